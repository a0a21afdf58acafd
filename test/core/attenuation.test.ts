/** Attenuation (§4.1) and delegation depth (§4.4) at mint time: `attenuate` and `checkHop`. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { attenuate, checkHop, type Grant, grantId, signGrant, verifyChain, verifyGrantSignature } from '../../core/index.ts';
import { OTHER_RESOURCE, RESOURCE, alice, bob, carol, dave, delegate, handChild, mallory, rng, rootGrant } from './authority-fixtures.ts';

describe('attenuation - narrowing mints', () => {
  it('allow / a child narrowed on every axis is minted, linked to its parent and signed by the holder', () => {
    const root = rootGrant({ delegate_depth: 3 });
    const r = attenuate(
      root,
      { subject: carol.did, actions: ['read'], budget_uj: 400n, expiry: 4_000, delegate_depth: 1, nonce: rng(16) },
      bob,
    );
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    const c = r.value.grant;
    expect(c.issuer).toBe(bob.did);
    expect(c.subject).toBe(carol.did);
    expect(c.parent).toBe(grantId(root.grant));
    expect(c.capability).toEqual({ resource: root.grant.capability.resource, actions: ['read'] });
    expect([c.budget_uj, c.expiry, c.delegate_depth]).toEqual([400n, 4_000, 1]);
    expect(verifyGrantSignature(r.value)).toBe(true);
  });

  it('allow / omitted fields inherit the parent, and a bounded depth drops by one', () => {
    const root = rootGrant({ delegate_depth: 2 });
    const c = delegate(root, bob, { subject: carol.did }).grant;
    expect(c.capability.actions).toEqual(root.grant.capability.actions);
    expect(c.budget_uj).toBe(root.grant.budget_uj);
    expect(c.expiry).toBe(root.grant.expiry);
    expect(c.delegate_depth).toBe(1);
  });

  it('deny / duplicate actions are refused at mint (readGrant would refuse the child)', () => {
    const r = attenuate(rootGrant(), { subject: carol.did, actions: ['read', 'read'], nonce: rng(16) }, bob);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.error.reason).toBe('attenuation-violation');
  });

  it('allow / equal values on every axis are not an amplification', () => {
    const root = rootGrant();
    const r = attenuate(root, { subject: carol.did, actions: ['write', 'read'], budget_uj: 1_000n, expiry: 5_000, nonce: rng(16) }, bob);
    expect(r.ok).toBe(true);
  });

  it('allow / under a never-expiring parent the child may also never expire', () => {
    const root = rootGrant({ expiry: 0 });
    expect(attenuate(root, { subject: carol.did, expiry: 0, nonce: rng(16) }, bob).ok).toBe(true);
  });
});

describe('attenuation - refusals at mint', () => {
  it.each([
    ['an action the parent lacks', { actions: ['read', 'delete'] }],
    ['a budget over the parent by 1 µJ', { budget_uj: 1_001n }],
    ['an expiry 1 s after the parent', { expiry: 5_001 }],
    ['no expiry under an expiring parent', { expiry: 0 }],
  ])('deny / attenuation violation / %s', (_what, params) => {
    const r = attenuate(rootGrant(), { subject: carol.did, nonce: rng(16), ...params }, bob);
    expect(r.ok ? 'minted' : r.error.reason).toBe('attenuation-violation');
  });

  it('deny / not holder / only the parent subject may delegate', () => {
    const root = rootGrant();
    for (const who of [mallory, alice, carol]) {
      const r = attenuate(root, { subject: who.did, nonce: rng(16) }, who);
      expect(r.ok ? 'minted' : r.error.reason).toBe('not-holder');
    }
  });

  it('deny / delegation forbidden / a leaf-only grant cannot be delegated', () => {
    const root = rootGrant({ delegate_depth: 0 });
    const r = attenuate(root, { subject: carol.did, delegate_depth: 0, nonce: rng(16) }, bob);
    expect(r.ok ? 'minted' : r.error.reason).toBe('delegation-forbidden');
  });

  it('deny / attenuation violation / a depth above parent − 1, or unbounded under a bounded parent', () => {
    const root = rootGrant({ delegate_depth: 2 });
    const deeper = attenuate(root, { subject: carol.did, delegate_depth: 2, nonce: rng(16) }, bob);
    expect(deeper.ok ? 'minted' : deeper.error.reason).toBe('attenuation-violation');
    const handUnbounded = handChild(root, { delegate_depth: undefined }, bob);
    const { delegate_depth: _drop, ...unbounded } = handUnbounded.grant;
    const hop = checkHop(root.grant, grantId(root.grant), unbounded);
    expect(hop.ok ? 'accepted' : hop.error.reason).toBe('attenuation-violation');
  });

  it('depth narrows hop by hop until the leaf-only grant refuses to delegate', () => {
    const root = rootGrant({ delegate_depth: 2 });
    const c1 = delegate(root, bob, { subject: carol.did });
    const c2 = delegate(c1, carol, { subject: dave.did });
    expect([c1.grant.delegate_depth, c2.grant.delegate_depth]).toEqual([1, 0]);
    const r = attenuate(c2, { subject: mallory.did, nonce: rng(16) }, dave);
    expect(r.ok ? 'minted' : r.error.reason).toBe('delegation-forbidden');
    expect(verifyChain([root, c1, c2]).ok).toBe(true);
  });
});

describe('attenuation - checkHop on hand-built children', () => {
  const root = rootGrant({ delegate_depth: 1 });
  const rootId = grantId(root.grant);
  it.each([
    ['a parent link to another grant', { parent: grantId(rootGrant().grant) }, 'chain-broken'],
    ['an issuer other than the parent subject', { issuer: mallory.did }, 'chain-broken'],
    ['another resource', { capability: { resource: OTHER_RESOURCE, actions: ['read'] } }, 'attenuation-violation'],
    ['an extra action', { capability: { resource: root.grant.capability.resource, actions: ['read', 'admin'] } }, 'attenuation-violation'],
    ['a larger budget', { budget_uj: 1_001n }, 'attenuation-violation'],
    ['a later expiry', { expiry: 5_001 }, 'attenuation-violation'],
    ['a depth equal to the parent depth', { delegate_depth: 1 }, 'attenuation-violation'],
  ] as const)('deny / %s is %s', (_what, over, reason) => {
    const child = handChild(root, over, bob).grant;
    const hop = checkHop(root.grant, rootId, child);
    expect(hop.ok ? 'accepted' : hop.error.reason).toBe(reason);
  });

  it('deny / chain broken / any hop under a leaf-only parent', () => {
    const leafOnly = rootGrant({ delegate_depth: 0 });
    const child = handChild(leafOnly, { budget_uj: 1n }, bob).grant;
    const hop = checkHop(leafOnly.grant, grantId(leafOnly.grant), child);
    expect(hop.ok ? 'accepted' : hop.error.reason).toBe('chain-broken');
  });
});

// ---- properties -------------------------------------------------------------------------

const UNIVERSE = ['read', 'write', 'list', 'delete', 'admin'] as const;

/** True when `child` is no stronger than `parent` on every axis (§4.1, §4.4). */
function narrower(parent: Grant, child: Grant): boolean {
  return (
    child.capability.resource === parent.capability.resource &&
    child.capability.actions.every((a) => parent.capability.actions.includes(a)) &&
    child.budget_uj <= parent.budget_uj &&
    (parent.expiry === 0 || (child.expiry !== 0 && child.expiry <= parent.expiry)) &&
    (parent.delegate_depth === undefined ||
      (parent.delegate_depth > 0 && child.delegate_depth !== undefined && child.delegate_depth <= parent.delegate_depth - 1))
  );
}

