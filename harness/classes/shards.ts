/**
 * Conformance classes for distributed budgets (spec §4.5): C11 (sharded budgets, refused over-sum
 * at mint) and C17 (budget channels, the pure part: optimistic spends settled by signed
 * statements; forged, stale and regressing statements refused; the merged ledger binds; an
 * overdraft is provable from the signed statements).
 */
import { type Actor, newActor, seededRng } from '../../core/actor.ts';
import { decode, encode } from '../../core/cbor.ts';
import { checkHop, type Grant, grantId, signGrant, verifyGrantSignature } from '../../core/grant.ts';
import { contentId } from '../../core/hash.ts';
import { Ledger } from '../../core/ledger.ts';
import { mintShards, planSplit, ShardRefusals } from '../../core/shard.ts';
import { signBody } from '../../core/signed.ts';
import {
  ChannelLedger,
  channelAllows,
  overdraftBound,
  overdraftProofToCbor,
  readOverdraftProof,
  type SignedStatement,
  signStatement,
  StatementRefusals,
  verifyOverdraftProof,
} from '../../core/statement.ts';
import type { ConformanceClass } from '../conformance.ts';

/** C11: shard slices that sum past the parent are refused at mint; valid shards chain-verify. */
export const C11: ConformanceClass = {
  id: 'C11',
  title: 'sharded budgets',
  run(t) {
    const rng = seededRng('conformance/C11');
    const issuer = newActor(rng);
    const holder = newActor(rng);
    const nodes = [newActor(rng), newActor(rng), newActor(rng)];
    const g: Grant = {
      issuer: issuer.did,
      subject: holder.did,
      capability: { resource: contentId({ tool: 'fs' }), actions: ['read', 'write'] },
      budget_uj: 1_000_000n,
      expiry: 0,
      nonce: rng(16),
    };
    const parent = signGrant(g, issuer);
    const pid = grantId(g);
    const slicesOf = (budgets: readonly bigint[]) =>
      budgets.map((b, i) => ({ subject: nodes[i % nodes.length]!.did, budget_uj: b, nonce: rng(16) }));

    const plan = planSplit(g.budget_uj, [50, 30, 20]);
    t.ok(plan.ok, 'a 50/30/20 split plans');
    const budgets = plan.ok ? plan.value : [];
    t.eq(budgets.reduce((a, b) => a + b, 0n), g.budget_uj, 'a 100% split uses the whole parent, no more');
    const minted = mintShards(parent, holder, slicesOf(budgets));
    t.ok(minted.ok, 'slices summing exactly to the parent mint');
    for (const [i, s] of (minted.ok ? minted.value : []).entries()) {
      t.ok(verifyGrantSignature(s), `shard ${i} is signed by the holder`);
      t.ok(checkHop(g, pid, s.grant).ok, `shard ${i} is a strictly weaker child of the parent`);
      t.eq(s.grant.subject, nodes[i]!.did, `shard ${i} is held by its enforcement point`);
    }

    const over = mintShards(parent, holder, slicesOf([500_000n, 300_000n, 200_001n]));
    t.eq(over.ok ? undefined : over.error.code, ShardRefusals.OVER_SUM, 'slices over the parent by 1 µJ are refused at mint');
    const second = mintShards(parent, holder, slicesOf([1n]), { allocatedUj: g.budget_uj });
    t.eq(second.ok ? undefined : second.error.code, ShardRefusals.OVER_SUM, 'a second round past the live shards is refused');
    const negative = mintShards(parent, holder, slicesOf([1_500_000n, -500_000n]));
    t.eq(negative.ok ? undefined : negative.error.code, ShardRefusals.BAD_SLICE, 'a negative slice cannot make room');
    const notHolder = mintShards(parent, issuer, slicesOf([1n]));
    t.eq(notHolder.ok ? undefined : notHolder.error.code, ShardRefusals.NOT_HOLDER, 'only the holder shards');
    const wider = mintShards(parent, holder, [{ ...slicesOf([1n])[0]!, actions: ['delete'] }]);
    t.eq(wider.ok ? undefined : wider.error.code, ShardRefusals.ATTENUATION_VIOLATION, 'a slice with a new action is refused');
    t.eq(planSplit(1000n, [60, 40.01]).ok, false, 'a split past 100% is refused');

    // Each point enforces only its slice, locally: the shard's own budget stops it.
    if (minted.ok) {
      const local = new Ledger();
      const shard = minted.value[2]!;
      const sid = grantId(shard.grant);
      local.debit([pid, sid], shard.grant.budget_uj);
      t.eq(local.spent(sid) + 1n > shard.grant.budget_uj, true, 'a point that spent its slice has nothing left to allow');
    }
  },
};

