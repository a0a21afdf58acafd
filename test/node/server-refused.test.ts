/**
 * What a rate-limited address costs the jcp/1 server (node/server.ts): a large frame from a
 * refused address is refused on its declared length, before its body is read; a read timeout
 * spends a token of the peer's abuse bucket (docs/node.md "Abuse limits").
 */
import { describe, expect, test } from 'vitest';
import { decodeWireMessage, frameMessage } from '../../core/index.ts';
import { NodeErrorCodes } from '../../node/index.ts';
import { liveNode, RawConn, tempFolders } from './fixtures.ts';

const folder = tempFolders('server-refused');
const garbage = frameMessage(Uint8Array.of(0xff, 0x00, 0x01));
const CLOCK = 1_900_000_000;

/** A node whose abuse limits are `burst` tokens, never refilled. */
const limited = (burst: number, extra: Record<string, unknown> = {}) =>
  liveNode({ abuse: { burst, refill_per_s: 0 }, snapshot: { every_receipts: 0, every_s: 0 }, ...extra }, { clockS: () => CLOCK }, folder());

/** The next reply on `c`: its error code, or its kind. */
const code = async (c: RawConn, ms?: number) => {
  const m = decodeWireMessage(await c.next(ms));
  return m.kind === 'error' ? m.error.code : m.kind;
};

/** The 4-byte header of a frame declaring `n` bytes of body. */
const header = (n: number) => {
  const h = new Uint8Array(4);
  new DataView(h.buffer).setUint32(0, n, false);
  return h;
};

describe('jcp/1 server: a large frame from a rate-limited address', () => {
  test('is refused on its declared length: rate-limited and closed before its body is sent', async () => {
    const node = await limited(1);
    const c = await RawConn.open(node.port, '127.0.0.70');
    c.write(garbage);
    expect(await code(c)).toBe('cbor-malformed'); // the one token: the address is refused now
    // A frame just under the 1 MiB cap, of which only the header and 1 KiB are sent: the node
    // does not wait for (and read) the rest.
    c.write(header((1 << 20) - 8));
    c.write(new Uint8Array(1024).fill(0xa0));
    expect(await code(c, 3000)).toBe(NodeErrorCodes.RATE_LIMITED);
    expect(await c.waitClosed(3000)).toBe(true);
    expect((await node.metrics.rateLimitedCloses.get()).values).toEqual([{ labels: { why: 'bytes' }, value: 1 }]);
    c.destroy();
    await node.cleanup();
  });

  test('one begun while admitted is refused once the address is refused, before the rest is read', async () => {
    const node = await limited(1);
    const big = await RawConn.open(node.port, '127.0.0.71');
    big.write(header((1 << 20) - 8));
    big.write(new Uint8Array(1024).fill(0xa0));
    // Another connection of the address spends its one token.
    const other = await RawConn.open(node.port, '127.0.0.71');
    other.write(garbage);
    expect(await code(other)).toBe('cbor-malformed');
    big.write(new Uint8Array(1024).fill(0xa0)); // more of the body: the node now refuses it
    expect(await code(big, 3000)).toBe(NodeErrorCodes.RATE_LIMITED);
    expect(await big.waitClosed(3000)).toBe(true);
    for (const c of [big, other]) c.destroy();
    await node.cleanup();
  });

  test('small messages from a refused address are still answered one by one', async () => {
    const node = await limited(1);
    const c = await RawConn.open(node.port, '127.0.0.72');
    c.write(garbage);
    expect(await code(c)).toBe('cbor-malformed');
    for (let i = 0; i < 8; i++) {
      c.write(garbage);
      expect(await code(c)).toBe(NodeErrorCodes.RATE_LIMITED);
    }
    expect(c.closed).toBe(false);
    c.destroy();
    await node.cleanup();
  });
});

