/**
 * The regions bench (`npm run bench -- regions --json out.json`): one point per region, three
 * regions 40 ms apart (testkit/regions.ts: one NATS cluster per region joined by gateways through
 * delaying proxies), the same load in every mode — every point makes the same number of decisions
 * with the same number in flight, each with the node's crypto (decode, verify the caller's
 * Ed25519 signature, decide §7, seal the receipt) — and five ways to keep one budget:
 *
 *  - channel  — our budget channel: a local check; settlement over JetStream (stream in region a,
 *    read from its leader across the gateway) in the background;
 *  - shards   — one shard per point: a purely local check;
 *  - redis    — one atomic Lua script per decision on a central Redis in region a (127.0.0.1:6379,
 *    keys under a random prefix, deleted after); remote regions reach it through a delaying proxy;
 *  - kv       — a JetStream KV compare-and-set per decision on a bucket in region a (each point
 *    through its own region's NATS, so remote ones cross the gateway);
 *  - per-node — each point counts alone and holds the whole budget (what gateways that count
 *    locally do): local and fast, and it overspends.
 *
 * The budget is a third of the load, so every mode runs out and its overspend shows. Printed per
 * mode: decisions/s, p50 and p99 for the home region and for the remote regions, and the final
 * overspend against the budget and (channel) the bound Σ_{j≠k} W_j. Goals (met/unmet, never
 * asserted): channel p99 in the remote regions within 2 ms of region a's; channel decisions/s in
 * the remote regions ≥ 10× the central Redis counter's; channel overspend ≤ bound; per-node
 * counters show their overspend (> 0).
 *
 * Then two more phases. One region at a time (docs/chaos.md "Channel ÷ Redis from the remote
 * regions"): channel against the central Redis with each region's point alone in the process, at
 * 1, 8 and 32 in flight, the same decisions in both modes, with each mode's CPU per decision and
 * its ceiling (channel: 1 / CPU per decision; Redis: in flight / RTT) — in the phase above the
 * three points share one event loop, so the channel's local decisions get a third of one
 * process's CPU while Redis waits on the RTT. And revocation reach (docs/chaos.md "Revocation
 * reach across regions"): node processes in every region, revocations sent at region a, each
 * node's reach taken from its own record.
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Kvm } from '@nats-io/kv';
import { Redis } from 'ioredis';
import {
  type Actor,
  actorFromSeed,
  contentId,
  grantId,
  overdraftBound,
  type Rng,
  seededRng,
  type SignedGrant,
  signGrant,
  TrustRoots,
} from '../core/index.ts';
import { channelNames, ChannelPoint, JetStreamBus } from '../channel/index.ts';
import { mintShardSet } from '../shards/index.ts';
import { JcpClient } from '../client/index.ts';
import { measureRevocationReach, metricsReachTarget, quantileMs, type ReachTarget, startRegions } from '../testkit/index.ts';
import { drive, type Keeper, type ModeResult, requests } from './cluster.ts';
import { type Figure, percentile, type SuiteOptions, sig } from './figures.ts';
import { revokeFreshGrant } from './reach.ts';

const REGIONS = 3;
const RTT_MS = 40;
const COST = 1_000n;
/** Decisions per point and in flight per point: the same load in every mode. */
const PER_POINT = 400;
const IN_FLIGHT = 8;
const REDIS_PORT = 6379;
/**
 * The one-region-at-a-time phase: in flight per point (each run), and decisions per point per
 * in-flight lane (the same count in every mode at one concurrency).
 */
const ALONE_IN_FLIGHT = [1, 8, 32] as const;
const ALONE_PER_LANE = 50;
/** At least this many decisions per region in one run of that phase (one lane's 50 last ~40 ms: too short a sample). */
const ALONE_MIN = 200;
/** The revocation reach phase: node processes per region, and revocations sent (one at a time) to a node of region a. */
const REACH_NODES_PER_REGION = 2;
const REACH_SAMPLES = 40;

type Mode = 'channel' | 'shards' | 'redis' | 'kv' | 'per-node';

const us2ms = (us: number) => sig(us / 1000, 3);

