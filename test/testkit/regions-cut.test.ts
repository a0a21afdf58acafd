/**
 * A cut link between two regions of three stays cut (testkit/regions.ts, docs/regions.md): NATS
 * gateways gossip the urls of the gateways they know, so b learns from a the url a dials for c
 * (a's proxy to c). When the b→c proxy is cut, b's server must not reach c through the a→c proxy
 * instead: a proxy of a gateway link admits only the gateway of its own source region.
 */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RegionCluster, startRegions } from '../../testkit/index.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The regions `monitor`'s server holds an outbound gateway connection to (its `/gatewayz`). */
async function outbound(monitor: string): Promise<string[]> {
  const g = (await (await fetch(`http://${monitor}/gatewayz`)).json()) as { outbound_gateways?: Record<string, { connection?: unknown }> };
  return Object.entries(g.outbound_gateways ?? {})
    .filter(([, o]) => o.connection !== undefined)
    .map(([n]) => n)
    .sort();
}

describe('regions - 3 regions, a cut b-c link', () => {
  let rc: RegionCluster;
  let b: NatsConnection;
  let c: NatsConnection;

  beforeAll(async () => {
    rc = await startRegions({ regions: 3, nodesPerRegion: 0, serversPerRegion: 1, rttMs: 10 });
    b = await connect({ servers: rc.region('b').natsUrls });
    c = await connect({ servers: rc.region('c').natsUrls });
  }, 60_000);
  afterAll(async () => {
    await b?.close();
    await c?.close();
    await rc?.stop();
  });

  it('carries nothing from b to c, and b holds no gateway connection to c, until it is healed', async () => {
    const mon = (r: string) => rc.status().regions.find((x) => x.name === r)!.servers[0]!.monitor!;
    // The full mesh first (every gateway connected, so a has gossiped its urls for c to b).
    for (let i = 0; (await outbound(mon('b'))).join() !== 'a,c' || (await outbound(mon('a'))).join() !== 'b,c'; i++) {
      if (i > 200) throw new Error('the gateways did not connect');
      await sleep(50);
    }
    let got = 0;
    c.subscribe('cut.bc', {
      callback: () => {
        got++;
      },
    });
    await c.flush();
    rc.cut('b', 'c');
    await sleep(500);
    got = 0;
    const seen: string[][] = [];
    // NATS retries a gateway within about a second; 6 s covers several retries.
    for (let i = 0; i < 30; i++) {
      b.publish('cut.bc', 'x');
      await b.flush();
      seen.push(await outbound(mon('b')));
      await sleep(200);
    }
    expect(got).toBe(0);
    expect(seen.filter((s) => s.includes('c'))).toEqual([]);
    rc.heal('b', 'c');
    for (let i = 0; !(await outbound(mon('b'))).includes('c'); i++) {
      if (i > 300) throw new Error('b did not reconnect to c after the heal');
      await sleep(50);
    }
  }, 60_000);
});