/** C17: budget channels settle by signed statements; bad statements are refused; overdraft is provable. */
export const C17: ConformanceClass = {
  id: 'C17',
  title: 'budget channels',
  run(t) {
    const rng = seededRng('conformance/C17');
    const issuer = newActor(rng);
    const points = [newActor(rng), newActor(rng), newActor(rng)];
    const outsider = newActor(rng);
    const agent = newActor(rng);
    const budget = 900n;
    const windowUj = 100n;
    const grant = signGrant(
      {
        issuer: issuer.did,
        subject: agent.did,
        capability: { resource: contentId({ tool: 'llm' }), actions: ['complete'] },
        budget_uj: budget,
        expiry: 0,
        nonce: rng(16),
      },
      issuer,
    );
    const gid = grantId(grant.grant);
    const members = points.map((p) => p.did);

    /** One point: its spend, its settlement state, its merged ledger, its statement seq. */
    const state = points.map((p) => ({ actor: p, spent: 0n, atSettle: 0n, peers: 0n, seq: 0, ledger: new ChannelLedger(gid, { points: members }) }));
    const published: SignedStatement[] = [];
    const spend = (i: number, cost: bigint) => {
      const s = state[i]!;
      const r = channelAllows({ mySpent: s.spent, mySpentAtLastSettle: s.atSettle, peersSettled: s.peers, budget, windowUj, cost });
      if (r.ok) s.spent += cost;
      return r;
    };
    const statementOf = (a: Actor, spent: bigint, seq: number) => signStatement({ grant_id: gid, point: a.did, spent_uj: spent, seq }, a);
    const settle = (i: number) => {
      const s = state[i]!;
      s.seq += 1;
      published.push(statementOf(s.actor, s.spent, s.seq));
      for (const st of published) s.ledger.admit(st);
      s.atSettle = s.spent;
      s.peers = s.ledger.peersSettled(s.actor.did);
    };

    // Optimistic spends, then settlement: every point's merged ledger agrees on the settled total.
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < 3; i++) {
        t.ok(spend(i, 100n).ok, `round ${round}: point ${i} spends within its window`);
      }
      for (let i = 0; i < 3; i++) settle(i);
      for (let i = 0; i < 3; i++) settle(i);
    }
    t.eq(state.map((s) => s.ledger.settledSpent()), [600n, 600n, 600n], 'every merged ledger settles at 600 µJ');
    const wait = spend(0, 101n);
    t.eq(wait.ok ? undefined : wait.error.code, 'window-exhausted', 'a spend past the unsettled window waits for settlement');

    // Forged, stale and regressing statements are refused and change nothing.
    const l = state[1]!.ledger;
    const before = l.settledSpent();
    const latest0 = l.latest(points[0]!.did)!;
    const refusal = (ss: SignedStatement) => {
      const r = l.admit(ss);
      return r.ok ? 'admitted' : r.error.code;
    };
    t.eq(refusal({ body: { ...latest0.body, spent_uj: 0n, seq: latest0.body.seq + 1 }, signature: latest0.signature }), StatementRefusals.FORGED, 'a tampered statement is refused as forged');
    t.eq(refusal(signBody({ ...latest0.body, seq: latest0.body.seq + 1 }, points[1]!)), StatementRefusals.FORGED, 'a statement signed by another point is refused as forged');
    t.eq(refusal(statementOf(outsider, 1n, 1)), StatementRefusals.UNKNOWN_POINT, 'a statement from a non-member is refused');
    t.eq(refusal(statementOf(points[0]!, latest0.body.spent_uj + 1n, latest0.body.seq - 1)), StatementRefusals.STALE, 'a stale statement is refused');
    t.eq(refusal(statementOf(points[0]!, latest0.body.spent_uj - 1n, latest0.body.seq + 1)), StatementRefusals.REGRESSING, 'a regressing statement is refused');
    t.eq(l.settledSpent(), before, 'refused statements leave the merged ledger unchanged');
    t.eq(l.latest(points[0]!.did), latest0, 'the point latest statement is unchanged');

    // The merged ledger binds: spend up to the budget, then refuse.
    for (let i = 0; i < 3; i++) {
      t.ok(spend(i, 100n).ok, `point ${i} spends its third 100 µJ`);
      settle(i);
    }
    for (let i = 0; i < 3; i++) settle(i);
    t.eq(state[0]!.ledger.settledSpent(), budget, 'settled spend reaches the budget exactly');
    const bound = spend(2, 1n);
    t.eq(bound.ok ? undefined : bound.error.code, 'budget-exceeded', 'after settlement the merged ledger refuses 1 µJ more');

    // A partition: points that cannot settle each stop at their window; the overdraft is provable.
    const small = 250n;
    const part = points.map((p) => ({ actor: p, spent: 0n }));
    for (const [i, s] of part.entries()) {
      for (;;) {
        const r = channelAllows({ mySpent: s.spent, mySpentAtLastSettle: 0n, peersSettled: 0n, budget: small, windowUj, cost: 10n });
        if (!r.ok) break;
        s.spent += 10n;
      }
      t.eq(s.spent, windowUj, `cut-off point ${i} stops after its ${windowUj} µJ window`);
    }
    const after = new ChannelLedger(gid, { points: members });
    for (const s of part) t.ok(after.admit(statementOf(s.actor, s.spent, 1)).ok, 'the partition heals: statements settle');
    const proof = after.overdraftProof(small);
    t.eq(proof.total, 300n, 'settlement recovers every point spend');
    t.ok(proof.total <= small + overdraftBound([windowUj, windowUj, windowUj]), 'the spend stays within budget + Σ_{j≠k} W_j');
    const third = readOverdraftProof(decode(encode(overdraftProofToCbor(proof))));
    const verdict = verifyOverdraftProof(third, { id: gid, budget_uj: small });
    t.eq(verdict.ok ? verdict.value : undefined, 50n, 'a third party verifies a 50 µJ overdraft from the signed statements');
    const inflated = verifyOverdraftProof({ ...proof, overdraft: 60n, total: 310n });
    t.eq(inflated.ok, false, 'an inflated overdraft claim does not verify');
    const forged = verifyOverdraftProof({
      ...proof,
      statements: proof.statements.map((st, i) => (i === 0 ? { body: st.body, signature: proof.statements[1]!.signature } : st)),
    });
    t.eq(forged.ok, false, 'a proof with a forged statement does not verify');
  },
};
