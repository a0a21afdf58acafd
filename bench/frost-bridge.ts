/**
 * An approved 2-of-3 call through the bridge (spec §2.2, §11), beside its floor measured in the
 * same run: the same tool call through the same bridge code with a single Ed25519 key.
 *
 * Both paths: the SDK v2 MCP `Client` → in-memory transport → `bridgeServer` (bridge/server.ts,
 * bridge/agent.ts) → jcp/1 over TCP → an in-process node → `mcp-server-memory` `read_graph`.
 * The threshold path adds one signing session per call (bridge/threshold.ts, no prefetch): three
 * `Participant` holders in this process, each with a rules-file policy that approves the call,
 * each decoding and judging the request, fsyncing its signed decision record and publishing it on
 * JetStream, then FROST rounds one and two through nats-server. Calls alternate (threshold, then
 * single-key) so load on the machine hits both alike. Figures: p50 and p99 per call, and the p50
 * ratio to the floor. `npm run bench -- frost-bridge` runs only this; `npm run bench -- frost`
 * includes it.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { randomBytes } from 'node:crypto';
import { Client, InMemoryTransport } from '@modelcontextprotocol/client';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import pino from 'pino';
import { BridgeAgent, bridgeServer, CallJournal, ThresholdCaller } from '../bridge/index.ts';
import { actorFromSeed, type Rng, seededRng, type SignedGrant, signGrant } from '../core/index.ts';
import { frostStreams, deal, type DealtShare, Participant, rulesApprover, shareRecord, writeShareFile } from '../frost/index.ts';
import { warmUp } from '../frost/index.ts';
import { type ClientSigner, JcpClient } from '../client/index.ts';
import { configFromJson, resourceIdOf, startNode } from '../node/index.ts';
import { type Figure, median, percentile, type SuiteOptions, sig } from './figures.ts';

const NATS_URL = process.env['JCP_NATS_URL'] ?? 'nats://127.0.0.1:4222';
const CALLS = 40;
const WARMUP = 3;

function ms(name: string, value: number, floor?: number): Figure {
  return { name, value: sig(value, 4), unit: 'ms', ...(floor !== undefined ? { floor: sig(floor, 4), ratio: sig(value / floor, 3) } : {}) };
}

/** An MCP client on a bridge agent, in memory. */
async function mcpOn(agent: BridgeAgent): Promise<Client> {
  const [a, b] = InMemoryTransport.createLinkedPair();
  await bridgeServer(agent).connect(b);
  const c = new Client({ name: 'bench', version: '1' });
  await c.connect(a);
  return c;
}

/** A node on loopback serving `mcp-server-memory` as resource `memory`, its data under `root`. */
function startMemoryNode(root: string): ReturnType<typeof startNode> {
  return startNode(
    configFromJson({
      listen: '127.0.0.1:0',
      data_dir: join(root, 'data'),
      resources: [
        {
          name: 'memory',
          endpoint: { kind: 'mcp-stdio', command: 'mcp-server-memory', env: { MEMORY_FILE_PATH: join(root, 'memory.jsonl') } },
        },
      ],
      meter: { default_estimate_uj: 1, rungs: ['estimator'] },
    }),
    { logger: pino({ level: 'silent' }) },
  );
}

/**
 * Writes each share to its own keystore under `root` and starts a holder for it that approves by
 * the rules file `rules`, taking requests from `coordinator` only. Started holders are pushed to
 * `holders` as they start, so the caller stops them even when a later one fails.
 */
async function startHolders(
  shares: readonly DealtShare[],
  root: string,
  rules: string,
  at: { nc: NatsConnection; prefix: string; coordinator: string },
  holders: Participant[],
): Promise<void> {
  for (const s of shares) {
    const ks = join(root, `h${s.identifier}`);
    mkdirSync(ks, { recursive: true, mode: 0o700 });
    writeShareFile(join(ks, `h${s.identifier}.share`), shareRecord(s.group, s.identifier, s.signingShare, s.identitySeed));
    holders.push(
      await Participant.start({
        keystore: ks,
        nc: at.nc,
        prefix: at.prefix,
        coordinators: [at.coordinator],
        approver: rulesApprover(rules),
      }),
    );
  }
}

/**
 * An MCP client on a bridge agent `name` that calls the node on `port` as `signer` with `chain`
 * (1 µJ per call; threshold-signed when `threshold` is given). Its close steps go to `closers`.
 */
