/**
 * Conformance class C7: chain conservation (§4.2): hop-by-hop verification, splices refused,
 * siblings share the root budget — in the pure decision and through a real node, whose ledger
 * must hold the debit of every ancestor (`live-node.ts`).
 */
import { decide, grantId, type SignedGrant, verifyChain } from '../../core/index.ts';
import type { ConformanceClass } from '../runner.ts';
import { type Kit, kit, verdict } from './authority-kit.ts';
import { LiveNode } from './live-node.ts';

/** C7: a multi-hop chain verifies hop by hop; a spliced chain is refused; sibling delegations share their root's budget. */
export const C7: ConformanceClass = {
  id: 'C7',
  title: 'chain conservation',
  async run(t) {
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
    t.eq(
      ok.ok && ok.value,
      [root, mid, leaf].map((g) => grantId(g.grant)),
      'a three-link chain verifies, ids root first',
    );
    t.eq(check([root, mid, otherLeaf]), 'chain-broken@2', 'a leaf spliced from another chain is refused');
    t.eq(check([root, otherMid, otherLeaf]), 'chain-broken@1', 'a subtree spliced under another root is refused');
    t.eq(check([otherRoot, mid, leaf]), 'chain-broken@1', 'a chain re-rooted elsewhere is refused');
    t.eq(check([root, leaf]), 'chain-broken@1', 'a chain missing a link is refused');
    t.eq(check([mid, leaf]), 'chain-broken@0', 'a chain without its root is refused');
    t.eq(check([]), 'chain-broken@-', 'an empty chain is refused');
    t.eq(check([root, k.forged(mid), leaf]), 'bad-signature@1', 'a forged middle link is refused');
    t.eq(check([root, mid, k.handChild(mid, { budget_uj: 601n }, k.carol)]), 'attenuation-violation@2', 'an amplifying hop is refused');
    t.eq(verdict(decide(k.request([root, mid, otherLeaf]), k.state()), true), 'chain-broken@2', 'the decision denies a spliced chain');
    // A delegated grant presented alone (it names a parent, its ancestors are missing) is not a
    // root: deciding it directly would skip every ancestor's signature, revocation and budget.
    t.eq(verdict(decide(k.request([leaf]), k.state()), true), 'chain-broken@0', 'the decision denies a lone delegated grant (no chain)');
    t.eq(verdict(decide(k.request([mid]), k.state()), true), 'chain-broken@0', 'and a lone middle link');

    // Siblings share the root (the decision, over a ledger debited with each allow's chainIds; the
    // node's own debits are checked in liveChain): together they cannot exceed the root budget.
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
    t.eq(state.ledger.spent(sharedId), allowedTotal, 'every allow names the root in its chainIds');
    const kidSum = kids.reduce((a, g) => a + state.ledger.spent(grantId(g.grant)), 0n);
    t.eq(kidSum, allowedTotal, 'and exactly one child');
    const remaining = 100n - allowedTotal;
    const last = decide(k.request([shared, kids[0]!], { costUj: remaining + 1n }), state);
    t.eq(verdict(last, true), 'budget-exceeded@0', 'one µJ past the shared remainder is refused at the root');
    t.eq(verdict(decide(k.request([shared, kids[1]!], { costUj: remaining }), state)), 'allow', 'the exact shared remainder is allowed');

    await liveChain(k, t);
  },
};

/**
 * C7 through a real node: a three-link chain and its sibling debit every ancestor in the node's
 * own ledger, a middle link's budget binds its subtree, and spliced chains debit nothing.
 */
async function liveChain(k: Kit, t: Parameters<ConformanceClass['run']>[0]): Promise<void> {
  const live = await LiveNode.start('c7', [k.alice.did], 1_000);
  try {
    const cap = { resource: live.resource, actions: ['read', 'write'] };
    const root = k.root({ capability: cap });
    const mid = k.delegate(root, k.bob, { subject: k.carol.did, budget_uj: 600n });
    const a = k.delegate(mid, k.carol, { subject: k.dave.did, budget_uj: 400n });
    const b = k.delegate(mid, k.carol, { subject: k.erin.did, budget_uj: 400n });
    const other = k.root({ capability: cap });
    const otherMid = k.delegate(other, k.bob, { subject: k.carol.did, budget_uj: 600n });
    const otherLeaf = k.delegate(otherMid, k.carol, { subject: k.dave.did, budget_uj: 400n });
    const ids = [root, mid, a, b, other, otherMid, otherLeaf].map((g) => grantId(g.grant));
    const spent = () => ids.map((id) => live.spent(id));

    for (const [label, chain] of [
      ['a leaf spliced from another chain', [root, mid, otherLeaf]],
      ['a subtree spliced under another root', [root, otherMid, otherLeaf]],
      ['a chain missing its middle link', [root, a]],
      ['a chain re-rooted elsewhere', [other, mid, a]],
      [
        'a hop issued by the parent issuer, not its subject',
        [root, k.handChild(root, { issuer: k.alice.did, subject: k.dave.did }, k.alice)],
      ],
      ['a hop issued by its own subject', [root, k.handChild(root, { issuer: k.dave.did, subject: k.dave.did }, k.dave)]],
    ] as const) {
      t.eq((await live.call(k.dave, { chain })).verdict, 'chain-broken', `node: ${label} is chain-broken`);
    }
    for (const [label, chain] of [
      ['a lone leaf that names a parent (no chain)', [a]],
      ['a lone middle link that names a parent', [mid]],
    ] as const) {
      t.eq((await live.call(k.dave, { chain })).verdict, 'chain-broken', `node: ${label} is chain-broken`);
    }
    t.eq(
      spent(),
      ids.map(() => 0n),
      'node: no spliced or parentless-delegated chain debited any link',
    );

    const first = await live.call(k.dave, { chain: [root, mid, a], costUj: 350n });
    t.eq(first.verdict, 'allow', 'node: a three-link chain is allowed');
    t.eq(first.receipt?.chain_ids, ids.slice(0, 3), 'node: its receipt names every link, root first');
    t.eq(spent().slice(0, 4), [350n, 350n, 350n, 0n], 'node: the allow debited the root, the middle link and the leaf');
    t.eq(
      (await live.call(k.erin, { chain: [root, mid, b], costUj: 251n })).verdict,
      'budget-exceeded',
      'node: the sibling is held by the middle link',
    );
    t.eq(spent().slice(0, 4), [350n, 350n, 350n, 0n], 'node: the refused sibling debited nothing');
    t.eq(
      (await live.call(k.erin, { chain: [root, mid, b], costUj: 250n })).verdict,
      'allow',
      'node: the exact shared remainder is allowed',
    );
    t.eq(spent().slice(0, 4), [600n, 600n, 350n, 250n], 'node: the sibling debited the shared ancestors');
    t.eq(
      (await live.call(k.dave, { chain: [root, mid, a], costUj: 1n })).verdict,
      'budget-exceeded',
      'node: a leaf with budget left is held by its exhausted parent',
    );
    t.eq(
      (await live.call(k.bob, { chain: [root], costUj: 401n })).verdict,
      'budget-exceeded',
      'node: the root holder has only what the subtree left',
    );
    t.eq((await live.call(k.bob, { chain: [root], costUj: 400n })).verdict, 'allow', 'node: and may spend exactly that');
    t.eq(spent(), [1_000n, 600n, 350n, 250n, 0n, 0n, 0n], 'node: total debits conserve the root budget');
  } finally {
    await live.close();
  }
}
