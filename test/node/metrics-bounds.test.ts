/**
 * The node's metrics port bounds its connections (node/metrics.ts serveMetrics over
 * io/httplimits.ts): one connection over the per-peer bound is closed at once while another
 * loopback address is still served, so a slow-loris peer cannot take the node's file handles; the
 * counts are exported on /metrics.
 */
import { get } from 'node:http';
import { describe, expect, test } from 'vitest';
import { NodeMetrics, serveMetrics } from '../../node/index.ts';
import { perPeerBound } from '../listeners.ts';

describe('the metrics port bounds connections per peer', () => {
  test('the connection over the bound is closed at once; 127.0.0.2 is still served', async () => {
    const metrics = new NodeMetrics();
    const s = await serveMetrics(metrics, () => ({ ok: true, detail: {} }), '127.0.0.1', 0, undefined, { maxPerPeer: 3 });
    try {
      expect(await perPeerBound(s.port, 3, '/healthz')).toEqual({ extraClosed: true, heldOpen: true, otherServed: 200 });
      // The refusal is on /metrics: one closed by the per-peer bound; the scrape's own connection is open.
      const text = await new Promise<string>((resolve, reject) => {
        get({ host: '127.0.0.1', port: s.port, path: '/metrics', localAddress: '127.0.0.2', agent: false }, (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (d: string) => {
            body += d;
          });
          res.on('end', () => resolve(body));
        }).on('error', reject);
      });
      expect(text).toContain('jcp_http_connections_closed_total{listener="metrics",why="peer-bound"} 1');
      expect(text).toMatch(/jcp_http_connections\{listener="metrics"\} [1-9]/);
      expect(text).not.toContain('why="evicted"');
    } finally {
      s.server.close();
    }
  });
});
