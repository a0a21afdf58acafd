/**
 * The chaos runner across regions (docs/chaos.md): 20 seeded short runs, each on its own
 * three-region supercluster (one NATS server per region, gateways through proxies adding 40 ms of
 * round trip), one node per region, every fault kind including `region-cut`. In every run every
 * invariant holds: total spend ≤ budget + Σ_{j≠k} W_j, the signed statements prove the measured
 * overdraft exactly, no acknowledged receipt is lost, every receipt verifies, and the grant revoked
 * halfway through is never allowed after its revocation reached a node (revoked_allowed_after_reach
 * = 0). Runs go four at a time: most of a run's wall time is waiting for processes and timers.
 */
import { describe, expect, it } from 'vitest';
import { ALL_FAULT_KINDS, faultSchedule, runChaos } from '../../chaos/internal.ts';

const SEEDS = Array.from({ length: 20 }, (_, i) => `r${i + 1}`);

describe.concurrent('chaos across three regions, 40 ms apart', () => {
  for (const seed of SEEDS) {
    it(`seed ${seed}: every invariant holds`, { timeout: 240_000 }, async () => {
      const r = await runChaos({
        nodes: 3,
        regions: 3,
        rttMs: 40,
        mode: 'channel',
        faults: ALL_FAULT_KINDS,
        durationS: 8,
        seed,
        ratePerAgent: 15,
      });
      expect(r.problems).toEqual([]);
      expect(Object.values(r.invariants).every(Boolean)).toBe(true);
      expect(r.regions?.map((g) => g.name)).toEqual(['a', 'b', 'c']);
      expect(r.revoked_allowed_after_reach).toBe(0);
      expect(r.revocation?.revoked_at_s).not.toBeNull();
      expect(BigInt(r.spent_uj)).toBeLessThanOrEqual(BigInt(r.budget_uj) + BigInt(r.bound_uj));
      expect(r.statements?.overdraft_uj).toBe(r.overdraft_uj);
      expect(r.decisions.allow).toBeGreaterThan(0);
    });
  }

  it('the 20 schedules between them apply every fault kind', async () => {
    const kinds = new Set(SEEDS.flatMap((s) => faultSchedule(s, ALL_FAULT_KINDS, 3, 3, 8, 3).map((f) => f.kind)));
    expect([...kinds].sort()).toEqual([...ALL_FAULT_KINDS].sort());
  });
});
