/**
 * The node's cluster hooks (docs/cluster.md; docs/design.md "Budget channels: the bound we prove", §4.3, §4.5): what a node started
 * with `nats` adds through the seams of node/hooks.ts —
 *
 * - a budget policy: the budget channels this node serves as a point (channel/), consulted after
 *   the pure decision allowed and before the debit;
 * - a revocation feed: the revocation stream, read from its first message on every boot, each
 *   revocation submitted to the node's revocation store; once one is in force the node publishes
 *   its close record of the revoked grant (shards/), which is what rebalancing reads;
 * - shard binding (§4.5 "each point then enforces only its own shard"): the shard assignment
 *   stream, read from its first message on every boot; a chain through a child of a sharded
 *   parent that is not assigned to this node is refused `budget-exceeded` (shards/binding.ts), and
 *   the node acknowledges each assignment once it is in force, which is what `jcp shards mint`
 *   waits for before it hands out chain files.
 *
 * The hooks are built before the node opens its log and attached once the steward and the
 * replayed ledger exist ({@link ClusterHooks.attach}); until then every chain through a channel
 * grant is refused (the restart rule), and so is every chain of more than one link until the
 * assignment stream has been read once (a shard cannot be told from another child before).
 *
 * Config: the `cluster` section of the node config (docs/cluster.md), read by
 * {@link readClusterConfig}:
 * `{"subject_root": "jcp", "replicas": 1, "stream_cluster": "a", "settle_interval_ms": 250, "revocation_catch_up_ms": 5000,
 *   "nats_monitor_url": "http://127.0.0.1:8222",
 *   "channels": [{"grant_id": "<id>", "window_uj": 5000, "points": ["did:key:…"]}]}`.
 */
import {
  type Actor,
  contentIdOfBytes,
  type Decision,
  type DecisionRequest,
  type Deny,
  DenyReasons,
  type Did,
  encode,
  isContentId,
  isDid,
  type LedgerView,
  type SignedRevocation,
  signedRevocationToCbor,
} from '../core/index.ts';
import {
  channelNames,
  Channels,
  type ChannelSpec,
  type ChannelStats,
  type ChannelSteering,
  type FreshnessView,
  JetStreamBus,
  type Logger,
  REVOCATION_STALE,
  type RevocationSinkLike,
  RevocationStreamFeed,
} from '../channel/index.ts';
import {
  type AssignmentFollow,
  decodeShardAssignment,
  ShardAssignmentStream,
  ShardBindings,
  ShardCloser,
  signShardAck,
} from '../shards/index.ts';
import { NodeFault, NodeFaultCodes } from './codes.ts';
import type { Logger as PinoLogger } from 'pino';
import type { NodeMetrics } from './metrics.ts';
import { Counter, Gauge, Histogram, type Registry } from './prom.ts';
import type { TileServer } from './tlogtiles.ts';
import { TlogStream, TlogWitnessing, type WitnessedCheckpoint } from './witnessing.ts';

/** The `cluster` section of a node config, with defaults applied. */
export interface ClusterConfig {
  /** Subject root and stream prefix (default `jcp`: streams JCP_STATEMENTS, JCP_REVOCATIONS). */
  readonly subjectRoot: string;
  /** Stream replicas: 1 for a single NATS server, 3 for a 3-server cluster. */
  readonly replicas: number;
  /**
   * The NATS cluster (region) the node creates a missing stream in, in a supercluster
   * (docs/regions.md "Where the streams live": every stream in the home region). Absent: no
   * placement (the cluster the node's NATS server belongs to).
   */
  readonly streamCluster?: string;
  /** Settle every channel at least this often (ms). */
  readonly settleIntervalMs: number;
  /** How long boot waits for the revocation stream's backlog (ms). */
  readonly revocationCatchUpMs: number;
  /** The channel grants this node serves as a point. */
  readonly channels: readonly ChannelSpec[];
  /** Publish a checkpoint of the receipt log at least this often while it grows (ms; docs/tlog.md). */
  readonly checkpointEveryMs: number;
  /** …or once this many receipts were added since the last one. */
  readonly checkpointEveryReceipts: number;
  /**
   * `nats_monitor_url` (optional): the HTTP monitoring address of this node's nats-server
   * (`http://127.0.0.1:8222`); when set, `/metrics` reads its `/gatewayz` at each scrape and
   * reports `jcp_nats_gateway_connected{region,gateway,direction}`.
   */
  readonly natsMonitorUrl?: string;
}

function bad(where: string, what: string): never {
  throw new NodeFault(NodeFaultCodes.CONFIG_INVALID, `config: ${where}: ${what}`, where);
}

