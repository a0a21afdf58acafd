/**
 * The peer address abuse limits and per-address fairness count by (node/server.ts `peerAddress`):
 * IPv4 as is, IPv4-mapped IPv6 (a dual-stack listener) as IPv4, other IPv6 by its /64 (a
 * reviewer's note, 2026-12-06: counting by full IPv6 address gave one host a bucket per address).
 */
import { describe, expect, test } from 'vitest';
import { decodeWireMessage, frameMessage } from '../../core/index.ts';
import { NodeErrorCodes, peerAddress } from '../../node/index.ts';
import { liveNode, RawConn, tempFolders } from './fixtures.ts';

const folder = tempFolders('peer-address');

describe('peerAddress', () => {
  test('IPv4 as is; IPv4-mapped as IPv4; IPv6 by /64, however it is written', () => {
    expect(peerAddress('192.0.2.7')).toBe('192.0.2.7');
    expect(peerAddress('::ffff:192.0.2.7')).toBe('192.0.2.7');
    expect(peerAddress('::FFFF:127.0.0.2')).toBe('127.0.0.2');
    expect(peerAddress('2001:db8:1:2:aaaa:bbbb:cccc:dddd')).toBe('2001:db8:1:2::/64');
    expect(peerAddress('2001:db8:1:2::1')).toBe('2001:db8:1:2::/64');
    expect(peerAddress('2001:0DB8:0001:0002::ffff')).toBe('2001:db8:1:2::/64');
    expect(peerAddress('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(peerAddress('2001:db8:1:3::1')).not.toBe(peerAddress('2001:db8:1:2::1'));
    expect(peerAddress('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
    expect(peerAddress('::1')).toBe('0:0:0:0::/64');
    expect(peerAddress('64:ff9b::192.0.2.7')).toBe('64:ff9b:0:0::/64');
    expect(peerAddress(undefined)).toBe('');
  });

  test('a dual-stack node counts an IPv4 client by its IPv4 address', async () => {
    const node = await liveNode(
      { listen: '[::]:0', abuse: { burst: 1, refill_per_s: 0 }, snapshot: { every_receipts: 0, every_s: 0 } },
      {},
      folder(),
    );
    try {
      const c = await RawConn.open(node.port, '127.0.0.2');
      const garbage = frameMessage(Uint8Array.of(0xff, 0x00, 0x01));
      c.write(garbage);
      expect(decodeWireMessage(await c.next()).kind).toBe('error');
      c.write(garbage);
      const m = decodeWireMessage(await c.next());
      expect(m.kind === 'error' && m.error.code).toBe(NodeErrorCodes.RATE_LIMITED);
      expect(m.kind === 'error' && m.error.message).toContain('from 127.0.0.2;');
      c.destroy();
    } finally {
      await node.cleanup();
    }
  });
});