const parentArb = fc.record({
  actions: fc.subarray([...UNIVERSE]),
  budget: fc.bigInt({ min: 0n, max: 1_000_000n }),
  expiry: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 10_000 })),
  depth: fc.option(fc.integer({ min: 0, max: 5 }), { nil: undefined }),
});
const paramsArb = fc.record(
  {
    actions: fc.subarray([...UNIVERSE]),
    budget_uj: fc.bigInt({ min: 0n, max: 2_000_000n }),
    expiry: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 20_000 })),
    delegate_depth: fc.integer({ min: 0, max: 6 }),
  },
  { requiredKeys: [] },
);

describe('attenuation - properties', () => {
  const unrelatedId = grantId(rootGrant().grant);
  it('attenuate mints exactly the children that are ≤ the parent on every axis, and they chain-verify', () => {
    fc.assert(
      fc.property(parentArb, paramsArb, (p, params) => {
        const parent = rootGrant({
          capability: { resource: RESOURCE, actions: p.actions },
          budget_uj: p.budget,
          expiry: p.expiry,
          ...(p.depth !== undefined ? { delegate_depth: p.depth } : {}),
        });
        const r = attenuate(parent, { subject: carol.did, nonce: rng(16), ...params }, bob);
        if (r.ok) {
          expect(narrower(parent.grant, r.value.grant)).toBe(true);
          expect(checkHop(parent.grant, grantId(parent.grant), r.value.grant).ok).toBe(true);
          expect(verifyChain([parent, r.value]).ok).toBe(true);
        } else {
          // A refusal is justified: the would-be child amplifies, or the parent is leaf-only.
          const depth = params.delegate_depth ?? (p.depth === undefined ? undefined : p.depth - 1);
          const wouldBe: Grant = {
            ...parent.grant,
            issuer: bob.did,
            subject: carol.did,
            capability: { ...parent.grant.capability, actions: params.actions ?? p.actions },
            budget_uj: params.budget_uj ?? p.budget,
            expiry: params.expiry ?? p.expiry,
            ...(depth !== undefined ? { delegate_depth: depth } : {}),
          };
          expect(narrower(parent.grant, wouldBe)).toBe(false);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('checkHop accepts a hand-built child only if it is ≤ the parent on every axis and properly linked', () => {
    const parentOf = fc.tuple(parentArb, fc.boolean());
    fc.assert(
      fc.property(parentOf, paramsArb, fc.boolean(), fc.boolean(), ([p, issuerIsHolder], c, linked, sameResource) => {
        const parent = signGrant(
          {
            issuer: alice.did,
            subject: bob.did,
            capability: { resource: RESOURCE, actions: p.actions },
            budget_uj: p.budget,
            expiry: p.expiry,
            ...(p.depth !== undefined ? { delegate_depth: p.depth } : {}),
            nonce: rng(16),
          },
          alice,
        );
        const child: Grant = {
          issuer: issuerIsHolder ? bob.did : mallory.did,
          subject: carol.did,
          capability: {
            resource: sameResource ? parent.grant.capability.resource : OTHER_RESOURCE,
            actions: c.actions ?? p.actions,
          },
          budget_uj: c.budget_uj ?? p.budget,
          expiry: c.expiry ?? p.expiry,
          parent: linked ? grantId(parent.grant) : unrelatedId,
          ...(c.delegate_depth !== undefined ? { delegate_depth: c.delegate_depth } : {}),
          nonce: rng(16),
        };
        const hop = checkHop(parent.grant, grantId(parent.grant), child);
        const expected = issuerIsHolder && linked && narrower(parent.grant, child);
        expect(hop.ok).toBe(expected);
      }),
      { numRuns: 300 },
    );
  });
});
