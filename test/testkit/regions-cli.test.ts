/**
 * `jcp cluster cut <link>` / `heal <link>` on a running multi-region launcher, and the live link
 * health `jcp cluster status` reads from each region's NATS monitoring endpoint (`/gatewayz`)
 * and from the launcher's proxies (docs/regions.md "The local launcher"). The launcher runs in
 * this process (as `up --regions --foreground` runs it); the verbs go through the CLI.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LinkStatus, type RegionCluster, startRegions } from '../../testkit/index.ts';
import { runJcpInProcess } from '../support.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('jcp cluster cut|heal - 2 regions', () => {
  let rc: RegionCluster;
  let control: { url: string; close: () => Promise<void> };

  beforeAll(async () => {
    rc = await startRegions({ regions: 2, nodesPerRegion: 0, serversPerRegion: 1, rttMs: 10 });
    control = await rc.serveControl();
    rc.writeState(control.url);
  }, 60_000);
  afterAll(async () => {
    await control?.close();
    await rc?.stop();
  });

  const status = async () => {
    const r = await runJcpInProcess(['cluster', 'status', '--dir', rc.dir, '--json']);
    expect(r.code).toBe(0);
    return (JSON.parse(r.out) as { links: LinkStatus[] }).links;
  };
  /** Polls status until every link's live health is `live` (at most `ms`); returns the last links seen. */
  const until = async (live: string, ms: number) => {
    const deadline = Date.now() + ms;
    let links = await status();
    while (Date.now() < deadline && !links.every((l) => l.live === live)) {
      await sleep(200);
      links = await status();
    }
    return links;
  };

  it('status shows the gateways connected, a CLI cut flips them to disconnected, a CLI heal back', async () => {
    const before = await until('connected', 20_000);
    expect(before.map((l) => [l.name, l.state, l.live, l.gateway_connections, l.proxy?.cut])).toEqual([
      ['a-b', 'up', 'connected', { connected: 1, answered: 1, servers: 1 }, false],
      ['b-a', 'up', 'connected', { connected: 1, answered: 1, servers: 1 }, false],
    ]);
    expect(before.every((l) => (l.proxy?.open ?? 0) >= 1)).toBe(true);

    const cut = await runJcpInProcess(['cluster', 'cut', 'a-b', '--dir', rc.dir]);
    expect(cut.code).toBe(0);
    expect(cut.out).toContain('link a -> b gateway  cut');
    expect(cut.out).toContain('link b -> a gateway  cut');
    const after = await until('disconnected', 10_000);
    expect(after.map((l) => [l.state, l.live, l.gateway_connections?.connected, l.proxy])).toEqual([
      ['cut', 'disconnected', 0, { cut: true, open: 0 }],
      ['cut', 'disconnected', 0, { cut: true, open: 0 }],
    ]);
    const text = await runJcpInProcess(['cluster', 'status', '--dir', rc.dir]);
    expect(text.out).toMatch(
      /link a -> b gateway {2}cut {2}rtt 10 ms {2}live disconnected \(0\/1 gateway connection\) {2}proxy cut, 0 connection\(s\)\n/,
    );

    // `a->b` names the same link; the gateways reconnect through their proxies.
    const heal = await runJcpInProcess(['cluster', 'heal', 'a->b', '--dir', rc.dir]);
    expect(heal.code).toBe(0);
    const healed = await until('connected', 20_000);
    expect(healed.map((l) => [l.state, l.live, l.proxy?.cut])).toEqual([
      ['up', 'connected', false],
      ['up', 'connected', false],
    ]);
    const text2 = await runJcpInProcess(['cluster', 'status', '--dir', rc.dir]);
    expect(text2.out).toMatch(
      /link b -> a gateway {2}up {3}rtt 10 ms {2}live connected \(1\/1 gateway connection\) {2}proxy open, [1-9]\d* connection\(s\)\n/,
    );
  }, 60_000);

  it('a bad link name, an unknown region or a cluster without regions is a usage error; nothing is cut', async () => {
    for (const link of ['ab', 'a-b-c', 'a-a', 'a-e']) {
      const r = await runJcpInProcess(['cluster', 'cut', link, '--dir', rc.dir]);
      expect(r.code, link).toBe(2);
      expect(r.err).toContain('error [usage]');
    }
    const none = await runJcpInProcess(['cluster', 'cut', 'a-b', '--dir', `${rc.dir}/nothing-here`]);
    expect(none.code).toBe(2);
    expect(none.err).toContain('no multi-region cluster');
    expect(rc.status().links.every((l) => l.state === 'up')).toBe(true);
  });
});