function intIn(v: unknown, where: string, min: number, max: number, dflt: number): number {
  if (v === undefined) return dflt;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) bad(where, `expected an integer in [${min}, ${max}]`);
  return v;
}

/**
 * Reads the `cluster` section (absent = defaults, no channels).
 * @throws NodeFault `config-invalid` naming the field.
 */
export function readClusterConfig(v: unknown): ClusterConfig {
  const o = (v ?? {}) as Record<string, unknown>;
  if (typeof o !== 'object' || Array.isArray(o)) bad('cluster', 'expected an object');
  const allowed = [
    'subject_root',
    'replicas',
    'stream_cluster',
    'settle_interval_ms',
    'revocation_catch_up_ms',
    'channels',
    'checkpoint_every_ms',
    'checkpoint_every_receipts',
    'nats_monitor_url',
  ];
  for (const k of Object.keys(o)) if (!allowed.includes(k)) bad(`cluster.${k}`, 'unknown field');
  const root = o['subject_root'] ?? 'jcp';
  if (typeof root !== 'string') bad('cluster.subject_root', 'expected text');
  try {
    channelNames(root);
  } catch (e) {
    bad('cluster.subject_root', (e as Error).message);
  }
  const sc = o['stream_cluster'];
  if (sc !== undefined && (typeof sc !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(sc)))
    bad('cluster.stream_cluster', 'expected a NATS cluster name: 1-64 of [A-Za-z0-9_-]');
  const rawChannels = o['channels'] ?? [];
  if (!Array.isArray(rawChannels)) bad('cluster.channels', 'expected an array');
  const channels = rawChannels.map((c: unknown, i: number): ChannelSpec => {
    const where = `cluster.channels[${i}]`;
    const co = c as Record<string, unknown>;
    if (typeof co !== 'object' || co === null) bad(where, 'expected an object');
    for (const k of Object.keys(co)) if (!['grant_id', 'window_uj', 'points'].includes(k)) bad(`${where}.${k}`, 'unknown field');
    if (!isContentId(co['grant_id'])) bad(`${where}.grant_id`, 'expected a content id');
    const w = co['window_uj'];
    if (
      !(
        (typeof w === 'number' && Number.isSafeInteger(w) && w >= 0) ||
        (typeof w === 'string' && /^\d{1,20}$/.test(w) && BigInt(w) < 1n << 64n)
      )
    ) {
      bad(`${where}.window_uj`, 'expected a non-negative integer (µJ) below 2^64 (energy amounts are uint64)');
    }
    let points: Did[] | undefined;
    if (co['points'] !== undefined) {
      if (!Array.isArray(co['points'])) bad(`${where}.points`, 'expected an array of did:key');
      points = co['points'].map((d: unknown, j: number) => {
        if (!isDid(d)) bad(`${where}.points[${j}]`, 'not a valid did:key');
        return d as Did;
      });
    }
    return { grantId: co['grant_id'] as string, windowUj: BigInt(w as number | string), ...(points ? { points } : {}) };
  });
  return {
    subjectRoot: root,
    replicas: intIn(o['replicas'], 'cluster.replicas', 1, 5, 1),
    ...(sc !== undefined ? { streamCluster: sc as string } : {}),
    settleIntervalMs: intIn(o['settle_interval_ms'], 'cluster.settle_interval_ms', 10, 600_000, 250),
    revocationCatchUpMs: intIn(o['revocation_catch_up_ms'], 'cluster.revocation_catch_up_ms', 0, 600_000, 5_000),
    channels,
    checkpointEveryMs: intIn(o['checkpoint_every_ms'], 'cluster.checkpoint_every_ms', 50, 3_600_000, 5_000),
    checkpointEveryReceipts: intIn(o['checkpoint_every_receipts'], 'cluster.checkpoint_every_receipts', 1, 1_000_000_000, 1_000),
    ...(o['nats_monitor_url'] !== undefined ? { natsMonitorUrl: monitorUrl(o['nats_monitor_url']) } : {}),
  };
}

function monitorUrl(v: unknown): string {
  if (typeof v !== 'string' || !/^https?:\/\/[^\s/]+\/?$/.test(v))
    bad('cluster.nats_monitor_url', 'expected http://host:port of the nats-server monitoring port');
  return v.replace(/\/$/, '');
}

/** One gateway as a nats-server's `/gatewayz` lists it: name, direction, connected. */
export interface GatewayState {
  readonly gateway: string;
  readonly direction: 'outbound' | 'inbound';
  readonly connected: boolean;
}

