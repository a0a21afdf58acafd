import { describe, expect, it } from 'vitest';
import { percentile } from '../../bench/figures.ts';
import { splitByStretches } from '../../bench/split.ts';

describe('splitByStretches', () => {
  // Decisions replied at 1,000 + 10·i ms, each taking 4 ms (4,000 µs), the last one 30 ms.
  const replyAtMs = Array.from({ length: 10 }, (_, i) => 1000 + 10 * i);
  const latencyUs = [4000, 4000, 4000, 4000, 4000, 4000, 4000, 4000, 4000, 30_000];

  it('puts a decision inside when its flight overlaps a stretch, at either end', () => {
    // Stretch 1,032–1,046: decision 3 (sent 1,026, replied 1,030) ends before it; 4 (1,036–1,040)
    // and 5 (1,046–1,050: sent on its last ms) overlap; 6 (1,056–1,060) is after. Decision 9 was sent
    // at 1,060 (30 ms in flight) and overlaps the second stretch, 1,061–1,062, though replied after it.
    const s = splitByStretches(
      replyAtMs,
      latencyUs,
      [
        { fromMs: 1061, toMs: 1062 },
        { fromMs: 1032, toMs: 1046 },
      ],
      0,
    );
    expect(s.inside).toEqual([4000, 4000, 30_000]);
    expect(s.outside).toHaveLength(7);
    // A stretch that begins on the ms a decision is replied takes it in.
    expect(splitByStretches(replyAtMs, latencyUs, [{ fromMs: 1020, toMs: 1021 }], 0).inside).toEqual([4000]);
  });

  it('leaves out the decisions replied before the warm-up ends', () => {
    const s = splitByStretches(replyAtMs, latencyUs, [{ fromMs: 1000, toMs: 1015 }], 1010);
    expect(s.inside).toEqual([4000]);
    expect(s.outside).toHaveLength(8);
  });

  it('refuses arrays of different lengths', () => {
    expect(() => splitByStretches([1, 2], [1], [], 0)).toThrow(RangeError);
  });
});

describe('percentile (bench/figures.ts), as the split figures read it', () => {
  it('is the nearest rank, as the load process computes its p99', () => {
    const xs = Array.from({ length: 200 }, (_, i) => 200 - i);
    expect(percentile(xs, 99)).toBe(198);
    expect(percentile(xs, 50)).toBe(100);
    expect(() => percentile([], 99)).toThrow(RangeError);
    // 150 values: the 99th percentile is the 149th (148.5 rounded up), not the 148th.
    expect(
      percentile(
        Array.from({ length: 150 }, (_, i) => i + 1),
        99,
      ),
    ).toBe(149);
  });
});
