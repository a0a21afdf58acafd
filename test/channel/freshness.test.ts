/**
 * Revocation freshness (channel/freshness.ts): what counts as a confirmation that a node has seen
 * the latest revocations, with the clock passed in.
 */
import { describe, expect, test } from 'vitest';
import { RevocationFreshness } from '../../channel/index.ts';

describe('freshness - confirmation', () => {
  test('stale / never confirmed: unbounded staleness, refused once a limit is set', () => {
    const f = new RevocationFreshness(5);
    const v = f.view(1_000);
    expect(v.stalenessS).toBe(Number.POSITIVE_INFINITY);
    expect(v.stale).toBe(true);
  });

  test('fresh / an answer at or below what was taken confirms at the send time, not the answer time', () => {
    const f = new RevocationFreshness(5);
    f.taken(3);
    f.answered(10_000, 3);
    expect(f.view(14_000)).toMatchObject({ stalenessS: 4, stale: false, streamSeq: 3, takenSeq: 3 });
    expect(f.view(15_001).stale).toBe(true);
  });

  test('stale / the stream is ahead: no confirmation until the store took up to that sequence', () => {
    const f = new RevocationFreshness(5);
    f.answered(10_000, 7);
    f.taken(6);
    expect(f.view(10_500).confirmedAtMs).toBeUndefined();
    expect(f.view(10_500).stale).toBe(true);
    f.taken(7);
    expect(f.view(10_500)).toMatchObject({ confirmedAtMs: 10_000, stale: false });
    // Taken first, answered after: one message short is still no confirmation.
    const g = new RevocationFreshness(5);
    g.taken(6);
    g.answered(20_000, 7);
    expect(g.view(20_100).confirmedAtMs).toBeUndefined();
  });

  test('stale / failed probes never confirm; the limit 0 is never stale', () => {
    const f = new RevocationFreshness(2);
    f.taken(1);
    f.answered(0, 1);
    f.failed('timeout');
    expect(f.view(2_500)).toMatchObject({ stale: true, lastProblem: 'timeout' });
    const off = new RevocationFreshness(0);
    expect(off.view(1e12).stale).toBe(false);
  });

  test('reject / a negative or non-finite limit', () => {
    expect(() => new RevocationFreshness(-1)).toThrow(RangeError);
    expect(() => new RevocationFreshness(Number.NaN)).toThrow(RangeError);
  });
});
