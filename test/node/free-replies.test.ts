/**
 * Replies a peer gets without a decision or a debit (node/enforcer.ts `#freeReply`,
 * node/ratelimit.ts `spend`, `ReplaySlots`): an idempotent replay of a request decided before
 * (§11) and a `tool_list` spend the peer's abuse tokens by size, one per 64 KiB, and replays read
 * back from the log run a few at a time. Found by a reviewer (2026-12-06): one paid call re-sent
 * 428 times returned 6 MB each and took the node from 1.1 to 3.2 GB.
 */
import { realpathSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, test, vi } from 'vitest';
import { decodeWireMessage, encodeWireMessage, encodeWireRequest, frameMessage } from '../../core/index.ts';
import { NodeErrorCodes, REPLY_TOKEN_BYTES, ReplaySlots } from '../../node/index.ts';
import { cast, liveNode, mint, RawConn, request, tempDir, tempFolders } from './fixtures.ts';

const { rng, alice, bob } = cast('free-replies');
const folder = tempFolders('free-replies');

/** Sends `frame` on `c` and returns what came back: an error code, `allow`/a deny reason, or the message kind. */
async function outcome(c: RawConn, frame: Uint8Array): Promise<{ what: string; bytes: number }> {
  c.write(frame);
  const body = await c.next();
  const m = decodeWireMessage(body);
  const what = m.kind === 'error' ? m.error.code : m.kind === 'response' ? (m.response.decision.deny_reason ?? 'allow') : m.kind;
  return { what, bytes: body.byteLength };
}

describe('free replies spend abuse tokens', () => {
  test('replays of a decided request: one token each, then rate-limited; nothing is decided again', async () => {
    let clock = 1_900_000_000;
    const node = await liveNode(
      { abuse: { burst: 3, refill_per_s: 1 }, snapshot: { every_receipts: 0, every_s: 0 } },
      { clockS: () => clock },
      folder(),
    );
    try {
      const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
      const frame = frameMessage(encodeWireRequest(request(bob, [g], { now: clock })));
      const c = await RawConn.open(node.port, '127.0.0.2');
      const slots = vi.spyOn(ReplaySlots.prototype, 'run');
      const seen: string[] = [];
      for (let i = 0; i < 5; i++) seen.push((await outcome(c, frame)).what);
      // Each replay read back from the log took one of the peer's slots (the fifth was refused first).
      expect(slots.mock.calls.map((call) => call[0])).toEqual(['127.0.0.2', '127.0.0.2', '127.0.0.2']);
      slots.mockRestore();
      // The first is decided (no token); three replays take the three tokens; the fifth is refused.
      expect(seen).toEqual(['allow', 'allow', 'allow', 'allow', NodeErrorCodes.RATE_LIMITED]);
      expect(node.enforcer.nextSeq).toBe(1);
      // Counted as replays: the three answered (the refused one is counted as rate-limited).
      expect(await node.metrics.registry.getSingleMetricAsString('jcp_idempotent_replays_total')).toContain(
        'jcp_idempotent_replays_total 3',
      );
      // Another address is not touched, and tokens come back with time.
      const other = await RawConn.open(node.port, '127.0.0.3');
      expect((await outcome(other, frame)).what).toBe('allow');
      clock += 1;
      expect((await outcome(c, frame)).what).toBe('allow');
      expect((await outcome(c, frame)).what).toBe(NodeErrorCodes.RATE_LIMITED);
      expect(node.enforcer.nextSeq).toBe(1);
      c.destroy();
      other.destroy();
    } finally {
      await node.cleanup();
    }
  });

  test('a large replayed result spends one token per 64 KiB: the peer then waits for the refill', async () => {
    let clock = 1_900_000_000;
    const files = tempDir('free-replies-fs');
    const root = realpathSync(files.dir);
    const big = path.join(root, 'big.txt');
    writeFileSync(big, 'A'.repeat(150_000)); // the result carries it twice (content and structuredContent)
    const node = await liveNode(
      {
        abuse: { burst: 10, refill_per_s: 1 },
        snapshot: { every_receipts: 0, every_s: 0 },
        resources: [{ name: 'fs', endpoint: { kind: 'mcp-stdio', command: 'mcp-server-filesystem', args: [root] } }],
      },
      { clockS: () => clock },
      folder(),
    );
    try {
      const g = mint(alice, bob, 'fs', ['read_text_file'], 1_000_000n, rng);
      const payload = new TextEncoder().encode(JSON.stringify({ path: big }));
      const frame = frameMessage(encodeWireRequest(request(bob, [g], { now: clock, payload })));
      const c = await RawConn.open(node.port, '127.0.0.2');
      const first = await outcome(c, frame);
      expect(first.what).toBe('allow');
      expect(first.bytes).toBeGreaterThan(300_000);
      const tokens = Math.ceil(first.bytes / REPLY_TOKEN_BYTES);
      expect(tokens).toBeGreaterThanOrEqual(5);
      expect(tokens).toBeLessThan(10);
      // 10 tokens: the first replay spends `tokens` (5 or 6), the second runs the bucket into debt.
      expect((await outcome(c, frame)).what).toBe('allow');
      expect((await outcome(c, frame)).what).toBe('allow');
      expect((await outcome(c, frame)).what).toBe(NodeErrorCodes.RATE_LIMITED);
      // The debt (2 × tokens − 10) is paid by the refill, one token a second, before the next.
      clock += 2 * tokens - 10;
      expect((await outcome(c, frame)).what).toBe(NodeErrorCodes.RATE_LIMITED);
      clock += 1;
      expect((await outcome(c, frame)).what).toBe('allow');
      expect(node.enforcer.nextSeq).toBe(1);
      c.destroy();
    } finally {
      await node.cleanup();
      files.cleanup();
    }
  });

  test('list_tools spends a token per 64 KiB of the list; the list is encoded once while no tool list changes', async () => {
    const clock = 1_900_000_000;
    const node = await liveNode(
      { abuse: { burst: 2, refill_per_s: 1 }, snapshot: { every_receipts: 0, every_s: 0 } },
      { clockS: () => clock },
      folder(),
    );
    try {
      const c = await RawConn.open(node.port, '127.0.0.2');
      const list = frameMessage(encodeWireMessage({ kind: 'list_tools' }));
      c.write(list);
      const a = await c.next();
      c.write(list);
      const b = await c.next();
      expect(decodeWireMessage(a).kind).toBe('tool_list');
      expect(b).toEqual(a);
      // Encoded once: the enforcer hands out the same body while no endpoint's list changed
      // (test/node/upstream.test.ts "list_changed" sees a changed list come through).
      const body = encodeWireMessage({ kind: 'list_tools' });
      const once = await node.enforcer.handle(body, undefined, '127.0.0.9');
      expect(await node.enforcer.handle(body, undefined, '127.0.0.9')).toBe(once);
      expect((await outcome(c, list)).what).toBe(NodeErrorCodes.RATE_LIMITED);
      const other = await RawConn.open(node.port, '127.0.0.3');
      expect((await outcome(other, list)).what).toBe('tool_list');
      c.destroy();
      other.destroy();
    } finally {
      await node.cleanup();
    }
  });
});

