/** Chain verification (§4.2), depth in chains (§4.4), and energy conservation across siblings (C7). */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decide, grantId, MAX_CHAIN_LENGTH, type SignedGrant, verifyChain } from '../../core/internal.ts';
import {
  bob,
  carol,
  dave,
  delegate,
  erin,
  forged,
  freshState,
  handChild,
  idsOf,
  mallory,
  requestFor,
  rootGrant,
} from './authority-fixtures.ts';

function reasonOf(chain: readonly SignedGrant[]): string {
  const r = verifyChain(chain);
  return r.ok ? 'verified' : `${r.error.reason}@${r.error.link ?? '-'}`;
}

/** alice → bob (root) → carol (mid) → dave (leaf). */
function threeLinks(): SignedGrant[] {
  const root = rootGrant();
  const mid = delegate(root, bob, { subject: carol.did, budget_uj: 600n, actions: ['read'] });
  const leaf = delegate(mid, carol, { subject: dave.did, budget_uj: 300n });
  return [root, mid, leaf];
}

describe('chain - verification', () => {
  it('allow / a three-link chain verifies and yields its ids root first', () => {
    const chain = threeLinks();
    const r = verifyChain(chain);
    expect(r.ok && r.value).toEqual(idsOf(chain));
  });

  it('allow / a lone root is a one-link chain', () => {
    const root = rootGrant();
    expect(verifyChain([root])).toEqual({ ok: true, value: [grantId(root.grant)] });
  });

  it('deny / chain broken / an empty chain', () => {
    expect(reasonOf([])).toBe('chain-broken@-');
  });

  it('deny / chain broken / a root that names a parent (a delegated grant without its ancestors)', () => {
    const [, mid, leaf] = threeLinks();
    expect(reasonOf([mid!, leaf!])).toBe('chain-broken@0');
    expect(reasonOf([leaf!])).toBe('chain-broken@0');
  });

  it('deny / chain broken / a spliced chain: a leaf from another chain under this parent', () => {
    const a = threeLinks();
    const b = threeLinks();
    expect(reasonOf([a[0]!, a[1]!, b[2]!])).toBe('chain-broken@2');
    expect(reasonOf([a[0]!, b[1]!, b[2]!])).toBe('chain-broken@1');
  });

  it('deny / chain broken / a missing middle link and a reordered chain', () => {
    const [root, mid, leaf] = threeLinks();
    expect(reasonOf([root!, leaf!])).toBe('chain-broken@1');
    expect(reasonOf([root!, leaf!, mid!])).toBe('chain-broken@1');
    expect(reasonOf([mid!, root!, leaf!])).toBe('chain-broken@0');
  });

  it('deny / chain broken / a hop issued by someone other than the previous subject', () => {
    const root = rootGrant();
    const hijack = handChild(root, { issuer: mallory.did }, mallory);
    expect(reasonOf([root, hijack])).toBe('chain-broken@1');
  });

  it('deny / attenuation violation / a properly signed hop that amplifies budget, actions or expiry', () => {
    const [root, mid] = threeLinks();
    const leafOver = handChild(mid!, { budget_uj: 601n }, carol);
    const leafAct = handChild(mid!, { capability: { resource: mid!.grant.capability.resource, actions: ['read', 'write'] } }, carol);
    const leafLate = handChild(mid!, { expiry: 5_001 }, carol);
    for (const leaf of [leafOver, leafAct, leafLate]) expect(reasonOf([root!, mid!, leaf])).toBe('attenuation-violation@2');
  });

  it('deny / bad signature / a forged link anywhere in the chain', () => {
    const [root, mid, leaf] = threeLinks();
    expect(reasonOf([forged(root!), mid!, leaf!])).toBe('bad-signature@0');
    expect(reasonOf([root!, forged(mid!), leaf!])).toBe('bad-signature@1');
    expect(reasonOf([root!, mid!, forged(leaf!)])).toBe('bad-signature@2');
  });

  it('deny / tampered links: a tampered ancestor breaks the next link, a tampered leaf fails its signature', () => {
    const [root, mid, leaf] = threeLinks();
    const tamperedMid = { grant: { ...mid!.grant, budget_uj: 601n }, signature: mid!.signature };
    expect(reasonOf([root!, tamperedMid, leaf!])).toBe('chain-broken@2');
    const tamperedLeaf = { grant: { ...leaf!.grant, budget_uj: 299n }, signature: leaf!.signature };
    expect(reasonOf([root!, mid!, tamperedLeaf])).toBe('bad-signature@2');
  });

  it('structure is checked before any signature: an amplifying link outranks an earlier forged one', () => {
    const [root, mid] = threeLinks();
    const leafOver = handChild(mid!, { budget_uj: 601n }, carol);
    expect(reasonOf([root!, forged(mid!), leafOver])).toBe('attenuation-violation@2');
  });

  it(`deny / chain broken / more than ${MAX_CHAIN_LENGTH} links; exactly ${MAX_CHAIN_LENGTH} verify`, () => {
    const people = [bob, carol, dave, erin];
    const chain: SignedGrant[] = [rootGrant({ expiry: 0 })];
    for (let i = 1; i <= MAX_CHAIN_LENGTH; i++) {
      const holder = people[(i - 1) % people.length]!;
      chain.push(delegate(chain[i - 1]!, holder, { subject: people[i % people.length]!.did }));
    }
    expect(reasonOf(chain.slice(0, MAX_CHAIN_LENGTH))).toBe('verified');
    expect(reasonOf(chain)).toBe(`chain-broken@${MAX_CHAIN_LENGTH}`);
  });
});