/** Figures of one mode: decisions/s, p50, p99 for region a (home) and the remote regions. */
function modeFigures(mode: Mode, r: ModeResult): Figure[] {
  const pts = r.byPoint ?? [];
  const home = pts[0]!;
  const remote = pts.slice(1);
  const remoteLat = remote.flatMap((p) => p.latUs);
  return [
    { name: `${mode} decisions/s, home region (a)`, value: sig(home.perS), unit: 'ops/s' },
    {
      name: `${mode} decisions/s, remote regions (per region, mean)`,
      value: sig(remote.reduce((a, p) => a + p.perS, 0) / remote.length),
      unit: 'ops/s',
    },
    { name: `${mode} decision p50, home region (a)`, value: us2ms(percentile(home.latUs, 50)), unit: 'ms' },
    { name: `${mode} decision p99, home region (a)`, value: us2ms(percentile(home.latUs, 99)), unit: 'ms' },
    { name: `${mode} decision p50, remote regions`, value: us2ms(percentile(remoteLat, 50)), unit: 'ms' },
    { name: `${mode} decision p99, remote regions`, value: us2ms(percentile(remoteLat, 99)), unit: 'ms' },
  ];
}

/** The suite. */
export async function run(opts: SuiteOptions): Promise<Figure[]> {
  const b = await startBench(opts.seed);
  const results = new Map<Mode, ModeResult>();
  const spentOf = new Map<Mode, bigint>();
  let bound = 0n;
  let window = 0n;
  let alone: Figure[] = [];
  try {
    const record = (mode: Mode, r: ModeRun) => {
      results.set(mode, r.result);
      spentOf.set(mode, r.spent);
    };
    const channel = await runChannel(b);
    ({ bound, window } = channel);
    record('channel', channel);
    record('shards', await runShards(b));
    record('redis', await runRedis(b));
    record('kv', await runKv(b));
    record('per-node', await runPerNode(b));
    alone = await runAlone(b);
  } finally {
    await stopBench(b);
  }
  // A revocation that does not reach a node in time is a result, not a reason to lose the figures above.
  const reach = await runReach(opts.seed).catch((e: unknown): Figure[] => {
    process.stderr.write(`bench regions: revocation reach: ${e instanceof Error ? e.message : String(e)}\n`);
    return [
      {
        name: `revocation reach: all ${REACH_SAMPLES} revocations in force on every node (each within 30 s)`,
        value: 0,
        unit: 'runs',
        goal: '1',
        met: false,
      },
    ];
  });
  return [...regionFigures(results, spentOf, b.budget, bound, window), ...alone, ...reach];
}

/**
 * Revocation reach time across regions (spec §4.3; docs/chaos.md "Revocation reach across
 * regions"): a second launch, {@link REGIONS} regions `RTT_MS` apart with
 * {@link REACH_NODES_PER_REGION} node processes each (the revocation stream in region a);
 * {@link REACH_SAMPLES} fresh grants revoked one at a time at node a1 over jcp/1, each node's reach
 * read from its own `/metrics` record of when its store took the revocation
 * (`jcp_revocation_last_taken_timestamp_seconds`, testkit/reach.ts) minus the send time. Figures
 * (ms): p50/p99 until every node of the home region had it, until every node of the remote
 * regions had it, and until every node had it.
 * @throws Error (from testkit/reach.ts) when a revocation does not reach a node within 30 s.
 */
async function runReach(seed: number): Promise<Figure[]> {
  const rng = seededRng(`bench/regions/reach/${seed}`);
  const alice = actorFromSeed(rng(32));
  const bob = actorFromSeed(rng(32));
  const rc = await startRegions({
    regions: REGIONS,
    nodesPerRegion: REACH_NODES_PER_REGION,
    serversPerRegion: 1,
    rttMs: RTT_MS,
    subjectRoot: `benchrr${randomBytes(4).toString('hex')}`,
    logLevel: 'warn',
  });
  try {
    const nodes = rc.regions.flatMap((r) => r.nodes);
    const a1 = rc.region(rc.home).nodes[0]!;
    const targets = nodes.map((n) => metricsReachTarget(n.id, n.region, n.metricsPort));
    await untilClustered(targets);
    const client = await JcpClient.connect({ host: '127.0.0.1', port: a1.port, signer: alice });
    try {
      const report = await measureRevocationReach({
        targets,
        samples: REACH_SAMPLES,
        revoke: () => revokeFreshGrant(client, alice, bob.did, 'cluster', rng),
      });
      return reachFigures(report.rawMs, nodes, rc.home);
    } finally {
      await client.close();
    }
  } finally {
    await rc.stop();
  }
}

