/**
 * The chaos runner (issue 4; DESIGN "Budget channels: the bound we prove"): agents spend against
 * every node of a local cluster on one root grant while faults drawn from a seed hit the cluster
 * — SIGKILL and restart, SIGSTOP/SIGCONT, a node cut off from NATS through its proxy, NATS server
 * restarts. Then everything is healed, the nodes settle and stop, and four invariants are checked
 * from the nodes' receipt logs and the signed statements:
 *
 *  1. `no_lost_receipts`: every allow an agent got a reply for is in its node's log;
 *  2. `overdraft_within_bound`: channel mode, total spend ≤ budget + bound (bound = Σ W − min W,
 *     core `overdraftBound`); shards mode, total spend ≤ budget exactly;
 *  3. `overdraft_proven`: the overdraft computed from the receipts equals the one proven by the
 *     signed statements (channel mode; the statements' total equals the receipts' total too);
 *     shards mode, there is no overdraft to prove (it must be 0);
 *  4. `receipts_verify`: every receipt verifies under its node's steward, every log is continuous
 *     (`seq`/`prev`), every allow debited exactly the chain its agent presented (§4.2), and every
 *     receipt's `budget_remaining_uj` is the leaf budget minus that node's spend so far.
 *
 * The fault schedule is a pure function of the seed (times, kinds, targets, lengths); the
 * interleaving with real processes is not, so two runs with one seed differ in their figures but
 * face the same faults.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { actorFromSeed, type ContentId, type Grant, grantId, openReceipt, overdraftBound, type ReceiptCore, receiptId, replayReceipts, type Rng, seededRng, type SignedGrant, signGrant, type Uj } from '../core/index.ts';
import { auditChannel, type ChannelAudit, channelNames, JetStreamBus } from '../channel/index.ts';
import { ReceiptLog, resourceIdOf } from '../node/index.ts';
import { JcpClient } from '../client/index.ts';
import { mintShardSet } from '../shards/index.ts';
import { LocalCluster } from '../testkit/index.ts';
import { spendPlot } from './plot.ts';

/** The faults the runner knows. */
export const FAULT_KINDS = ['kill', 'pause', 'partition', 'nats-restart'] as const;
/** One fault kind. */
export type FaultKind = (typeof FAULT_KINDS)[number];

/** Options of {@link runChaos}. Amounts in µJ, times in seconds unless named otherwise. */
export interface ChaosOpts {
  readonly nodes: number;
  readonly mode: 'channel' | 'shards';
  readonly faults: readonly FaultKind[];
  readonly durationS: number;
  readonly seed: string;
  /** NATS servers: 1 (default) or 3 (a JetStream cluster). */
  readonly natsServers?: number;
  /** Cost of one call (default 1,000 µJ). */
  readonly costUj?: bigint;
  /** Calls per second per agent (default 20) and agents per node (default 2). */
  readonly ratePerAgent?: number;
  readonly agentsPerNode?: number;
  /** Budget of the root grant (default: what the agents would spend in 60% of the run). */
  readonly budgetUj?: bigint;
  /** Unsettled window per node, channel mode (default 20 calls' worth). */
  readonly windowUj?: bigint;
  /** Settlement timer of the nodes (default 200 ms). */
  readonly settleIntervalMs?: number;
  /** Keep the cluster folder (default: removed). */
  readonly keepDir?: string;
  /** Progress lines (default: none). */
  readonly progress?: (line: string) => void;
}

/** One scheduled fault. */
export interface FaultEvent {
  readonly kind: FaultKind;
  /** Node index for kill/pause/partition; NATS server index for nats-restart. */
  readonly target: number;
  readonly atS: number;
  readonly forS: number;
}

