/** Revocation (§4.3, C6): authority checks, the admitted set, and subtree death in the decision. */
import { describe, expect, it } from 'vitest';
import {
  decide,
  decode,
  encode,
  ErrorCodes,
  grantId,
  Ledger,
  readSignedRevocation,
  revocationId,
  RevocationSet,
  revocationToCbor,
  sign,
  type SignedRevocation,
  signedRevocationToCbor,
  signRevocation,
  TrustRoots,
  verifyRevocation,
} from '../../core/internal.ts';
import { alice, bob, carol, dave, delegate, erin, mallory, requestFor, rng, rootGrant } from './authority-fixtures.ts';
import { codeOf } from '../support.ts';

describe('revocation - encoding', () => {
  it('round-trips through canonical CBOR and keeps its signature', () => {
    const root = rootGrant();
    const sr = signRevocation(grantId(root.grant), alice, rng(16));
    const bytes = encode(signedRevocationToCbor(sr));
    const back = readSignedRevocation(decode(bytes));
    expect(encode(signedRevocationToCbor(back))).toEqual(bytes);
    expect(back.body.grant_id).toBe(grantId(root.grant));
    expect(back.body.revoked_by).toBe(alice.did);
    expect(verifyRevocation(back, root.grant).ok).toBe(true);
    expect(revocationId(back.body)).toBe(revocationId(sr.body));
  });

  it('two revocations of one grant have distinct ids (the nonce)', () => {
    const id = grantId(rootGrant().grant);
    expect(revocationId(signRevocation(id, alice, rng(16)).body)).not.toBe(revocationId(signRevocation(id, alice, rng(16)).body));
  });

  const good = signedRevocationToCbor(signRevocation(grantId(rootGrant().grant), alice, rng(16)));
  const body = good['body'] as Record<string, unknown>;
  it.each([
    ['not a map', [1, 2], ErrorCodes.SCHEMA],
    ['a missing signature', { body }, ErrorCodes.SCHEMA],
    ['a short signature', { body, signature: new Uint8Array(63) }, ErrorCodes.BAD_LENGTH],
    ['an unknown body field', { ...good, body: { ...body, reason: 'x' } }, ErrorCodes.SCHEMA],
    ['a missing grant id', { ...good, body: { revoked_by: body['revoked_by'], nonce: body['nonce'] } }, ErrorCodes.SCHEMA],
    ['a grant id that is not a content id', { ...good, body: { ...body, grant_id: 'ABC' } }, ErrorCodes.SCHEMA],
    ['a revoker that is not a did:key', { ...good, body: { ...body, revoked_by: 'did:web:example.com' } }, ErrorCodes.DID_INVALID],
    ['a 15-byte nonce', { ...good, body: { ...body, nonce: new Uint8Array(15) } }, ErrorCodes.BAD_LENGTH],
  ])('refuses %s with a code', (_what, v, code) => {
    expect(codeOf(() => readSignedRevocation(v))).toBe(code);
  });

  it('refuses to sign with a nonce that is not 16 bytes, or a grant id that is not a content id', () => {
    expect(codeOf(() => signRevocation(grantId(rootGrant().grant), alice, new Uint8Array(8)))).toBe(ErrorCodes.BAD_LENGTH);
    expect(codeOf(() => signRevocation('nope', alice, rng(16)))).toBe(ErrorCodes.SCHEMA);
  });
});

describe('revocation - authority', () => {
  const root = rootGrant();
  const id = grantId(root.grant);

  it('allow / the issuer revokes its own grant', () => {
    expect(verifyRevocation(signRevocation(id, alice, rng(16)), root.grant)).toEqual({ ok: true, value: undefined });
  });

  it('deny / wrong grant / a revocation naming another grant', () => {
    const other = rootGrant();
    const r = verifyRevocation(signRevocation(grantId(other.grant), alice, rng(16)), root.grant);
    expect(r.ok ? 'admitted' : r.error.code).toBe('wrong-grant');
  });

  it('deny / not issuer / the holder, a delegate or a stranger revoking', () => {
    for (const who of [bob, carol, mallory]) {
      const r = verifyRevocation(signRevocation(id, who, rng(16)), root.grant);
      expect(r.ok ? 'admitted' : r.error.code).toBe('not-issuer');
    }
  });

  it('deny / bad signature / a revocation claiming the issuer but signed by another key', () => {
    const body = { grant_id: id, revoked_by: alice.did, nonce: rng(16) };
    const forgedSr: SignedRevocation = { body, signature: sign(mallory.key, encode(revocationToCbor(body))) };
    const r = verifyRevocation(forgedSr, root.grant);
    expect(r.ok ? 'admitted' : r.error.code).toBe('bad-signature');
  });

  it('deny / bad signature / a genuine revocation with its nonce altered', () => {
    const sr = signRevocation(id, alice, rng(16));
    const altered: SignedRevocation = { body: { ...sr.body, nonce: rng(16) }, signature: sr.signature };
    const r = verifyRevocation(altered, root.grant);
    expect(r.ok ? 'admitted' : r.error.code).toBe('bad-signature');
  });
});