/**
 * Waits until every target's `/metrics` shows its revocation count (a node publishes it once its
 * cluster hooks run, a moment after its jcp/1 port opens). @throws Error naming a target still without it after 60 s.
 */
async function untilClustered(targets: readonly ReachTarget[]): Promise<void> {
  const end = Date.now() + 60_000;
  for (const t of targets) {
    for (;;) {
      const ok = await t.takenCount().then(
        () => true,
        (e: unknown) => {
          if (Date.now() > end) throw e;
          return false;
        },
      );
      if (ok) break;
      await sleep(100);
    }
  }
}

/** p50/p99 (ms) of the per-sample reach to every node of the home region, of the remote regions, and of all. */
function reachFigures(
  raw: ReadonlyArray<Readonly<Record<string, number>>>,
  nodes: readonly { readonly id: string; readonly region: string }[],
  home: string,
): Figure[] {
  const every = (ids: readonly string[]) => raw.map((r) => Math.max(...ids.map((id) => r[id]!)));
  const groups: [string, number[]][] = [
    [`home region (${home})`, every(nodes.filter((n) => n.region === home).map((n) => n.id))],
    ['remote regions', every(nodes.filter((n) => n.region !== home).map((n) => n.id))],
    ['every node', every(nodes.map((n) => n.id))],
  ];
  const where = `${REGIONS} regions × ${REACH_NODES_PER_REGION} nodes, ${RTT_MS} ms RTT, ${raw.length} revocations sent at ${home}1`;
  return groups.flatMap(([label, xs]) => [
    { name: `revocation reach ms p50, ${label} (${where})`, value: sig(quantileMs(xs, 0.5), 3), unit: 'ms' },
    { name: `revocation reach ms p99, ${label} (${where})`, value: sig(quantileMs(xs, 0.99), 3), unit: 'ms' },
  ]);
}

/**
 * What every mode of the suite shares: the seeded actors (issuer, agent, one steward per region),
 * the trust roots, the budget (µJ, per grant), `mkRoot` (a fresh root grant of that budget),
 * the started regions and their NATS URLs, `load` (the signed requests of one mode), the Redis
 * key, and the cleanups run by {@link stopBench} (first to last).
 */
interface RegionsBench {
  readonly rng: Rng;
  readonly issuer: Actor;
  readonly nowS: number;
  readonly agent: Actor;
  readonly stewards: readonly Actor[];
  readonly trust: TrustRoots;
  readonly budget: bigint;
  readonly mkRoot: () => SignedGrant;
  readonly tag: string;
  readonly subjectRoot: string;
  readonly rc: Awaited<ReturnType<typeof startRegions>>;
  readonly urls: string[][];
  readonly load: (chains: Parameters<typeof requests>[1], name: string) => ReturnType<typeof requests>;
  readonly redisKey: string;
  readonly cleanups: (() => Promise<unknown>)[];
}

/** One mode's run: its drive result and what it spent in total (µJ). */
interface ModeRun {
  readonly result: ModeResult;
  readonly spent: bigint;
}

