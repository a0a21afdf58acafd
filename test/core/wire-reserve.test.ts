import { describe, expect, test } from 'vitest';
import { ErrorCodes, FRAME_INITIAL_RESERVE, FrameReader, frameMessage } from '../../core/index.ts';

/** A bare 4-byte header declaring `n` bytes. */
const header = (n: number): Uint8Array => {
  const h = new Uint8Array(4);
  new DataView(h.buffer).setUint32(0, n, false);
  return h;
};

describe('FrameReader: memory follows the bytes that arrive', () => {
  test('1,000 readers fed only a 64 MiB header reserve 64 KiB each at most, not 64 GiB in total', () => {
    const cap = 64 << 20;
    const readers = Array.from({ length: 1000 }, () => new FrameReader(cap));
    let total = 0;
    for (const r of readers) {
      expect(r.read(header(cap))).toEqual({ bodies: [] });
      r.read(Uint8Array.of(0xa1));
      total += r.reserved;
    }
    expect(total).toBeLessThanOrEqual(1000 * (4 + FRAME_INITIAL_RESERVE));
    // the header counts as a partial frame (what the node's read timer looks at)
    expect(readers[0]!.buffered).toBe(5);
  });

  test('the buffer grows to the declared length as the body arrives, and the body is intact', () => {
    const body = new Uint8Array(300_000).map((_, i) => i & 0xff);
    const framed = frameMessage(body, 1 << 20);
    const r = new FrameReader(1 << 20);
    const got: Uint8Array[] = [];
    for (let off = 0; off < framed.length; off += 7_001) {
      got.push(...r.push(framed.subarray(off, off + 7_001)));
      expect(r.reserved).toBeLessThanOrEqual(Math.max(2 * r.buffered, 4 + FRAME_INITIAL_RESERVE));
    }
    expect(got).toEqual([body]);
    expect(r.reserved).toBe(0);
  });

  test('an allocation failure is a frame-unallocatable error, not a thrown RangeError; bodies before it are kept', () => {
    const r = new FrameReader(1 << 20, {
      alloc: (n) => {
        if (n > 100) throw new RangeError('Array buffer allocation failed');
        return new Uint8Array(n);
      },
    });
    const small = frameMessage(Uint8Array.of(0xa0));
    const chunk = new Uint8Array([...small, ...header(1 << 20), 1, 2, 3]);
    const out = r.read(chunk);
    expect(out.bodies).toEqual([Uint8Array.of(0xa0)]);
    expect(out.error?.code).toBe(ErrorCodes.FRAME_UNALLOCATABLE);
    expect(r.read(Uint8Array.of(1)).error?.code).toBe(ErrorCodes.FRAME_UNALLOCATABLE);
    expect(() => r.push(Uint8Array.of(1))).toThrow(/cannot allocate/);
  });
});
