/**
 * The chaos runner (docs/chaos.md; docs/design.md "Budget channels: the bound we prove"): agents spend against
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
import {
  type Actor,
  actorFromSeed,
  type ContentId,
  type Grant,
  grantId,
  openReceipt,
  overdraftBound,
  type ReceiptCore,
  receiptId,
  replayReceipts,
  type Rng,
  seededRng,
  type SignedGrant,
  type SignedRevocation,
  signGrant,
  signRevocation,
  type Uj,
} from '../core/index.ts';
import { auditChannel, type ChannelAudit, channelNames, JetStreamBus } from '../channel/index.ts';
import { ReceiptLog, resourceIdOf } from '../node/index.ts';
import { JcpClient } from '../client/index.ts';
import { mintShardSet } from '../shards/index.ts';
import { type ChaosCluster, startChaosCluster } from './target.ts';
import { overdraftPlot } from './plot.ts';

/** The faults of a one-region run (the default `--faults`). */
export const FAULT_KINDS = ['kill', 'pause', 'partition', 'nats-restart'] as const;
/** Every fault the runner knows: {@link FAULT_KINDS} plus `region-cut` (a region's links cut; multi-region runs). */
export const ALL_FAULT_KINDS = [...FAULT_KINDS, 'region-cut'] as const;
/** One fault kind. */
export type FaultKind = (typeof ALL_FAULT_KINDS)[number];

/** Options of {@link runChaos}. Amounts in µJ, times in seconds unless named otherwise. */
export interface ChaosOpts {
  readonly nodes: number;
  readonly mode: 'channel' | 'shards';
  readonly faults: readonly FaultKind[];
  readonly durationS: number;
  readonly seed: string;
  /** NATS servers: 1 (default) or 3 (a JetStream cluster); per region in a multi-region run. */
  readonly natsServers?: number;
  /**
   * Regions (default 1: one local cluster). From 2 on, `nodes` is split evenly over regions a, b, …,
   * each its own NATS cluster joined by gateways through delaying proxies (testkit/regions.ts).
   */
  readonly regions?: number;
  /** Injected round-trip time between regions (ms, default 40) and its jitter (ms, default 0). */
  readonly rttMs?: number;
  readonly jitterMs?: number;
  /**
   * How long a node may go without confirming it has seen the latest revocations before it must
   * stop allowing (s, default 10): allows of the revoked grant later than this count as violations
   * even at a node the revocation could not reach.
   */
  readonly revocationStalenessS?: number;
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
  /**
   * TLS on every link (multi-region runs only): jcp/1 between the agents and the nodes, the nodes'
   * NATS client connections, and the NATS routes and gateways (verified peers), all with one CA
   * made for the run (testkit/tls.ts; docs/tls.md). Default false.
   */
  readonly tls?: boolean;
  /** Keep the cluster folder (default: removed). */
  readonly keepDir?: string;
  /** Progress lines (default: none). */
  readonly progress?: (line: string) => void;
}