/** The runner's report (the JSON written by `jcp chaos --json`). µJ as decimal strings. */
export interface ChaosReport {
  readonly invariants: {
    readonly no_lost_receipts: boolean;
    readonly overdraft_within_bound: boolean;
    readonly overdraft_proven: boolean;
    readonly receipts_verify: boolean;
  };
  readonly mode: 'channel' | 'shards';
  readonly seed: string;
  readonly nodes: number;
  readonly nats_servers: number;
  readonly duration_s: number;
  readonly budget_uj: string;
  readonly spent_uj: string;
  readonly bound_uj: string;
  readonly overdraft_uj: string;
  readonly statements: { readonly total_uj: string; readonly overdraft_uj: string; readonly points: number; readonly refused: number } | null;
  readonly window_uj: string | null;
  readonly faults: readonly { kind: FaultKind; target: string; at_s: number; for_s: number }[];
  readonly decisions: {
    readonly allow: number;
    readonly deny: number;
    readonly by_reason: Record<string, number>;
    readonly no_reply: number;
    readonly receipts: number;
    readonly per_node: { node: string; allow: number; deny: number; no_reply: number; spent_uj: string }[];
  };
  /** Why an invariant failed, one line each (empty when all hold). */
  readonly problems: readonly string[];
  /** (seconds, µJ acknowledged) samples. */
  readonly series: readonly [number, number][];
}

/** A uniform draw in [0, 1) from a seeded RNG. */
function uniform(rng: Rng): () => number {
  return () => {
    const b = rng(4);
    return ((b[0]! << 24) >>> 0) / 2 ** 32 + ((b[1]! << 16) | (b[2]! << 8) | b[3]!) / 2 ** 56;
  };
}

/**
 * The fault schedule of a run: a pure function of the seed. Faults start between 2 s and
 * duration − 4 s, one every 1–3.5 s; a node has at most one fault at a time, and NATS at most one
 * restart at a time.
 */
export function faultSchedule(seed: string, faults: readonly FaultKind[], nodes: number, natsServers: number, durationS: number): FaultEvent[] {
  const u = uniform(seededRng(`chaos/schedule/${seed}`));
  const out: FaultEvent[] = [];
  if (faults.length === 0) return out;
  const busyUntil = new Map<string, number>();
  const end = durationS - 4;
  for (let t = 2 + u() * 1.5; t < end; t += 1 + u() * 2.5) {
    const kind = faults[Math.floor(u() * faults.length)]!;
    const target = kind === 'nats-restart' ? Math.floor(u() * natsServers) : Math.floor(u() * nodes);
    const key = kind === 'nats-restart' ? 'nats' : `n${target}`;
    const forS = kind === 'kill' ? 0.5 + u() * 1.5 : kind === 'pause' ? 0.5 + u() * 2 : kind === 'partition' ? 1 + u() * 4 : 0.5 + u() * 1.5;
    if ((busyUntil.get(key) ?? 0) > t) continue;
    const until = Math.min(t + forS, end);
    busyUntil.set(key, until + 0.5);
    out.push({ kind, target, atS: Math.round(t * 100) / 100, forS: Math.round((until - t) * 100) / 100 });
  }
  return out;
}

interface Reply {
  readonly node: number;
  readonly verdict: 'allow' | 'deny';
  readonly reason: string | undefined;
  readonly receiptId: ContentId;
  readonly costUj: Uj;
}

