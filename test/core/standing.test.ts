import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  authorPolicy,
  checkHop,
  contentId,
  decode,
  EMPTY_MINT_LEDGER,
  encode,
  fire,
  type Grant,
  grantId,
  type MintLedger,
  mintPolicyId,
  newActor,
  readSignedMintPolicy,
  seededRng,
  signBody,
  signedMintPolicyToCbor,
  signGrant,
  StandingRefusals,
  verifyGrantSignature,
  verifyPolicy,
} from '../../core/index.ts';

const rng = seededRng('test/core/standing');
const owner = newActor(rng); // the standing grant's issuer: authors the policy
const trigger = newActor(rng); // the standing grant's subject: fires it
const worker = newActor(rng); // does the work under each child
const WEBHOOK = contentId({ source: 'github', kind: 'push' });
const OTHER_HOOK = contentId({ source: 'gitlab', kind: 'push' });

function standingGrant(budget = 100n, extra: Partial<Grant> = {}) {
  return signGrant(
    {
      issuer: owner.did,
      subject: trigger.did,
      capability: { resource: contentId({ tool: 'ci' }), actions: ['build', 'test'] },
      budget_uj: budget,
      expiry: 0,
      nonce: rng(16),
      ...extra,
    },
    owner,
  );
}

function policyFor(g = standingGrant(), per = 40n, max = 5) {
  const r = authorPolicy(g, { event_class: WEBHOOK, per_firing_uj: per, max_firings: max, nonce: rng(16) }, owner);
  if (!r.ok) throw new Error(r.error.why);
  return { g, p: r.value };
}

const params = () => ({ subject: worker.did, nonce: rng(16) });

describe('standing - authoring the mint policy (§4.6, C20)', () => {
  it('allow / the issuer authors a policy bound to the grant by id', () => {
    const { g, p } = policyFor();
    expect(p.body.grant_id).toBe(grantId(g.grant));
    expect(verifyPolicy(p, g).ok).toBe(true);
    const back = readSignedMintPolicy(decode(encode(signedMintPolicyToCbor(p))));
    expect(mintPolicyId(back)).toBe(mintPolicyId(p));
    expect(verifyPolicy(back, g).ok).toBe(true);
  });

  it('refuse / amplification / per-firing budget over the grant by 1 µJ', () => {
    const g = standingGrant(100n);
    const r = authorPolicy(g, { event_class: WEBHOOK, per_firing_uj: 101n, max_firings: 1, nonce: rng(16) }, owner);
    expect(r).toMatchObject({ ok: false, error: { code: StandingRefusals.AMPLIFICATION } });
  });

  it('refuse / wrong-signer / the holder cannot author its own policy', () => {
    const r = authorPolicy(standingGrant(), { event_class: WEBHOOK, per_firing_uj: 1n, max_firings: 1, nonce: rng(16) }, trigger);
    expect(r).toMatchObject({ ok: false, error: { code: StandingRefusals.WRONG_SIGNER } });
  });

  it('refuse / wrong-signer / a policy signed by the holder is not admitted', () => {
    const { g, p } = policyFor();
    const forged = signBody(p.body, trigger);
    expect(verifyPolicy(forged, g)).toMatchObject({ ok: false, error: { code: StandingRefusals.WRONG_SIGNER } });
  });

  it('refuse / amplification / an issuer-signed policy past the grant, presented anyway', () => {
    const g = standingGrant(100n);
    const p = signBody({ grant_id: grantId(g.grant), event_class: WEBHOOK, per_firing_uj: 150n, max_firings: 1, nonce: rng(16) }, owner);
    expect(verifyPolicy(p, g)).toMatchObject({ ok: false, error: { code: StandingRefusals.AMPLIFICATION } });
  });

  it('refuse / wrong-grant / a policy presented with another grant', () => {
    const { p } = policyFor();
    expect(verifyPolicy(p, standingGrant())).toMatchObject({ ok: false, error: { code: StandingRefusals.WRONG_GRANT } });
  });
});

