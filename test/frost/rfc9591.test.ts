/**
 * RFC 9591 FROST(Ed25519, SHA-512) signing vectors, driven through our wrapper (dealer, commit,
 * package check, sign share, verify shares, aggregate): the CFRG vector (RFC 9591 App. E.1), the
 * Zcash Foundation vector with other nonces, and the 257-participant big-identifier vector. The
 * files are read at test time from test/vectors/third-party/ (test/vectors/load.ts).
 */
import { fileURLToPath } from 'node:url';
import { VECTORS_DIR } from '../vectors/load.ts';
import { readFileSync } from 'node:fs';
import { sha512 } from '@noble/hashes/sha2.js';
import { describe, expect, it } from 'vitest';
import { concat, fromHex, parseDid, toHex, utf8, verify } from '../../core/index.ts';
import {
  aggregate,
  aggregatePlanned,
  badShares,
  checkPackage,
  commit,
  deal,
  decodeElement,
  Fn,
  FrostErrorCodes,
  groupDid,
  IDENTITY_ENCODING,
  planAggregate,
  type SigningCommitment,
  type SigningPackage,
  signShare,
} from '../../frost/internal.ts';

const VECTORS = fileURLToPath(VECTORS_DIR);

interface SigningVector {
  config: { MAX_PARTICIPANTS: string; MIN_PARTICIPANTS: string; NUM_PARTICIPANTS: string };
  inputs: {
    participant_list: number[];
    group_secret_key: string;
    group_public_key?: string;
    verifying_key_key?: string;
    message: string;
    share_polynomial_coefficients: string[];
    participant_shares: { identifier: number; participant_share: string }[];
  };
  round_one_outputs: {
    outputs: {
      identifier: number;
      hiding_nonce_randomness: string;
      binding_nonce_randomness: string;
      hiding_nonce: string;
      binding_nonce: string;
      hiding_nonce_commitment: string;
      binding_nonce_commitment: string;
      binding_factor_input: string;
      binding_factor: string;
    }[];
  };
  round_two_outputs: { outputs: { identifier: number; sig_share: string }[] };
  final_output: { sig: string };
}

function load(path: string): SigningVector {
  return JSON.parse(readFileSync(`${VECTORS}/${path}`, 'utf8')) as SigningVector;
}

/** An RNG that returns the given 32-byte blocks in order (RFC 9591 §4.1 nonce randomness). */
function scripted(...blocks: Uint8Array[]) {
  return (n: number) => {
    const b = blocks.shift();
    if (!b || b.length !== n) throw new Error('scripted rng exhausted');
    return b;
  };
}

const CTX = 'FROST-ED25519-SHA512-v1';
const leScalar = (h: Uint8Array) => Fn.create(BigInt(`0x${toHex(Uint8Array.from(h).reverse())}`));

