/**
 * The decisions of one run split by when they were in flight: those whose interval from send to
 * reply overlaps a stretch (a snapshot being written) and the rest of the same run. `npm run
 * bench -- history` reads the snapshot goal's p99 this way beside its run-against-run ratio: the
 * p99 of a run without snapshots moves 1.2–2.5× from one round to the next on this machine, more
 * than the 1.25× the goal allows, while both sides of a split share one node, one process start
 * and one stretch of the machine's weather.
 */

/** A stretch of wall time (unix ms), both ends included. */
export interface Stretch {
  readonly fromMs: number;
  readonly toMs: number;
}

/** The latencies (µs) of a run's decisions on each side of a split. */
export interface Split {
  /** Decisions whose [sent, replied] overlaps one of the stretches. */
  readonly inside: number[];
  /** The other decisions replied from the warm-up's end on. */
  readonly outside: number[];
}

/**
 * Splits a run's decisions by `stretches`. `replyAtMs[i]` (unix ms) and `latencyUs[i]` (µs) are
 * decision i's reply time and latency, in reply order (bench/nodeload.ts's `timelineFile` and
 * `latencyFile`); its send time is the reply time less the latency. Decisions replied before
 * `fromMs` (the warm-up) are on neither side.
 * @throws RangeError when the two arrays differ in length.
 */
export function splitByStretches(
  replyAtMs: readonly number[],
  latencyUs: readonly number[],
  stretches: readonly Stretch[],
  fromMs: number,
): Split {
  if (replyAtMs.length !== latencyUs.length)
    throw new RangeError(`split: ${replyAtMs.length} reply times against ${latencyUs.length} latencies`);
  const inside: number[] = [];
  const outside: number[] = [];
  for (let i = 0; i < replyAtMs.length; i++) {
    const replied = replyAtMs[i]!;
    if (replied < fromMs) continue;
    const lat = latencyUs[i]!;
    const sent = replied - lat / 1000;
    const overlaps = stretches.some((s) => s.fromMs <= replied && s.toMs >= sent);
    (overlaps ? inside : outside).push(lat);
  }
  return { inside, outside };
}