describe('ReplaySlots', () => {
  test('at most two per peer and the total at once; waiters go in order, a peer at its bound does not hold up others', async () => {
    const slots = new ReplaySlots(2, 3);
    const order: string[] = [];
    const gates: Array<() => void> = [];
    const job = (name: string) => () =>
      new Promise<string>((resolve) => {
        order.push(name);
        gates.push(() => resolve(name));
      });
    const runs = [
      slots.run('a', job('a1')),
      slots.run('a', job('a2')),
      slots.run('a', job('a3')),
      slots.run('b', job('b1')),
      slots.run('c', job('c1')),
    ];
    await Promise.resolve();
    // a1, a2 run (a's bound); a3 waits; b1 runs (the total, 3); c1 waits.
    expect(order).toEqual(['a1', 'a2', 'b1']);
    expect(slots.running).toBe(3);
    expect(slots.waiting).toBe(2);
    gates.shift()!(); // a1 ends: a3 fits again (a has one running) and goes first, in order.
    await runs[0];
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual(['a1', 'a2', 'b1', 'a3']);
    gates.shift()!(); // a2 ends: c1 goes.
    await runs[1];
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual(['a1', 'a2', 'b1', 'a3', 'c1']);
    while (gates.length > 0) gates.shift()!();
    expect(await Promise.all(runs)).toEqual(['a1', 'a2', 'a3', 'b1', 'c1']);
    expect(slots.running).toBe(0);
    expect(slots.waiting).toBe(0);
  });

  test('a slot is freed when the job throws', async () => {
    const slots = new ReplaySlots(1, 1);
    await expect(slots.run('a', () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await slots.run('a', () => Promise.resolve(7))).toBe(7);
    expect(slots.running).toBe(0);
  });
});
