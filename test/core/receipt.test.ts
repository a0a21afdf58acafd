/** The JCR-1 receipt (spec §8, C5): seal, open, and every refusal with its stable code. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  actorFromSeed,
  ALL_DENY_REASONS,
  decode,
  decodeSign1,
  didFromPublicKey,
  encode,
  encodeProtectedHeader,
  encodeSign1,
  ErrorCodes,
  grantId,
  JcpError,
  jcrProtectedHeader,
  openReceipt,
  type ReceiptCore,
  receiptCoreFor,
  receiptCoreToCbor,
  receiptId,
  ReceiptRefusals,
  sealReceipt,
  signSign1,
  Tagged,
  toHex,
  utf8,
} from '../../core/internal.ts';
import { alice, bob, child, mallory, request, rootGrant, steward, TestSteward } from './evidence-fixtures.ts';

const refusal = (bytes: Uint8Array, expected?: string) => {
  const r = openReceipt(bytes, expected);
  return r.ok ? 'ok' : r.error.code;
};

/** Signs an arbitrary core map as `signer`, with `kidDid` in the protected header. */
function signRaw(core: Record<string, unknown>, signer = steward, kidDid = signer.did): Uint8Array {
  return signSign1({ protectedBytes: jcrProtectedHeader(utf8(kidDid)), payload: encode(core) }, signer.key);
}

const g = rootGrant(alice, 1000n);
const s = new TestSteward();
const allow = s.handle(request([g], alice, 300n));
const deny = s.handle(request([g], alice, 800n));
const goodCore = (() => {
  const r = openReceipt(allow.bytes);
  if (!r.ok) throw new Error(r.error.why);
  return r.value;
})();
const goodMap = receiptCoreToCbor(goodCore);