/** One scheduled fault. */
export interface FaultEvent {
  readonly kind: FaultKind;
  /**
   * Node index for kill/pause/partition; NATS server index for nats-restart (the region's index in
   * a multi-region run); region index for region-cut.
   */
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
    /** No allow of the revoked grant after its revocation reached the node (or after the staleness limit). */
    readonly revocation_enforced: boolean;
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
  readonly statements: {
    readonly total_uj: string;
    readonly overdraft_uj: string;
    readonly points: number;
    readonly refused: number;
  } | null;
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
  /** The regions and their nodes (one region `a` in a one-region run). */
  readonly regions?: readonly { readonly name: string; readonly nodes: readonly string[] }[];
  /** Per region: (seconds, µJ acknowledged by that region's nodes) samples, on the times of `series`. */
  readonly series_by_region?: Readonly<Record<string, readonly [number, number][]>>;
  /** Allows of the revoked grant after its revocation reached the node or the staleness limit passed (must be 0). */
  readonly revoked_allowed_after_reach?: number;
  /** The mid-run revocation: when (s), the limit used (s), how many nodes were seen denying it, allows before and after reach. */
  readonly revocation?: {
    readonly revoked_at_s: number | null;
    readonly staleness_s: number;
    readonly reached_nodes: number;
    readonly allowed_before_reach: number;
    readonly allowed_after_reach: number;
    /** Per node: when it first denied the grant as revoked (s; null = never seen), allows after reach. */
    readonly per_node?: readonly {
      readonly node: number;
      readonly first_revoked_deny_s: number | null;
      readonly allowed_after_reach: number;
    }[];
  };
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
 * duration − 4 s, one every 1–3.5 s; a node has at most one fault at a time, NATS at most one
 * restart at a time (per region in a multi-region run), and a region at most one cut at a time.
 * `natsServers` is the number of restart targets: NATS servers, or regions when `regions` > 1.
 */
export function faultSchedule(
  seed: string,
  faults: readonly FaultKind[],
  nodes: number,
  natsServers: number,
  durationS: number,
  regions = 1,
): FaultEvent[] {
  const u = uniform(seededRng(`chaos/schedule/${seed}`));
  const out: FaultEvent[] = [];
  if (faults.length === 0) return out;
  const busyUntil = new Map<string, number>();
  const end = durationS - 4;
  for (let t = 2 + u() * 1.5; t < end; t += 1 + u() * 2.5) {
    const kind = faults[Math.floor(u() * faults.length)]!;
    const target =
      kind === 'nats-restart' ? Math.floor(u() * natsServers) : kind === 'region-cut' ? Math.floor(u() * regions) : Math.floor(u() * nodes);
    const key =
      kind === 'nats-restart' ? (regions > 1 ? `nats${target}` : 'nats') : kind === 'region-cut' ? `region${target}` : `n${target}`;
    const forS =
      kind === 'kill'
        ? 0.5 + u() * 1.5
        : kind === 'pause'
          ? 0.5 + u() * 2
          : kind === 'partition' || kind === 'region-cut'
            ? 1 + u() * 4
            : 0.5 + u() * 1.5;
    if (kind === 'region-cut' && regions < 2) continue;
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

/** The grants, chains and amounts of one run: a pure function of the options and the seed. */
interface RunPlan {
  readonly issuer: Actor;
  readonly agent: Actor;
  readonly seeds: Uint8Array[];
  readonly root: SignedGrant;
  readonly rootId: ContentId;
  readonly chains: SignedGrant[][];
  readonly budget: Uj;
  readonly window: Uj;
  readonly cost: Uj;
  readonly subjectRoot: string;
  /** A second grant, one agent per node spends on it; it is revoked halfway through the run. */
  readonly revokee: SignedGrant;
  readonly revocation: SignedRevocation;
}

function planRun(o: ChaosOpts): RunPlan {
  const rng = seededRng(`chaos/${o.seed}`);
  const issuer = actorFromSeed(rng(32));
  const agent = actorFromSeed(rng(32));
  const seeds = Array.from({ length: o.nodes }, () => rng(32));
  const cost = o.costUj ?? 1_000n;
  const rate = o.ratePerAgent ?? 20;
  const perNode = o.agentsPerNode ?? 2;
  const busyS = Math.max(1, o.durationS - 4);
  const budget = o.budgetUj ?? BigInt(Math.round(o.nodes * perNode * rate * busyS * 0.6)) * cost;
  const window = o.windowUj ?? cost * 20n;
  const resource = resourceIdOf('chaos');
  // The agent's grants: `call` on the chaos resource, the whole budget, a fresh nonce per grant.
  const agentGrant = (): SignedGrant =>
    signGrant(
      {
        issuer: issuer.did,
        subject: agent.did,
        capability: { resource, actions: ['call'] },
        budget_uj: budget,
        expiry: 0,
        nonce: rng(16),
      } satisfies Grant,
      issuer,
    );
  const root = agentGrant();
  const rootId = grantId(root.grant);
  let chains: SignedGrant[][];
  if (o.mode === 'shards') {
    const pct = Math.floor(10_000 / o.nodes) / 100;
    const minted = mintShardSet(
      [root],
      agent,
      Array.from({ length: o.nodes }, (_, i) => ({ name: `n${i + 1}`, percent: pct })),
      { subject: agent.did, rng },
    );
    if (!minted.ok) throw new Error(`shards: ${minted.error.why}`);
    chains = minted.value.map((s) => [root, s.grant]);
  } else chains = Array.from({ length: o.nodes }, () => [root]);
  const subjectRoot = `chaos${Buffer.from(rng(4)).toString('hex')}`;
  // Drawn after everything above, so the grants and streams of a seed stay what they were.
  const revokee = agentGrant();
  const revocation = signRevocation(grantId(revokee.grant), issuer, rng(16));
  return { issuer, agent, seeds, root, rootId, chains, budget, window, cost, subjectRoot, revokee, revocation };
}

/** What the agents saw, shared by the steps of a run. */
interface RunState {
  readonly t0: number;
  readonly replies: Reply[];
  readonly noReply: number[];
  /** Region name → (seconds, µJ acknowledged in that region) samples. */
  readonly series: Map<string, [number, number][]>;
  readonly ackedByRegion: Map<string, bigint>;
  /** Allows and denies of the revoked grant: node, when the request was sent (ms since t0), verdict, reason. */
  readonly revokeeReplies: RevokeeReply[];
  /** When the revocation was acknowledged by the node it was sent to (ms since t0). */
  revokedAtMs: number | undefined;
  stopping: boolean;
}

const nowS = (st: RunState) => Math.round((Date.now() - st.t0) / 10) / 100;

/**
 * One agent: calls node `node` at `rate` calls/s with `chain` until the run stops, reconnecting
 * after errors; records every reply (and every request without one).
 */
async function agentLoop(
  cluster: ChaosCluster,
  st: RunState,
  node: number,
  k: string,
  chain: SignedGrant[],
  agent: Actor,
  cost: Uj,
  rate: number,
  onReply: (r: Reply, sentMs: number) => void,
): Promise<void> {
  let client: JcpClient | undefined;
  let n = 0;
  const interval = 1000 / rate;
  while (!st.stopping) {
    const started = Date.now();
    if (!client) {
      try {
        const nd = cluster.node(node);
        client = await JcpClient.connect({
          host: nd.host,
          port: nd.port,
          signer: agent,
          reconnectAttempts: 2,
          reconnectDelayMs: 100,
          ...(nd.tls ? { tls: nd.tls } : {}),
        });
      } catch {
        await sleep(150);
        continue;
      }
    }
    const payload = new TextEncoder().encode(`${node}/${k}/${n++}`);
    try {
      const call = client.call({ chain, action: 'call', payload, cost: { uj: cost, provenance: 'Estimator' } });
      const r = await Promise.race([call, sleep(8_000).then(() => undefined)]);
      if (r === undefined) throw new Error('no reply within 8 s');
      onReply(
        { node, verdict: r.decision.verdict, reason: r.decision.deny_reason, receiptId: receiptId(r.receipt), costUj: cost },
        started - st.t0,
      );
    } catch {
      st.noReply[node]!++;
      await client.close().catch(() => {});
      client = undefined;
    }
    const wait = interval - (Date.now() - started);
    if (wait > 0) await sleep(wait);
  }
  await client?.close().catch(() => {});
}

/** Starts every agent: `agentsPerNode` on the channel (or shard) chain per node, one on the revoked grant. */
function startAgents(o: ChaosOpts, plan: RunPlan, cluster: ChaosCluster, st: RunState): Promise<void>[] {
  const rate = o.ratePerAgent ?? 20;
  const perNode = o.agentsPerNode ?? 2;
  const out: Promise<void>[] = [];
  for (let i = 0; i < o.nodes; i++) {
    const region = cluster.regionOf(i);
    for (let k = 0; k < perNode; k++) {
      out.push(
        agentLoop(cluster, st, i, String(k), plan.chains[i]!, plan.agent, plan.cost, rate, (r) => {
          st.replies.push(r);
          if (r.verdict === 'allow') st.ackedByRegion.set(region, (st.ackedByRegion.get(region) ?? 0n) + r.costUj);
        }),
      );
    }
    out.push(
      agentLoop(cluster, st, i, 'revokee', [plan.revokee], plan.agent, plan.cost, Math.max(1, Math.round(rate / 4)), (r, sentMs) => {
        st.revokeeReplies.push({ node: i, sentMs, verdict: r.verdict, reason: r.reason });
      }),
    );
  }
  return out;
}

/** Samples each region's acknowledged spend every 250 ms until the run stops. */
async function sampleSeries(st: RunState): Promise<void> {
  while (!st.stopping) {
    pushSample(st);
    await sleep(250);
  }
}

function pushSample(st: RunState): void {
  const t = nowS(st);
  for (const [region, series] of st.series) series.push([t, Number(st.ackedByRegion.get(region) ?? 0n)]);
}

/** Revokes the second grant at node 0 halfway through the run (retrying while node 0 is down). */
async function revokeMidRun(o: ChaosOpts, plan: RunPlan, cluster: ChaosCluster, st: RunState, say: (l: string) => void): Promise<void> {
  await sleep((o.durationS * 1000) / 2);
  while (!st.stopping) {
    let client: JcpClient | undefined;
    try {
      const target = cluster.regionNodes[0]!.find((i) => cluster.running(i)) ?? 0;
      const nd = cluster.node(target);
      client = await JcpClient.connect({
        host: nd.host,
        port: nd.port,
        signer: plan.issuer,
        reconnectAttempts: 1,
        reconnectDelayMs: 100,
        ...(nd.tls ? { tls: nd.tls } : {}),
      });
      await client.revoke(plan.revocation, plan.revokee.grant);
      st.revokedAtMs = Date.now() - st.t0;
      say(`t=${nowS(st).toFixed(1)}s revoked the second grant at ${nd.name}`);
      return;
    } catch {
      await sleep(250);
    } finally {
      await client?.close().catch(() => {});
    }
  }
}

/** Applies one scheduled fault at its time, for its length. Failures are reported, not thrown. */
async function runFault(
  cluster: ChaosCluster,
  st: RunState,
  f: FaultEvent,
  applied: FaultEvent[],
  say: (l: string) => void,
): Promise<void> {
  const wait = f.atS * 1000 - (Date.now() - st.t0);
  if (wait > 0) await sleep(wait);
  if (st.stopping) return;
  applied.push(f);
  say(`t=${nowS(st).toFixed(1)}s ${f.kind} ${faultTarget(f, cluster)} for ${f.forS}s`);
  try {
    await cluster.fault(f, () => sleep(f.forS * 1000));
  } catch (e) {
    say(`fault ${f.kind} failed: ${(e as Error).message}`);
  }
}

/** The printed target of a fault: a node name, `natsK` (`nats X`: region X's NATS), or `region X`. */
function faultTarget(f: FaultEvent, cluster: ChaosCluster): string {
  if (f.kind === 'nats-restart')
    return cluster.regionNames.length > 1 ? `nats ${cluster.regionNames[f.target % cluster.regionNames.length]}` : `nats${f.target + 1}`;
  if (f.kind === 'region-cut') return `region ${cluster.regionNames[f.target % cluster.regionNames.length]}`;
  return cluster.node(f.target).name;
}

/**
 * Heals everything (every node resumed, reconnected and running, every region joined, every NATS
 * server up), lets the nodes settle, then stops them gracefully: a graceful stop settles one last
 * time, so the stream holds every node's final spend.
 */
async function healAndStop(
  o: ChaosOpts,
  cluster: ChaosCluster,
  say: (l: string) => void,
  probe: () => Promise<void> = async () => {},
): Promise<void> {
  say('healing: every node resumed, reconnected and running; settling');
  await cluster.healAll();
  await probe();
  // Across regions a healed node first waits for its gateway to reconnect (about 1.2 s measured)
  // and then settles in three round trips to the home region: give that time before the check
  // reads the statements, or a node's last spend is in its receipts and not yet in a statement.
  const acrossRegions = (o.regions ?? 1) > 1 ? 3_000 + 20 * (o.rttMs ?? 0) : 0;
  await sleep(Math.max(1_500, 6 * (o.settleIntervalMs ?? 200)) + acrossRegions);
  for (let i = 0; i < o.nodes; i++) await cluster.stopNode(i);
}

/** How long, at most, the probe after the heal asks one node about the revoked grant (ms). */
const REVOCATION_PROBE_MS = 30_000;

/**
 * After the heal, asks every node that has not yet answered the revoked grant with `revoked`
 * since the revocation, until it does (at most {@link REVOCATION_PROBE_MS} per node, 4 calls/s).
 * The run's own calls stop at its end: a node killed late in the run may only be back after
 * that (its restart under load took longer than the rest of the run), and then the report could
 * not say whether the revocation reached it. The probe's replies join the run's, so an allow
 * past the staleness limit still breaks `revocation_enforced`.
 */
async function probeRevocation(o: ChaosOpts, plan: RunPlan, cluster: ChaosCluster, st: RunState): Promise<void> {
  const revokedAt = st.revokedAtMs;
  if (revokedAt === undefined) return;
  const reached = (i: number) =>
    st.revokeeReplies.some((r) => r.node === i && r.verdict === 'deny' && r.reason === 'revoked' && r.sentMs >= revokedAt);
  await Promise.all(
    Array.from({ length: o.nodes }, async (_, i) => {
      const until = Date.now() + REVOCATION_PROBE_MS;
      let client: JcpClient | undefined;
      let n = 0;
      while (!reached(i) && Date.now() < until) {
        const sentMs = Date.now() - st.t0;
        try {
          const nd = cluster.node(i);
          client ??= await JcpClient.connect({
            host: nd.host,
            port: nd.port,
            signer: plan.agent,
            reconnectAttempts: 2,
            reconnectDelayMs: 100,
            ...(nd.tls ? { tls: nd.tls } : {}),
          });
          const payload = new TextEncoder().encode(`${i}/probe/${n++}`);
          const r = await client.call({ chain: [plan.revokee], action: 'call', payload, cost: { uj: plan.cost, provenance: 'Estimator' } });
          st.revokeeReplies.push({ node: i, sentMs, verdict: r.decision.verdict, reason: r.decision.deny_reason });
        } catch {
          await client?.close().catch(() => {});
          client = undefined;
        }
        if (!reached(i)) await sleep(250);
      }
      await client?.close().catch(() => {});
    }),
  );
}

/** Runs one chaos experiment; resolves to its report. Never leaves processes behind. */
export async function runChaos(o: ChaosOpts): Promise<ChaosReport> {
  const say = o.progress ?? (() => {});
  const plan = planRun(o);
  const dir = o.keepDir ?? mkdtempSync(join(tmpdir(), 'jcp-chaos-'));
  const cluster = await startChaosCluster(o, plan, dir, say);
  const windows = o.mode === 'channel' ? Array.from({ length: o.nodes }, () => plan.window) : [];
  const bound = o.mode === 'channel' ? overdraftBound(windows) : 0n;
  const schedule = faultSchedule(o.seed, o.faults, o.nodes, cluster.natsServers, o.durationS, cluster.regionNames.length);
  const st: RunState = {
    t0: Date.now(),
    replies: [],
    noReply: new Array<number>(o.nodes).fill(0),
    series: new Map(cluster.regionNames.map((r) => [r, []])),
    ackedByRegion: new Map(),
    revokeeReplies: [],
    revokedAtMs: undefined,
    stopping: false,
  };
  const applied: FaultEvent[] = [];
  let report: ChaosReport;
  try {
    const agents = startAgents(o, plan, cluster, st);
    const sampler = sampleSeries(st);
    const revoke = revokeMidRun(o, plan, cluster, st, say);
    const faults = schedule.map((f) => runFault(cluster, st, f, applied, say));
    await sleep(o.durationS * 1000);
    st.stopping = true;
    await Promise.all([...faults, revoke, ...agents, sampler]);
    pushSample(st);
    await healAndStop(o, cluster, say, () => probeRevocation(o, plan, cluster, st));
    report = await check(o, cluster, {
      rootId: plan.rootId,
      root: plan.root,
      chains: plan.chains,
      revokeeId: grantId(plan.revokee.grant),
      budget: plan.budget,
      bound,
      window: plan.window,
      subjectRoot: plan.subjectRoot,
      st,
      applied,
    });
  } finally {
    st.stopping = true;
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
  readonly revokeeId: ContentId;
  readonly st: RunState;
  readonly applied: readonly FaultEvent[];
}

async function readLog(dataDir: string, steward: string): Promise<Uint8Array[]> {
  const log = await ReceiptLog.open(dataDir, {
    steward: steward as `did:key:${string}`,
    nowS: Math.floor(Date.now() / 1000),
    mustExist: true,
  });
  const out: Uint8Array[] = [];
  try {
    for await (const chunk of log.receiptChunks()) for (const [, bytes] of chunk) out.push(bytes);
  } finally {
    await log.close();
  }
  return out;
}

/** One node's log checked (§8): its receipts, whether they all verify and agree with the replay, and the µJ allowed on the root. */
interface NodeLogCheck {
  readonly count: number;
  readonly ok: boolean;
  readonly spentUj: bigint;
  readonly line: ChaosReport['decisions']['per_node'][number];
}

/**
 * Checks node `i`'s receipt log: every receipt verifies with no continuity break, each allow
 * debited the chain presented, each leaf receipt's remaining budget (µJ) matches the log, and the
 * replay debited the root what the allows add up to. Adds every receipt id to `inLogs` and pushes a
 * problem for each mismatch.
 */
async function checkNodeLog(
  cluster: ChaosCluster,
  c: CheckInput,
  i: number,
  inLogs: Set<ContentId>,
  problems: string[],
): Promise<NodeLogCheck> {
  const { replies, noReply } = c.st;
  let receiptsOk = true;
  const n = cluster.node(i);
  const receipts = await readLog(n.dataDir, n.steward.did);
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
    // The second agent's grant (revoked mid-run) is not on the channel: checked by revocationCheck.
    if (debited.length === 1 && debited[0] === c.revokeeId) continue;
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
  const mine = replies.filter((r) => r.node === i);
  const line = {
    node: n.name,
    allow: mine.filter((r) => r.verdict === 'allow').length,
    deny: mine.filter((r) => r.verdict === 'deny').length,
    no_reply: noReply[i] ?? 0,
    spent_uj: spentHere.toString(),
  };
  return { count: receipts.length, ok: receiptsOk, spentUj: spentHere, line };
}

/** Checks the run's invariants from the nodes' logs, the channel's statements and the replies, and builds the report (docs/chaos.md). */
async function check(o: ChaosOpts, cluster: ChaosCluster, c: CheckInput): Promise<ChaosReport> {
  const problems: string[] = [];
  const logs = await checkLogs(o, cluster, c, problems);
  const lost = c.st.replies.filter((r) => r.verdict === 'allow' && !logs.inLogs.has(r.receiptId));
  if (lost.length > 0) problems.push(`${lost.length} acknowledged allow(s) missing from the logs`);
  const total = logs.totalUj;
  const overdraft = total > c.budget ? total - c.budget : 0n;
  const limit = c.budget + (o.mode === 'channel' ? c.bound : 0n);
  const within = total <= limit;
  if (!within) problems.push(`spent ${total} µJ > ${o.mode === 'channel' ? 'budget + bound' : 'budget'} ${limit} µJ`);
  const { audit, proven } = await proveSpend(o, cluster, c, total, overdraft, problems);
  const revocation = revocationCheck(o, c.st);
  if (revocation.allowed_after_reach > 0) {
    problems.push(
      `${revocation.allowed_after_reach} allow(s) of the revoked grant after its revocation reached the node (or after ${revocation.staleness_s} s)`,
    );
  }
  const invariants = {
    no_lost_receipts: lost.length === 0,
    overdraft_within_bound: within,
    overdraft_proven: proven,
    receipts_verify: logs.ok,
    revocation_enforced: revocation.allowed_after_reach === 0,
  };
  return chaosReport(o, cluster, c, { invariants, logs, overdraft, audit, revocation, problems });
}

/** Every node's log checked (see {@link checkNodeLog}): the receipt ids seen, the µJ the allows add up to, and the per-node lines. */
interface LogsCheck {
  readonly inLogs: Set<ContentId>;
  readonly totalUj: bigint;
  readonly ok: boolean;
  readonly count: number;
  readonly perNode: ChaosReport['decisions']['per_node'];
}

/** Checks the logs of nodes 0 … `o.nodes` − 1 in turn, pushing a problem for each mismatch. */
async function checkLogs(o: ChaosOpts, cluster: ChaosCluster, c: CheckInput, problems: string[]): Promise<LogsCheck> {
  const inLogs = new Set<ContentId>();
  let totalUj = 0n;
  let ok = true;
  let count = 0;
  const perNode: ChaosReport['decisions']['per_node'] = [];
  for (let i = 0; i < o.nodes; i++) {
    const n = await checkNodeLog(cluster, c, i, inLogs, problems);
    count += n.count;
    if (!n.ok) ok = false;
    totalUj += n.spentUj;
    perNode.push(n.line);
  }
  return { inLogs, totalUj, ok, count, perNode };
}

/**
 * Whether the spend is proven: in channel mode the channel's statements (read back from JetStream)
 * must verify, refuse nothing and prove the receipts' total `totalUj` and `overdraftUj` (µJ); in
 * shards mode there must be no overdraft. Pushes a problem when not.
 */
async function proveSpend(
  o: ChaosOpts,
  cluster: ChaosCluster,
  c: CheckInput,
  totalUj: bigint,
  overdraftUj: bigint,
  problems: string[],
): Promise<{ audit: ChannelAudit | undefined; proven: boolean }> {
  if (o.mode !== 'channel') {
    const proven = overdraftUj === 0n;
    if (!proven) problems.push(`shards mode overspent by ${overdraftUj} µJ`);
    return { audit: undefined, proven };
  }
  const bus = await JetStreamBus.connect(
    cluster.natsUrls,
    {
      names: channelNames(c.subjectRoot),
      replicas: cluster.natsUrls.length >= 3 ? 3 : 1,
      deadlineMs: 15_000,
      ...(cluster.natsTls ? { tls: cluster.natsTls } : {}),
    },
    30_000,
  );
  let audit: ChannelAudit;
  try {
    // Only the run's nodes are the channel's points: a statement by any other key is refused.
    const members = c.chains.map((_, i) => cluster.node(i).steward.did);
    audit = await auditChannel(bus, c.rootId, { budgetUj: c.budget, members });
  } finally {
    await bus.close();
  }
  const proven =
    audit.proofVerifies === true && audit.refused.length === 0 && audit.totalUj === totalUj && audit.overdraftUj === overdraftUj;
  if (!proven) {
    problems.push(
      `statements prove ${audit.totalUj} µJ (overdraft ${audit.overdraftUj}, ${audit.refused.length} refused, proof ${audit.proofVerifies ? 'verifies' : 'fails'}); receipts say ${totalUj} µJ (overdraft ${overdraftUj})`,
    );
  }
  return { audit, proven };
}

/** What {@link check} found, for {@link chaosReport}. */
interface CheckFindings {
  readonly invariants: ChaosReport['invariants'];
  readonly logs: LogsCheck;
  readonly overdraft: bigint;
  readonly audit: ChannelAudit | undefined;
  readonly revocation: NonNullable<ChaosReport['revocation']>;
  readonly problems: string[];
}

/** The run's {@link ChaosReport} (docs/chaos.md) from the options, the cluster, the run's record and the findings. */
function chaosReport(o: ChaosOpts, cluster: ChaosCluster, c: CheckInput, f: CheckFindings): ChaosReport {
  const { replies, noReply } = c.st;
  const { audit, revocation } = f;
  const byReason: Record<string, number> = {};
  for (const r of replies) if (r.verdict === 'deny') byReason[r.reason ?? '?'] = (byReason[r.reason ?? '?'] ?? 0) + 1;
  return {
    invariants: f.invariants,
    mode: o.mode,
    seed: o.seed,
    nodes: o.nodes,
    nats_servers: o.natsServers ?? 1,
    duration_s: o.durationS,
    budget_uj: c.budget.toString(),
    spent_uj: f.logs.totalUj.toString(),
    bound_uj: c.bound.toString(),
    overdraft_uj: f.overdraft.toString(),
    statements: audit
      ? {
          total_uj: audit.totalUj.toString(),
          overdraft_uj: String(audit.overdraftUj ?? 0n),
          points: audit.lines.length,
          refused: audit.refused.length,
        }
      : null,
    window_uj: o.mode === 'channel' ? c.window.toString() : null,
    faults: c.applied.map((fe) => ({
      kind: fe.kind,
      target: faultTarget(fe, cluster),
      at_s: fe.atS,
      for_s: fe.forS,
    })),
    decisions: {
      allow: replies.filter((r) => r.verdict === 'allow').length,
      deny: replies.filter((r) => r.verdict === 'deny').length,
      by_reason: byReason,
      no_reply: noReply.reduce((a, b) => a + b, 0),
      receipts: f.logs.count,
      per_node: f.logs.perNode,
    },
    problems: f.problems,
    series: totalSeries(c.st.series),
    regions: cluster.regionNames.map((name, r) => ({ name, nodes: cluster.regionNodes[r]!.map((i) => cluster.node(i).name) })),
    series_by_region: Object.fromEntries(c.st.series),
    revoked_allowed_after_reach: revocation.allowed_after_reach,
    revocation,
  };
}

/** The total of per-region step series, on the union of their times. */
function totalSeries(byRegion: ReadonlyMap<string, readonly [number, number][]>): [number, number][] {
  const all = [...byRegion.values()];
  return (all[0] ?? []).map(([t], k) => [t, all.reduce((a, s) => a + (s[k]?.[1] ?? 0), 0)]);
}

function revocationCheck(o: ChaosOpts, st: RunState): NonNullable<ChaosReport['revocation']> {
  return revocationCount(st.revokeeReplies, st.revokedAtMs, o.revocationStalenessS ?? 10, o.nodes);
}

/** One reply to a call on the revoked grant: node index, when the request was sent (ms since start), verdict, deny reason. */
export interface RevokeeReply {
  readonly node: number;
  readonly sentMs: number;
  readonly verdict: 'allow' | 'deny';
  readonly reason: string | undefined;
}

/**
 * Counts the allows of a revoked grant that a node gave more than `stalenessS` seconds after the
 * revocation: by then every node has either taken the revocation or, unable to confirm it has seen
 * the latest revocations for that long, stopped allowing (docs/regions.md). A node's first `revoked`
 * deny is reported per node but is not taken as the moment the revocation reached it: a stale node
 * refuses every grant with that same reason (§7's reasons are a closed list), before or after the
 * revocation, and may rightly allow again once it confirms a stream position that predates it.
 * Times are when the agent sent the request (ms since the start); `revokedAtMs` undefined (never
 * revoked) counts nothing.
 */
export function revocationCount(
  replies: readonly RevokeeReply[],
  revokedAtMs: number | undefined,
  stalenessS: number,
  nodes: number,
): NonNullable<ChaosReport['revocation']> {
  if (revokedAtMs === undefined)
    return { revoked_at_s: null, staleness_s: stalenessS, reached_nodes: 0, allowed_before_reach: 0, allowed_after_reach: 0 };
  const limitMs = revokedAtMs + stalenessS * 1000;
  let after = 0;
  let before = 0;
  let reached = 0;
  const perNode: { node: number; first_revoked_deny_s: number | null; allowed_after_reach: number }[] = [];
  for (let i = 0; i < nodes; i++) {
    const afterBefore = after;
    const mine = replies.filter((r) => r.node === i).sort((a, b) => a.sentMs - b.sentMs);
    const firstDeny = mine.find((r) => r.verdict === 'deny' && r.reason === 'revoked' && r.sentMs >= revokedAtMs)?.sentMs;
    if (firstDeny !== undefined) reached++;
    const from = limitMs;
    for (const r of mine) {
      if (r.verdict !== 'allow') continue;
      if (r.sentMs > from) after++;
      else if (r.sentMs >= revokedAtMs) before++;
    }
    perNode.push({
      node: i,
      first_revoked_deny_s: firstDeny === undefined ? null : Math.round(firstDeny / 10) / 100,
      allowed_after_reach: after - afterBefore,
    });
  }
  return {
    revoked_at_s: Math.round(revokedAtMs / 10) / 100,
    staleness_s: stalenessS,
    reached_nodes: reached,
    allowed_before_reach: before,
    allowed_after_reach: after,
    per_node: perNode,
  };
}

/**
 * The SVG plot of a report: the overdraft (spend − budget) over time against the bound, one
 * stacked series per region, with the faults marked (chaos/plot.ts). Reports without
 * `series_by_region` (written before it existed) plot their total series as one region.
 */
export function chaosPlot(r: ChaosReport): string {
  const byRegion = r.series_by_region ?? { all: r.series };
  return overdraftPlot({
    title: `jcp chaos: ${r.mode} mode, ${r.nodes} nodes${r.regions && r.regions.length > 1 ? ` in ${r.regions.length} regions` : ''}, seed ${r.seed}`,
    regions: Object.entries(byRegion).map(([name, spend]) => ({ name, spend })),
    budgetUj: Number(r.budget_uj),
    boundUj: Number(r.bound_uj),
    faults: r.faults.map((f) => ({ kind: f.kind, target: f.target, fromS: f.at_s, toS: f.at_s + f.for_s })),
    durationS: r.duration_s,
  });
}

/** The report as a table for people. */
export function chaosTable(r: ChaosReport): string {
  const lines = [
    `mode ${r.mode}, ${r.nodes} nodes, ${r.nats_servers} NATS server(s), ${r.duration_s} s, seed ${r.seed}`,
    ...(r.regions && r.regions.length > 1 ? [`regions: ${r.regions.map((g) => `${g.name} (${g.nodes.join(', ')})`).join('; ')}`] : []),
    `faults: ${r.faults.length} (${ALL_FAULT_KINDS.map((k) => `${k} ${r.faults.filter((f) => f.kind === k).length}`).join(', ')})`,
    `decisions: ${r.decisions.allow} allow, ${r.decisions.deny} deny ${JSON.stringify(r.decisions.by_reason)}, ${r.decisions.no_reply} without reply, ${r.decisions.receipts} receipts`,
    '',
    `${'node'.padEnd(6)}${'allow'.padStart(8)}${'deny'.padStart(8)}${'no reply'.padStart(10)}${'spent µJ'.padStart(16)}`,
    ...r.decisions.per_node.map(
      (n) =>
        `${n.node.padEnd(6)}${String(n.allow).padStart(8)}${String(n.deny).padStart(8)}${String(n.no_reply).padStart(10)}${n.spent_uj.padStart(16)}`,
    ),
    '',
    `budget    ${r.budget_uj} µJ`,
    `spent     ${r.spent_uj} µJ (from receipts)`,
    ...(r.mode === 'channel' ? [`window    ${r.window_uj} µJ per node`, `bound     ${r.bound_uj} µJ (Σ W − min W)`] : []),
    `overdraft ${r.overdraft_uj} µJ${r.statements ? `; statements prove ${r.statements.overdraft_uj} µJ of ${r.statements.total_uj} µJ from ${r.statements.points} points` : ''}`,
    ...(r.revocation
      ? [
          `revoked   a second grant at ${r.revocation.revoked_at_s ?? '-'} s; ${r.revocation.reached_nodes} node(s) seen denying it; ${r.revocation.allowed_before_reach} allow(s) before reach, ${r.revocation.allowed_after_reach} after (staleness limit ${r.revocation.staleness_s} s)`,
          ...(r.revocation.per_node ?? [])
            .filter((n) => n.first_revoked_deny_s === null || n.allowed_after_reach > 0)
            .map(
              (n) =>
                `          ${r.decisions.per_node[n.node]?.node ?? n.node}: first revoked deny ${n.first_revoked_deny_s ?? 'never'}, ${n.allowed_after_reach} allow(s) after reach`,
            ),
        ]
      : []),
    '',
    ...Object.entries(r.invariants).map(([k, v]) => `${v ? 'PASS' : 'FAIL'}  ${k}`),
    ...r.problems.map((p) => `  - ${p}`),
  ];
  return `${lines.join('\n')}\n`;
}