/**
 * Reads `<monitor>/gatewayz` (nats-server monitoring): every outbound and inbound gateway and
 * whether it has a connection. Empty when the server has no gateways.
 * @throws Error when the monitor does not answer within `timeoutMs` (milliseconds).
 */
export async function readGateways(monitor: string, timeoutMs = 1_000): Promise<GatewayState[]> {
  const r = await fetch(`${monitor}/gatewayz`, { signal: AbortSignal.timeout(timeoutMs) });
  if (!r.ok) throw new Error(`${monitor}/gatewayz answered ${r.status}`);
  const g = (await r.json()) as {
    outbound_gateways?: Record<string, { connection?: unknown }>;
    inbound_gateways?: Record<string, unknown[]>;
  };
  const out: GatewayState[] = [];
  for (const [name, v] of Object.entries(g.outbound_gateways ?? {}))
    out.push({ gateway: name, direction: 'outbound', connected: v?.connection != null });
  for (const [name, v] of Object.entries(g.inbound_gateways ?? {}))
    out.push({ gateway: name, direction: 'inbound', connected: Array.isArray(v) && v.length > 0 });
  return out;
}

type AllowDecision = Extract<Decision, { verdict: 'allow' }>;

/** Node-level settings of the cluster hooks that live outside the `cluster` section (node/config.ts). */
export interface ClusterHookOpts {
  /** `revocation_staleness_s` (seconds; 0 = off; default 0 here, 30 from a node config). */
  readonly revocationStalenessS?: number;
  /** `region`: the label of this node's cluster metrics (default `local`). */
  readonly region?: string;
  /** `nats_tls`: TLS of the NATS client connection (docs/tls.md). */
  readonly natsTls?:
    | { readonly caFile?: string | undefined; readonly certFile?: string | undefined; readonly keyFile?: string | undefined }
    | undefined;
  /** Unix milliseconds (default `Date.now`). */
  readonly clockMs?: () => number;
}

/** A readiness problem as `/healthz` lists it: a stable code and what it means now. */
export interface NotReady {
  readonly code: string;
  readonly why: string;
}

/** The hooks a clustered node passes to `startNode`, and their lifecycle. */
export class ClusterHooks {
  readonly bus: JetStreamBus;
  readonly channels: Channels;
  readonly feed: RevocationStreamFeed;
  readonly config: ClusterConfig;
  /** The shard assignments in force here and the binding check (shards/binding.ts). */
  readonly shards = new ShardBindings();
  readonly #log: Logger;
  #closer: ShardCloser | undefined;
  #steward: Actor | undefined;
  #assignments: ShardAssignmentStream | undefined;
  #assignFollow: AssignmentFollow | undefined;
  /** The assignment follow, started with the hooks so it is usually caught up before the node listens. */
  readonly #assignFollowing: Promise<void>;
  #stopped = false;
  #tlog: TlogStream | undefined;
  #witnessing: TlogWitnessing | undefined;
  /** Revocations taken before {@link attach} (boot catch-up): closed once the ledger is known. */
  readonly #taken: SignedRevocation[] = [];
  /** This node's region label (config `region`). */
  readonly region: string;
  readonly #clockMs: () => number;
  /** Allows refused because the revocations could not be confirmed (`revocation-stale`). */
  staleDenies = 0;