function run(path: string) {
  const v = load(path);
  const min = Number(v.config.MIN_PARTICIPANTS);
  const max = Number(v.config.MAX_PARTICIPANTS);
  const groupKey = v.inputs.group_public_key ?? v.inputs.verifying_key_key!;
  const message = fromHex(v.inputs.message);
  let dealt: ReturnType<typeof deal> | undefined;
  // The vector's polynomial, split by our dealer once per vector (257 shares take a few seconds here).
  const vectorDeal = () =>
    (dealt ??= deal({ min, max }, (n: number) => new Uint8Array(n).fill(7), {
      secret: fromHex(v.inputs.group_secret_key),
      coefficients: v.inputs.share_polynomial_coefficients.map((c) => fromHex(c)),
    }));

  it('dealer: shares f(i) and group key reproduce the vector', () => {
    const d = vectorDeal();
    expect(d.ok).toBe(true);
    if (!d.ok) return;
    expect(toHex(d.value.group.commitments[0]!)).toBe(groupKey);
    expect(d.value.did).toBe(groupDid(d.value.group));
    for (const s of v.inputs.participant_shares) {
      expect(toHex(d.value.shares[s.identifier - 1]!.signingShare)).toBe(s.participant_share);
    }
  });

  it('signing: nonces, commitments, binding factors, shares and aggregate reproduce the vector byte for byte', () => {
    const d = vectorDeal();
    if (!d.ok) throw new Error(d.error.why);
    const pub = d.value.group;
    const rounds = v.round_one_outputs.outputs.map((o) => {
      const share = d.value.shares[o.identifier - 1]!;
      const c = commit(share, scripted(fromHex(o.hiding_nonce_randomness), fromHex(o.binding_nonce_randomness)));
      expect(toHex(c.nonces.hiding)).toBe(o.hiding_nonce);
      expect(toHex(c.nonces.binding)).toBe(o.binding_nonce);
      expect(toHex(c.commitment.hiding)).toBe(o.hiding_nonce_commitment);
      expect(toHex(c.commitment.binding)).toBe(o.binding_nonce_commitment);
      return { o, share, c };
    });
    expect(rounds.map((r) => r.o.identifier)).toEqual(v.inputs.participant_list);
    const pkg: SigningPackage = { message, commitments: rounds.map((r) => r.c.commitment) };
    // RFC 9591 §4.4 binding factor input: PK ‖ H4(msg) ‖ H5(encoded commitments) ‖ identifier.
    const encoded = concat(
      ...[...pkg.commitments]
        .sort((a, b) => a.identifier - b.identifier)
        .flatMap((c) => [Fn.toBytes(BigInt(c.identifier)), c.hiding, c.binding]),
    );
    for (const r of rounds) {
      const input = concat(
        pub.commitments[0]!,
        sha512(concat(utf8(`${CTX}msg`), message)),
        sha512(concat(utf8(`${CTX}com`), encoded)),
        Fn.toBytes(BigInt(r.o.identifier)),
      );
      expect(toHex(input)).toBe(r.o.binding_factor_input);
      expect(toHex(Fn.toBytes(leScalar(sha512(concat(utf8(`${CTX}rho`), input)))))).toBe(r.o.binding_factor);
    }
    const shares = new Map<number, Uint8Array>();
    for (const r of rounds) {
      const s = signShare(pub, r.share, r.c.nonces, r.c.commitment, pkg);
      if (!s.ok) throw new Error(s.error.why);
      shares.set(r.o.identifier, s.value);
    }
    for (const o of v.round_two_outputs.outputs) expect(toHex(shares.get(o.identifier)!)).toBe(o.sig_share);
    expect(badShares(pub, pkg, shares)).toEqual([]);
    const sig = aggregate(pub, pkg, shares);
    expect(sig.ok && toHex(sig.value)).toBe(v.final_output.sig);
    expect(verify(parseDid(d.value.did), message, fromHex(v.final_output.sig))).toBe(true);
  });

  it('signing: a nonce pair is refused the second time (it was zeroed by the first share)', () => {
    const d = vectorDeal();
    if (!d.ok) throw new Error(d.error.why);
    const ids = v.inputs.participant_list;
    const cs = ids.map((i) => commit(d.value.shares[i - 1]!, (n: number) => new Uint8Array(n).fill(i)));
    const pkg = { message, commitments: cs.map((c) => c.commitment) };
    const first = signShare(d.value.group, d.value.shares[ids[0]! - 1]!, cs[0]!.nonces, cs[0]!.commitment, pkg);
    expect(first.ok).toBe(true);
    const again = signShare(d.value.group, d.value.shares[ids[0]! - 1]!, cs[0]!.nonces, cs[0]!.commitment, pkg);
    expect(again.ok ? 'signed twice' : again.error.code).toBe(FrostErrorCodes.NONCE_USED);
  });
}