describe('jcp/1 server: a read timeout', () => {
  test('spends a token of the peer: once the bucket is empty, its new connections are refused', async () => {
    const node = await limited(2, { read_timeout_ms: 100 });
    for (let i = 0; i < 2; i++) {
      const slow = await RawConn.open(node.port, '127.0.0.73');
      slow.write(Uint8Array.of(0, 0)); // half a header, never completed
      expect(await code(slow)).toBe(NodeErrorCodes.READ_TIMEOUT);
      expect(await slow.waitClosed(3000)).toBe(true);
      slow.destroy();
    }
    const again = await RawConn.open(node.port, '127.0.0.73');
    expect(await code(again, 3000)).toBe(NodeErrorCodes.RATE_LIMITED);
    expect(await again.waitClosed(3000)).toBe(true);
    again.destroy();
    // Another address is not affected.
    const other = await RawConn.open(node.port, '127.0.0.74');
    other.write(garbage);
    expect(await code(other)).toBe('cbor-malformed');
    other.destroy();
    await node.cleanup();
  });
});

describe('jcp/1 server: failures spread over many addresses (abuse.failure_burst)', () => {
  /** Per-address buckets of 100 tokens; a global failure bucket of `global` tokens; no refill; the clock is `clock()`. */
  const spread = (global: number, clock: () => number) =>
    liveNode(
      {
        abuse: { burst: 100, refill_per_s: 0, failure_burst: global, failure_refill_per_s: 0 },
        snapshot: { every_receipts: 0, every_s: 0 },
      },
      { clockS: clock },
      folder(),
    );

  test('once the global bucket is empty, addresses that failed within 10 s are refused; others are not', async () => {
    let clock = CLOCK;
    const node = await spread(4, () => clock);
    const a = await RawConn.open(node.port, '127.0.0.80');
    const b = await RawConn.open(node.port, '127.0.0.81');
    // Two failures from each of two addresses, each far within its own bucket, empty the global one.
    for (const c of [a, b, a, b]) {
      c.write(garbage);
      expect(await code(c)).toBe('cbor-malformed');
    }
    a.write(garbage);
    const refused = decodeWireMessage(await a.next());
    expect(refused.kind === 'error' && refused.error).toMatchObject({
      code: NodeErrorCodes.RATE_LIMITED,
      message: expect.stringContaining('from all peers, and 127.0.0.80 failed within the last 10 s'),
    });
    const again = await RawConn.open(node.port, '127.0.0.81'); // a new connection of a failing address
    expect(await code(again, 3000)).toBe(NodeErrorCodes.RATE_LIMITED);
    expect(await again.waitClosed(3000)).toBe(true);
    // An address that has not failed is still answered (its failure then counts against it).
    const fresh = await RawConn.open(node.port, '127.0.0.82');
    fresh.write(garbage);
    expect(await code(fresh)).toBe('cbor-malformed');
    fresh.write(garbage);
    expect(await code(fresh)).toBe(NodeErrorCodes.RATE_LIMITED);
    // 10 s after its last failure an address is admitted again, though the global bucket is still empty.
    clock += 10;
    b.write(garbage);
    expect(await code(b)).toBe('cbor-malformed');
    for (const c of [a, b, again, fresh]) c.destroy();
    await node.cleanup();
  });

  test('a 1 MiB junk frame takes 16 tokens of the global bucket', async () => {
    const node = await spread(17, () => CLOCK);
    const a = await RawConn.open(node.port, '127.0.0.83');
    a.write(frameMessage(new Uint8Array((1 << 20) - 64).fill(0xff)));
    expect(await code(a)).toBe('cbor-malformed'); // 16 of 17 taken: the global bucket still admits
    const b = await RawConn.open(node.port, '127.0.0.84');
    b.write(garbage);
    expect(await code(b)).toBe('cbor-malformed'); // the 17th
    a.write(garbage);
    expect(await code(a)).toBe(NodeErrorCodes.RATE_LIMITED);
    for (const c of [a, b]) c.destroy();
    await node.cleanup();
  });
});