/** Seeds the actors from `bench/regions/<seed>` and starts {@link REGIONS} regions `RTT_MS` apart (one NATS server each). */
async function startBench(seed: number): Promise<RegionsBench> {
  const rng = seededRng(`bench/regions/${seed}`);
  const issuer = actorFromSeed(rng(32));
  const agent = actorFromSeed(rng(32));
  const stewards = Array.from({ length: REGIONS }, () => actorFromSeed(rng(32)));
  const resource = contentId({ jcp_resource: 'bench-regions' });
  const trust = new TrustRoots({ [resource]: [issuer.did] });
  const nowS = Math.floor(Date.now() / 1000);
  const budget = COST * BigInt(PER_POINT);
  const mkRoot = () =>
    signGrant(
      { issuer: issuer.did, subject: agent.did, capability: { resource, actions: ['call'] }, budget_uj: budget, expiry: 0, nonce: rng(16) },
      issuer,
    );
  const tag = randomBytes(4).toString('hex');
  const subjectRoot = `benchrg${tag}`;
  const rc = await startRegions({ regions: REGIONS, nodesPerRegion: 0, serversPerRegion: 1, rttMs: RTT_MS, subjectRoot });
  const urls = rc.regions.map((r) => r.natsUrls);
  const load = (chains: Parameters<typeof requests>[1], name: string) => requests(agent, chains, PER_POINT, `${tag}${name}`, nowS);
  return {
    rng,
    issuer,
    nowS,
    agent,
    stewards,
    trust,
    budget,
    mkRoot,
    tag,
    subjectRoot,
    rc,
    urls,
    load,
    redisKey: `jcp:bench:regions:${tag}`,
    cleanups: [],
  };
}

/** Runs the cleanups, deletes the Redis key whatever happened, and stops the regions; throws nothing a cleanup throws. */
async function stopBench(b: RegionsBench): Promise<void> {
  for (const c of b.cleanups) await c().catch(() => undefined);
  // The Redis keys go whatever happened (the only state this bench leaves outside its own servers).
  const r = new Redis({ host: '127.0.0.1', port: REDIS_PORT, lazyConnect: true, maxRetriesPerRequest: 1 });
  await r
    .connect()
    .then(() => r.del(b.redisKey))
    .catch(() => undefined);
  await r.quit().catch(() => undefined);
  await sleep(10);
  await b.rc.stop();
}

/** channel: each point's bus goes to its own region's NATS; the stream (region a) is read from its leader. Also returns the 40-call window and its overdraft bound (µJ). */
async function runChannel(b: RegionsBench): Promise<ModeRun & { bound: bigint; window: bigint }> {
  const ch = b.mkRoot();
  const chId = grantId(ch.grant);
  const window = COST * 40n;
  const bound = overdraftBound(b.stewards.map(() => window));
  const buses = await Promise.all(
    b.urls.map((u) => JetStreamBus.connect(u, { names: channelNames(b.subjectRoot), replicas: 1, deadlineMs: 10_000 }, 30_000)),
  );
  b.cleanups.push(async () => Promise.all(buses.map((x) => x.close())));
  const points = b.stewards.map((self, p) => new ChannelPoint({ grantId: chId, windowUj: window, self, bus: buses[p]! }));
  await Promise.all(points.map((p) => p.settle()));
  const timers = points.map((p) => setInterval(() => void p.settle(), 100));
  const chKeeper: Keeper = (p, cost) => {
    const pt = points[p]!;
    const r = pt.tryReserve(cost, b.budget);
    if (r.ok) pt.commit(cost);
    return r.ok;
  };
  const result = await drive(b.stewards, b.load([[ch], [ch], [ch]], 'c'), chKeeper, b.trust, IN_FLIGHT);
  for (const t of timers) clearInterval(t);
  return { result, spent: BigInt(result.allowed) * COST, bound, window };
}

/** One point driven alone: its drive result and the process CPU (user + system, µs) it used per decision. */
interface AloneRun {
  readonly result: ModeResult;
  readonly cpuUsPerDecision: number;
}

/** Drives the points one after another, each alone in this process (as its own node would be on its own machine). */
async function driveAlone(b: RegionsBench, bodies: Uint8Array[][], keeper: Keeper, inFlight: number): Promise<AloneRun[]> {
  const out: AloneRun[] = [];
  for (const [p, steward] of b.stewards.entries()) {
    const cpu0 = process.cpuUsage();
    const result = await drive([steward], [bodies[p]!], (_q, cost) => keeper(p, cost), b.trust, inFlight);
    const cpu = process.cpuUsage(cpu0);
    out.push({ result, cpuUsPerDecision: (cpu.user + cpu.system) / result.decisions });
  }
  return out;
}