async function openAgent(
  port: number,
  closers: (() => Promise<unknown>)[],
  name: string,
  signer: ClientSigner,
  chain: SignedGrant,
  threshold?: ThresholdCaller,
): Promise<Client> {
  const client = await JcpClient.connect({ host: '127.0.0.1', port, signer });
  const journal = new CallJournal({});
  closers.push(async () => {
    await client.close();
    journal.close();
  });
  const a = new BridgeAgent({
    name,
    signer,
    chains: [[chain]],
    client,
    journal,
    costUj: 1n,
    ...(threshold !== undefined ? { threshold } : {}),
  });
  const mcp = await mcpOn(a);
  closers.push(() => mcp.close());
  return mcp;
}

/** One `read_graph` call's wall time (ms); throws unless the bridge allowed it. */
async function timedCall(c: Client): Promise<number> {
  const t0 = performance.now();
  const r = await c.callTool({ name: 'read_graph', arguments: {} });
  const t = performance.now() - t0;
  if (r.isError === true || r._meta?.['jcp/verdict'] !== 'allow') throw new Error(`bench call not allowed: ${JSON.stringify(r.content)}`);
  return t;
}

/** Alternating team/solo calls, {@link WARMUP} dropped, then {@link CALLS} pairs; the figures in ms. */
async function pairFigures(team: Client, solo: Client): Promise<Figure[]> {
  const tTeam: number[] = [];
  const tSolo: number[] = [];
  for (let i = 0; i < WARMUP + CALLS; i++) {
    const a = await timedCall(team);
    const b = await timedCall(solo);
    if (i >= WARMUP) {
      tTeam.push(a);
      tSolo.push(b);
    }
  }
  return [
    ms('bridge call, approved 2-of-3 (rules files), p50 (floor: the same call with a single key, p50)', median(tTeam), median(tSolo)),
    ms('bridge call, approved 2-of-3 (rules files), p99 (floor: single key, p99)', percentile(tTeam, 99), percentile(tSolo, 99)),
    ms(
      'bridge call, approved 2-of-3, added per call p50 (median of threshold − single-key pairs)',
      median(tTeam.map((t, i) => t - tSolo[i]!)),
    ),
  ];
}

/** Deletes the registry bucket and the evidence and approvals streams under `prefix`, best effort. */
async function dropStreams(nc: NatsConnection, prefix: string): Promise<void> {
  try {
    const jsm = await jetstreamManager(nc);
    for (const s of frostStreams(prefix)) await jsm.streams.delete(s).catch(() => false);
  } catch {
    // best effort
  }
}

/**
 * The figures of an approved 2-of-3 call through the bridge against a single-key call through the
 * same bridge (see the file comment). Needs the local NATS with JetStream and `mcp-server-memory`.
 */
export async function bridgeFigures(nc: NatsConnection, rng: Rng): Promise<Figure[]> {
  warmUp();
  const root = mkdtempSync(join(tmpdir(), 'jcp-bench-frost-bridge-'));
  const prefix = `jcp.bench.frostbridge.${randomBytes(5).toString('hex')}`;
  const issuer = actorFromSeed(rng(32));
  const agent = actorFromSeed(rng(32));
  const coordinator = actorFromSeed(rng(32));
  const d = deal({ min: 2, max: 3 }, rng);
  if (!d.ok) throw new Error('deal failed');
  const rules = join(root, 'rules.json');
  writeFileSync(rules, JSON.stringify({ allow: [{ resource: 'memory', actions: ['read_graph'], max_cost_uj: 1000 }] }));
  const holders: Participant[] = [];
  const closers: (() => Promise<unknown>)[] = [];
  const node = await startMemoryNode(root);
  try {
    await startHolders(d.value.shares, root, rules, { nc, prefix, coordinator: coordinator.did }, holders);
    const grantTo = (subject: string): SignedGrant =>
      signGrant(
        {
          issuer: issuer.did,
          subject,
          capability: { resource: resourceIdOf('memory'), actions: ['read_graph'] },
          budget_uj: 10n ** 15n,
          expiry: 0,
          nonce: rng(16),
        },
        issuer,
      );
    const caller = await ThresholdCaller.open({ nc, group: d.value.did, prefix, coordinator, timeoutMs: 30_000 });
    const team = await openAgent(node.port, closers, 'team', { did: caller.did, sign: caller.sign }, grantTo(d.value.did), caller);
    const solo = await openAgent(node.port, closers, 'solo', agent, grantTo(agent.did));
    return await pairFigures(team, solo);
  } finally {
    for (const c of closers.reverse()) await c().catch(() => undefined);
    for (const h of holders) await h.stop();
    await node.close();
    await dropStreams(nc, prefix);
    rmSync(root, { recursive: true, force: true });
  }
}

/** Runs only the bridge figures (needs the local NATS with JetStream). */
export async function run({ seed }: SuiteOptions): Promise<Figure[]> {
  const nc = await connect({ servers: NATS_URL });
  try {
    return await bridgeFigures(nc, seededRng(`bench/frost-bridge/${seed}`));
  } finally {
    await nc.close();
  }
}
