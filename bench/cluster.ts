/**
 * The cluster bench (`npm run bench -- cluster --json out.json`): one shared grant across three
 * enforcement points, the same crypto per decision in every mode (decode the jcp/1 request, verify
 * the caller's Ed25519 signature, decide §7, seal the receipt), and four ways to keep the budget:
 *
 *  (a) channel — our budget channel: a local check, settlement over JetStream in the background;
 *  (b) shards  — one shard per point, a purely local check;
 *  (c) redis   — every decision checks and debits a central Redis counter with one atomic Lua
 *      script (the design of Envoy's global rate limiter); Redis on 127.0.0.1:6379;
 *  (d) kv      — every decision does a compare-and-set on a JetStream KV key (consensus per spend).
 *
 * The points run in this process (NATS and Redis are the real servers), with several decisions in
 * flight per point, so the modes differ only in how they keep the budget. Printed: decisions/s,
 * decision latency p50/p99, settlement latency p50/p99 (channel), and, in a second phase where
 * the channel's budget runs out under load, the largest overdraft seen against the bound.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Kvm } from '@nats-io/kv';
import { Redis } from 'ioredis';
import {
  type Actor,
  actorFromSeed,
  contentId,
  decide,
  type DecisionRequest,
  type DecisionState,
  decodeWireMessage,
  denied,
  DenyReasons,
  encodeWireRequest,
  grantId,
  Ledger,
  overdraftBound,
  payloadHash,
  receiptCoreFor,
  RevocationSet,
  sealReceipt,
  seededRng,
  type SignedGrant,
  signGrant,
  signWireRequestSync,
  TrustRoots,
  verifyWireRequestSignature,
} from '../core/index.ts';
import { channelNames, ChannelPoint, JetStreamBus } from '../channel/index.ts';
import { mintShardSet } from '../shards/index.ts';
import { type Figure, percentile, type SuiteOptions, sig } from './figures.ts';

const POINTS = 3;
const IN_FLIGHT = 8;
const ROUNDS = 3;
const COST = 1_000n;
const NATS = 'nats://127.0.0.1:4222';
const REDIS = { host: '127.0.0.1', port: 6379 };

type Mode = 'channel' | 'shards' | 'redis' | 'kv';

/** A budget keeper: checks and debits one decision's cost (µJ); false = refuse. */
export type Keeper = (point: number, costUj: bigint) => boolean | Promise<boolean>;

/** What {@link drive} measured: totals, and per point (decisions/s over that point's own run, latencies in µs, allows). */
export interface ModeResult {
  readonly decisions: number;
  readonly allowed: number;
  readonly perS: number;
  readonly latUs: number[];
  readonly byPoint?: readonly { readonly perS: number; readonly latUs: number[]; readonly allowed: number }[];
}

/** Pre-signed jcp/1 request bodies, one list per point (chains differ per point in shards mode). */
export function requests(agent: Actor, chains: readonly (readonly SignedGrant[])[], n: number, tag: string, nowS: number): Uint8Array[][] {
  return chains.map((chain, p) => {
    const leaf = chain[chain.length - 1]!;
    const out: Uint8Array[] = [];
    for (let i = 0; i < n; i++) {
      const payload = new TextEncoder().encode(`${tag}/${p}/${i}`);
      out.push(
        encodeWireRequest(
          signWireRequestSync(
            {
              frame: {
                kind: 'tool-call',
                trust: 'control',
                grant_id: grantId(leaf.grant),
                action: 'call',
                resource: leaf.grant.capability.resource,
                payload_hash: payloadHash(payload),
              },
              chain: [...chain],
              caller: agent.did,
              cost: { uj: COST, provenance: 'Estimator' },
              now: nowS,
              payload,
            },
            agent,
          ),
        ),
      );
    }
    return out;
  });
}

/**
 * Drives every point with IN_FLIGHT lanes over its request list: the node's request path with
 * `keeper` as the budget step. Returns throughput and per-decision latency.
 */
