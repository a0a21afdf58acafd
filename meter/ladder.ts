/**
 * The vocabulary of the energy ladder (spec §5, docs/design.md "Energy"): its rungs, best first, the
 * provenance each rung earns, and the structured reasons a rung is skipped or a figure degrades.
 */
import type { Provenance, Uj } from '../core/index.ts';

/** The rungs of the ladder, best first (§5 "Recommended ladder"). */
export const RUNGS = ['rapl', 'nvml', 'cpu-time', 'estimator'] as const;
/** One rung of the ladder. */
export type Rung = (typeof RUNGS)[number];

/** The provenance a figure from each rung carries (§5): hardware counters → HwShunt, the model → ModelBased, the constant → Estimator. */
export const RUNG_PROVENANCE: Readonly<Record<Rung, Provenance>> = {
  rapl: 'HwShunt',
  nvml: 'HwShunt',
  'cpu-time': 'ModelBased',
  estimator: 'Estimator',
};

/**
 * Why a rung was skipped at probe time, or why one figure degraded below the rung in use:
 * - `absent`: the interface is not there (no powercap folder, no package domain, no libnvidia-ml, no GPU with an energy counter);
 * - `permission-denied`: it is there but this process may not read it (EACCES/EPERM, NVML_ERROR_NO_PERMISSION);
 * - `read-failed`: a read failed for another reason (EIO, a garbled counter, an NVML error) before any figure was started;
 * - `failed-mid-reading`: the first reading of a call succeeded and the second did not, or the two do not make a delta;
 * - `not-calibrated`: the model has no active power (W) configured or calibrated;
 * - `disabled`: the configuration leaves the rung out.
 */
export const SKIP_REASONS = ['absent', 'permission-denied', 'read-failed', 'failed-mid-reading', 'not-calibrated', 'disabled'] as const;
/** A structured skip reason. */
export type SkipReason = (typeof SKIP_REASONS)[number];

/** A rung that was skipped (or failed for one figure), with the reason and a human-readable detail. */
export interface Skipped {
  readonly rung: Rung;
  readonly reason: SkipReason;
  readonly detail: string;
}

/** A reason without its rung, as returned by a single source. */
export interface Failure {
  readonly reason: SkipReason;
  readonly detail: string;
}

/** Where the model's active power comes from. */
export type WattsSource = 'configured' | 'calibrated';

/** The time × power model (§5 rung 3) as probed: its basis, and its power when it has one. */
export interface ModelInfo {
  /** What the time is: CPU time of the metered work, or the call's wall-clock duration. */
  readonly basis: 'cpu-time' | 'wall-time';
  /** Active power in watts (= µJ per µs), when configured or calibrated. */
  readonly watts?: number;
  readonly wattsSource?: WattsSource;
}

/** The result of probing the ladder on this machine. */
export interface Probe {
  /** The best rung that works here. */
  readonly rung: Rung;
  /** The provenance figures from that rung carry. */
  readonly provenance: Provenance;
  /** What the rung in use reads (domains, devices, watts). */
  readonly detail: string;
  /** Every better rung, in ladder order, with why it was skipped. */
  readonly skipped: readonly Skipped[];
  /** The model a hardware figure degrades to when a reading fails half-way. */
  readonly model: ModelInfo;
  /** For a hardware rung: the counters a figure sums (RAPL domains as `package-0`, `dram (package-0)`; NVML `GPU 0`). */
  readonly summed?: readonly string[];
  /** For RAPL: the zones found and not summed, with why (`core (package-0)`: inside package-0; `psys`: covers the platform). */
  readonly notSummed?: readonly { readonly domain: string; readonly why: string }[];
}

/** How one figure was obtained: the rung that produced it, its raw value and what failed on the way. */
export interface Reading {
  /** The rung whose figure was used (may be below the probed rung when a read failed). */
  readonly rung: Rung;
  /** The rung's own figure in µJ before the per-action floor (absent for the estimator). */
  readonly rawUj?: Uj;
  /** The per-action floor (µJ) the cost was lifted to, if higher. */
  readonly floorUj: Uj;
  /** Wall-clock duration of the call (ns). */
  readonly wallNs: bigint;
  /** CPU time the model saw during the call (µs). */
  readonly cpuUs: number;
  /** Rungs above `rung` that were tried for this figure and failed, with why. */
  readonly degraded: readonly Skipped[];
  /** For a hardware figure: the counters summed into `rawUj` (as {@link Probe.summed}). */
  readonly summed?: readonly string[];
  /**
   * For a hardware figure: counters that restarted during the call (an NVML driver reload), as
   * `GPU 0: 5000 → 120 mJ`. Each contributes only its energy since the restart, so `rawUj` is a
   * lower bound of the call's energy.
   */
  readonly reset?: readonly string[];
}

/** Builds a {@link Skipped} entry. */
export function skipped(rung: Rung, f: Failure): Skipped {
  return { rung, reason: f.reason, detail: f.detail };
}

/** Maps a Node fs error to a skip reason: ENOENT/ENOTDIR → absent, EACCES/EPERM → permission-denied, else read-failed. */
export function reasonOfErrno(e: unknown): SkipReason {
  const code = (e as { code?: unknown })?.code;
  if (code === 'ENOENT' || code === 'ENOTDIR') return 'absent';
  if (code === 'EACCES' || code === 'EPERM') return 'permission-denied';
  return 'read-failed';
}

/** A short message for an unknown thrown value. */
export function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