/** Runs one chaos experiment; resolves to its report. Never leaves processes behind. */
export async function runChaos(o: ChaosOpts): Promise<ChaosReport> {
  const say = o.progress ?? (() => {});
  const rng = seededRng(`chaos/${o.seed}`);
  const issuer = actorFromSeed(rng(32));
  const agent = actorFromSeed(rng(32));
  const seeds = Array.from({ length: o.nodes }, () => rng(32));
  const natsServers = o.natsServers ?? 1;
  const cost = o.costUj ?? 1_000n;
  const rate = o.ratePerAgent ?? 20;
  const perNode = o.agentsPerNode ?? 2;
  const busyS = Math.max(1, o.durationS - 4);
  const budget = o.budgetUj ?? (BigInt(Math.round(o.nodes * perNode * rate * busyS * 0.6)) * cost);
  const window = o.windowUj ?? cost * 20n;
  const resource = resourceIdOf('chaos');
  const root: SignedGrant = signGrant(
    { issuer: issuer.did, subject: agent.did, capability: { resource, actions: ['call'] }, budget_uj: budget, expiry: 0, nonce: rng(16) } satisfies Grant,
    issuer,
  );
  const rootId = grantId(root.grant);
  let chains: SignedGrant[][];
  if (o.mode === 'shards') {
    const pct = Math.floor(10_000 / o.nodes) / 100;
    const minted = mintShardSet([root], agent, Array.from({ length: o.nodes }, (_, i) => ({ name: `n${i + 1}`, percent: pct })), { subject: agent.did, rng });
    if (!minted.ok) throw new Error(`shards: ${minted.error.why}`);
    chains = minted.value.map((s) => [root, s.grant]);
  } else chains = Array.from({ length: o.nodes }, () => [root]);

  const dir = o.keepDir ?? mkdtempSync(join(tmpdir(), 'jcp-chaos-'));
  const subjectRoot = `chaos${Buffer.from(rng(4)).toString('hex')}`;
  say(`starting ${o.nodes} nodes (${o.mode} mode, ${natsServers} NATS server${natsServers > 1 ? 's' : ''}) in ${dir}`);
  const cluster = await LocalCluster.start({
    nodes: o.nodes,
    dir,
    proxies: true,
    natsCluster: natsServers,
    seeds,
    subjectRoot,
    settleIntervalMs: o.settleIntervalMs ?? 200,
    resources: [{ name: 'chaos', trust_roots: [issuer.did] }],
    channels: o.mode === 'channel' ? [{ grant_id: rootId, window_uj: window.toString() }] : [],
    logLevel: 'warn',
  });
  const windows = o.mode === 'channel' ? cluster.nodes.map(() => window) : [];
  const bound = o.mode === 'channel' ? overdraftBound(windows) : 0n;
  const schedule = faultSchedule(o.seed, o.faults, o.nodes, natsServers, o.durationS);
  const replies: Reply[] = [];
  const noReply = new Array<number>(o.nodes).fill(0);
  const series: [number, number][] = [];
  let acked = 0n;
  let stopping = false;
  const t0 = Date.now();
  const nowS = () => (Date.now() - t0) / 1000;

  const agentLoop = async (node: number, k: number) => {
    let client: JcpClient | undefined;
    let n = 0;
    const interval = 1000 / rate;
    while (!stopping) {
      const started = Date.now();
      if (!client) {
        try {
          const nd = cluster.node(node);
          client = await JcpClient.connect({ host: nd.host, port: nd.port, signer: agent, reconnectAttempts: 2, reconnectDelayMs: 100 });
        } catch {
          await sleep(150);
          continue;
        }
      }
      const payload = new TextEncoder().encode(`${node}/${k}/${n++}`);
      try {
        const call = client.call({ chain: chains[node]!, action: 'call', payload, cost: { uj: cost, provenance: 'Estimator' } });
        const r = await Promise.race([call, sleep(8_000).then(() => undefined)]);
        if (r === undefined) throw new Error('no reply within 8 s');
        const verdict = r.decision.verdict;
        replies.push({ node, verdict, reason: r.decision.deny_reason, receiptId: receiptId(r.receipt), costUj: cost });
        if (verdict === 'allow') acked += cost;
      } catch {
        noReply[node]!++;
        await client.close().catch(() => {});
        client = undefined;
      }
      const wait = interval - (Date.now() - started);
      if (wait > 0) await sleep(wait);
    }
    await client?.close().catch(() => {});
  };

  const sampler = (async () => {
    while (!stopping) {
      series.push([Math.round(nowS() * 100) / 100, Number(acked)]);
      await sleep(250);
    }
  })();

  const applied: FaultEvent[] = [];
  const runFault = async (f: FaultEvent) => {
    const wait = f.atS * 1000 - (Date.now() - t0);
    if (wait > 0) await sleep(wait);
    if (stopping) return;
    applied.push(f);
    say(`t=${nowS().toFixed(1)}s ${f.kind} ${f.kind === 'nats-restart' ? `nats${f.target + 1}` : `n${f.target + 1}`} for ${f.forS}s`);
    try {
      if (f.kind === 'kill') {
        await cluster.killNode(f.target);
        await sleep(f.forS * 1000);
        await cluster.startNode(f.target);
      } else if (f.kind === 'pause') {
        cluster.pauseNode(f.target);
        await sleep(f.forS * 1000);
        cluster.resumeNode(f.target);
      } else if (f.kind === 'partition') {
        cluster.partition(f.target);
        await sleep(f.forS * 1000);
        cluster.heal(f.target);
      } else {
        const nats = cluster.nats;
        const server = nats && 'servers' in nats ? nats.servers[f.target % nats.servers.length]! : nats && !('servers' in nats) ? nats : undefined;
        if (server) {
          if (natsServers > 1) await server.kill();
          else await server.stop();
          await sleep(f.forS * 1000);
          await server.start();
        }
      }
    } catch (e) {
      say(`fault ${f.kind} failed: ${(e as Error).message}`);
    }
  };

  let report: ChaosReport;
  try {
    const agents = cluster.nodes.flatMap((_, i) => Array.from({ length: perNode }, (_, k) => agentLoop(i, k)));
    const faults = schedule.map(runFault);
    await sleep(o.durationS * 1000);
    stopping = true;
    await Promise.all(faults);
    await Promise.all(agents);
    await sampler;
    series.push([Math.round(nowS() * 100) / 100, Number(acked)]);
    say('healing: every node resumed, reconnected and running; settling');
    for (let i = 0; i < o.nodes; i++) {
      cluster.resumeNode(i);
      cluster.heal(i);
    }
    const nats = cluster.nats;
    for (const s of nats && 'servers' in nats ? nats.servers : nats ? [nats] : []) await s.start();
    for (let i = 0; i < o.nodes; i++) if (!cluster.running(i)) await cluster.startNode(i);
    await Promise.all(cluster.nodes.map((_, i) => cluster.waitReady(i)));
    await sleep(Math.max(1_500, 6 * (o.settleIntervalMs ?? 200)));
    // A graceful stop settles one last time, so the stream holds every node's final spend.
    for (let i = 0; i < o.nodes; i++) await cluster.stopNode(i);
    report = await check(o, cluster, { rootId, root, chains, budget, bound, window, subjectRoot, replies, noReply, series, applied });
  } finally {
    stopping = true;
    await cluster.stop();
    if (!o.keepDir) rmSync(dir, { recursive: true, force: true });
  }
  return report;
}