/**
 * channel against the central Redis counter with each region's point alone in this process, one
 * region after another (a real deployment gives each region's node its own machine; the
 * concurrent phase makes the three points share one event loop and 2 cores, so the channel's
 * local decisions are CPU-bound at a third of the process while Redis waits on the RTT), at
 * {@link ALONE_IN_FLIGHT} in flight, {@link ALONE_PER_LANE} decisions per lane (at least {@link ALONE_MIN}), the same requests
 * count in both modes, and a budget neither runs out of (throughput of allows). Figures per
 * concurrency: decisions/s per region (home, remote mean), the ratio, CPU µs per decision, the
 * channel's CPU ceiling (1 / CPU per decision) and Redis's RTT ceiling (in flight / RTT).
 */
async function runAlone(b: RegionsBench): Promise<Figure[]> {
  const big = b.budget * 1_000n;
  const buses = await Promise.all(
    b.urls.map((u) => JetStreamBus.connect(u, { names: channelNames(b.subjectRoot), replicas: 1, deadlineMs: 10_000 }, 30_000)),
  );
  b.cleanups.push(async () => Promise.all(buses.map((x) => x.close())));
  const clients = await regionRedisClients(b);
  const key = `${b.redisKey}:alone`;
  b.cleanups.push(async () => clients[0]!.del(key));
  const sha = (await clients[0]!.script('LOAD', REDIS_DEBIT)) as string;
  const figures: Figure[] = [];
  for (const inFlight of ALONE_IN_FLIGHT) {
    const n = Math.max(ALONE_MIN, ALONE_PER_LANE * inFlight);
    const root = signGrant({ ...b.mkRoot().grant, budget_uj: big }, b.issuer);
    const chId = grantId(root.grant);
    const window = COST * 40n;
    const points = b.stewards.map((self, p) => new ChannelPoint({ grantId: chId, windowUj: window, self, bus: buses[p]! }));
    await Promise.all(points.map((p) => p.settle()));
    const timers = points.map((p) => setInterval(() => void p.settle(), 100));
    const ch = await driveAlone(
      b,
      requests(b.agent, [[root], [root], [root]], n, `${b.tag}ac${inFlight}`, b.nowS),
      (p, cost) => {
        const r = points[p]!.tryReserve(cost, big);
        if (r.ok) points[p]!.commit(cost);
        return r.ok;
      },
      inFlight,
    );
    for (const t of timers) clearInterval(t);
    await clients[0]!.del(key);
    const rd = await driveAlone(
      b,
      requests(b.agent, [[root], [root], [root]], n, `${b.tag}ar${inFlight}`, b.nowS),
      async (p, cost) => (await clients[p]!.evalsha(sha, 1, key, cost.toString(), big.toString())) === 1,
      inFlight,
    );
    figures.push(...aloneFigures(inFlight, n, ch, rd));
  }
  return figures;
}

/** The figures of one concurrency of {@link runAlone}. */
function aloneFigures(inFlight: number, n: number, ch: readonly AloneRun[], rd: readonly AloneRun[]): Figure[] {
  const tag = `one region at a time, ${inFlight} in flight, ${n} decisions per region`;
  const remoteMean = (xs: readonly AloneRun[]) => xs.slice(1).reduce((a, x) => a + x.result.perS, 0) / (xs.length - 1);
  const cpu = (xs: readonly AloneRun[]) => xs.reduce((a, x) => a + x.cpuUsPerDecision, 0) / xs.length;
  const chRemote = remoteMean(ch);
  const rdRemote = remoteMean(rd);
  const remoteLat = (xs: readonly AloneRun[]) => xs.slice(1).flatMap((x) => x.result.latUs);
  const ratio: Figure = {
    name: `channel decisions/s, remote regions (per region, mean; × central redis from the remote regions; ${tag})`,
    value: sig(chRemote),
    unit: 'ops/s',
    floor: sig(rdRemote),
    ratio: sig(chRemote / rdRemote, 3),
  };
  return [
    { name: `channel decisions/s, home region (a) (${tag})`, value: sig(ch[0]!.result.perS), unit: 'ops/s' },
    { name: `redis decisions/s, home region (a) (${tag})`, value: sig(rd[0]!.result.perS), unit: 'ops/s' },
    // The goal is stated at the bench's concurrency ({@link IN_FLIGHT}); the other concurrencies show how it moves.
    inFlight === IN_FLIGHT ? { ...ratio, goal: 'ratio ≥ 10', met: chRemote >= 10 * rdRemote } : ratio,
    { name: `channel decision p50, remote regions (${tag})`, value: us2ms(percentile(remoteLat(ch), 50)), unit: 'ms' },
    { name: `redis decision p50, remote regions (${tag})`, value: us2ms(percentile(remoteLat(rd), 50)), unit: 'ms' },
    { name: `channel CPU per decision (process user + system, ${tag})`, value: sig(cpu(ch)), unit: 'µs' },
    { name: `redis CPU per decision (process user + system, ${tag})`, value: sig(cpu(rd)), unit: 'µs' },
    { name: `channel CPU ceiling per region (1 / CPU per decision, ${tag})`, value: sig(1e6 / cpu(ch)), unit: 'ops/s' },
    {
      name: `redis RTT ceiling per remote region (in flight / ${RTT_MS} ms RTT, ${tag})`,
      value: sig((inFlight * 1000) / RTT_MS),
      unit: 'ops/s',
    },
  ];
}