describe('receipt - seal and open (C5)', () => {
  it('an allow seals and opens to exactly the core the decision produced', () => {
    expect(allow.decision.verdict).toBe('allow');
    const r = openReceipt(allow.bytes, steward.did);
    expect(r.ok && r.value).toMatchObject({
      jcp_receipt: 'jcp/1',
      grant_id: grantId(g.grant),
      issuer: g.grant.issuer,
      subject: alice.did,
      verdict: 'allow',
      cost_uj: 300n,
      budget_uj: 1000n,
      budget_remaining_uj: 700n,
      steward: steward.did,
      seq: 0,
      energy_provenance: 'Estimator',
    });
    expect(r.ok && 'deny_reason' in r.value).toBe(false);
    expect(r.ok && 'prev' in r.value).toBe(false);
  });
  it('a deny seals too: budget-exceeded, nothing debited, prev links to the allow', () => {
    const r = openReceipt(deny.bytes, steward.did);
    expect(r.ok && r.value).toMatchObject({
      verdict: 'deny',
      deny_reason: 'budget-exceeded',
      cost_uj: 800n,
      budget_remaining_uj: 700n,
      seq: 1,
      prev: receiptId(allow.bytes),
    });
    expect(s.ledger.spent(grantId(g.grant))).toBe(300n);
  });
  it('sealing is deterministic: the same core gives the same bytes', () => {
    expect(toHex(sealReceipt(goodCore, steward))).toBe(toHex(allow.bytes));
  });
  it('the envelope is the JCR-1 profile: tag 18, {1: -8, 4: kid}, empty unprotected map', () => {
    const m = decodeSign1(allow.bytes);
    expect(allow.bytes[0]).toBe(0xd2);
    expect([...m.protectedHeader.entries()]).toEqual([
      [1, -8],
      [4, expect.anything()],
    ]);
    expect(new TextDecoder().decode(m.protectedHeader.get(4) as Uint8Array)).toBe(steward.did);
    expect(m.unprotected.size).toBe(0);
  });
  it('a chained receipt names every link root first, the leaf as grant_id', () => {
    const mid = child(g, alice, bob, 500n);
    const leaf = child(mid, bob, alice, 200n);
    const st = new TestSteward();
    const { bytes, decision } = st.handle(request([g, mid, leaf], alice, 50n));
    expect(decision.verdict).toBe('allow');
    const r = openReceipt(bytes);
    expect(r.ok && r.value.chain_ids).toEqual([grantId(g.grant), grantId(mid.grant), grantId(leaf.grant)]);
    expect(r.ok && r.value.grant_id).toBe(grantId(leaf.grant));
    expect(r.ok && r.value.budget_remaining_uj).toBe(150n);
  });
  it('a one-link receipt carries no chain_ids', () => {
    expect('chain_ids' in goodCore).toBe(false);
  });
  it('request_id and at are carried', () => {
    const st = new TestSteward();
    const rid = 'ab'.repeat(32);
    const { bytes } = st.handle(request([g], alice, 1n, { nowS: 1_800_000_123 }), rid);
    const r = openReceipt(bytes);
    expect(r.ok && r.value.request_id).toBe(rid);
    expect(r.ok && r.value.at).toBe(1_800_000_123);
  });
  it.each([
    ['untrusted-control', () => request([g], alice, 1n, { trust: 'data' })],
    ['wrong-subject', () => request([g], bob, 1n)],
    ['action-not-granted', () => request([g], alice, 1n, { action: 'delete' })],
  ])('deny / %s seals with its reason and verifies', (reason, mk) => {
    const st = new TestSteward();
    const { bytes } = st.handle(mk());
    const r = openReceipt(bytes, steward.did);
    expect(r.ok && r.value.deny_reason).toBe(reason);
  });
  it('every spec deny reason round-trips through a sealed core', () => {
    for (const reason of ALL_DENY_REASONS) {
      const core: ReceiptCore = { ...goodCore, verdict: 'deny', deny_reason: reason };
      const r = openReceipt(sealReceipt(core, steward));
      expect(r.ok && r.value.deny_reason).toBe(reason);
    }
  });
  it('µJ figures above 2^53 round-trip as bigint', () => {
    const big = 2n ** 60n;
    const core: ReceiptCore = { ...goodCore, cost_uj: big, budget_uj: big * 2n, budget_remaining_uj: big };
    const r = openReceipt(sealReceipt(core, steward));
    expect(r.ok && r.value.budget_uj).toBe(big * 2n);
  });
  it('refuses to seal for a steward other than the signer', () => {
    expect(() => sealReceipt(goodCore, mallory)).toThrow(JcpError);
  });
  it('receiptCoreFor refuses a non-integer time', () => {
    expect(() => receiptCoreFor({ ...request([g], alice, 1n), nowS: 1.5 }, allow.decision, { steward: steward.did, seq: 0 })).toThrow(
      JcpError,
    );
  });
});

