/**
 * Revocation reach time (spec §4.3 across regions; docs/cluster.md "Revocation reach time"): how
 * long a revocation sent to one node takes to be in force on every node, measured on the nodes'
 * own clocks (all nodes of a local cluster share the machine's clock).
 *
 * One sample: read every target's count of revocations taken from the stream, note the send time
 * `t0` (unix ms), send one revocation, then wait until every target's count has grown; each
 * target's reach is its own record of when it took the revocation (`lastTakenAtMs`, set by the
 * node's revocation feed the moment its store took it) minus `t0`. A sample's "every node" reach
 * is the largest of its targets'. Samples run one after another, so a count that grows belongs to
 * this sample's revocation — run nothing else that revokes meanwhile. The polling interval only
 * bounds how long the measurement takes, not its resolution: the time comes from the node.
 *
 * Targets: {@link metricsReachTarget} reads a node process's `/metrics`
 * (`jcp_revocations_taken_total`, `jcp_revocation_last_taken_timestamp_seconds`), so it works on
 * any launcher that gives each node a metrics port (testkit/cluster.ts, testkit/regions.ts);
 * {@link feedReachTarget} reads an in-process node's revocation feed.
 */
import type { RevocationStreamFeed } from '../channel/index.ts';

/** One node whose revocation arrivals are measured. */
export interface ReachTarget {
  readonly name: string;
  /** The node's region (config `region`), for per-region figures. */
  readonly region: string;
  /** Revocations this node has taken from the stream so far. */
  takenCount(): Promise<number>;
  /** Unix ms when it last took one (undefined: never). */
  lastTakenAtMs(): Promise<number | undefined>;
}

/** p50 / p99 / max of a set of durations (ms). */
export interface ReachStats {
  readonly samples: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

/** What {@link measureRevocationReach} found. */
export interface ReachReport {
  /** Time until the revocation was in force on EVERY target (the largest per sample). */
  readonly everyNode: ReachStats;
  /** Per region, the time until every target of that region had it. */
  readonly byRegion: Readonly<Record<string, ReachStats>>;
  /** Per target. */
  readonly byNode: Readonly<Record<string, ReachStats>>;
  /** Every sample: per-target reach (ms). */
  readonly rawMs: ReadonlyArray<Readonly<Record<string, number>>>;
}

/** Options of {@link measureRevocationReach}. Times in milliseconds. */
export interface ReachOptions {
  readonly targets: readonly ReachTarget[];
  /**
   * Sends one fresh revocation to one node (e.g. `JcpClient.revoke` of a newly minted grant) and
   * resolves once the node acknowledged it. Called once per sample.
   */
  readonly revoke: (sample: number) => Promise<void>;
  /** Samples (default 20). */
  readonly samples?: number;
  /** How long one sample may take before the measurement fails (default 30,000). */
  readonly timeoutMs?: number;
  /** Polling interval of the targets' counts (default 20). */
  readonly pollMs?: number;
  /** Unix ms (default `Date.now`). */
  readonly clockMs?: () => number;
}

/** The `q` quantile (0..1) of `xs` by the nearest-rank method; NaN for none. */
export function quantileMs(xs: readonly number[], q: number): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]!;
}

function stats(xs: readonly number[]): ReachStats {
  return { samples: xs.length, p50Ms: quantileMs(xs, 0.5), p99Ms: quantileMs(xs, 0.99), maxMs: xs.length ? Math.max(...xs) : Number.NaN };
}

/**
 * Measures revocation reach time over `samples` revocations, one at a time (see the module docs).
 * @throws Error naming the targets a revocation did not reach within `timeoutMs`.
 */
export async function measureRevocationReach(o: ReachOptions): Promise<ReachReport> {
  const samples = o.samples ?? 20;
  const timeoutMs = o.timeoutMs ?? 30_000;
  const pollMs = o.pollMs ?? 20;
  const clock = o.clockMs ?? Date.now;
  if (o.targets.length === 0) throw new RangeError('measureRevocationReach: no targets');
  const raw: Array<Record<string, number>> = [];
  for (let i = 0; i < samples; i++) {
    const before = await Promise.all(o.targets.map((t) => t.takenCount()));
    const t0 = clock();
    await o.revoke(i);
    const reach: Record<string, number> = {};
    const end = t0 + timeoutMs;
    let pending = o.targets.map((t, j) => ({ t, base: before[j]! }));
    while (pending.length > 0) {
      const next: typeof pending = [];
      for (const p of pending) {
        if ((await p.t.takenCount()) > p.base) {
          const at = await p.t.lastTakenAtMs();
          if (at === undefined) throw new Error(`${p.t.name}: took a revocation but reports no time for it`);
          reach[p.t.name] = Math.max(0, at - t0);
        } else next.push(p);
      }
      pending = next;
      if (pending.length === 0) break;
      if (clock() > end) throw new Error(`revocation ${i} did not reach ${pending.map((p) => p.t.name).join(', ')} within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, pollMs));
    }
    raw.push(reach);
  }
  const byNode: Record<string, ReachStats> = {};
  for (const t of o.targets) byNode[t.name] = stats(raw.map((r) => r[t.name]!));
  const regions = [...new Set(o.targets.map((t) => t.region))];
  const byRegion: Record<string, ReachStats> = {};
  for (const region of regions) {
    const names = o.targets.filter((t) => t.region === region).map((t) => t.name);
    byRegion[region] = stats(raw.map((r) => Math.max(...names.map((n) => r[n]!))));
  }
  return { everyNode: stats(raw.map((r) => Math.max(...Object.values(r)))), byRegion, byNode, rawMs: raw };
}

/** A target read from an in-process node's revocation feed (node/cluster.ts `ClusterHooks.feed`). */
export function feedReachTarget(name: string, region: string, feed: Pick<RevocationStreamFeed, 'counts' | 'lastTakenAtMs'>): ReachTarget {
  return {
    name,
    region,
    takenCount: async () => feed.counts.taken,
    lastTakenAtMs: async () => feed.lastTakenAtMs,
  };
}

/** The value of an unlabelled-or-any-label sample `name` in a Prometheus text exposition (NaN when absent). */
function metricValue(text: string, name: string): number {
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (m && m[1] === name) return Number(m[3]);
  }
  return Number.NaN;
}

/**
 * A target read from a node process's `/metrics` at `http://host:port/metrics`: the count
 * `jcp_revocations_taken_total` and the time `jcp_revocation_last_taken_timestamp_seconds`.
 * @throws (from its reads) Error when the node does not answer within 2 s or lacks the metrics (not clustered).
 */
export function metricsReachTarget(name: string, region: string, metricsPort: number, host = '127.0.0.1'): ReachTarget {
  const read = async (): Promise<string> => {
    const r = await fetch(`http://${host}:${metricsPort}/metrics`, { signal: AbortSignal.timeout(2_000) });
    if (!r.ok) throw new Error(`${name}: /metrics answered ${r.status}`);
    return await r.text();
  };
  return {
    name,
    region,
    takenCount: async () => {
      const v = metricValue(await read(), 'jcp_revocations_taken_total');
      if (Number.isNaN(v)) throw new Error(`${name}: no jcp_revocations_taken_total on /metrics (is the node clustered?)`);
      return v;
    },
    lastTakenAtMs: async () => {
      const v = metricValue(await read(), 'jcp_revocation_last_taken_timestamp_seconds');
      return Number.isFinite(v) && v > 0 ? v * 1000 : undefined;
    },
  };
}
