/**
 * The chaos runner, short and with fixed seeds: real node processes, a real nats-server, faults
 * from the seed; every invariant must hold. Longer runs belong to `jcp chaos` and the bench.
 */
import { describe, expect, it } from 'vitest';
import { FAULT_KINDS, faultSchedule, runChaos } from '../../chaos/internal.ts';

describe('chaos - the fault schedule', () => {
  it('is a function of the seed alone', () => {
    const a = faultSchedule('7', FAULT_KINDS, 3, 1, 60);
    expect(faultSchedule('7', FAULT_KINDS, 3, 1, 60)).toEqual(a);
    expect(faultSchedule('8', FAULT_KINDS, 3, 1, 60)).not.toEqual(a);
  });

  it('never puts two faults on one node at once, and ends 4 s before the run does', () => {
    const s = faultSchedule('busy', FAULT_KINDS, 2, 3, 120);
    for (const key of ['n0', 'n1', 'nats']) {
      const mine = s.filter((f) => (f.kind === 'nats-restart' ? 'nats' : `n${f.target}`) === key);
      for (let i = 1; i < mine.length; i++) expect(mine[i]!.atS).toBeGreaterThanOrEqual(mine[i - 1]!.atS + mine[i - 1]!.forS);
    }
    expect(Math.max(...s.map((f) => f.atS + f.forS))).toBeLessThanOrEqual(116);
    expect(new Set(s.map((f) => f.kind)).size).toBe(FAULT_KINDS.length);
  });
});

describe('chaos - a short run', () => {
  it('channel mode, 3 nodes, every fault kind, seed 7: all four invariants hold', async () => {
    const r = await runChaos({ nodes: 3, mode: 'channel', faults: FAULT_KINDS, durationS: 16, seed: '7' });
    expect(r.problems).toEqual([]);
    expect(r.invariants).toEqual({
      no_lost_receipts: true,
      overdraft_within_bound: true,
      overdraft_proven: true,
      receipts_verify: true,
      revocation_enforced: true,
    });
    expect(r.revoked_allowed_after_reach).toBe(0);
    expect(r.revocation?.reached_nodes).toBe(3);
    expect(r.faults.length).toBeGreaterThan(0);
    expect(r.decisions.allow).toBeGreaterThan(0);
    expect(BigInt(r.spent_uj)).toBeLessThanOrEqual(BigInt(r.budget_uj) + BigInt(r.bound_uj));
  }, 120_000);

  it('shards mode, 3 nodes, kills and partitions, seed 3: spend never passes the budget', async () => {
    const r = await runChaos({ nodes: 3, mode: 'shards', faults: ['kill', 'partition'], durationS: 12, seed: '3' });
    expect(r.problems).toEqual([]);
    expect(Object.values(r.invariants).every(Boolean)).toBe(true);
    expect(BigInt(r.spent_uj)).toBeLessThanOrEqual(BigInt(r.budget_uj));
  }, 120_000);
});
