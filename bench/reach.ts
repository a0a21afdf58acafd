/**
 * Revocation reach time (`npm run bench -- reach --json out.json`): three clustered nodes in this
 * process, one per region label, on one local NATS server (no injected delay: the floor a
 * multi-region run with RTT is compared with); revocations sent to the first node, the time until
 * each is in force on every node measured by testkit/reach.ts (on the nodes' own records).
 * Printed: p50 and p99 to reach every node, and per region. With testkit/regions.ts the same
 * function runs on a launcher's node processes through `metricsReachTarget`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { type Actor, actorFromSeed, type Did, grantId, type Rng, seededRng, signGrant, signRevocation } from '../core/index.ts';
import { NatsServer } from '../testkit/index.ts';
import { ClusterHooks, readClusterConfig } from '../node/index.ts';
import { JcpClient } from '../client/index.ts';
import { configFromJson, type RunningNode, resourceIdOf, startNode } from '../node/index.ts';
import { feedReachTarget, measureRevocationReach } from '../testkit/index.ts';
import { type Figure, type SuiteOptions, sig } from './figures.ts';

const REGIONS = ['r-a', 'r-b', 'r-c'];
const SAMPLES = 50;

/** Runs the suite; see the module docs. */
export async function run(opts: SuiteOptions): Promise<Figure[]> {
  const rng = seededRng(`bench-reach-${opts.seed}`);
  const alice = actorFromSeed(rng(32));
  const bob = actorFromSeed(rng(32));
  const quiet = pino({ level: 'silent' });
  const nats = await NatsServer.start();
  const dir = mkdtempSync(join(tmpdir(), 'jcp-bench-reach-'));
  const root = `benchreach${process.pid}`;
  const hooks: ClusterHooks[] = [];
  const nodes: RunningNode[] = [];
  try {
    for (const [i, region] of REGIONS.entries()) {
      const h = new ClusterHooks(nats.url, readClusterConfig({ subject_root: root, revocation_catch_up_ms: 10_000 }), quiet, { region });
      const cfg = configFromJson({
        listen: '127.0.0.1:0',
        data_dir: join(dir, `n${i}`),
        resources: [{ name: 'tools' }],
        meter: { rungs: ['estimator'] },
      });
      const n = await startNode(cfg, { logger: quiet, ...h.nodeOptions });
      h.attach(n.steward, n.ledger);
      hooks.push(h);
      nodes.push(n);
    }
    const atA = await JcpClient.connect({ host: '127.0.0.1', port: nodes[0]!.port, signer: alice });
    const report = await measureRevocationReach({
      targets: REGIONS.map((r, i) => feedReachTarget(`n${i}`, r, hooks[i]!.feed)),
      samples: SAMPLES,
      revoke: () => revokeFreshGrant(atA, alice, bob.did, 'tools', rng),
    });
    await atA.close();
    const figs: Figure[] = [
      { name: 'revocation reach, every node, p50 (1 NATS server, no injected RTT)', value: sig(report.everyNode.p50Ms), unit: 'ms' },
      { name: 'revocation reach, every node, p99 (1 NATS server, no injected RTT)', value: sig(report.everyNode.p99Ms), unit: 'ms' },
    ];
    for (const [region, s] of Object.entries(report.byRegion)) {
      figs.push({ name: `revocation reach, region ${region}, p50`, value: sig(s.p50Ms), unit: 'ms' });
      figs.push({ name: `revocation reach, region ${region}, p99`, value: sig(s.p99Ms), unit: 'ms' });
    }
    return figs;
  } finally {
    for (const n of nodes) await n.close().catch(() => undefined);
    await hooks[0]?.bus.deleteStreams().catch(() => undefined);
    for (const h of hooks) await h.close().catch(() => undefined);
    await nats.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * One reach sample's revocation: a fresh grant from `issuer` to `subject` on `resource` (1,000 µJ,
 * read), revoked at once through `client`, which resolves when the node acknowledged it.
 */
export async function revokeFreshGrant(client: JcpClient, issuer: Actor, subject: Did, resource: string, rng: Rng): Promise<void> {
  const g = signGrant(
    {
      issuer: issuer.did,
      subject,
      capability: { resource: resourceIdOf(resource), actions: ['read'] },
      budget_uj: 1_000n,
      expiry: 0,
      nonce: rng(16),
    },
    issuer,
  );
  await client.revoke(signRevocation(grantId(g.grant), issuer, rng(16)), g.grant);
}