interface CheckInput {
  readonly rootId: ContentId;
  readonly root: SignedGrant;
  readonly chains: SignedGrant[][];
  readonly budget: Uj;
  readonly bound: Uj;
  readonly window: Uj;
  readonly subjectRoot: string;
  readonly replies: readonly Reply[];
  readonly noReply: readonly number[];
  readonly series: [number, number][];
  readonly applied: readonly FaultEvent[];
}

async function readLog(dataDir: string, steward: string): Promise<Uint8Array[]> {
  const log = await ReceiptLog.open(dataDir, { steward: steward as `did:key:${string}`, nowS: Math.floor(Date.now() / 1000), mustExist: true });
  const out: Uint8Array[] = [];
  try {
    for await (const chunk of log.receiptChunks()) for (const [, bytes] of chunk) out.push(bytes);
  } finally {
    await log.close();
  }
  return out;
}

async function check(o: ChaosOpts, cluster: LocalCluster, c: CheckInput): Promise<ChaosReport> {
  const problems: string[] = [];
  const inLogs = new Set<ContentId>();
  let total = 0n;
  let receiptsOk = true;
  let receiptsCount = 0;
  const perNode: ChaosReport['decisions']['per_node'] = [];
  for (const [i, n] of cluster.nodes.entries()) {
    const receipts = await readLog(n.dataDir, n.steward.did);
    receiptsCount += receipts.length;
    const replay = replayReceipts(receipts, { steward: n.steward.did });
    if (replay.rejected.length > 0 || replay.breaks.length > 0) {
      receiptsOk = false;
      problems.push(`${n.name}: ${replay.rejected.length} receipt(s) failed verification, ${replay.breaks.length} continuity break(s)`);
    }
    const chainIds = c.chains[i]!.map((sg) => grantId(sg.grant));
    const leaf = c.chains[i]![c.chains[i]!.length - 1]!.grant;
    let spentHere = 0n;
    let leafRunning = 0n;
    for (const bytes of receipts) {
      inLogs.add(receiptId(bytes));
      const opened = openReceipt(bytes, n.steward.did);
      if (!opened.ok) continue;
      const core: ReceiptCore = opened.value;
      const debited = core.chain_ids ?? [core.grant_id];
      if (core.verdict === 'allow') {
        if (debited.join() !== chainIds.join()) {
          receiptsOk = false;
          problems.push(`${n.name}: seq ${core.seq} debited ${debited.length} link(s), not the chain presented`);
        }
        spentHere += core.cost_uj;
        leafRunning += core.cost_uj;
      }
      const expected = leaf.budget_uj > leafRunning ? leaf.budget_uj - leafRunning : 0n;
      if (core.grant_id === chainIds[chainIds.length - 1] && core.budget_remaining_uj !== expected) {
        receiptsOk = false;
        problems.push(`${n.name}: seq ${core.seq} says ${core.budget_remaining_uj} µJ remain, the log says ${expected}`);
      }
    }
    if (replay.ledger.spent(c.rootId) !== spentHere) {
      receiptsOk = false;
      problems.push(`${n.name}: replay debited ${replay.ledger.spent(c.rootId)} µJ from the root, allows add up to ${spentHere}`);
    }
    total += spentHere;
    const mine = c.replies.filter((r) => r.node === i);
    perNode.push({
      node: n.name,
      allow: mine.filter((r) => r.verdict === 'allow').length,
      deny: mine.filter((r) => r.verdict === 'deny').length,
      no_reply: c.noReply[i] ?? 0,
      spent_uj: spentHere.toString(),
    });
  }
  const lost = c.replies.filter((r) => r.verdict === 'allow' && !inLogs.has(r.receiptId));
  if (lost.length > 0) problems.push(`${lost.length} acknowledged allow(s) missing from the logs`);
  const overdraft = total > c.budget ? total - c.budget : 0n;
  const limit = c.budget + (o.mode === 'channel' ? c.bound : 0n);
  const within = total <= limit;
  if (!within) problems.push(`spent ${total} µJ > ${o.mode === 'channel' ? 'budget + bound' : 'budget'} ${limit} µJ`);
  let audit: ChannelAudit | undefined;
  let proven: boolean;
  if (o.mode === 'channel') {
    const bus = await JetStreamBus.connect(cluster.natsUrls, { names: channelNames(c.subjectRoot), replicas: cluster.natsUrls.length >= 3 ? 3 : 1, deadlineMs: 15_000 }, 30_000);
    try {
      audit = await auditChannel(bus, c.rootId, c.budget);
    } finally {
      await bus.close();
    }
    proven = audit.proofVerifies === true && audit.refused.length === 0 && audit.totalUj === total && audit.overdraftUj === overdraft;
    if (!proven) {
      problems.push(
        `statements prove ${audit.totalUj} µJ (overdraft ${audit.overdraftUj}, ${audit.refused.length} refused, proof ${audit.proofVerifies ? 'verifies' : 'fails'}); receipts say ${total} µJ (overdraft ${overdraft})`,
      );
    }
  } else {
    proven = overdraft === 0n;
    if (!proven) problems.push(`shards mode overspent by ${overdraft} µJ`);
  }
  const byReason: Record<string, number> = {};
  for (const r of c.replies) if (r.verdict === 'deny') byReason[r.reason ?? '?'] = (byReason[r.reason ?? '?'] ?? 0) + 1;
  return {
    invariants: { no_lost_receipts: lost.length === 0, overdraft_within_bound: within, overdraft_proven: proven, receipts_verify: receiptsOk },
    mode: o.mode,
    seed: o.seed,
    nodes: o.nodes,
    nats_servers: o.natsServers ?? 1,
    duration_s: o.durationS,
    budget_uj: c.budget.toString(),
    spent_uj: total.toString(),
    bound_uj: c.bound.toString(),
    overdraft_uj: overdraft.toString(),
    statements: audit
      ? { total_uj: audit.totalUj.toString(), overdraft_uj: String(audit.overdraftUj ?? 0n), points: audit.lines.length, refused: audit.refused.length }
      : null,
    window_uj: o.mode === 'channel' ? c.window.toString() : null,
    faults: c.applied.map((f) => ({
      kind: f.kind,
      target: f.kind === 'nats-restart' ? `nats${f.target + 1}` : `n${f.target + 1}`,
      at_s: f.atS,
      for_s: f.forS,
    })),
    decisions: {
      allow: c.replies.filter((r) => r.verdict === 'allow').length,
      deny: c.replies.filter((r) => r.verdict === 'deny').length,
      by_reason: byReason,
      no_reply: c.noReply.reduce((a, b) => a + b, 0),
      receipts: receiptsCount,
      per_node: perNode,
    },
    problems,
    series: c.series,
  };
}