  /** Builds the hooks and starts connecting to NATS in the background. */
  constructor(natsUrl: string, config: ClusterConfig, log: Logger, opts: ClusterHookOpts = {}) {
    this.config = config;
    this.#log = log;
    this.region = opts.region ?? 'local';
    this.#clockMs = opts.clockMs ?? Date.now;
    const tls = opts.natsTls;
    this.bus = JetStreamBus.start(natsUrl, {
      names: channelNames(config.subjectRoot),
      replicas: config.replicas,
      name: 'jcp-node',
      ...(tls !== undefined
        ? {
            tls: {
              ...(tls.caFile !== undefined ? { caFile: tls.caFile } : {}),
              ...(tls.certFile !== undefined ? { certFile: tls.certFile } : {}),
              ...(tls.keyFile !== undefined ? { keyFile: tls.keyFile } : {}),
            },
          }
        : {}),
      ...(config.streamCluster !== undefined ? { placement: { cluster: config.streamCluster } } : {}),
    });
    this.bus.onEvent((e) => {
      if (e.type === 'slow-consumer' || e.type === 'consumer-reset')
        log.warn({ nats_event: e.type, detail: e.detail }, 'NATS: consumer trouble');
      else if (e.type === 'disconnect' || e.type === 'reconnect') log.info({ nats_event: e.type, detail: e.detail }, `NATS ${e.type}`);
    });
    this.channels = new Channels({ bus: this.bus.statements, specs: config.channels, settleIntervalMs: config.settleIntervalMs, log });
    this.feed = new RevocationStreamFeed({
      bus: this.bus.revocations,
      log,
      catchUpMs: config.revocationCatchUpMs,
      stalenessS: opts.revocationStalenessS ?? 0,
      clockMs: this.#clockMs,
      onTaken: (sr) => {
        if (this.#closer) void this.#closer.closed(sr);
        else this.#taken.push(sr);
      },
    });
    this.#assignFollowing = this.#followAssignments();
  }

  /** Everything `startNode` takes from the hooks: budget policy, revocation feed, health source. */
  get nodeOptions(): {
    budgetPolicy: ClusterHooks['budgetPolicy'];
    revocationFeeds: [ClusterHooks['revocationFeed']];
    health: [{ name: string; notReady(): NotReady[]; healthDetail(): Record<string, unknown> }];
  } {
    return {
      budgetPolicy: this.budgetPolicy,
      revocationFeeds: [this.revocationFeed],
      health: [{ name: 'cluster', notReady: () => this.notReady(), healthDetail: () => this.healthDetail() }],
    };
  }

  /** The budget policy for `startNode` (node/hooks.ts `BudgetPolicy`). */
  get budgetPolicy(): {
    admit(req: DecisionRequest, d: AllowDecision): Deny | undefined;
    committed(req: DecisionRequest, d: AllowDecision): void;
  } {
    return {
      admit: (req, d) =>
        this.staleDeny() ?? this.shards.check(req.chain, d.chainIds, this.#steward?.did, req.cost.uj) ?? this.channels.admit(req, d),
      committed: (req, d) => this.channels.committed(req, d),
    };
  }

  /**
   * The revocation staleness rule (spec §4.3 across a partition; channel/freshness.ts): when this
   * node cannot confirm it has seen the latest revocations for longer than
   * `revocation_staleness_s`, every allow becomes `Deny(revoked)` — nothing is debited, and the
   * deny is sealed as a receipt like any other. §7's reasons are a closed list, and the check that
   * cannot be passed is check 2 ("grant revoked"): the node cannot show the grant is NOT revoked,
   * so it refuses on that check. The wire and the receipt carry only the spec's reason; the stable
   * detail code `revocation-stale` is in the deny's `why` (logged), in `/healthz` (`not_ready`)
   * and in `/metrics` (`jcp_revocation_stale_denies_total`, `jcp_revocation_stale`).
   * Returns undefined while fresh (or when the rule is off).
   */
  staleDeny(): Deny | undefined {
    const f = this.feed.freshness();
    if (!f.stale) return undefined;
    this.staleDenies++;
    return {
      reason: DenyReasons.REVOKED,
      why: `${REVOCATION_STALE}: revocations not confirmed for ${Number.isFinite(f.stalenessS) ? `${f.stalenessS.toFixed(1)} s` : 'ever'} (revocation_staleness_s ${f.limitS})`,
    };
  }

  /** Whether the node can confirm it has seen the latest revocations (channel/freshness.ts). */
  freshness(): FreshnessView {
    return this.feed.freshness();
  }

  /**
   * Readiness problems of the cluster side, for `/healthz` (`ready`, `not_ready`): today
   * `revocation-stale` when the staleness rule refuses allows. Empty = ready.
   */
  notReady(): NotReady[] {
    const f = this.feed.freshness();
    if (!f.stale) return [];
    const since = Number.isFinite(f.stalenessS) ? `for ${f.stalenessS.toFixed(1)} s` : 'since start';
    return [
      {
        code: REVOCATION_STALE,
        why: `the revocation stream could not be confirmed ${since} (limit ${f.limitS} s)${f.lastProblem ? `: ${f.lastProblem}` : ''}; allows are refused`,
      },
    ];
  }

  /** The cluster side of `/healthz`: region, NATS, revocation stream position and staleness, channels. */
  healthDetail(): Record<string, unknown> {
    const f = this.feed.freshness();
    return {
      region: this.region,
      nats_connected: this.bus.connected,
      revocations: {
        stream_seq: f.streamSeq,
        taken_seq: f.takenSeq,
        staleness_s: Number.isFinite(f.stalenessS) ? Number(f.stalenessS.toFixed(3)) : null,
        limit_s: f.limitS,
        stale: f.stale,
        ...(f.lastProblem ? { last_problem: f.lastProblem } : {}),
      },
      channels: this.stats(),
    };
  }

  /**
   * Registers the cluster metrics in `registry` (Prometheus names, base units: seconds, joules),
   * read at each scrape. Labels: `region` (config `region`), `grant` (channel grant id), `point`
   * (a point's did:key). docs/cluster.md "Metrics" lists them.
   */
  observe(registry: Registry): void {
    this.#observeNats(registry);
    this.#observeRevocations(registry);
    this.#observeChannels(registry);
  }

  /** The NATS metrics of {@link observe}: connection, gateways (from /gatewayz), disconnects, reconnects, retries and failures by operation. */
  #observeNats(registry: Registry): void {
    const region = this.region;
    const hooks = this;
    new Gauge({
      name: 'jcp_nats_connected',
      help: 'Whether this node is connected to NATS with its streams in place (1) or not (0), by region',
      labelNames: ['region'] as const,
      registers: [registry],
      collect() {
        this.set({ region }, hooks.bus.connected ? 1 : 0);
      },
    });
    const monitor = this.config.natsMonitorUrl;
    if (monitor !== undefined) {
      const known = new Set<string>();
      new Gauge({
        name: 'jcp_nats_gateway_connected',
        help: "Whether this node's nats-server has a connection for each gateway (1) or not (0), by region, gateway and direction (from /gatewayz)",
        labelNames: ['region', 'gateway', 'direction'] as const,
        registers: [registry],
        async collect() {
          let seen: GatewayState[];
          try {
            seen = await readGateways(monitor);
          } catch {
            seen = [];
          }
          const now = new Set<string>();
          for (const g of seen) {
            now.add(`${g.gateway}\u0000${g.direction}`);
            this.set({ region, gateway: g.gateway, direction: g.direction }, g.connected ? 1 : 0);
          }
          // A gateway seen before and gone now (or the monitor unreachable) reads 0, not a stale 1.
          for (const k of known) {
            if (now.has(k)) continue;
            const [gateway, direction] = k.split('\u0000') as [string, string];
            this.set({ region, gateway, direction }, 0);
          }
          for (const k of now) known.add(k);
        },
      });
    }
    new Counter({
      name: 'jcp_nats_disconnects_total',
      help: 'NATS disconnects seen by this node, by region',
      labelNames: ['region'] as const,
      registers: [registry],
      collect() {
        this.reset();
        this.inc({ region }, hooks.bus.counts.disconnects);
      },
    });
    new Counter({
      name: 'jcp_nats_reconnects_total',
      help: 'NATS reconnects seen by this node, by region',
      labelNames: ['region'] as const,
      registers: [registry],
      collect() {
        this.reset();
        this.inc({ region }, hooks.bus.counts.reconnects);
      },
    });
    const opCounter = (name: string, help: string, pick: (c: { retries: number; failures: number }) => number, only?: string) =>
      new Counter({
        name,
        help,
        labelNames: ['region', 'op'] as const,
        registers: [registry],
        collect() {
          this.reset();
          for (const [op, c] of hooks.bus.opCounts) if (only === undefined || op === only) this.inc({ region, op }, pick(c));
          if (only !== undefined && !hooks.bus.opCounts.has(only)) this.inc({ region, op: only }, 0);
        },
      });
    opCounter(
      'jcp_statement_publish_retries_total',
      'Retried statement publishes (JetStream), by region',
      (c) => c.retries,
      'publish statement',
    );
    opCounter(
      'jcp_statement_publish_failures_total',
      'Statement publishes that failed within their deadline, by region',
      (c) => c.failures,
      'publish statement',
    );
    opCounter('jcp_nats_request_retries_total', 'Retried JetStream requests, by region and operation', (c) => c.retries);
    opCounter(
      'jcp_nats_request_failures_total',
      'JetStream requests that failed within their deadline, by region and operation',
      (c) => c.failures,
    );
  }

  /** The revocation metrics of {@link observe}: stream and taken seqs, staleness and its limit, stale denies, revocations taken. */
  #observeRevocations(registry: Registry): void {
    const region = this.region;
    const hooks = this;
    new Gauge({
      name: 'jcp_revocation_stream_seq',
      help: 'The revocation stream last sequence as the stream leader last reported it',
      labelNames: ['region'] as const,
      registers: [registry],
      collect() {
        this.set({ region }, hooks.feed.freshness().streamSeq);
      },
    });
    new Gauge({
      name: 'jcp_revocation_taken_seq',
      help: 'The highest revocation stream sequence this node has taken into its revocation store',
      labelNames: ['region'] as const,
      registers: [registry],
      collect() {
        this.set({ region }, hooks.feed.freshness().takenSeq);
      },
    });
    new Gauge({
      name: 'jcp_revocation_staleness_seconds',
      help: 'Seconds since this node last confirmed it had seen the latest revocations (+Inf: never)',
      labelNames: ['region'] as const,
      registers: [registry],
      collect() {
        this.set({ region }, hooks.feed.freshness().stalenessS);
      },
    });
    new Gauge({
      name: 'jcp_revocation_staleness_limit_seconds',
      help: 'revocation_staleness_s (0 = off)',
      labelNames: ['region'] as const,
      registers: [registry],
      collect() {
        this.set({ region }, hooks.feed.freshness().limitS);
      },
    });
    new Gauge({
      name: 'jcp_revocation_stale',
      help: 'Whether allows are refused because the revocations could not be confirmed (1) or not (0)',
      labelNames: ['region'] as const,
      registers: [registry],
      collect() {
        this.set({ region }, hooks.feed.freshness().stale ? 1 : 0);
      },
    });
    new Counter({
      name: 'jcp_revocation_stale_denies_total',
      help: 'Allows refused Deny(revoked) with detail revocation-stale',
      labelNames: ['region'] as const,
      registers: [registry],
      collect() {
        this.reset();
        this.inc({ region }, hooks.staleDenies);
      },
    });
    new Counter({
      name: 'jcp_revocations_taken_total',
      help: 'Revocations taken from the revocation stream into the revocation store',
      labelNames: ['region'] as const,
      registers: [registry],
      collect() {
        this.reset();
        this.inc({ region }, hooks.feed.counts.taken);
      },
    });
    new Gauge({
      name: 'jcp_revocation_last_taken_timestamp_seconds',
      help: 'Unix time (seconds, ms precision) this node last took a revocation from the stream (0: never)',
      labelNames: ['region'] as const,
      registers: [registry],
      collect() {
        this.set({ region }, (hooks.feed.lastTakenAtMs ?? 0) / 1000);
      },
    });
  }