describe('chain - delegation depth (§4.4)', () => {
  it('deny / chain broken / a correctly signed hop under a leaf-only parent', () => {
    const root = rootGrant({ delegate_depth: 1 });
    const worker = delegate(root, bob, { subject: carol.did });
    expect(worker.grant.delegate_depth).toBe(0);
    const deepened = handChild(worker, { issuer: carol.did }, carol);
    expect(reasonOf([root, worker, deepened])).toBe('chain-broken@2');
  });

  it('deny / attenuation violation / a hop that keeps or widens its parent depth', () => {
    const root = rootGrant({ delegate_depth: 2 });
    const same = handChild(root, { delegate_depth: 2 }, bob);
    expect(reasonOf([root, same])).toBe('attenuation-violation@1');
    const unbounded = handChild(root, { delegate_depth: undefined }, bob);
    expect(unbounded.grant.delegate_depth).toBeUndefined();
    expect(reasonOf([root, unbounded])).toBe('attenuation-violation@1');
  });

  it('allow / depth narrowing by exactly one per hop verifies', () => {
    const root = rootGrant({ delegate_depth: 2 });
    const c1 = delegate(root, bob, { subject: carol.did });
    const c2 = delegate(c1, carol, { subject: dave.did });
    expect(reasonOf([root, c1, c2])).toBe('verified');
  });
});

describe('chain - conservation across siblings (property)', () => {
  it('random spends across sibling leaves never allow more than any ancestor budget, and allow exactly what fits', () => {
    const treeArb = fc.record({
      rootBudget: fc.bigInt({ min: 0n, max: 2_000n }),
      kids: fc.array(fc.record({ share: fc.integer({ min: 0, max: 100 }), grand: fc.option(fc.integer({ min: 0, max: 100 })) }), {
        minLength: 2,
        maxLength: 4,
      }),
    });
    const spendArb = fc.array(fc.record({ leaf: fc.nat(), cost: fc.bigInt({ min: 0n, max: 700n }) }), { maxLength: 40 });
    fc.assert(
      fc.property(treeArb, spendArb, (tree, spends) => {
        const root = rootGrant({ budget_uj: tree.rootBudget });
        // Every sibling may claim up to the whole root budget: delegation can never mint joules.
        const chains: SignedGrant[][] = tree.kids.map((k) => {
          const child = delegate(root, bob, {
            subject: carol.did,
            budget_uj: (tree.rootBudget * BigInt(k.share)) / 100n,
            actions: ['read'],
          });
          if (k.grand === null) return [root, child];
          const grand = delegate(child, carol, { subject: dave.did, budget_uj: (child.grant.budget_uj * BigInt(k.grand)) / 100n });
          return [root, child, grand];
        });
        const state = freshState();
        const allowed = new Map<string, bigint>();
        for (const s of spends) {
          const chain = chains[s.leaf % chains.length]!;
          const req = requestFor(chain, { costUj: s.cost });
          const ids = idsOf(chain);
          const fits = chain.every((sg, i) => state.ledger.spent(ids[i]!) + s.cost <= sg.grant.budget_uj);
          const d = decide(req, state);
          expect(d.verdict).toBe(fits ? 'allow' : 'deny');
          if (d.verdict === 'allow') {
            state.ledger.debit(d.chainIds, s.cost);
            for (const id of d.chainIds) allowed.set(id, (allowed.get(id) ?? 0n) + s.cost);
          } else {
            expect(d.deny.reason).toBe('budget-exceeded');
          }
        }
        for (const chain of chains) {
          for (const sg of chain) {
            const id = grantId(sg.grant);
            expect(allowed.get(id) ?? 0n).toBeLessThanOrEqual(sg.grant.budget_uj);
            expect(state.ledger.spent(id)).toBe(allowed.get(id) ?? 0n);
          }
        }
        const rootId = grantId(root.grant);
        const leafTotal = [...new Set(chains.map((c) => grantId(c[1]!.grant)))].reduce((a, id) => a + (allowed.get(id) ?? 0n), 0n);
        expect(leafTotal).toBe(allowed.get(rootId) ?? 0n);
        expect(leafTotal).toBeLessThanOrEqual(tree.rootBudget);
      }),
      { numRuns: 150 },
    );
  });

  it('siblings share the root: two children each granted the whole root budget cannot spend it twice', () => {
    const root = rootGrant({ budget_uj: 100n });
    const left = delegate(root, bob, { subject: carol.did });
    const right = delegate(root, bob, { subject: dave.did });
    const state = freshState();
    const first = decide(requestFor([root, left], { costUj: 70n }), state);
    expect(first.verdict).toBe('allow');
    state.ledger.debit(first.chainIds, 70n);
    const second = decide(requestFor([root, right], { costUj: 70n }), state);
    expect(second.verdict === 'deny' && [second.deny.reason, second.deny.link, second.deny.remainingUj]).toEqual([
      'budget-exceeded',
      0,
      30n,
    ]);
    const third = decide(requestFor([root, right], { costUj: 30n }), state);
    expect(third.verdict).toBe('allow');
  });
});
