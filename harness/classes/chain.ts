/** Conformance class C7: chain conservation (§4.2): hop-by-hop verification, splices refused, siblings share the root budget. */
import { verifyChain } from '../../core/chain.ts';
import { decide } from '../../core/decision.ts';
import { type SignedGrant, grantId } from '../../core/grant.ts';
import type { ConformanceClass } from '../conformance.ts';
import { kit, verdict } from './authority-kit.ts';

/** C7: a multi-hop chain verifies hop by hop; a spliced chain is refused; sibling delegations share their root's budget. */
export const C7: ConformanceClass = {
  id: 'C7',
  title: 'chain conservation',
  run(t) {
    const k = kit('C7');
    const chainOf = () => {
      const root = k.root();
      const mid = k.delegate(root, k.bob, { subject: k.carol.did, budget_uj: 600n });
      const leaf = k.delegate(mid, k.carol, { subject: k.dave.did, budget_uj: 300n });
      return [root, mid, leaf] as const;
    };
    const [root, mid, leaf] = chainOf();
    const [otherRoot, otherMid, otherLeaf] = chainOf();
    const check = (chain: readonly SignedGrant[]) => {
      const r = verifyChain(chain);
      return r.ok ? 'verified' : `${r.error.reason}@${r.error.link ?? '-'}`;
    };

    const ok = verifyChain([root, mid, leaf]);
    t.eq(ok.ok && ok.value, [root, mid, leaf].map((g) => grantId(g.grant)), 'a three-link chain verifies, ids root first');
    t.eq(check([root, mid, otherLeaf]), 'chain-broken@2', 'a leaf spliced from another chain is refused');
    t.eq(check([root, otherMid, otherLeaf]), 'chain-broken@1', 'a subtree spliced under another root is refused');
    t.eq(check([otherRoot, mid, leaf]), 'chain-broken@1', 'a chain re-rooted elsewhere is refused');
    t.eq(check([root, leaf]), 'chain-broken@1', 'a chain missing a link is refused');
    t.eq(check([mid, leaf]), 'chain-broken@0', 'a chain without its root is refused');
    t.eq(check([]), 'chain-broken@-', 'an empty chain is refused');
    t.eq(check([root, k.forged(mid), leaf]), 'bad-signature@1', 'a forged middle link is refused');
    t.eq(check([root, mid, k.handChild(mid, { budget_uj: 601n }, k.carol)]), 'attenuation-violation@2', 'an amplifying hop is refused');
    t.eq(verdict(decide(k.request([root, mid, otherLeaf]), k.state()), true), 'chain-broken@2', 'the decision denies a spliced chain');

    // Siblings share the root: each child may claim the whole root budget, together they cannot exceed it.
    const shared = k.root({ budget_uj: 100n });
    const sharedId = grantId(shared.grant);
    const kids = [k.carol, k.dave, k.erin].map((who) => k.delegate(shared, k.bob, { subject: who.did, budget_uj: 100n }));
    const state = k.state();
    let allowedTotal = 0n;
    let denied = 0;
    for (let i = 0; i < 60; i++) {
      const kid = kids[k.rng(1)[0]! % kids.length]!;
      const cost = BigInt(k.rng(1)[0]! % 12);
      const d = decide(k.request([shared, kid], { costUj: cost }), state);
      if (d.verdict === 'allow') {
        state.ledger.debit(d.chainIds, cost);
        allowedTotal += cost;
      } else {
        denied++;
        t.eq(d.deny.reason, 'budget-exceeded', 'a sibling is refused only for budget');
      }
    }
    t.ok(allowedTotal <= 100n, 'the siblings together never spend more than the root budget');
    t.ok(denied > 0, 'the shared root budget was reached');
    t.eq(state.ledger.spent(sharedId), allowedTotal, 'every allow was debited from the root');
    const kidSum = kids.reduce((a, g) => a + state.ledger.spent(grantId(g.grant)), 0n);
    t.eq(kidSum, allowedTotal, 'and from exactly one child');
    const remaining = 100n - allowedTotal;
    const last = decide(k.request([shared, kids[0]!], { costUj: remaining + 1n }), state);
    t.eq(verdict(last, true), 'budget-exceeded@0', 'one µJ past the shared remainder is refused at the root');
    t.eq(verdict(decide(k.request([shared, kids[1]!], { costUj: remaining }), state)), 'allow', 'the exact shared remainder is allowed');
  },
};
