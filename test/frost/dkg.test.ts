/**
 * DKG rounds (frost/dkg.ts): the Zcash Foundation frost-rs 2-of-3 DKG vector reproduced byte for
 * byte through our rounds, plus blame: a bad proof of knowledge or an inconsistent share names its
 * sender. The vector is read at test time from test/vectors/third-party/ (test/vectors/load.ts).
 */
import { fileURLToPath } from 'node:url';
import { VECTORS_DIR } from '../vectors/load.ts';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { fromHex, parseDid, seededRng, toHex, verify } from '../../core/index.ts';
import {
  aggregate,
  checkRound1,
  checkRound2Share,
  commit,
  dkgRound1,
  dkgRound2,
  dkgRound3,
  dkgStateFromCoefficients,
  Fn,
  FrostErrorCodes,
  groupDid,
  type PublicPackage,
  type Round1Package,
  signShare,
  soloSignature,
} from '../../frost/internal.ts';

const VECTORS = fileURLToPath(VECTORS_DIR);

interface DkgParticipant {
  identifier: number;
  signing_key: string;
  coefficient: string;
  vss_commitments: string[];
  proof_of_knowledge: string;
  signing_shares: Record<string, string>;
  verifying_share: string;
  signing_share: string;
}

const vec = JSON.parse(readFileSync(`${VECTORS}/zcash-frost/vectors_dkg.json`, 'utf8')) as {
  config: { MAX_PARTICIPANTS: number; MIN_PARTICIPANTS: number };
  inputs: Record<string, unknown> & { verifying_key: string };
};
const t = { min: vec.config.MIN_PARTICIPANTS, max: vec.config.MAX_PARTICIPANTS };
const ids = Array.from({ length: t.max }, (_, i) => i + 1);
const part = (n: number) => vec.inputs[String(n)] as DkgParticipant;
const round1Of = (n: number): Round1Package => ({
  identifier: n,
  commitment: part(n).vss_commitments.map((c) => fromHex(c)),
  proof: fromHex(part(n).proof_of_knowledge),
});

describe('dkg / zcash frost-rs 2-of-3 vector', () => {
  it('round 1: every proof of knowledge in the vector verifies', () => {
    for (const n of ids) expect(checkRound1(round1Of(n), t)).toEqual({ ok: true, value: undefined });
  });

  it('rounds 2 and 3: shares sent, final shares, verifying shares and group key reproduce the vector', () => {
    const finals = new Map<number, PublicPackage>();
    for (const n of ids) {
      const state = dkgStateFromCoefficients(n, t, [fromHex(part(n).signing_key), fromHex(part(n).coefficient)]);
      expect(state.secret.commitment.map(toHex)).toEqual(part(n).vss_commitments);
      const others = ids.filter((j) => j !== n);
      const sent = dkgRound2(state, others.map(round1Of));
      if (!sent.ok) throw new Error(sent.error.why);
      // inputs[j].signing_shares[n] is f_n(j): the share j received from n.
      for (const j of others) expect(toHex(sent.value.get(j)!)).toBe(part(j).signing_shares[String(n)]);
      const received = new Map(others.map((j) => [j, fromHex(part(n).signing_shares[String(j)]!)]));
      const done = dkgRound3(state, others.map(round1Of), received);
      if (!done.ok) throw new Error(done.error.why);
      expect(toHex(done.value.secret.signingShare)).toBe(part(n).signing_share);
      expect(done.value.secret.identifier).toBe(n);
      expect(toHex(done.value.public.commitments[0]!)).toBe(vec.inputs.verifying_key);
      expect(done.value.public.verifyingShares.map(toHex)).toEqual(ids.map((j) => part(j).verifying_share));
      finals.set(n, done.value.public);
    }
    const [a, b, c] = ids.map((n) => finals.get(n)!);
    expect(b).toEqual(a);
    expect(c).toEqual(a);
  });
});

describe('dkg / blame', () => {
  const rng = seededRng('test/frost/dkg');
  const fresh = (min: number, max: number) =>
    Array.from({ length: max }, (_, i) => {
      const r = dkgRound1(i + 1, { min, max }, rng);
      if (!r.ok) throw new Error(r.error.why);
      return r.value;
    });

  it('deny / a forged proof of knowledge is named by its sender', () => {
    const ps = fresh(2, 3);
    const forged = { ...ps[2]!.package, proof: ps[1]!.package.proof };
    const r = dkgRound2(ps[0]!.state, [ps[1]!.package, forged]);
    expect(r.ok ? 'accepted' : r.error).toMatchObject({ code: FrostErrorCodes.BAD_COMMITMENT, culprits: [{ identifier: 3 }] });
  });

  it('deny / an inconsistent round-2 share is named by its sender, and nobody else is', () => {
    const ps = fresh(3, 4);
    const sent = ps.map((p, i) => {
      const r = dkgRound2(
        p.state,
        ps.filter((_, j) => j !== i).map((q) => q.package),
      );
      if (!r.ok) throw new Error(r.error.why);
      return r.value;
    });
    const received = new Map([2, 3, 4].map((j) => [j, sent[j - 1]!.get(1)!]));
    const bad = Fn.toBytes(Fn.add(Fn.fromBytes(received.get(4)!), 1n));
    expect(checkRound2Share(1, { min: 3, max: 4 }, ps[3]!.package, bad)).toBe(false);
    received.set(4, bad);
    const r = dkgRound3(
      ps[0]!.state,
      ps.slice(1).map((q) => q.package),
      received,
    );
    expect(r.ok ? 'accepted' : r.error).toMatchObject({ code: FrostErrorCodes.INCONSISTENT_SHARE, culprits: [{ identifier: 4 }] });
  });

  it('a fresh 2-of-3 DKG signs a standard Ed25519 signature, and one share alone does not', () => {
    const ps = fresh(2, 3);
    const sent = ps.map((p, i) => {
      const r = dkgRound2(
        p.state,
        ps.filter((_, j) => j !== i).map((q) => q.package),
      );
      if (!r.ok) throw new Error(r.error.why);
      return r.value;
    });
    const keys = ps.map((p, i) => {
      const me = i + 1;
      const others = ps.filter((_, j) => j !== i);
      const r = dkgRound3(
        p.state,
        others.map((q) => q.package),
        new Map(others.map((q) => [q.package.identifier, sent[q.package.identifier - 1]!.get(me)!])),
      );
      if (!r.ok) throw new Error(r.error.why);
      return r.value;
    });
    const pub = keys[0]!.public;
    const msg = new TextEncoder().encode('two-agent rule');
    const [k1, , k3] = keys;
    const c1 = commit(k1!.secret, rng);
    const c3 = commit(k3!.secret, rng);
    const pkg = { message: msg, commitments: [c1.commitment, c3.commitment] };
    const z1 = signShare(pub, k1!.secret, c1.nonces, c1.commitment, pkg);
    const z3 = signShare(pub, k3!.secret, c3.nonces, c3.commitment, pkg);
    if (!z1.ok || !z3.ok) throw new Error('share refused');
    const sig = aggregate(
      pub,
      pkg,
      new Map([
        [1, z1.value],
        [3, z3.value],
      ]),
    );
    if (!sig.ok) throw new Error(sig.error.why);
    const group = parseDid(groupDid(pub));
    expect(verify(group, msg, sig.value)).toBe(true);
    for (const k of keys) expect(verify(group, msg, soloSignature(k.secret, msg))).toBe(false);
  });
});