describe('receipt - refusals, each with a stable code', () => {
  it('deny / a wrong steward fails (C5)', () => {
    expect(refusal(allow.bytes, mallory.did)).toBe(ReceiptRefusals.WRONG_STEWARD);
  });
  it('deny / non-canonical bytes are refused before the signature is looked at', () => {
    // tag 18 in its two-byte form, and the signature zeroed: the code is about the bytes, not the signature
    const m = decodeSign1(allow.bytes);
    const zeroed = encodeSign1({ ...m, signature: new Uint8Array(64) });
    expect(refusal(new Uint8Array([0xd8, 0x12, ...zeroed.subarray(1)]))).toBe(ErrorCodes.CBOR_NON_CANONICAL);
    expect(refusal(new Uint8Array([0xd8, 0x12, ...allow.bytes.subarray(1)]))).toBe(ErrorCodes.CBOR_NON_CANONICAL);
  });
  it('deny / a payload length in long form is non-canonical', () => {
    // rebuild with the 4-item array header 0x84 followed by protected, unprotected, then payload bstr in 0x5a form
    const m = decodeSign1(allow.bytes);
    const head = encode(m.protectedBytes);
    const p = m.payload;
    const longLen = new Uint8Array([0x5a, 0, 0, (p.length >> 8) & 0xff, p.length & 0xff]);
    const bytes = new Uint8Array([0xd2, 0x84, ...head, 0xa0, ...longLen, ...p, ...encode(m.signature)]);
    expect(refusal(bytes)).toBe(ErrorCodes.CBOR_NON_CANONICAL);
  });
  it('deny / trailing bytes are malformed', () => {
    expect(refusal(new Uint8Array([...allow.bytes, 0]))).toBe(ErrorCodes.CBOR_MALFORMED);
  });
  it('deny / the wrong tag', () => {
    const m = decodeSign1(allow.bytes);
    const as17 = encode(new Tagged(17, [m.protectedBytes, new Map(), m.payload, m.signature]));
    expect(refusal(as17)).toBe(ErrorCodes.COSE_INVALID);
    expect(refusal(encode([m.protectedBytes, new Map(), m.payload, m.signature]))).toBe(ErrorCodes.COSE_INVALID);
  });
  it('deny / alg not EdDSA (validly signed under -7)', () => {
    const prot = encodeProtectedHeader(
      new Map<number, unknown>([
        [1, -7],
        [4, utf8(steward.did)],
      ]),
    );
    const bytes = encodeSign1({ protectedBytes: prot, unprotected: new Map(), payload: encode(goodMap), signature: new Uint8Array(64) });
    expect(refusal(bytes)).toBe(ErrorCodes.COSE_UNSUPPORTED);
  });
  it('deny / alg only in the unprotected header', () => {
    const prot = encodeProtectedHeader(new Map<number, unknown>([[4, utf8(steward.did)]]));
    const bytes = encodeSign1({
      protectedBytes: prot,
      unprotected: new Map([[1, -8]]),
      payload: encode(goodMap),
      signature: new Uint8Array(64),
    });
    expect(refusal(bytes)).toBe(ErrorCodes.COSE_INVALID);
  });
  it('deny / a non-empty unprotected header (kid there too)', () => {
    const m = decodeSign1(allow.bytes);
    expect(refusal(encodeSign1({ ...m, unprotected: new Map([[3, 0]]) }))).toBe(ErrorCodes.COSE_INVALID);
  });
  it('deny / kid is not a did:key', () => {
    expect(refusal(signRaw(goodMap, steward, 'did:web:example.com'))).toBe(ErrorCodes.DID_INVALID);
    const m = decodeSign1(allow.bytes);
    const notUtf8 = encodeProtectedHeader(
      new Map<number, unknown>([
        [1, -8],
        [4, new Uint8Array([0xff, 0xfe])],
      ]),
    );
    expect(refusal(encodeSign1({ ...m, protectedBytes: notUtf8 }))).toBe(ErrorCodes.DID_INVALID);
  });
  it('deny / kid is a did:key of a small-order point', () => {
    const smallOrder = new Uint8Array(32);
    smallOrder[0] = 1; // the identity point: order 1
    expect(refusal(signRaw(goodMap, steward, didFromPublicKey(smallOrder)))).toBe(ErrorCodes.DID_INVALID);
  });
  it('deny / the steward field is not the kid', () => {
    // mallory signs honestly as herself but writes the steward's did in the core
    expect(refusal(signRaw(goodMap, mallory))).toBe(ReceiptRefusals.STEWARD_MISMATCH);
  });
  it('deny / a kid naming the steward but signed by another key', () => {
    expect(refusal(signRaw(goodMap, mallory, steward.did))).toBe(ErrorCodes.SIGNATURE_INVALID);
  });
  it('deny / a flipped signature bit', () => {
    const bad = new Uint8Array(allow.bytes);
    bad[bad.length - 1]! ^= 1;
    expect(refusal(bad)).toBe(ErrorCodes.SIGNATURE_INVALID);
  });
  it('deny / a tampered cost (payload re-encoded canonically, old signature)', () => {
    const m = decodeSign1(allow.bytes);
    const payload = encode({ ...goodMap, cost_uj: 1 });
    expect(refusal(encodeSign1({ ...m, payload }))).toBe(ErrorCodes.SIGNATURE_INVALID);
  });
  it('deny / a validly signed non-canonical payload', () => {
    const canon = encode(goodMap);
    // re-encode `at` (a small uint) in 8-byte form: same value, not canonical
    const m = decode(canon) as Record<string, unknown>;
    const atHex = toHex(encode(m['at']));
    const canonHex = toHex(canon);
    const i = canonHex.indexOf('626174' + atHex);
    expect(i).toBeGreaterThan(0);
    const long = `626174${'1b'}${BigInt(m['at'] as number)
      .toString(16)
      .padStart(16, '0')}`;
    const nonCanon = Buffer.from(canonHex.slice(0, i) + long + canonHex.slice(i + 6 + atHex.length), 'hex');
    const bytes = signSign1({ protectedBytes: jcrProtectedHeader(utf8(steward.did)), payload: new Uint8Array(nonCanon) }, steward.key);
    expect(refusal(bytes)).toBe(ErrorCodes.CBOR_NON_CANONICAL);
  });
  it.each([
    [
      'a missing field',
      () => {
        const o = { ...goodMap };
        delete o['at'];
        return o;
      },
    ],
    ['an unknown field', () => ({ ...goodMap, extra: 1 })],
    ['a deny without a reason', () => ({ ...goodMap, verdict: 'deny' })],
    ['a deny with a reason not in the spec', () => ({ ...goodMap, verdict: 'deny', deny_reason: 'because' })],
    ['an allow with a deny reason', () => ({ ...goodMap, deny_reason: 'revoked' })],
    ['remaining above budget', () => ({ ...goodMap, budget_remaining_uj: 2000 })],
    ['another profile', () => ({ ...goodMap, jcp_receipt: 'jcp/2' })],
    ['chain_ids not ending with grant_id', () => ({ ...goodMap, chain_ids: ['aa'.repeat(32), 'bb'.repeat(32)] })],
    ['a one-id chain_ids', () => ({ ...goodMap, chain_ids: [goodMap['grant_id']] })],
    ['an allow naming a link twice', () => ({ ...goodMap, chain_ids: [goodMap['grant_id'], goodMap['grant_id']] })],
    ['a negative cost', () => ({ ...goodMap, cost_uj: -1 })],
    ['an unknown provenance', () => ({ ...goodMap, energy_provenance: 'Guess' })],
  ])('deny / schema: %s (validly signed)', (_what, mk) => {
    expect(refusal(signRaw(mk()))).toBe(ErrorCodes.SCHEMA);
  });
  it('deny / schema: a subject that is not a did:key', () => {
    expect(refusal(signRaw({ ...goodMap, subject: 'did:key:zNope' }))).toBe(ErrorCodes.DID_INVALID);
  });
  it('deny / empty input and garbage never throw', () => {
    expect(refusal(new Uint8Array(0))).toBe(ErrorCodes.CBOR_MALFORMED);
    expect(refusal(new Uint8Array([0xd2]))).toBe(ErrorCodes.CBOR_MALFORMED);
  });
});

describe('receipt - properties', () => {
  it('any single-byte change to a sealed receipt is refused, never read as another core', () => {
    fc.assert(
      fc.property(fc.nat(allow.bytes.length - 1), fc.integer({ min: 1, max: 255 }), (pos, delta) => {
        const bad = new Uint8Array(allow.bytes);
        bad[pos] = (bad[pos]! + delta) & 0xff;
        return !openReceipt(bad).ok;
      }),
      { numRuns: 2000, seed: 5 },
    );
  });
  it('seal then open is the identity on cores', () => {
    const other = actorFromSeed(new Uint8Array(32).fill(9));
    fc.assert(
      fc.property(
        fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
        fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
        fc.nat(),
        fc.nat(),
        (a, b, seq, at) => {
          const [remaining, budget] = a <= b ? [a, b] : [b, a];
          const core: ReceiptCore = {
            ...goodCore,
            steward: other.did,
            cost_uj: a,
            budget_uj: budget,
            budget_remaining_uj: remaining,
            seq,
            at,
          };
          const r = openReceipt(sealReceipt(core, other), other.did);
          expect(r.ok && r.value).toEqual(core);
        },
      ),
      { numRuns: 300, seed: 11 },
    );
  });
});