export async function drive(
  stewards: readonly Actor[],
  bodies: Uint8Array[][],
  keeper: Keeper,
  trust: TrustRoots,
  inFlight = IN_FLIGHT,
): Promise<ModeResult> {
  const lat: number[] = [];
  let allowed = 0;
  let decisions = 0;
  const t0 = performance.now();
  const byPoint = stewards.map(() => ({ perS: 0, latUs: [] as number[], allowed: 0 }));
  await Promise.all(
    stewards.map(async (steward, p) => {
      const mine = byPoint[p]!;
      const tp = performance.now();
      const ledger = new Ledger();
      const state: DecisionState = { ledger, revoked: new RevocationSet(), trust };
      const list = bodies[p]!;
      let next = 0;
      let seq = 0;
      await Promise.all(
        Array.from({ length: inFlight }, async () => {
          while (next < list.length) {
            const body = list[next++]!;
            const s = performance.now();
            const msg = decodeWireMessage(body);
            if (msg.kind !== 'request') throw new Error('bench: not a request');
            const req = msg.request;
            const dreq: DecisionRequest = { frame: req.frame, chain: req.chain, caller: req.caller, cost: req.cost, nowS: req.now };
            let d = verifyWireRequestSignature(req)
              ? decide(dreq, state)
              : denied(dreq, state, { reason: DenyReasons.BAD_SIGNATURE, why: 'bad caller signature' });
            if (d.verdict === 'allow' && !(await keeper(p, req.cost.uj))) {
              d = denied(dreq, state, { reason: DenyReasons.BUDGET_EXCEEDED, why: 'shared budget' });
            }
            if (d.verdict === 'allow') {
              ledger.debit(d.chainIds, req.cost.uj);
              allowed++;
              mine.allowed++;
            }
            sealReceipt(receiptCoreFor(dreq, d, { steward: steward.did, seq: seq++ }), steward);
            decisions++;
            const us = (performance.now() - s) * 1000;
            lat.push(us);
            mine.latUs.push(us);
            // Let the event loop run settlements and I/O between decisions of one lane.
            if ((decisions & 7) === 0) await new Promise((r) => setImmediate(r));
          }
        }),
      );
      mine.perS = (list.length * 1000) / (performance.now() - tp);
    }),
  );
  const elapsed = performance.now() - t0;
  return { decisions, allowed, perS: (decisions * 1000) / elapsed, latUs: lat, byPoint };
}

/** Rounds of one mode: the median round's throughput, every round's latencies. */
function merge(rs: readonly ModeResult[]): ModeResult {
  const byRate = [...rs].sort((a, b) => a.perS - b.perS);
  const mid = byRate[Math.floor(byRate.length / 2)]!;
  return { decisions: mid.decisions, allowed: mid.allowed, perS: mid.perS, latUs: rs.flatMap((r) => r.latUs) };
}

function modeFigures(mode: Mode, r: ModeResult, goal?: { redis?: ModeResult; kv?: ModeResult }): Figure[] {
  const p99 = percentile(r.latUs, 99);
  const figs: Figure[] = [];
  const tp: Figure = {
    name: `${mode}: decisions/s (3 points, ${IN_FLIGHT} in flight each, median round)`,
    value: sig(r.perS),
    unit: 'ops/s',
  };
  if (goal?.redis) {
    const ok = r.perS >= goal.redis.perS && p99 < percentile(goal.redis.latUs, 99) && (goal.kv ? r.perS >= 5 * goal.kv.perS : true);
    figs.push({
      ...tp,
      floor: sig(goal.redis.perS),
      ratio: sig(r.perS / goal.redis.perS, 3),
      goal: '≥ redis ops/s, lower p99, ≥ 5× kv',
      met: ok,
    });
  } else figs.push(tp);
  figs.push(
    { name: `${mode}: decision latency p50`, value: sig(percentile(r.latUs, 50)), unit: 'µs' },
    { name: `${mode}: decision latency p99`, value: sig(p99), unit: 'µs' },
  );
  return figs;
}

/** Everything the modes share: keys (drawn from the seeded rng in a fixed order), the root grant, a run tag. */
interface Setup {
  readonly rng: (n: number) => Uint8Array;
  readonly agent: Actor;
  readonly stewards: Actor[];
  readonly trust: TrustRoots;
  readonly nowS: number;
  /** Decisions per point per round. */
  readonly perPoint: number;
  /** The root grant's budget (µJ): large enough never to run out. */
  readonly bigBudget: bigint;
  readonly root: SignedGrant;
  /** A fresh root grant from the same issuer to the same agent, with `budget` µJ. */
  readonly mkRoot: (budget: bigint) => SignedGrant;
  readonly tag: string;
}

/** Draws the issuer, agent and stewards from `bench/cluster/<seed>` and signs the root grant. */
function setup(seed: SuiteOptions['seed']): Setup {
  const rng = seededRng(`bench/cluster/${seed}`);
  const issuer = actorFromSeed(rng(32));
  const agent = actorFromSeed(rng(32));
  const stewards = Array.from({ length: POINTS }, () => actorFromSeed(rng(32)));
  const resource = contentId({ jcp_resource: 'bench-cluster' });
  const trust = new TrustRoots({ [resource]: [issuer.did] });
  const nowS = Math.floor(Date.now() / 1000);
  const perPoint = 1_500;
  const bigBudget = COST * BigInt(perPoint * POINTS * 10);
  const mkRoot = (budget: bigint) =>
    signGrant(
      { issuer: issuer.did, subject: agent.did, capability: { resource, actions: ['call'] }, budget_uj: budget, expiry: 0, nonce: rng(16) },
      issuer,
    );
  const root = mkRoot(bigBudget);
  return { rng, agent, stewards, trust, nowS, perPoint, bigBudget, root, mkRoot, tag: randomBytes(4).toString('hex') };
}