  /** The channel metrics of {@link observe}, by channel grant and point: settlement time and lag, unsettled and settled joules, failures. */
  #observeChannels(registry: Registry): void {
    const region = this.region;
    const hooks = this;
    const channelPoints = () => this.channels.points();
    const seen = new Map<string, number>();
    new Histogram({
      name: 'jcp_channel_settlement_seconds',
      help: 'Time one settlement took (publish own statement, leader read of all), seconds, by channel grant and point',
      labelNames: ['region', 'grant', 'point'] as const,
      buckets: [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5],
      registers: [registry],
      collect() {
        for (const p of channelPoints()) {
          const n = p.counts.settlements;
          const before = seen.get(p.grantId) ?? 0;
          const lat = p.latencies();
          const fresh = Math.min(n - before, lat.length);
          for (const ms of lat.slice(lat.length - fresh)) this.observe({ region, grant: p.grantId, point: p.self.did }, ms / 1000);
          seen.set(p.grantId, n);
        }
      },
    });
    new Gauge({
      name: 'jcp_channel_settlement_lag_seconds',
      help: 'Seconds since this point last completed a settlement (how old its view of the peers is; +Inf: never), by channel grant and point',
      labelNames: ['region', 'grant', 'point'] as const,
      registers: [registry],
      collect() {
        const now = hooks.#clockMs();
        for (const p of channelPoints()) {
          this.set(
            { region, grant: p.grantId, point: p.self.did },
            p.lastSettledAtMs === 0 ? Number.POSITIVE_INFINITY : Math.max(0, (now - p.lastSettledAtMs) / 1000),
          );
        }
      },
    });
    new Gauge({
      name: 'jcp_channel_unsettled_joules',
      help: 'Joules this point spent since its last completed settlement (what its window W bounds), by channel grant and point',
      labelNames: ['region', 'grant', 'point'] as const,
      registers: [registry],
      collect() {
        for (const p of channelPoints()) this.set({ region, grant: p.grantId, point: p.self.did }, Number(p.unsettledUj) / 1e6);
      },
    });
    new Counter({
      name: 'jcp_channel_settled_spend_joules_total',
      help: 'Settled spend of each point of a channel (its latest signed statement, verified), joules, by channel grant and the point that signed it',
      labelNames: ['region', 'grant', 'point'] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const p of channelPoints()) {
          for (const st of p.statements()) this.inc({ region, grant: p.grantId, point: st.body.point }, Number(st.body.spent_uj) / 1e6);
        }
      },
    });
    new Counter({
      name: 'jcp_channel_settle_failures_total',
      help: 'Settlements that failed (publish or leader read), by channel grant and point',
      labelNames: ['region', 'grant', 'point'] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const p of channelPoints()) this.inc({ region, grant: p.grantId, point: p.self.did }, p.counts.settleFailures);
      },
    });
  }

  /**
   * The revocation feed for `startNode` (node/hooks.ts `RevocationFeed`). Its start resolves once
   * both the revocation and the shard assignment backlogs are read (the assignments are followed
   * from construction on), or after `revocation_catch_up_ms`; chains of more than one link stay
   * refused until the assignments are read.
   */
  get revocationFeed(): {
    name: string;
    start(sink: RevocationSinkLike): Promise<void>;
    stop(): Promise<void>;
    publish(sr: SignedRevocation): Promise<void>;
    publishAmendment(steeredId: string, message: Uint8Array): Promise<void>;
  } {
    return {
      name: this.feed.name,
      publish: (sr) => this.publishRevocation(sr),
      publishAmendment: (id, m) => this.publishAmendment(id, m),
      start: async (sink) => {
        await Promise.all([this.feed.start(sink), this.#assignFollowing]);
      },
      stop: async () => {
        await this.#stopAssignments();
        await this.feed.stop();
      },
    };
  }

  /**
   * Publishes a revocation this node accepted over jcp/1 on the cluster's revocation stream,
   * which every node follows (this one too: taking it again is a no-op), so a
   * revocation sent to one node is enforced by all. The message id is the content id of the
   * signed revocation's bytes, so a retried publish is stored once (the stream's duplicate
   * window). Resolves once JetStream acknowledged it.
   * @throws the bus's error when NATS cannot take it within its retry deadline.
   */
  async publishRevocation(sr: SignedRevocation): Promise<void> {
    const bytes = encode(signedRevocationToCbor(sr));
    await this.bus.ready();
    await this.bus.revocations.publishRevocation(sr.body.grant_id, bytes, `rev.${contentIdOfBytes(bytes)}`);
  }

  /**
   * Publishes an amendment this node admitted over jcp/1 (§4.7; docs/steering.md) on the
   * revocation stream, as the det-CBOR `{amend: …}` message, under the steered grant's subject,
   * so every node puts it in force (channel/feed.ts hands it to the node's `amend`). Message id
   * `amd.<content id of the bytes>`: a retried publish is stored once. Resolves once acknowledged.
   * @throws the bus's error when NATS cannot take it within its retry deadline.
   */
  async publishAmendment(steeredId: string, message: Uint8Array): Promise<void> {
    await this.bus.ready();
    await this.bus.revocations.publishRevocation(steeredId, message, `amd.${contentIdOfBytes(message)}`);
  }

  /** Follows the assignment stream until stopped; resolves once caught up or after the catch-up window. Never rejects. */
  async #followAssignments(): Promise<void> {
    const catchUpMs = this.config.revocationCatchUpMs;
    const started = (async () => {
      for (let attempt = 0; !this.#stopped; attempt++) {
        try {
          await this.bus.ready();
          this.#assignments ??= new ShardAssignmentStream(this.bus.connection!, {
            root: this.config.subjectRoot,
            replicas: this.config.replicas,
            ...(this.config.streamCluster !== undefined ? { placement: { cluster: this.config.streamCluster } } : {}),
          });
          const follow = await this.#assignments.follow((bytes) => this.#assignment(bytes));
          if (this.#stopped) await follow.stop();
          else this.#assignFollow = follow;
          await follow.caughtUp;
          this.shards.markReady();
          this.#ackInForce();
          this.#log.info({ assignments: this.shards.counts.taken }, 'shard assignment stream caught up');
          return;
        } catch (e) {
          this.#log.warn(
            { why: (e as Error).message, attempt },
            'shard assignment stream not reachable yet; retrying (chains of more than one link are refused meanwhile)',
          );
          await new Promise((r) => setTimeout(r, Math.min(2_000, 100 * 2 ** Math.min(attempt, 4))));
        }
      }
    })();
    const inTime = await Promise.race([
      started.then(() => true),
      new Promise<boolean>((r) => setTimeout(() => r(false), catchUpMs).unref()),
    ]);
    if (!inTime)
      this.#log.warn({ catch_up_ms: catchUpMs }, 'shard assignments not read yet; chains of more than one link are refused until they are');
  }

  async #stopAssignments(): Promise<void> {
    this.#stopped = true;
    await this.#assignFollow?.stop();
    this.#assignFollow = undefined;
  }

  /** Takes one assignment from the stream; acknowledges it once caught up and attached. */
  #assignment(bytes: Uint8Array): void {
    let taken: ReturnType<ShardBindings['take']>;
    try {
      taken = this.shards.take(decodeShardAssignment(bytes));
    } catch (e) {
      this.#log.warn({ why: (e as Error).message }, 'malformed shard assignment on the stream: ignored');
      return;
    }
    if (!taken.ok) {
      this.#log.warn({ code: taken.error.code, why: taken.error.why }, 'shard assignment refused');
      return;
    }
    if (this.shards.ready) this.#ack(taken.value);
  }

  #ackInForce(): void {
    if (!this.shards.ready) return;
    for (const id of this.shards.inForce()) this.#ack(id);
  }

  #ack(assignment: string): void {
    const steward = this.#steward;
    const stream = this.#assignments;
    if (steward === undefined || stream === undefined) return;
    stream.publishAck(signShardAck({ assignment, point: steward.did }, steward)).catch((e: Error) => {
      this.#log.warn({ assignment, why: e.message }, 'shard assignment acknowledgement not published');
    });
  }

  /**
   * Attaches the running node: its steward signs statements and close records, its replayed
   * ledger gives each channel's starting spend; `steering` (the node's amendments, §4.7) makes a
   * channel grant's continuations spend from its channel and binds a shard's continuations to
   * that shard's point. Starts settlement (each channel settles before
   * it allows anything) and acknowledges the shard assignments already in force.
   */
  attach(steward: Actor, ledger: LedgerView, steering?: ChannelSteering): void {
    this.channels.attach(steward, (id) => ledger.spent(id), steering);
    this.shards.steering = steering;
    this.#steward = steward;
    this.#ackInForce();
    this.#closer = new ShardCloser(this.bus.closes, steward, ledger);
    for (const sr of this.#taken.splice(0)) void this.#closer.closed(sr);
    this.channels.start();
    this.#log.info({ channels: this.config.channels.length, subject_root: this.config.subjectRoot }, 'cluster hooks attached');
  }

  /**
   * For `startNode`'s `witnessed` (the start-up check, docs/tlog.md): the newest checkpoint of
   * the log of `steward` that peers cosigned, read from the transparency-log stream.
   * @throws Error when NATS is not reachable within `revocation_catch_up_ms` or the stream cannot be read
   */
  async witnessed(steward: Did): Promise<WitnessedCheckpoint | undefined> {
    const ms = this.config.revocationCatchUpMs;
    await Promise.race([
      this.bus.ready(),
      new Promise((_, reject) => setTimeout(() => reject(new Error(`NATS not reachable within ${ms} ms`)), ms).unref()),
    ]);
    const r = await this.#tlogStream().newestWitnessed(steward);
    for (const why of r.ignored) this.#log.warn({ why }, 'tlog: a stored cosignature of this log does not verify: ignored');
    return r.newest;
  }

  #tlogStream(): TlogStream {
    this.#tlog ??= new TlogStream(this.bus.connection!, { root: this.config.subjectRoot, replicas: this.config.replicas });
    return this.#tlog;
  }

  /**
   * Starts witnessing (node/witnessing.ts) for a running node: publishes its checkpoints and
   * cosigns its peers'. Retried in the background until NATS answers; never rejects.
   */
  startWitnessing(node: { readonly steward: Actor; readonly tiles: TileServer; readonly metrics: NodeMetrics }, logger: PinoLogger): void {
    void (async () => {
      for (let attempt = 0; !this.#stopped; attempt++) {
        try {
          await this.bus.ready();
          const w = new TlogWitnessing(this.#tlogStream(), node.steward, node.tiles, node.metrics, logger, {
            everyMs: this.config.checkpointEveryMs,
            everyReceipts: this.config.checkpointEveryReceipts,
          });
          await w.start();
          if (this.#stopped) await w.stop();
          else this.#witnessing = w;
          return;
        } catch (e) {
          this.#log.warn({ why: (e as Error).message, attempt }, 'tlog: witnessing not started yet; retrying');
          await new Promise((r) => setTimeout(r, Math.min(2_000, 100 * 2 ** Math.min(attempt, 4))));
        }
      }
    })();
  }

  /** The node's witnessing, once started. */
  get witnessing(): TlogWitnessing | undefined {
    return this.#witnessing;
  }

  /** Channel state for `/healthz` and logs. */
  stats(): ChannelStats[] {
    return this.channels.stats();
  }

  /** Stops settlement (after one final settlement) and closes the NATS connection. */
  async close(): Promise<void> {
    await this.channels.stop(this.bus.connected);
    await this.#stopAssignments();
    await this.#witnessing?.stop();
    await this.feed.stop();
    await this.bus.close();
  }
}
