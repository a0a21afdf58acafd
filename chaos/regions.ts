/**
 * The multi-region {@link ChaosCluster}: testkit/regions.ts's supercluster (one NATS cluster per
 * region, gateways through delaying, cuttable proxies), every node behind its own proxy to its
 * region's NATS so one node can be cut off. Node index i is node i mod n of region ⌊i / n⌋.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { makeTlsMaterial, type RegionCluster, startRegions } from '../testkit/index.ts';
import type { ChaosOpts } from './chaos.ts';
import type { ChaosCluster, ChaosPlanLike } from './target.ts';

/** Starts `o.regions` regions of `o.nodes / o.regions` nodes each. @throws RangeError when the nodes do not split evenly. */
export async function startRegionTarget(o: ChaosOpts, plan: ChaosPlanLike, dir: string, say: (l: string) => void): Promise<ChaosCluster> {
  const regions = o.regions ?? 1;
  if (o.nodes % regions !== 0) throw new RangeError(`nodes: ${o.nodes} do not split evenly over ${regions} regions`);
  const per = o.nodes / regions;
  const servers = (o.natsServers ?? 1) === 3 ? 3 : 1;
  say(
    `starting ${regions} regions × ${per} node(s) (${o.mode} mode, ${servers} NATS server(s) per region, ${o.rttMs ?? 40} ms RTT) in ${dir}`,
  );
  // A `tls` run: one CA for the run, its server certificate on every nats-server (client, route and
  // gateway connections) and every node's jcp/1 listener; the nodes' NATS clients verify against it.
  if (o.tls) mkdirSync(join(dir, 'tls'), { recursive: true });
  const tls = o.tls ? makeTlsMaterial(join(dir, 'tls')) : undefined;
  const tlsConfig = tls ? { tls: { cert_file: tls.server.certFile, key_file: tls.server.keyFile }, nats_tls: { ca_file: tls.caFile } } : {};
  const rc: RegionCluster = await startRegions({
    regions,
    nodesPerRegion: per,
    serversPerRegion: servers,
    rttMs: o.rttMs ?? 40,
    jitterMs: o.jitterMs ?? 0,
    dir,
    nodeProxies: true,
    seeds: plan.seeds,
    subjectRoot: plan.subjectRoot,
    settleIntervalMs: o.settleIntervalMs ?? 200,
    resources: [{ name: 'chaos', trust_roots: [plan.issuer.did] }],
    channels: o.mode === 'channel' ? [{ grant_id: plan.rootId, window_uj: plan.window.toString() }] : [],
    logLevel: 'warn',
    // The nodes stop allowing at the same staleness limit the runner counts allows after
    // (`--revocation-staleness`, default 10 s); they would otherwise use the node default (30 s).
    nodeConfig: () => ({ revocation_staleness_s: o.revocationStalenessS ?? 10, ...tlsConfig }),
    ...(tls ? { tls: { caFile: tls.caFile, certFile: tls.server.certFile, keyFile: tls.server.keyFile } } : {}),
  });
  const at = (i: number) => {
    const region = rc.regions[Math.floor(i / per)];
    if (!region) throw new RangeError(`node ${i}: no such node`);
    return { region, k: i % per };
  };
  return {
    natsUrls: rc.region(rc.home).natsUrls,
    ...(tls ? { natsTls: { caFile: tls.caFile } } : {}),
    natsServers: regions,
    regionNames: rc.regions.map((r) => r.name),
    regionNodes: rc.regions.map((_, r) => Array.from({ length: per }, (_, k) => r * per + k)),
    node(i) {
      const { region, k } = at(i);
      const n = region.nodes[k]!;
      return {
        name: n.id,
        host: '127.0.0.1',
        port: n.port,
        dataDir: n.proc.dataDir,
        steward: n.steward,
        ...(tls ? { tls: { ca: tls.ca } } : {}),
      };
    },
    regionOf: (i) => at(i).region.name,
    running: (i) => at(i).region.cluster.running(at(i).k),
    async fault(f, hold) {
      if (f.kind === 'region-cut') {
        const name = rc.regions[f.target % regions]!.name;
        rc.isolate(name);
        await hold();
        rc.rejoin(name);
        return;
      }
      if (f.kind === 'nats-restart') {
        const region = rc.regions[f.target % regions]!;
        // One server of three dies (the region keeps a quorum); a lone server is stopped.
        const down = servers === 3 ? [region.servers[0]!] : region.servers;
        for (const s of down) await (servers === 3 ? s.kill() : s.stop());
        await hold();
        for (const s of down) await s.start();
        return;
      }
      const { region, k } = at(f.target);
      if (f.kind === 'kill') {
        await region.cluster.killNode(k);
        await hold();
        await region.cluster.startNode(k);
      } else if (f.kind === 'pause') {
        region.cluster.pauseNode(k);
        await hold();
        region.cluster.resumeNode(k);
      } else {
        region.cluster.partition(k);
        await hold();
        region.cluster.heal(k);
      }
    },
    async healAll() {
      for (const r of rc.regions) {
        rc.rejoin(r.name);
        for (const s of r.servers) await s.start();
        for (let k = 0; k < per; k++) {
          r.cluster.resumeNode(k);
          r.cluster.heal(k);
        }
      }
      for (const r of rc.regions) for (let k = 0; k < per; k++) if (!r.cluster.running(k)) await r.cluster.startNode(k);
      await Promise.all(rc.regions.flatMap((r) => Array.from({ length: per }, (_, k) => r.cluster.waitReady(k))));
    },
    stopNode: (i) => at(i).region.cluster.stopNode(at(i).k),
    stop: () => rc.stop(),
  };
}