describe('revocation - the admitted set', () => {
  it('admits a verified revocation and never a forged or non-issuer one', () => {
    const set = new RevocationSet();
    const root = rootGrant();
    const id = grantId(root.grant);
    const body = { grant_id: id, revoked_by: alice.did, nonce: rng(16) };
    const forgedSr: SignedRevocation = { body, signature: sign(mallory.key, encode(revocationToCbor(body))) };
    const refusals = [forgedSr, signRevocation(id, bob, rng(16))].map((sr) => {
      const r = set.admit(sr, root.grant);
      return r.ok ? 'admitted' : r.error.code;
    });
    expect(refusals).toEqual(['bad-signature', 'not-issuer']);
    expect([set.has(id), set.size, set.ids()]).toEqual([false, 0, []]);
    const genuine = signRevocation(id, alice, rng(16));
    expect(set.admit(genuine, root.grant).ok).toBe(true);
    expect([set.has(id), set.ids(), set.get(id)]).toEqual([true, [id], genuine]);
  });

  it('keeps the first admitted revocation; a second genuine one is a no-op', () => {
    const set = new RevocationSet();
    const root = rootGrant();
    const id = grantId(root.grant);
    const first = signRevocation(id, alice, rng(16));
    set.admit(first, root.grant);
    expect(set.admit(signRevocation(id, alice, rng(16)), root.grant).ok).toBe(true);
    expect([set.size, set.get(id), set.revocations()]).toEqual([1, first, [first]]);
  });

  it('refuses to admit a revocation against a grant it does not name', () => {
    const set = new RevocationSet();
    const a = rootGrant();
    const b = rootGrant();
    const r = set.admit(signRevocation(grantId(a.grant), alice, rng(16)), b.grant);
    expect(r.ok ? 'admitted' : r.error.code).toBe('wrong-grant');
    expect(set.size).toBe(0);
  });
});

describe('revocation - subtree death in the decision', () => {
  // alice → bob (root) ─┬─ carol (left) → dave (leftLeaf)
  //                     └─ erin (right)
  const root = rootGrant();
  const left = delegate(root, bob, { subject: carol.did, budget_uj: 500n });
  const leftLeaf = delegate(left, carol, { subject: dave.did, budget_uj: 200n });
  const right = delegate(root, bob, { subject: erin.did, budget_uj: 500n });
  const chains = { leftLeaf: [root, left, leftLeaf], right: [root, right], rootOnly: [root] };

  function verdicts(revoked: RevocationSet): Record<string, string> {
    const state = { ledger: new Ledger(), revoked, trust: new TrustRoots() };
    const out: Record<string, string> = {};
    for (const [name, chain] of Object.entries(chains)) {
      const d = decide(requestFor(chain), state);
      out[name] = d.verdict === 'allow' ? 'allow' : `${d.deny.reason}@${d.deny.link}`;
    }
    return out;
  }

  it('deny / revoked / a revoked middle grant kills its subtree and spares its sibling', () => {
    const set = new RevocationSet();
    expect(set.admit(signRevocation(grantId(left.grant), bob, rng(16)), left.grant).ok).toBe(true);
    expect(verdicts(set)).toEqual({ leftLeaf: 'revoked@1', right: 'allow', rootOnly: 'allow' });
  });

  it('deny / revoked / a revoked root kills every descendant, on the direct and chained paths', () => {
    const set = new RevocationSet();
    set.admit(signRevocation(grantId(root.grant), alice, rng(16)), root.grant);
    expect(verdicts(set)).toEqual({ leftLeaf: 'revoked@0', right: 'revoked@0', rootOnly: 'revoked@0' });
  });

  it('deny / revoked / a revoked leaf dies alone', () => {
    const set = new RevocationSet();
    set.admit(signRevocation(grantId(leftLeaf.grant), carol, rng(16)), leftLeaf.grant);
    expect(verdicts(set)).toEqual({ leftLeaf: 'revoked@2', right: 'allow', rootOnly: 'allow' });
  });

  it('allow / a refused (non-issuer) revocation kills nothing', () => {
    const set = new RevocationSet();
    expect(set.admit(signRevocation(grantId(root.grant), bob, rng(16)), root.grant).ok).toBe(false);
    expect(verdicts(set)).toEqual({ leftLeaf: 'allow', right: 'allow', rootOnly: 'allow' });
  });
});
