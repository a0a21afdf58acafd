/**
 * Gateway state on a node's `/metrics` (docs/cluster.md "Metrics"): two nats-servers joined by a
 * gateway; the node reads its server's `/gatewayz` (cluster `nats_monitor_url`) and reports
 * `jcp_nats_gateway_connected` 1, and 0 once the other side is gone.
 */
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { Registry } from 'prom-client';
import { afterAll, describe, expect, test } from 'vitest';
import { ClusterHooks, readClusterConfig, readGateways } from '../../node/index.ts';
import { NatsServer } from '../../testkit/index.ts';
import { freePort } from '../../testkit/index.ts';
import { quiet } from '../node/fixtures.ts';
import { sample } from './prom.ts';

async function until(pred: () => Promise<boolean>, what: string, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await pred().catch(() => false))) {
    if (Date.now() > end) throw new Error(what);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('cluster: gateway state per region', () => {
  const servers: NatsServer[] = [];
  let hooks: ClusterHooks | undefined;
  afterAll(async () => {
    await hooks?.bus.deleteStreams().catch(() => undefined);
    await hooks?.close().catch(() => undefined);
    for (const s of servers) await s.dispose().catch(() => undefined);
  });

  test('connected gateway reads 1; the other region gone reads 0', async () => {
    const gw = { A: await freePort(), B: await freePort() };
    const block = (self: 'A' | 'B') =>
      [
        'gateway {',
        `  name: "${self}"`,
        `  listen: "127.0.0.1:${gw[self]}"`,
        `  gateways: [{ name: "A", url: "nats://127.0.0.1:${gw.A}" }, { name: "B", url: "nats://127.0.0.1:${gw.B}" }]`,
        '}',
      ].join('\n');
    // JetStream with gateways needs each server in a cluster (named as its gateway): one member each.
    const rA = await freePort();
    const rB = await freePort();
    const a = await NatsServer.start(
      { name: `gwA${process.pid}`, cluster: { name: 'A', port: rA, routes: [rA] }, extraConfig: [block('A')] },
      false,
    );
    const b = await NatsServer.start(
      { name: `gwB${process.pid}`, cluster: { name: 'B', port: rB, routes: [rB] }, extraConfig: [block('B')] },
      false,
    );
    servers.push(a, b);
    const monitor = `http://127.0.0.1:${a.httpPort}`;
    await until(
      async () => (await readGateways(monitor)).some((g) => g.gateway === 'B' && g.direction === 'outbound' && g.connected),
      'gateway A→B never connected',
    );
    await a.ready();
    hooks = new ClusterHooks(a.url, readClusterConfig({ subject_root: `gw${process.pid}`, nats_monitor_url: monitor }), quiet, {
      region: 'A',
    });
    const registry = new Registry();
    hooks.observe(registry);
    const scrape = async () => parsePrometheusTextFormat(await registry.metrics());
    expect(sample(await scrape(), 'jcp_nats_gateway_connected', { region: 'A', gateway: 'B', direction: 'outbound' })).toBe(1);
    await b.stop();
    await until(
      async () => sample(await scrape(), 'jcp_nats_gateway_connected', { region: 'A', gateway: 'B', direction: 'outbound' }) === 0,
      'gateway A→B still reads connected after B stopped',
    );
  }, 90_000);

  test('reject / a monitor url that is not http://host:port', () => {
    expect(() => readClusterConfig({ nats_monitor_url: 'nats://127.0.0.1:4222' })).toThrow(/nats_monitor_url/);
  });
});
