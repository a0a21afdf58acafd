/**
 * The node's metrics port bounds its connections (node/metrics.ts serveMetrics over
 * io/httplimits.ts): one connection over the per-peer bound is closed at once while another
 * loopback address is still served, so a slow-loris peer cannot take the node's file handles.
 */
import { describe, expect, test } from 'vitest';
import { NodeMetrics, serveMetrics } from '../../node/index.ts';
import { perPeerBound } from '../listeners.ts';

describe('the metrics port bounds connections per peer', () => {
  test('the connection over the bound is closed at once; 127.0.0.2 is still served', async () => {
    const s = await serveMetrics(new NodeMetrics(), () => ({ ok: true, detail: {} }), '127.0.0.1', 0, undefined, { maxPerPeer: 3 });
    try {
      expect(await perPeerBound(s.port, 3, '/healthz')).toEqual({ extraClosed: true, heldOpen: true, otherServed: 200 });
    } finally {
      s.server.close();
    }
  });
});