describe('standing - firing (§4.6, C20)', () => {
  it('allow / a firing mints a strictly weaker child that traces to the standing grant', () => {
    const { g, p } = policyFor();
    const r = fire(p, g, EMPTY_MINT_LEDGER, { event_class: WEBHOOK }, params(), trigger);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    const child = r.value.child.grant;
    expect(child.parent).toBe(grantId(g.grant));
    expect(child.issuer).toBe(trigger.did);
    expect(child.subject).toBe(worker.did);
    expect(child.budget_uj).toBe(40n);
    expect(verifyGrantSignature(r.value.child)).toBe(true);
    expect(checkHop(g.grant, grantId(g.grant), child).ok).toBe(true);
    expect(r.value.ledger).toEqual({ firings: 1, spent_uj: 40n });
  });

  it('refuse / wrong-event-class / another source cannot spend the grant; ledger unchanged', () => {
    const { g, p } = policyFor();
    const ledger: MintLedger = { firings: 1, spent_uj: 40n };
    const r = fire(p, g, ledger, { event_class: OTHER_HOOK }, params(), trigger);
    expect(r).toMatchObject({ ok: false, error: { code: StandingRefusals.WRONG_EVENT_CLASS } });
    expect(ledger).toEqual({ firings: 1, spent_uj: 40n });
  });

  it('refuse / firings-exhausted / the third firing of a two-firing policy', () => {
    const { g, p } = policyFor(standingGrant(1000n), 10n, 2);
    let ledger = EMPTY_MINT_LEDGER;
    for (let i = 0; i < 2; i++) {
      const r = fire(p, g, ledger, { event_class: WEBHOOK }, params(), trigger);
      if (!r.ok) throw new Error(r.error.why);
      ledger = r.value.ledger;
    }
    const r = fire(p, g, ledger, { event_class: WEBHOOK }, params(), trigger);
    expect(r).toMatchObject({ ok: false, error: { code: StandingRefusals.FIRINGS_EXHAUSTED } });
    expect(ledger).toEqual({ firings: 2, spent_uj: 20n });
  });

  it('refuse / budget-exhausted / a third 40 µJ firing would bring spend to 120 of 100 µJ', () => {
    const { g, p } = policyFor(standingGrant(100n), 40n, 5);
    const r = fire(p, g, { firings: 2, spent_uj: 80n }, { event_class: WEBHOOK }, params(), trigger);
    expect(r).toMatchObject({ ok: false, error: { code: StandingRefusals.BUDGET_EXHAUSTED } });
  });

  it('allow / a firing that lands exactly on the grant budget', () => {
    const { g, p } = policyFor(standingGrant(100n), 50n, 5);
    const r = fire(p, g, { firings: 1, spent_uj: 50n }, { event_class: WEBHOOK }, params(), trigger);
    expect(r.ok && r.value.ledger).toEqual({ firings: 2, spent_uj: 100n });
  });

  it('refuse / not-holder / the policy author is not the grant holder and cannot fire', () => {
    const { g, p } = policyFor();
    const r = fire(p, g, EMPTY_MINT_LEDGER, { event_class: WEBHOOK }, params(), owner);
    expect(r).toMatchObject({ ok: false, error: { code: StandingRefusals.NOT_HOLDER } });
  });

  it('refuse / delegation-forbidden / a leaf-only standing grant cannot fire', () => {
    const { g, p } = policyFor(standingGrant(100n, { delegate_depth: 0 }));
    const r = fire(p, g, EMPTY_MINT_LEDGER, { event_class: WEBHOOK }, params(), trigger);
    expect(r).toMatchObject({ ok: false, error: { code: StandingRefusals.DELEGATION_FORBIDDEN } });
  });

  it('refuse / attenuation-violation / a child asking for an action the grant lacks', () => {
    const { g, p } = policyFor();
    const r = fire(p, g, EMPTY_MINT_LEDGER, { event_class: WEBHOOK }, { ...params(), actions: ['deploy'] }, trigger);
    expect(r).toMatchObject({ ok: false, error: { code: StandingRefusals.ATTENUATION_VIOLATION } });
  });

  it('allow / an issuer that put its own authority on standing fires it itself', () => {
    const self = signGrant(
      {
        issuer: owner.did,
        subject: owner.did,
        capability: { resource: contentId({ tool: 'ci' }), actions: ['build'] },
        budget_uj: 10n,
        expiry: 0,
        nonce: rng(16),
      },
      owner,
    );
    const { p } = policyFor(self, 10n, 1);
    expect(fire(p, self, EMPTY_MINT_LEDGER, { event_class: WEBHOOK }, params(), owner).ok).toBe(true);
  });

  it('property / whatever the events, firings stay within max and spend within the grant', () => {
    const arb = fc.record({
      budget: fc.bigInt({ min: 0n, max: 200n }),
      per: fc.bigInt({ min: 0n, max: 60n }),
      max: fc.nat(6),
      events: fc.array(fc.boolean(), { maxLength: 12 }),
    });
    fc.assert(
      fc.property(arb, ({ budget, per, max, events }) => {
        const g = standingGrant(budget);
        const authored = authorPolicy(g, { event_class: WEBHOOK, per_firing_uj: per, max_firings: max, nonce: rng(16) }, owner);
        expect(authored.ok).toBe(per <= budget);
        if (!authored.ok) return;
        let ledger = EMPTY_MINT_LEDGER;
        for (const right of events) {
          const r = fire(authored.value, g, ledger, { event_class: right ? WEBHOOK : OTHER_HOOK }, params(), trigger);
          if (!right) expect(r.ok).toBe(false);
          if (r.ok) {
            expect(r.value.ledger.firings).toBe(ledger.firings + 1);
            ledger = r.value.ledger;
          }
        }
        expect(ledger.firings <= max).toBe(true);
        expect(ledger.spent_uj <= budget).toBe(true);
        expect(ledger.spent_uj).toBe(per * BigInt(ledger.firings));
      }),
      { numRuns: 80 },
    );
  });
});
