/**
 * Budgets that follow delegation, the bridge's part (bridge/delegation.ts, docs/a2a.md
 * "Budgets that follow delegation"): minting a child grant from the agent's own (only narrower, §4.1), the det-CBOR /
 * base64url codec of the chain, and accepting a handed chain (leaf subject, delegator listed,
 * attenuation, expiry, signatures, resource), with real keys.
 */
import { describe, expect, test } from 'vitest';
import {
  DelegationError,
  DelegationGate,
  decodeDelegation,
  encodeDelegation,
  mintDelegation,
  readDelegateRequest,
} from '../../bridge/index.ts';
import { type Actor, grantId, newActor, type SignedGrant, signGrant, verifyChain } from '../../core/index.ts';
import { cast, mint, rid } from '../node/fixtures.ts';

const { rng, alice: steward, bob: planner, carol: researcher, mallory } = cast('a2a-delegation');
const NOW = 1_700_000_000;

function codeOf(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    if (e instanceof DelegationError) return e.code;
    throw e;
  }
  throw new Error('expected a DelegationError');
}

/** The planner's own chain: steward → planner, 1,000 µJ on `search` with two actions, expiring. */
function plannerChain(extra: Parameters<typeof mint>[6] = {}): SignedGrant[] {
  return [mint(steward, planner, 'search', ['query', 'fetch'], 1000n, rng, { expiry: NOW + 3600, ...extra })];
}

function delegate(chain: SignedGrant[], o: Record<string, unknown>, holder: Actor = planner): SignedGrant[] {
  return mintDelegation(chain, readDelegateRequest({ to: researcher.did, resource: 'search', budget_uj: '250', ...o }), holder, NOW);
}

describe('minting a delegation (§4.1)', () => {
  test('a quarter of the budget, fewer actions: a verifying chain whose leaf names the receiver, issued by the planner', () => {
    const chain = delegate(plannerChain(), { actions: ['query'] });
    expect(chain).toHaveLength(2);
    const leaf = chain[1]!.grant;
    expect(leaf.subject).toBe(researcher.did);
    expect(leaf.issuer).toBe(planner.did);
    expect(leaf.budget_uj).toBe(250n);
    expect(leaf.capability.actions).toEqual(['query']);
    expect(leaf.capability.resource).toBe(rid('search'));
    expect(leaf.expiry).toBe(NOW + 3600);
    expect(leaf.parent).toBe(grantId(chain[0]!.grant));
    expect(verifyChain(chain).ok).toBe(true);
  });

  test('delegate_depth is narrowed under a bounded parent', () => {
    const chain = delegate(plannerChain({ delegate_depth: 2 }), {});
    expect(chain[1]!.grant.delegate_depth).toBe(1);
  });

  test('every amplification is refused delegate-not-narrower; a leaf-only parent delegate-forbidden', () => {
    expect(codeOf(() => delegate(plannerChain(), { budget_uj: '1001' }))).toBe('delegate-not-narrower');
    expect(codeOf(() => delegate(plannerChain(), { actions: ['query', 'delete'] }))).toBe('delegate-not-narrower');
    expect(codeOf(() => delegate(plannerChain(), { expiry: NOW + 7200 }))).toBe('delegate-not-narrower');
    expect(codeOf(() => delegate(plannerChain({ delegate_depth: 1 }), { delegate_depth: 1 }))).toBe('delegate-not-narrower');
    expect(codeOf(() => delegate(plannerChain({ delegate_depth: 0 }), {}))).toBe('delegate-forbidden');
  });

  test('a bad jcp/delegate is refused delegate-invalid naming the field', () => {
    const bad = (v: unknown, says: string) => {
      expect(codeOf(() => readDelegateRequest(v))).toBe('delegate-invalid');
      expect(() => readDelegateRequest(v)).toThrow(says);
    };
    bad('x', 'expected an object');
    bad({ to: 'did:web:x', resource: 'search', budget_uj: '1' }, 'to:');
    bad({ to: researcher.did, budget_uj: '1' }, 'resource');
    bad({ to: researcher.did, resource: 'search', budget_uj: 1 }, 'budget_uj');
    bad({ to: researcher.did, resource: 'search', budget_uj: '-1' }, 'budget_uj');
    bad({ to: researcher.did, resource: 'search', budget_uj: '1', actions: ['a', 'a'] }, 'actions');
    bad({ to: researcher.did, resource: 'search', budget_uj: '1', expiry: 1.5 }, 'expiry');
    bad({ to: researcher.did, resource: 'search', budget_uj: '1', extra: 1 }, 'unknown field');
    expect(codeOf(() => delegate(plannerChain(), { expiry: NOW - 1 }))).toBe('delegate-invalid');
  });
});

