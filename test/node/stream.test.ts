/**
 * How the node reads a connection's byte stream (spec §11; node/server.ts): the read timeout
 * measures the frame being received, not the connection's first partial frame; requests ahead of
 * a bad length in the same chunk are still answered; a client that half-closes after its last
 * request gets every reply.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { concat, decodeWireMessage, encodeWireRequest, frameMessage } from '../../core/index.ts';
import type { RunningNode } from '../../node/index.ts';
import { cast, liveNode, mint, RawConn, request } from './fixtures.ts';

const { rng, alice, bob } = cast('stream');
const READ_TIMEOUT_MS = 300;

/** `n` framed, distinct allow-able requests back to back. */
function frames(n: number, tag: string): Uint8Array {
  const g = mint(alice, bob, 'tools', ['read'], 10n ** 12n, rng);
  return concat(
    ...Array.from({ length: n }, (_, i) =>
      frameMessage(encodeWireRequest(request(bob, [g], { payload: new TextEncoder().encode(`{"i":${i},"t":"${tag}"}`) }))),
    ),
  );
}

/** The kinds of the next `n` replies: 'allow' | 'deny' | the error code. */
async function kinds(c: RawConn, n: number): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const m = decodeWireMessage(await c.next());
    out.push(m.kind === 'error' ? m.error.code : m.kind === 'response' ? m.response.decision.verdict : m.kind);
  }
  return out;
}

describe('connection stream handling', () => {
  let node: RunningNode & { cleanup: () => Promise<void> };
  beforeAll(async () => {
    node = await liveNode({ read_timeout_ms: READ_TIMEOUT_MS, frame_cap: 65_536 });
  });
  afterAll(async () => node.cleanup());

  test('a steady stream whose chunks end mid-frame is never cut off, however long it lasts', async () => {
    const n = 120;
    const stream = frames(n, 'steady');
    const c = await RawConn.open(node.port);
    // Slices of an odd size, one every 40 ms: every frame completes well within the timeout, but
    // some frame is always incomplete at a chunk's end, for 4 × the timeout in all.
    const slice = Math.ceil(stream.length / 30) | 1;
    for (let off = 0; off < stream.length; off += slice) {
      c.write(stream.subarray(off, off + slice));
      await new Promise((r) => setTimeout(r, 40));
    }
    expect(await kinds(c, n)).toEqual(Array(n).fill('allow'));
    expect(c.closed).toBe(false);
    c.destroy();
  });

  test('a frame that stays incomplete is still timed out (read-timeout), and the connection closed', async () => {
    const one = frames(2, 'stalled');
    const c = await RawConn.open(node.port);
    c.write(one.subarray(0, one.length - 10)); // the first frame whole, the second short by 10 bytes
    expect(await kinds(c, 2)).toEqual(['allow', 'read-timeout']);
    expect(await c.waitClosed(5_000)).toBe(true);
  });

  test('requests ahead of an oversized length in the same write are answered, then frame-too-large', async () => {
    const n = 50;
    const bad = new Uint8Array(4);
    new DataView(bad.buffer).setUint32(0, 0x7fffffff);
    const c = await RawConn.open(node.port);
    c.write(concat(frames(n, 'then-too-large'), bad));
    expect(await kinds(c, n + 1)).toEqual([...Array(n).fill('allow'), 'frame-too-large']);
    expect(await c.waitClosed(5_000)).toBe(true);
  });

  test('a client that half-closes after its last request gets every reply, then the node ends the connection', async () => {
    const n = 300;
    const c = await RawConn.open(node.port);
    c.write(frames(n, 'half-close'));
    c.sock.end(); // FIN: nothing more will be sent, replies are still wanted
    expect(await kinds(c, n)).toEqual(Array(n).fill('allow'));
    expect(await c.waitClosed(5_000)).toBe(true);
  });
});