/** shards: one shard per point (a third of the budget each). */
async function runShards(b: RegionsBench): Promise<ModeRun> {
  const sh = b.mkRoot();
  const shards = mintShardSet(
    [sh],
    b.agent,
    [0, 1, 2].map((i) => ({ name: `p${i}`, percent: 33.33 })),
    { subject: b.agent.did, rng: b.rng },
  );
  if (!shards.ok) throw new Error(shards.error.why);
  const result = await drive(
    b.stewards,
    b.load(
      shards.value.map((s) => [sh, s.grant]),
      's',
    ),
    () => true,
    b.trust,
    IN_FLIGHT,
  );
  return { result, spent: BigInt(result.allowed) * COST };
}

/** The central counter's debit, one Lua script: add the cost, and undo it (answer 0) if that passes the budget (ARGV[2]). */
const REDIS_DEBIT = `local v = redis.call('INCRBY', KEYS[1], ARGV[1])
if v > tonumber(ARGV[2]) then redis.call('DECRBY', KEYS[1], ARGV[1]) return 0 end
return 1`;

/** One connected Redis client per region, in region order: the home region's direct, the others through their proxied client link to it (quit at clean-up). */
async function regionRedisClients(b: RegionsBench): Promise<Redis[]> {
  const clients: Redis[] = [];
  for (const [p, r] of b.rc.regions.entries()) {
    const port = p === 0 ? REDIS_PORT : (await b.rc.clientLink(r.name, b.rc.home, REDIS_PORT)).proxy.port;
    const c = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 1 });
    await c.connect();
    clients.push(c);
  }
  b.cleanups.push(async () => Promise.all(clients.map((c) => c.quit().catch(() => undefined))));
  return clients;
}

/** redis: central in region a; remote points through a delaying client link. */
async function runRedis(b: RegionsBench): Promise<ModeRun> {
  const rd = b.mkRoot();
  const clients = await regionRedisClients(b);
  const redisHome = clients[0]!;
  const sha = (await redisHome.script('LOAD', REDIS_DEBIT)) as string;
  const redisKeeper: Keeper = async (p, cost) =>
    (await clients[p]!.evalsha(sha, 1, b.redisKey, cost.toString(), b.budget.toString())) === 1;
  const result = await drive(b.stewards, b.load([[rd], [rd], [rd]], 'r'), redisKeeper, b.trust, IN_FLIGHT);
  return { result, spent: BigInt((await redisHome.get(b.redisKey)) ?? '0') };
}