describe('rfc9591 / cfrg FROST(Ed25519, SHA-512) vector', () => run('cfrg-frost/frost-ed25519-sha512.json'));
describe('rfc9591 / zcash frost-ed25519 vector', () => run('zcash-frost/vectors.json'));
describe('rfc9591 / zcash frost-ed25519 big-identifier vector (257 shares)', () => run('zcash-frost/vectors-big-identifier.json'));

describe('rfc9591 / elements (RFC 9591 §3.1 DeserializeElement)', () => {
  const invalid = fromHex(
    (JSON.parse(readFileSync(`${VECTORS}/zcash-frost/elements.json`, 'utf8')) as { elements: { invalid_element: string } }).elements
      .invalid_element,
  );

  it('refuse / the zcash invalid element (small-order component)', () => {
    expect(decodeElement(invalid)).toBeUndefined();
  });

  it('refuse / the identity element', () => {
    expect(decodeElement(IDENTITY_ENCODING)).toBeUndefined();
  });

  const v = load('cfrg-frost/frost-ed25519-sha512.json');
  const d = deal({ min: 2, max: 3 }, (n: number) => new Uint8Array(n).fill(3), { secret: fromHex(v.inputs.group_secret_key) });
  if (!d.ok) throw new Error(d.error.why);
  const [s1, , s3] = d.value.shares;
  const fresh = () => {
    const a = commit(s1!, (n: number) => new Uint8Array(n).fill(1));
    const b = commit(s3!, (n: number) => new Uint8Array(n).fill(3));
    return { a, b };
  };
  const msg = utf8('test');

  it('refuse / a package whose other commitment holds the invalid element, before any share exists', () => {
    const { a, b } = fresh();
    const evil: SigningCommitment = { ...b.commitment, binding: invalid };
    const r = signShare(d.value.group, s1!, a.nonces, a.commitment, { message: msg, commitments: [a.commitment, evil] });
    expect(r.ok ? 'signed' : r.error.code).toBe(FrostErrorCodes.BAD_PACKAGE);
  });

  it('refuse / a package with an identity commitment, a duplicate, a zero identifier, or my commitment altered', () => {
    const { a, b } = fresh();
    const pub = d.value.group;
    const code = (pkg: SigningPackage) => {
      const r = checkPackage(pub, a.commitment, pkg);
      return r.ok ? 'accepted' : r.error.code;
    };
    expect(code({ message: msg, commitments: [a.commitment, { ...b.commitment, hiding: IDENTITY_ENCODING }] })).toBe(
      FrostErrorCodes.BAD_PACKAGE,
    );
    expect(code({ message: msg, commitments: [a.commitment, a.commitment] })).toBe(FrostErrorCodes.BAD_PACKAGE);
    expect(code({ message: msg, commitments: [a.commitment, { ...b.commitment, identifier: 0 }] })).toBe(FrostErrorCodes.BAD_PACKAGE);
    expect(code({ message: msg, commitments: [{ ...a.commitment, hiding: b.commitment.hiding }, b.commitment] })).toBe(
      FrostErrorCodes.BAD_PACKAGE,
    );
    expect(code({ message: msg, commitments: [b.commitment, { ...b.commitment, identifier: 2 }] })).toBe(FrostErrorCodes.BAD_PACKAGE);
    expect(code({ message: msg, commitments: [a.commitment, b.commitment] })).toBe('accepted');
  });

  it('deny / a tampered signature share is named by identifier', () => {
    const { a, b } = fresh();
    const pkg = { message: msg, commitments: [a.commitment, b.commitment] };
    const z1 = signShare(d.value.group, s1!, a.nonces, a.commitment, pkg);
    const z3 = signShare(d.value.group, s3!, b.nonces, b.commitment, pkg);
    if (!z1.ok || !z3.ok) throw new Error('share failed');
    const forged = Uint8Array.from(z3.value);
    forged[0] = forged[0]! ^ 1;
    const r = aggregate(
      d.value.group,
      pkg,
      new Map([
        [1, z1.value],
        [3, forged],
      ]),
    );
    expect(r.ok ? 'aggregated' : r.error).toMatchObject({ code: FrostErrorCodes.BAD_SIGNATURE_SHARE, culprits: [{ identifier: 3 }] });
  });

  it('aggregation planned before the shares: the same signature; a bad share or commitment named as before', () => {
    const { a, b } = fresh();
    const pub = d.value.group;
    const pkg = { message: msg, commitments: [a.commitment, b.commitment] };
    const plan = planAggregate(pub, pkg);
    const z1 = signShare(pub, s1!, a.nonces, a.commitment, pkg);
    const z3 = signShare(pub, s3!, b.nonces, b.commitment, pkg);
    if (!z1.ok || !z3.ok) throw new Error('share failed');
    const good = new Map([
      [1, z1.value],
      [3, z3.value],
    ]);
    const planned = aggregatePlanned(pub, plan, good);
    const whole = aggregate(pub, pkg, good);
    if (!planned.ok || !whole.ok) throw new Error('aggregation failed');
    expect(toHex(planned.value)).toBe(toHex(whole.value));
    expect(verify(parseDid(groupDid(pub)), msg, planned.value)).toBe(true);
    // A missing share, a non-canonical one, and a wrong one are each named.
    const code = (m: Map<number, Uint8Array>) => {
      const r = aggregatePlanned(pub, plan, m);
      return r.ok ? 'aggregated' : { code: r.error.code, culprits: r.error.culprits };
    };
    expect(code(new Map([[1, z1.value]]))).toEqual({ code: FrostErrorCodes.BAD_SIGNATURE_SHARE, culprits: [{ identifier: 3 }] });
    expect(
      code(
        new Map([
          [1, new Uint8Array(32).fill(0xff)],
          [3, z3.value],
        ]),
      ),
    ).toEqual({ code: FrostErrorCodes.BAD_SIGNATURE_SHARE, culprits: [{ identifier: 1 }] });
    const off = Fn.toBytes(Fn.add(Fn.fromBytes(z3.value), 1n));
    expect(
      code(
        new Map([
          [1, z1.value],
          [3, off],
        ]),
      ),
    ).toEqual({ code: FrostErrorCodes.BAD_SIGNATURE_SHARE, culprits: [{ identifier: 3 }] });
    // A commitment that is not a valid element is refused by the plan, naming its holder.
    const evil = planAggregate(pub, { message: msg, commitments: [a.commitment, { ...b.commitment, binding: invalid }] });
    const r = aggregatePlanned(pub, evil, good);
    expect(r.ok ? 'aggregated' : r.error).toMatchObject({ code: FrostErrorCodes.BAD_SIGNATURE_SHARE, culprits: [{ identifier: 3 }] });
  });

  it('verify-first (RFC 9591 §5.3, as frost-rs): shares that sum to a valid signature are accepted; each is still named by badShares', () => {
    const { a, b } = fresh();
    const pub = d.value.group;
    const pkg = { message: msg, commitments: [a.commitment, b.commitment] };
    const z1 = signShare(pub, s1!, a.nonces, a.commitment, pkg);
    const z3 = signShare(pub, s3!, b.nonces, b.commitment, pkg);
    if (!z1.ok || !z3.ok) throw new Error('share failed');
    // Two colluding signers shift value between their shares: neither share verifies on its
    // own, the sum is the same valid Ed25519 signature.
    const shifted = new Map([
      [1, Fn.toBytes(Fn.add(Fn.fromBytes(z1.value), 7n))],
      [3, Fn.toBytes(Fn.sub(Fn.fromBytes(z3.value), 7n))],
    ]);
    const r = aggregate(pub, pkg, shifted);
    if (!r.ok) throw new Error(r.error.why);
    expect(verify(parseDid(groupDid(pub)), msg, r.value)).toBe(true);
    expect(badShares(pub, pkg, shifted)).toEqual([{ identifier: 1 }, { identifier: 3 }]);
  });
});