/** The SVG plot of a report: spend against budget (and budget + bound) with the faults marked. */
export function chaosPlot(r: ChaosReport): string {
  return spendPlot({
    title: `jcp chaos: ${r.mode} mode, ${r.nodes} nodes, seed ${r.seed}`,
    spend: r.series,
    budgetUj: Number(r.budget_uj),
    ...(r.mode === 'channel' ? { limitUj: Number(BigInt(r.budget_uj) + BigInt(r.bound_uj)) } : {}),
    faults: r.faults.map((f) => ({ kind: f.kind, target: f.target, fromS: f.at_s, toS: f.at_s + f.for_s })),
    durationS: r.duration_s,
  });
}

/** The report as a table for people. */
export function chaosTable(r: ChaosReport): string {
  const lines = [
    `mode ${r.mode}, ${r.nodes} nodes, ${r.nats_servers} NATS server(s), ${r.duration_s} s, seed ${r.seed}`,
    `faults: ${r.faults.length} (${FAULT_KINDS.map((k) => `${k} ${r.faults.filter((f) => f.kind === k).length}`).join(', ')})`,
    `decisions: ${r.decisions.allow} allow, ${r.decisions.deny} deny ${JSON.stringify(r.decisions.by_reason)}, ${r.decisions.no_reply} without reply, ${r.decisions.receipts} receipts`,
    '',
    `${'node'.padEnd(6)}${'allow'.padStart(8)}${'deny'.padStart(8)}${'no reply'.padStart(10)}${'spent µJ'.padStart(16)}`,
    ...r.decisions.per_node.map((n) => `${n.node.padEnd(6)}${String(n.allow).padStart(8)}${String(n.deny).padStart(8)}${String(n.no_reply).padStart(10)}${n.spent_uj.padStart(16)}`),
    '',
    `budget    ${r.budget_uj} µJ`,
    `spent     ${r.spent_uj} µJ (from receipts)`,
    ...(r.mode === 'channel' ? [`window    ${r.window_uj} µJ per node`, `bound     ${r.bound_uj} µJ (Σ W − min W)`] : []),
    `overdraft ${r.overdraft_uj} µJ${r.statements ? `; statements prove ${r.statements.overdraft_uj} µJ of ${r.statements.total_uj} µJ from ${r.statements.points} points` : ''}`,
    '',
    ...Object.entries(r.invariants).map(([k, v]) => `${v ? 'PASS' : 'FAIL'}  ${k}`),
    ...r.problems.map((p) => `  - ${p}`),
  ];
  return `${lines.join('\n')}\n`;
}