/** kv: a bucket in region a (created from there); each point through its own region's NATS. */
async function runKv(b: RegionsBench): Promise<ModeRun> {
  const kvRoot = b.mkRoot();
  const kvBuses = await Promise.all(
    b.urls.map((u) => JetStreamBus.connect(u, { names: channelNames(b.subjectRoot), replicas: 1, deadlineMs: 10_000 }, 30_000)),
  );
  b.cleanups.push(async () => Promise.all(kvBuses.map((x) => x.close())));
  const bucket = `jcp_bench_regions_${b.tag}`;
  const kvHome = await new Kvm(kvBuses[0]!.connection!).create(bucket, { history: 1 });
  b.cleanups.unshift(async () => kvHome.destroy().catch(() => false));
  await kvHome.put('spent', '0');
  const kvs = await Promise.all(kvBuses.map((x, p) => (p === 0 ? kvHome : new Kvm(x.connection!).open(bucket))));
  const kvKeeper: Keeper = async (p, cost) => {
    const kv = kvs[p]!;
    for (;;) {
      const e = await kv.get('spent');
      const cur = BigInt(e?.string() ?? '0');
      if (cur + cost > b.budget) return false;
      try {
        await kv.update('spent', String(cur + cost), e?.revision ?? 0);
        return true;
      } catch {
        // another point won the compare-and-set: read again
      }
    }
  };
  const result = await drive(b.stewards, b.load([[kvRoot], [kvRoot], [kvRoot]], 'k'), kvKeeper, b.trust, IN_FLIGHT);
  return { result, spent: BigInt((await kvHome.get('spent'))?.string() ?? '0') };
}

/** per-node: every point holds the whole budget and counts alone. */
async function runPerNode(b: RegionsBench): Promise<ModeRun> {
  const pn = b.mkRoot();
  const local = b.stewards.map(() => 0n);
  const pnKeeper: Keeper = (p, cost) => {
    if (local[p]! + cost > b.budget) return false;
    local[p] = local[p]! + cost;
    return true;
  };
  const result = await drive(b.stewards, b.load([[pn], [pn], [pn]], 'n'), pnKeeper, b.trust, IN_FLIGHT);
  return { result, spent: local.reduce((x, y) => x + y, 0n) };
}

/**
 * The figures: per mode throughput and latency, channel remote − home p99 (goal ≤ 2 ms),
 * channel × central redis from the remote regions (goal ≥ 10), and each mode's final overspend
 * (µJ; the channel's against its bound `bound`, window `window`).
 */
function regionFigures(
  results: ReadonlyMap<Mode, ModeResult>,
  spentOf: ReadonlyMap<Mode, bigint>,
  budget: bigint,
  bound: bigint,
  window: bigint,
): Figure[] {
  const figures: Figure[] = [];
  for (const mode of ['channel', 'shards', 'redis', 'kv', 'per-node'] as const) figures.push(...modeFigures(mode, results.get(mode)!));
  const ch = results.get('channel')!.byPoint!;
  const rdp = results.get('redis')!.byPoint!;
  const homeP99 = percentile(ch[0]!.latUs, 99);
  const remoteP99 = percentile(
    ch.slice(1).flatMap((p) => p.latUs),
    99,
  );
  figures.push({
    name: 'channel p99, remote regions − region a',
    value: us2ms(remoteP99 - homeP99),
    unit: 'ms',
    goal: '≤ 2 ms (decisions stay local)',
    met: remoteP99 - homeP99 <= 2_000,
  });
  const chRemote = ch.slice(1).reduce((a, p) => a + p.perS, 0);
  const rdRemote = rdp.slice(1).reduce((a, p) => a + p.perS, 0);
  figures.push({
    name: 'channel decisions/s, remote regions (× central redis from the remote regions)',
    value: sig(chRemote),
    unit: 'ops/s',
    floor: sig(rdRemote),
    ratio: sig(chRemote / rdRemote, 3),
    goal: 'ratio ≥ 10',
    met: chRemote >= 10 * rdRemote,
  });
  for (const mode of ['channel', 'shards', 'redis', 'kv', 'per-node'] as const) {
    const spent = spentOf.get(mode)!;
    const over = spent > budget ? spent - budget : 0n;
    const f: Figure = {
      name: `${mode} final overspend (budget ${budget} µJ${mode === 'channel' ? `, bound ${bound} µJ = Σ W − min W, W ${window} µJ` : ''})`,
      value: Number(over),
      unit: 'µJ',
    };
    if (mode === 'channel')
      figures.push({ ...f, floor: Number(bound), ratio: sig(Number(over) / Number(bound), 3), goal: '≤ bound', met: over <= bound });
    else if (mode === 'per-node') figures.push({ ...f, goal: '> 0 (each node holds the whole budget)', met: over > 0n });
    else figures.push(f);
  }
  return figures;
}