describe('the jcp/delegation codec (det-CBOR array, base64url)', () => {
  test('round-trips, byte for byte', () => {
    const chain = delegate(plannerChain(), {});
    const text = encodeDelegation(chain);
    expect(text).toMatch(/^[A-Za-z0-9_-]+$/);
    const back = decodeDelegation(text);
    expect(back.map((g) => grantId(g.grant))).toEqual(chain.map((g) => grantId(g.grant)));
    expect(encodeDelegation(back)).toBe(text);
  });

  test('anything else is delegation-invalid', () => {
    for (const v of [42, '', 'a=b', 'AAAA', `${encodeDelegation(plannerChain())}=`, 'x'.repeat(70_000)]) {
      expect(codeOf(() => decodeDelegation(v))).toBe('delegation-invalid');
    }
    // A det-CBOR array that is not signed grants.
    expect(codeOf(() => decodeDelegation(Buffer.from([0x81, 0x01]).toString('base64url')))).toBe('delegation-invalid');
  });
});

describe('accepting a handed chain', () => {
  const gate = () => new DelegationGate({ self: researcher.did, acceptFrom: [planner.did] });

  test('a good chain from a listed delegator is accepted for its resource', () => {
    const chain = delegate(plannerChain(), {});
    const got = gate().accept(encodeDelegation(chain), rid('search'));
    expect(grantId(got[1]!.grant)).toBe(grantId(chain[1]!.grant));
  });

  test('each abuse is refused with its code', () => {
    const good = delegate(plannerChain(), {});
    // Leaf subject is not this agent.
    const toOther = mintDelegation(
      plannerChain(),
      readDelegateRequest({ to: mallory.did, resource: 'search', budget_uj: '1' }),
      planner,
      NOW,
    );
    expect(codeOf(() => gate().accept(encodeDelegation(toOther)))).toBe('delegation-not-for-me');
    // Delegator not listed.
    const g2 = new DelegationGate({ self: researcher.did, acceptFrom: [mallory.did] });
    expect(codeOf(() => g2.accept(encodeDelegation(good)))).toBe('delegation-delegator-not-accepted');
    expect(codeOf(() => new DelegationGate({ self: researcher.did, acceptFrom: [] }).accept(encodeDelegation(good)))).toBe(
      'delegation-delegator-not-accepted',
    );
    // Another resource than the one called.
    expect(codeOf(() => gate().accept(encodeDelegation(good), rid('other')))).toBe('delegation-resource-mismatch');
    // A child signed by the planner but wider than its parent (hand-made: mint refuses it).
    const wider = (g: Partial<SignedGrant['grant']>) => {
      const parent = plannerChain();
      const child = signGrant({ ...delegate(parent, {})[1]!.grant, ...g, parent: grantId(parent[0]!.grant), nonce: rng(16) }, planner);
      return encodeDelegation([...parent, child]);
    };
    expect(codeOf(() => gate().accept(wider({ budget_uj: 5000n })))).toBe('delegation-not-attenuating');
    expect(codeOf(() => gate().accept(wider({ capability: { resource: rid('search'), actions: ['query', 'delete'] } })))).toBe(
      'delegation-not-attenuating',
    );
    expect(codeOf(() => gate().accept(wider({ expiry: NOW + 7200 })))).toBe('delegation-outlives-parent');
    expect(codeOf(() => gate().accept(wider({ expiry: 0 })))).toBe('delegation-outlives-parent');
    // A forged signature, and a spliced link.
    const forged = [good[0]!, { ...good[1]!, signature: new Uint8Array(64) }];
    expect(codeOf(() => gate().accept(encodeDelegation(forged)))).toBe('delegation-chain-invalid');
    const other = delegate(plannerChain(), {});
    expect(codeOf(() => gate().accept(encodeDelegation([good[0]!, other[1]!])))).toBe('delegation-chain-invalid');
    // Issued by someone who does not hold the parent (mallory signs a child of the planner's grant).
    const parent = plannerChain();
    const stolen = signGrant({ ...good[1]!.grant, issuer: mallory.did, parent: grantId(parent[0]!.grant) }, mallory);
    const g3 = new DelegationGate({ self: researcher.did, acceptFrom: [mallory.did] });
    expect(codeOf(() => g3.accept(encodeDelegation([...parent, stolen])))).toBe('delegation-chain-invalid');
  });

  test('the cache of accepted chains is bounded', () => {
    const g = new DelegationGate({ self: researcher.did, acceptFrom: [planner.did], cacheSize: 3 });
    for (let i = 0; i < 10; i++) g.accept(encodeDelegation(delegate(plannerChain(), {})));
    expect(g.cached).toBe(3);
    // A refused chain is never cached.
    const toOther = mintDelegation(
      plannerChain(),
      readDelegateRequest({ to: newActor(rng).did, resource: 'search', budget_uj: '1' }),
      planner,
      NOW,
    );
    expect(() => g.accept(encodeDelegation(toOther))).toThrow(DelegationError);
    expect(g.cached).toBe(3);
  });
});
