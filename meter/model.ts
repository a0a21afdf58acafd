/**
 * The time × calibrated power model (spec §5 rung 3 → ModelBased) and the per-action constant
 * (rung 4 → Estimator).
 *
 * One watt for one microsecond is one microjoule, so a figure is `ceil(time_µs × watts)` µJ,
 * rounded up so the model never under-charges by rounding. The time is the CPU time of the
 * metered work by default (`process.cpuUsage()` deltas: the whole process, since Node 20 has no
 * per-thread CPU clock; concurrent calls in one process therefore each see the others' CPU time,
 * which over-counts like RAPL does). Work done in another process (an MCP server child) is not in
 * this process's CPU time: a caller that meters such work passes a `cpuUsage` that includes it,
 * or chooses the `wall-time` basis, which charges the whole wall interval at active power.
 */
import { check, type Uj } from '../core/index.ts';

/** CPU time consumed so far, in µs, as `process.cpuUsage()` reports it. */
export interface CpuUsage {
  readonly user: number;
  readonly system: number;
}

/** The model's figure: `ceil(timeUs × watts)` µJ (1 W × 1 µs = 1 µJ). `timeUs` and `watts` must be finite and ≥ 0. */
export function modelUj(timeUs: number, watts: number): Uj {
  check(Number.isFinite(timeUs) && timeUs >= 0, 'timeUs', 'must be a finite number ≥ 0');
  check(Number.isFinite(watts) && watts >= 0, 'watts', 'must be a finite number ≥ 0');
  // Integer arithmetic in µs × mW, rounded up, so large times keep their precision.
  const us = BigInt(Math.ceil(timeUs));
  const mw = BigInt(Math.ceil(watts * 1000));
  return (us * mw + 999n) / 1000n;
}

/** CPU µs between two `cpuUsage()` samples (user + system), never negative. */
export function cpuDeltaUs(before: CpuUsage, after: CpuUsage): number {
  return Math.max(0, after.user - before.user + (after.system - before.system));
}

/** The default per-action constant when the configuration names none (µJ): 0.1 J, a ~10 ms call at 10 W. */
export const DEFAULT_ESTIMATE_UJ: Uj = 100_000n;

/** Checks an active power figure (W) from configuration: finite and > 0. @throws JcpError `schema` naming `field`. */
export function checkWatts(watts: number, field: string): number {
  check(typeof watts === 'number' && Number.isFinite(watts) && watts > 0, field, 'must be a finite number of watts > 0');
  return watts;
}