/**
 * Mode (c), Redis: a keeper that runs one atomic Lua script per decision on key `jcp:bench:<tag>`
 * (INCRBY the cost in µJ, undo and refuse past `budget` µJ). The caller deletes the key and quits.
 */
async function redisMode(tag: string, budget: bigint): Promise<{ redis: Redis; key: string; keeper: Keeper }> {
  const redis = new Redis({ ...REDIS, lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  const key = `jcp:bench:${tag}`;
  const script = `local v = redis.call('INCRBY', KEYS[1], ARGV[1])
if v > tonumber(ARGV[2]) then redis.call('DECRBY', KEYS[1], ARGV[1]) return 0 end
return 1`;
  const sha = (await redis.script('LOAD', script)) as string;
  const keeper: Keeper = async (_p, cost) => (await redis.evalsha(sha, 1, key, cost.toString(), budget.toString())) === 1;
  return { redis, key, keeper };
}

/**
 * Mode (a), channel: one {@link ChannelPoint} per steward on grant `id` with a `windowUj` window,
 * settled once, then every 100 ms in the background until `stop()`; the keeper reserves and
 * commits against `budget` (µJ).
 */
async function channelMode(
  stewards: readonly Actor[],
  id: string,
  windowUj: bigint,
  budget: bigint,
  bus: JetStreamBus,
): Promise<{ points: ChannelPoint[]; keeper: Keeper; stop: () => void }> {
  const points = stewards.map((self) => new ChannelPoint({ grantId: id, windowUj, self, bus }));
  await Promise.all(points.map((p) => p.settle()));
  const timers = points.map((p) => setInterval(() => void p.settle(), 100));
  const keeper: Keeper = (p, cost) => {
    const pt = points[p]!;
    const r = pt.tryReserve(cost, budget);
    if (r.ok) pt.commit(cost);
    return r.ok;
  };
  return {
    points,
    keeper,
    stop: () => {
      for (const t of timers) clearInterval(t);
    },
  };
}

/** The suite. */
export async function run(opts: SuiteOptions): Promise<Figure[]> {
  const s = setup(opts.seed);
  const { agent, stewards, trust, nowS, perPoint, bigBudget, root, tag } = s;
  const results = new Map<Mode, ModeResult>();

  // (d) JetStream KV compare-and-set: slow (consensus per spend), so one short round.
  const kvBus = await JetStreamBus.connect(NATS, { names: channelNames(`bench${tag}`) });
  results.set(
    'kv',
    await driveKv(kvBus, tag, bigBudget, (kvKeeper) =>
      drive(stewards, requests(agent, [[root], [root], [root]], 300, `${tag}kv`, nowS), kvKeeper, trust),
    ),
  );

  // (c) Redis: one atomic Lua script per decision.
  const redis = await redisMode(tag, bigBudget);

  // (b) shards: one shard per point, local only.
  const shards = mintShardSet(
    [root],
    agent,
    [0, 1, 2].map((i) => ({ name: `p${i}`, percent: 33.33 })),
    { subject: agent.did, rng: s.rng },
  );
  if (!shards.ok) throw new Error(shards.error.why);
  const shardChains = shards.value.map((sh) => [root, sh.grant]);

  // (a) channel: every point settles over JetStream in the background, all along.
  const window = COST * 200n;
  const chBus = await JetStreamBus.connect(NATS, { names: channelNames(`bench${tag}`) });
  const ch = await channelMode(stewards, grantId(root.grant), window, bigBudget, chBus);

  // Redis, shards and channel in interleaved rounds, so load from elsewhere hits all three alike.
  const rounds: Record<'redis' | 'shards' | 'channel', ModeResult[]> = { redis: [], shards: [], channel: [] };
  for (let round = 0; round < ROUNDS; round++) {
    rounds.redis.push(
      await drive(stewards, requests(agent, [[root], [root], [root]], perPoint, `${tag}r${round}`, nowS), redis.keeper, trust),
    );
    rounds.shards.push(await drive(stewards, requests(agent, shardChains, perPoint, `${tag}s${round}`, nowS), () => true, trust));
    rounds.channel.push(
      await drive(stewards, requests(agent, [[root], [root], [root]], perPoint, `${tag}c${round}`, nowS), ch.keeper, trust),
    );
  }
  for (const [mode, rs] of Object.entries(rounds) as [Mode, ModeResult[]][]) results.set(mode, merge(rs));
  ch.stop();
  await redis.redis.del(redis.key);
  const settleLat = ch.points.flatMap((p) => [...p.latencies()]);

  const overdraft = await overdraftPhase(s, window, chBus);
  await chBus.deleteStreams();
  await chBus.close();
  await kvBus.deleteStreams();
  await kvBus.close();
  await redis.redis.quit();

  return clusterFigures(results, settleLat, overdraft);
}

/**
 * The overdraft phase: a fresh root grant of 1,500 decisions' cost (µJ), exhausted under load by
 * 1,000 requests per point while the channel points settle every 100 ms. Returns the budget, the
 * window, what was spent and the §9 overdraft bound, all in µJ.
 */
async function overdraftPhase(
  s: Setup,
  window: bigint,
  bus: JetStreamBus,
): Promise<{ smallBudget: bigint; window: bigint; spent: bigint; bound: bigint }> {
  const smallBudget = COST * 1_500n;
  const small = s.mkRoot(smallBudget);
  const ch = await channelMode(s.stewards, grantId(small.grant), window, smallBudget, bus);
  const over = await drive(s.stewards, requests(s.agent, [[small], [small], [small]], 1_000, `${s.tag}over`, s.nowS), ch.keeper, s.trust);
  ch.stop();
  await sleep(50);
  const spent = BigInt(over.allowed) * COST;
  const bound = overdraftBound(ch.points.map(() => window));
  return { smallBudget, window, spent, bound };
}

/**
 * Mode (d), JetStream KV compare-and-set: creates bucket `jcp_bench_<tag>` holding the spend
 * (µJ), runs `go` with a keeper that allows a spend while the total stays ≤ `budget` (µJ), and
 * destroys the bucket after a successful run.
 */
async function driveKv(kvBus: JetStreamBus, tag: string, budget: bigint, go: (keeper: Keeper) => Promise<ModeResult>): Promise<ModeResult> {
  const kvm = new Kvm(kvBus.connection!);
  const kv = await kvm.create(`jcp_bench_${tag}`, { history: 1 });
  await kv.put('spent', '0');
  const kvKeeper: Keeper = async (_p, cost) => {
    for (;;) {
      const e = await kv.get('spent');
      const cur = BigInt(e?.string() ?? '0');
      if (cur + cost > budget) return false;
      try {
        await kv.update('spent', String(cur + cost), e?.revision ?? 0);
        return true;
      } catch {
        // another point won the compare-and-set: read again
      }
    }
  };
  const result = await go(kvKeeper);
  await kv.destroy().catch(() => false);
  return result;
}

/**
 * The suite's figures: each mode's throughput and latency (channel and shards as ratios to redis
 * and kv), the channel's settlement latency (ms), and the largest overdraft seen in the overdraft
 * phase (µJ, budget `smallBudget`, window `window`) against its bound Σ W − min W.
 */
function clusterFigures(
  results: ReadonlyMap<Mode, ModeResult>,
  settleLat: readonly number[],
  { smallBudget, window, spent, bound }: { smallBudget: bigint; window: bigint; spent: bigint; bound: bigint },
): Figure[] {
  const figures: Figure[] = [];
  const redisR = results.get('redis')!;
  const kvR = results.get('kv')!;
  figures.push(...modeFigures('channel', results.get('channel')!, { redis: redisR, kv: kvR }));
  figures.push(
    { name: 'channel: settlement latency p50', value: sig(percentile(settleLat, 50)), unit: 'ms' },
    { name: 'channel: settlement latency p99', value: sig(percentile(settleLat, 99)), unit: 'ms' },
  );
  figures.push(...modeFigures('shards', results.get('shards')!, { redis: redisR, kv: kvR }));
  figures.push(...modeFigures('redis', redisR));
  figures.push(...modeFigures('kv', kvR));
  figures.push({
    name: `channel: largest overdraft seen (budget ${smallBudget} µJ, W ${window} µJ × 3)`,
    value: Number(spent > smallBudget ? spent - smallBudget : 0n),
    unit: 'µJ',
    floor: Number(bound),
    ratio: sig(Number(spent > smallBudget ? spent - smallBudget : 0n) / Number(bound), 3),
    goal: '≤ bound (Σ W − min W)',
    met: spent <= smallBudget + bound,
  });
  return figures;
}
