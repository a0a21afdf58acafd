/**
 * Starting and stopping an enforcement node (docs/design.md "The way data flows"): the steward key
 * (created 0600 on first start), the receipt log (opened, never recreated empty), boot replay
 * (§8.1), revocations (§4.3), trust roots (§7), the meter (§5), the MCP endpoints, the jcp/1
 * listener (§11), and `/metrics` + `/healthz`.
 */
import { DEFAULT_CONTINUATION_LIMITS } from './continuations.ts';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { type Logger, pino } from 'pino';
import {
  type Actor,
  type ContentId,
  type Grant,
  isJcpError,
  type Ledger,
  type Rng,
  type SignedAmendment,
  type SignedCheckpoint,
  type SignedGrant,
  type SignedRevocation,
  TrustRoots,
} from '../core/index.ts';
import { makeDirs } from '../io/index.ts';
import { createMeter, readMeterConfig } from '../meter/index.ts';
import { NodeFault, NodeFaultCodes } from './codes.ts';
import { type NodeConfig, REPLAY_WORKERS_MIN_RECEIPTS, type ResourceConfig, trustRootsOf } from './config.ts';
import { A2aEndpoint, rebuildTaskTables } from './a2a.ts';
import { McpHttpEndpoint, McpStdioEndpoint } from './endpoint.ts';
import { type EndpointBinding, Enforcer } from './enforcer.ts';
import type { BudgetPolicy, RevocationFeed } from './hooks.ts';
import { loadOrCreateKey } from './keyfile.ts';
import { type LogGrowth, NodeMetrics, RateSampler, serveMetrics } from './metrics.ts';
import { TileServer } from './tlogtiles.ts';
import { buildLogTree, checkAgainstCheckpoint } from './tlog.ts';
import type { WitnessedCheckpoint } from './witnessing.ts';
import type { MerkleTree } from '../core/index.ts';
import type { Did } from '../core/index.ts';
import { PeerLimiter } from './ratelimit.ts';
import { IssuerPolicy } from './issuerpolicy.ts';
import { type MeterProbe, type NodeMeter, provenanceCeiling } from './pricing.ts';
import { type BootProblem, readAccepted, recordAccepted, unaccepted } from './accepted.ts';
import { type HeadCheck, ReceiptLog } from './receiptlog.ts';
import { type LogReplay, replayLog } from './replay.ts';
import { AmendmentStore } from './amendments.ts';
import { RevocationStore } from './revocations.ts';
import { chooseSnapshot, Snapshotter } from './snapshot.ts';
import { type JcpTlsOptions, JcpServer } from './server.ts';
import { SIGNATURE_WORKER_REPLACEMENTS, WorkerPool } from './workers.ts';

/** Effects and hooks a node takes besides its config (all optional). */
export interface NodeOptions {
  /** Randomness for the steward key on first start (default `crypto.randomBytes`). */
  readonly rng?: Rng;
  /** The node clock in unix seconds (default wall clock). */
  readonly clockS?: () => number;
  /** The energy meter (default `createMeter(config.meter)`). */
  readonly meter?: NodeMeter;
  /** Consulted before an allow stands (budget channels, §4.5). */
  readonly budgetPolicy?: BudgetPolicy;
  /** Revocation sources besides jcp/1 (the cluster: a NATS stream). */
  readonly revocationFeeds?: readonly RevocationFeed[];
  /** The logger (default pino JSON on stdout at `config.logLevel`). */
  readonly logger?: Logger;
  /** Called if the node stops by itself (the receipt log failed). */
  readonly onFatal?: (e: Error) => void;
  /**
   * Start even when boot replay finds bad receipts or continuity breaks (their spend is then not
   * counted). Default false: such a log stops the node with `log-damaged`.
   */
  readonly acceptDamagedLog?: boolean;
  /** Receipts from which boot replay uses temporary workers (default {@link REPLAY_WORKERS_MIN_RECEIPTS}). */
  readonly replayWorkersFrom?: number;
  /**
   * The newest checkpoint of this node's own log that peers cosigned (node/witnessing.ts
   * `TlogStream.newestWitnessed`), asked for at boot with the steward's did. A log shorter than it,
   * or different below its size, stops the start with `log-damaged` naming it (docs/tlog.md
   * "The start-up check"); `--accept-damaged-log` does not override this. Undefined: no check.
   */
  readonly witnessed?: (steward: Did) => Promise<WitnessedCheckpoint | undefined>;
  /**
   * Readiness and health beyond the node's own (the cluster hooks: revocation staleness, NATS):
   * `/healthz` adds each source's detail under its `name`, `ready: false` and `not_ready` when a
   * source lists problems, and `/readyz` answers 503 then (docs/node.md "Operations").
   */
  readonly health?: ReadonlyArray<HealthSource>;
}

/** A source of readiness problems and health detail for `/healthz` and `/readyz`. */
export interface HealthSource {
  /** The key of its detail in `/healthz` (e.g. `cluster`). */
  readonly name: string;
  /** Problems that make the node not ready (it refuses allows meanwhile): stable code and text. Empty = ready. */
  notReady(): ReadonlyArray<{ readonly code: string; readonly why: string }>;
  /** Detail shown under {@link name}. */
  healthDetail(): Record<string, unknown>;
}

/** What boot replay found (§8.1): receipts read, good and bad, continuity breaks, time. */
export interface BootReport {
  readonly receipts: number;
  readonly good: number;
  readonly bad: number;
  readonly breaks: number;
  readonly allowed: number;
  readonly denied: number;
  readonly revocations: { readonly admitted: number; readonly pending: number; readonly bad: number };
  /** Amendments in force (§4.7, node/amendments.ts) re-applied from their records; bad ones counted, never applied. */
  readonly amendments: { readonly applied: number; readonly bad: number };
  readonly seconds: number;
  /** The first few rejected receipts and breaks, by seq, for the operator. */
  readonly problems: ReadonlyArray<{ seq: number; code: string; why?: string }>;
  /** The log against its head mark: not ok when receipts the node had made durable are lost. */
  readonly head: HeadCheck;
  /**
   * The snapshot the start continued from (node/snapshot.ts): the seq it covers and the receipts
   * replayed after it; absent after a full replay. `receipts` above still counts the whole log.
   */
  readonly snapshot?: { readonly seq: number; readonly file: string; readonly replayed: number };
  /** Reversal records (`outcome.ts`) applied to the ledger, µJ they handed back (decimal text), and records that failed their check (never applied). */
  readonly reversals: { readonly applied: number; readonly refunded_uj: string; readonly bad: number };
}

/** A running node. */
export interface RunningNode {
  /** The steward's did:key (the receipts' signer). */
  readonly did: string;
  readonly steward: Actor;
  readonly config: NodeConfig;
  /** The bound jcp/1 port. */
  readonly port: number;
  readonly host: string;
  /** The bound metrics port, when metrics are on. */
  readonly metricsPort: number | undefined;
  readonly resources: readonly ResourceConfig[];
  readonly boot: BootReport;
  readonly probe: MeterProbe | undefined;
  /** The live ledger (µJ spent per grant id). */
  readonly ledger: Ledger;
  readonly enforcer: Enforcer;
  readonly endpoints: ReadonlyMap<ContentId, EndpointBinding>;
  readonly metrics: NodeMetrics;
  /** The receipt log (read access for operators and tests; the enforcer is its only writer). */
  readonly log: ReceiptLog;
  /** Writes the ledger snapshots (config `snapshot`); `snapshotNow()` makes one at once. */
  readonly snapshots: Snapshotter;
  /** The revocation store (§4.3): admitted and waiting revocations; `taken(id)` resolves when one arrives. */
  readonly revocations: RevocationStore;
  /** The amendments in force (§4.7); `applied(id)` resolves when one of that steered grant is. */
  readonly amendments: AmendmentStore;
  /** The log's Merkle tree and checkpoints (C2SP tlog-tiles; served on the metrics port when on). */
  readonly tiles: TileServer;
  /** What the start-up check held the log to: the witnessed checkpoint's label, or why there was none. */
  readonly witnessCheck: string;
  /** Stops listening, closes connections, endpoints, workers and the log. */
  close(): Promise<void>;
}

/** The PEM files of the `tls` section, read. @throws NodeFault `config-invalid` naming the file's field. */
function readTlsFiles(cfg: NodeConfig): JcpTlsOptions | undefined {
  const t = cfg.tls;
  if (t === undefined) return undefined;
  const read = (file: string, where: string): Buffer => {
    try {
      return readFileSync(file);
    } catch (e) {
      throw new NodeFault(NodeFaultCodes.CONFIG_INVALID, `config: ${where}: cannot read ${file}: ${(e as Error).message}`, where, {
        cause: e,
      });
    }
  };
  return {
    cert: read(t.certFile, 'tls.cert_file'),
    key: read(t.keyFile, 'tls.key_file'),
    ...(t.caFile !== undefined ? { ca: read(t.caFile, 'tls.ca_file') } : {}),
    clientCerts: t.clientCerts,
  };
}

/** Every problem boot replay and the head check found, in log order (head first at its seq). */
function bootProblems(r: LogReplay, head: HeadCheck): Array<BootProblem & { why: string }> {
  return [
    ...(head.ok ? [] : [{ seq: head.markSeq ?? head.lastSeq, code: head.code, why: head.why }]),
    ...r.rejected.map((x) => ({ seq: x.seq, code: x.code, why: x.why })),
    ...r.breaks.map((x) => ({
      seq: x.seq,
      code: x.code,
      expectedSeq: x.expectedSeq,
      why: `expected seq ${x.expectedSeq}, found ${x.seq}`,
    })),
  ];
}

function bootReport(
  r: LogReplay,
  revocations: BootReport['revocations'],
  amendments: BootReport['amendments'],
  head: HeadCheck,
  snapshot?: BootReport['snapshot'],
): BootReport {
  const problems = bootProblems(r, head)
    .sort((a, b) => a.seq - b.seq)
    .slice(0, 20)
    .map(({ seq, code, why }) => ({ seq, code, why }));
  return {
    receipts: r.total,
    good: r.total - r.rejected.length,
    bad: r.rejected.length,
    breaks: r.breaks.length,
    allowed: r.allowed,
    denied: r.denied,
    revocations,
    amendments,
    seconds: r.seconds,
    problems,
    head,
    ...(snapshot ? { snapshot } : {}),
    reversals: { applied: r.outcomes.reversals, refunded_uj: String(r.outcomes.refundedUj), bad: r.outcomes.bad.length },
  };
}

/** The data folder made (0700) and the steward key loaded or created. @throws NodeFault `config-invalid` (data_dir), `key-file-invalid` */
function openSteward(cfg: NodeConfig, opts: NodeOptions, logger: Logger): Actor {
  try {
    makeDirs(cfg.dataDir, 0o700);
  } catch (e) {
    throw new NodeFault(NodeFaultCodes.CONFIG_INVALID, (e as Error).message, 'data_dir', { cause: e });
  }
  const { actor: steward, created } = loadOrCreateKey(cfg.stewardKey, opts.rng ?? ((n) => new Uint8Array(randomBytes(n))));
  logger.info({ steward: steward.did, key: cfg.stewardKey, created }, created ? 'steward key created' : 'steward key loaded');
  return steward;
}

/** The meter the options give, else the one the `meter` section configures (§5). @throws NodeFault `config-invalid` naming the field */
function nodeMeter(cfg: NodeConfig, opts: NodeOptions): NodeMeter {
  if (opts.meter !== undefined) return opts.meter;
  try {
    return createMeter(readMeterConfig(cfg.meter));
  } catch (e) {
    const field = isJcpError(e) ? String(e.detail?.['field'] ?? 'meter') : 'meter';
    throw new NodeFault(NodeFaultCodes.CONFIG_INVALID, `config: ${(e as Error).message}`, field, { cause: e });
  }
}

/** What boot recovery (§8.1) hands the running node: the replayed state, the stores, the report. */
interface Recovered {
  readonly replay: LogReplay;
  readonly revocations: RevocationStore;
  readonly amendments: AmendmentStore;
  readonly boot: BootReport;
  /** The seq the snapshot replay started from covers, -1 without one. */
  readonly snapshotSeq: number;
  readonly witnessCheck: { said: string; tree?: MerkleTree };
  readonly tiles: TileServer;
}

/** The effects boot recovery uses, gathered so each step takes one argument. */
interface BootParts {
  readonly cfg: NodeConfig;
  readonly opts: NodeOptions;
  readonly log: ReceiptLog;
  readonly steward: Actor;
  readonly pool: WorkerPool | undefined;
  /** The request index window, seconds: `max_skew_s` plus the margin. */
  readonly windowS: number;
  /** The node clock, unix seconds. */
  readonly clockS: () => number;
  readonly logger: Logger;
  /** The record policy for amendments and revocations (node/issuerpolicy.ts). */
  readonly policy: IssuerPolicy;
  readonly metrics: NodeMetrics;
}

/**
 * Boot recovery (§8.1): the newest good snapshot, the replay of the log after it (on temporary
 * workers for a big log), revocations (§4.3) and amendments (§4.7) loaded, the head and witnessed
 * checks, and the damage verdict ({@link refuseDamage}). On any failure the pools and the log are
 * closed before the error goes on.
 * @throws NodeFault `log-damaged` (damage not accepted, or a log below its witnessed checkpoint)
 */
async function recoverLog(b: BootParts): Promise<Recovered> {
  const { cfg, opts, log, steward, pool, windowS, clockS, logger } = b;
  let replayPool: WorkerPool | undefined;
  try {
    // The newest snapshot that verifies and agrees with the log; the rest is replayed from it.
    // One that does not is ignored with its reason, and the replay starts at seq 0.
    const choice = await chooseSnapshot(log, cfg.dataDir, steward.did, { nowS: clockS(), toleranceS: cfg.requestIndexMarginS });
    for (const x of choice.ignored)
      logger.warn(
        { file: x.file, why: x.why },
        'snapshot ignored: it does not verify, disagrees with the log, or was made ahead of the clock',
      );
    if (choice.ahead)
      logger.warn(
        { file: choice.used?.file, horizon: choice.ahead.horizon, aheadS: choice.ahead.byS },
        'snapshot made ahead of the clock used (the log was archived: no full replay): requests with now below the horizon are refused (clock-skew) until the clock passes it',
      );
    const from = choice.used?.state(windowS, clockS() - windowS);
    const snapshotSeq = choice.used?.seq ?? -1;
    // A big log is replayed on temporary workers (signature checks on every core), stopped after boot.
    const expected = (await log.lastSeq()) - snapshotSeq;
    if (cfg.replayWorkers > (pool?.size ?? 0) && expected >= (opts.replayWorkersFrom ?? REPLAY_WORKERS_MIN_RECEIPTS)) {
      replayPool = await WorkerPool.start(cfg.replayWorkers);
    }
    const runner = replayPool ?? pool;
    const replay = await replayLog(log, {
      steward: steward.did,
      expected,
      requestWindowS: windowS,
      requestHorizon: clockS() - windowS,
      ...(from ? { from } : {}),
      ...(runner ? { runner: (job) => runner.replaySlice(job), parallel: runner.size * 2 } : {}),
    });
    await replayPool?.close();
    replayPool = undefined;
    const revocations = new RevocationStore((id, bytes) => log.putRevocation(id, bytes), {
      maxRevocations: cfg.abuse.maxRevocations,
      policy: b.policy,
      onRefused: (source, why) => b.metrics.recordsRefused.inc({ kind: 'revocation', source, reason: why.reason }),
    });
    const rev = revocations.load(await log.revocations());
    // After the replay: a record re-applies the carry it names (the steered spend cannot change).
    const amendments = new AmendmentStore(steward, (id, bytes) => log.putAmendment(id, bytes));
    const amd = amendments.load(await log.amendments());
    const head = await log.checkHead();
    const witnessCheck = await checkWitnessed(log, steward.did, opts.witnessed, logger);
    const tiles = witnessCheck.tree ? new TileServer(log, steward, undefined, witnessCheck.tree) : new TileServer(log, steward);
    const boot = bootReport(
      replay,
      rev,
      amd,
      head,
      choice.used ? { seq: choice.used.seq, file: choice.used.file, replayed: replay.total - (from?.total ?? 0) } : undefined,
    );
    refuseDamage(cfg, opts, replay, head, boot, logger);
    if (!head.ok) await log.remark(); // a damaged or missing mark is rewritten from the log as it is
    // Drop the table files the full read mapped into memory (they would stay resident).
    await log.reopen();
    return { replay, revocations, amendments, boot, snapshotSeq, witnessCheck, tiles };
  } catch (e) {
    await replayPool?.close();
    await pool?.close();
    await log.close();
    throw e;
  }
}

/**
 * Damage stops the start unless the operator accepts it; accepted damage is recorded
 * (accepted.json), so later starts stop only on damage not accepted yet.
 * @throws NodeFault `log-damaged` naming the data folder and the first damage not yet accepted
 */
function refuseDamage(cfg: NodeConfig, opts: NodeOptions, replay: LogReplay, head: HeadCheck, boot: BootReport, logger: Logger): void {
  const accepted = readAccepted(cfg.dataDir);
  const fresh = unaccepted(bootProblems(replay, head), accepted);
  if (fresh.length > 0 && !opts.acceptDamagedLog) {
    const first = fresh[0]!;
    throw new NodeFault(
      NodeFaultCodes.LOG_DAMAGED,
      !head.ok && first.code === head.code
        ? `${cfg.dataDir}: ${head.why}; starting would hand their spend back and reuse their seqs. ` +
            `Inspect it with 'jcp receipts verify ${cfg.dataDir}' (restore the folder from a copy if you have one); start with --accept-damaged-log to continue without that spend`
        : `${cfg.dataDir}: the receipt log has ${boot.bad} receipt(s) that fail verification and ${boot.breaks} continuity break(s)` +
            ` (first not yet accepted: seq ${first.seq}, ${first.code}); starting would hand their spend back. ` +
            `Inspect it with 'jcp receipts verify ${cfg.dataDir}'; start with --accept-damaged-log to continue without that spend`,
      cfg.dataDir,
    );
  }
  if (fresh.length > 0) {
    const lost =
      !head.ok && head.code === 'tail-lost' && head.markSeq !== undefined ? ([head.lastSeq + 1, head.markSeq] as const) : undefined;
    recordAccepted(cfg.dataDir, accepted, fresh, lost, Math.floor(Date.now() / 1000));
    logger.warn(
      { accepted: fresh.slice(0, 20), lost },
      'damaged receipt log accepted by the operator (--accept-damaged-log); recorded in accepted.json',
    );
  }
}

/** The boot report into the replay gauges (seconds, good/bad receipts) and the log: a warning when it found problems. */
function reportBoot(boot: BootReport, metrics: NodeMetrics, logger: Logger): void {
  metrics.replaySeconds.set(boot.seconds);
  metrics.replayReceipts.set({ outcome: 'good' }, boot.good);
  metrics.replayReceipts.set({ outcome: 'bad' }, boot.bad);
  const bootLog = { ...boot, problems: boot.problems.slice(0, 5) };
  if (boot.bad > 0 || boot.breaks > 0 || boot.revocations.bad > 0 || boot.amendments.bad > 0 || boot.reversals.bad > 0 || !boot.head.ok) {
    logger.warn(bootLog, 'receipt log replayed with problems: bad receipts were counted, never applied');
  } else logger.info(bootLog, 'receipt log replayed');
}

/** The meter's rung and provenance (§5), logged and set on the gauge; undefined (with a warning) if the probe fails. */
async function probeMeter(meter: NodeMeter, metrics: NodeMetrics, logger: Logger): Promise<MeterProbe | undefined> {
  try {
    const probe = await meter.probe();
    metrics.meterRung.set({ rung: probe.rung, provenance: probe.provenance }, 1);
    logger.info(
      {
        rung: probe.rung,
        provenance: probe.provenance,
        provenance_ceiling: provenanceCeiling(probe.provenance),
        detail: probe.detail,
        skipped: probe.skipped,
      },
      'meter probed',
    );
    return probe;
  } catch (e) {
    logger.warn({ err: (e as Error).message }, 'meter probe failed');
    return undefined;
  }
}

/**
 * Rebuilds the A2A endpoints' task tables from the log (node/a2a.ts `rebuildTaskTables`), so
 * follow-ups on tasks started before a restart stay bound to their caller and grant (docs/a2a.md
 * "Follow-ups"). A log that cannot be read here is logged, never fatal (boot replay read it).
 */
async function rebindTasks(log: ReceiptLog, endpoints: Map<ContentId, EndpointBinding>, logger: Logger): Promise<void> {
  try {
    const tasks = await rebuildTaskTables(log, endpoints);
    if (tasks > 0) logger.info({ tasks }, 'A2A task bindings rebuilt from the log');
  } catch (e) {
    logger.warn({ err: (e as Error).message }, 'A2A task bindings not rebuilt: follow-ups on earlier tasks get task-not-found');
  }
}

/**
 * The endpoint of every resource that has one (an MCP server or an A2A agent), by resource id;
 * started in the background (a call waits for its server), the A2A task tables rebuilt from `log`.
 */
async function startEndpoints(cfg: NodeConfig, logger: Logger, log: ReceiptLog): Promise<Map<ContentId, EndpointBinding>> {
  const endpoints = new Map<ContentId, EndpointBinding>();
  for (const r of cfg.resources) {
    if (r.endpoint === undefined) continue;
    const endpoint =
      r.endpoint.kind === 'a2a'
        ? new A2aEndpoint(r.name, r.endpoint, logger)
        : r.endpoint.kind === 'mcp-http'
          ? new McpHttpEndpoint(r.name, r.endpoint, logger)
          : new McpStdioEndpoint(r.name, r.endpoint, logger);
    endpoints.set(r.id, { name: r.name, endpoint });
  }
  // Started in the background: a slow server does not hold up recovery; a call waits for it.
  void Promise.all([...endpoints.values()].map((b) => b.endpoint.start()));
  await rebindTasks(log, endpoints, logger);
  return endpoints;
}

/** The enforcer over the recovered state (§4–§8); `onFatal` runs when the log fails under it. */
function makeEnforcer(
  b: BootParts,
  r: Recovered,
  parts: { meter: NodeMeter; probe: MeterProbe | undefined; endpoints: Map<ContentId, EndpointBinding>; metrics: NodeMetrics },
  onFatal: (e: Error) => void,
): Enforcer {
  const { cfg, opts, clockS } = b;
  const { replay, boot } = r;
  return new Enforcer({
    steward: b.steward,
    log: b.log,
    ledger: replay.ledger,
    requests: replay.requests,
    // After an accepted loss of the tail, seqs the node already handed out are never reused.
    nextSeq: Math.max(replay.nextSeq, boot.head.ok ? 0 : (boot.head.markSeq ?? -1) + 1),
    headId: replay.headId,
    trust: new TrustRoots(trustRootsOf(cfg)),
    revocations: r.revocations,
    amendments: r.amendments,
    meter: parts.meter,
    provenanceCeiling: provenanceCeiling(parts.probe?.provenance),
    endpoints: parts.endpoints,
    resources: new Set(cfg.resources.map((x) => x.id)),
    metrics: parts.metrics,
    logger: b.logger,
    maxSkewS: cfg.maxSkewS,
    clockS,
    pool: b.pool,
    budgetPolicy: opts.budgetPolicy,
    amendmentOutlets: (opts.revocationFeeds ?? []).flatMap((f) =>
      f.publishAmendment !== undefined ? [{ name: f.name, publish: (id: ContentId, m: Uint8Array) => f.publishAmendment!(id, m) }] : [],
    ),
    continuationLimits: {
      perCaller: cfg.abuse.inputPendingPerCaller,
      total: cfg.abuse.inputPendingTotal,
      ttlMs: cfg.abuse.inputPendingTtlS * 1000,
      rounds: cfg.abuse.inputRoundsMax,
      stateChars: DEFAULT_CONTINUATION_LIMITS.stateChars,
    },
    limiter: new PeerLimiter(cfg.abuse, clockS),
    denyLimiter: new PeerLimiter({ burst: cfg.abuse.denyBurst, refillPerS: cfg.abuse.denyRefillPerS, maxPeers: 1 }, clockS),
    failureLimiter: new PeerLimiter({ burst: cfg.abuse.failureBurst, refillPerS: cfg.abuse.failureRefillPerS, maxPeers: 1 }, clockS),
    issuerPolicy: b.policy,
    revocationOutlets: (opts.revocationFeeds ?? []).flatMap((f) =>
      f.publish !== undefined ? [{ name: f.name, publish: (sr: SignedRevocation) => f.publish!(sr) }] : [],
    ),
    onFatal,
  });
}

/** The snapshotter (docs/design.md "The way data flows"), started; its figures go to the snapshot gauges. */
function startSnapshots(b: BootParts, r: Recovered, metrics: NodeMetrics): Snapshotter {
  const { cfg, log, pool } = b;
  const bootCovered = r.replay.coveredSeq;
  const snapshots = new Snapshotter({
    log,
    dataDir: cfg.dataDir,
    steward: b.steward,
    everyReceipts: cfg.snapshot.everyReceipts,
    everyS: cfg.snapshot.everyS,
    keep: cfg.snapshot.keep,
    scheduling: cfg.snapshot.scheduling,
    builder: cfg.snapshot.builder,
    pauseMs: cfg.snapshot.pauseMs,
    windowS: b.windowS,
    aheadS: cfg.requestIndexMarginS,
    clockS: b.clockS,
    durableSeq: () => Math.max(bootCovered, log.durableSeq),
    coveredSeq: r.snapshotSeq,
    runner: pool ? (job) => pool.replaySlice(job) : undefined,
    parallel: pool ? pool.size : 1,
    logger: b.logger,
    onSnapshot: (made) => {
      metrics.snapshots.inc();
      metrics.snapshotSeq.set(made.seq);
      metrics.snapshotSeconds.set(made.seconds);
    },
  });
  metrics.snapshotSeq.set(r.snapshotSeq);
  snapshots.start();
  return snapshots;
}

/** The `/healthz` answer: live while the enforcer has no fatal error, ready when no health source says otherwise too. */
function healthOf(
  b: BootParts,
  enforcer: Enforcer,
  growth: () => LogGrowth,
  server: () => JcpServer | undefined,
  snapshots: Snapshotter,
): { ok: boolean; ready: boolean; detail: Record<string, unknown> } {
  const g = growth();
  const sources = b.opts.health ?? [];
  const notReady = sources.flatMap((h) => h.notReady());
  return {
    ok: enforcer.fatal === undefined,
    ready: enforcer.fatal === undefined && notReady.length === 0,
    detail: {
      ready: enforcer.fatal === undefined && notReady.length === 0,
      ...(notReady.length > 0 ? { not_ready: notReady } : {}),
      ...Object.fromEntries(sources.map((h) => [h.name, h.healthDetail()])),
      steward: b.steward.did,
      seq: enforcer.nextSeq,
      connections: server()?.connections ?? 0,
      rss_bytes: process.memoryUsage.rss(),
      log_bytes: g.bytes,
      receipts_per_s: g.receiptsPerS,
      log_size_alarm: g.alarm,
      snapshot_seq: snapshots?.coveredSeq ?? -1,
      ...(enforcer.fatal ? { error: enforcer.fatal.message } : {}),
    },
  };
}

/**
 * The jcp/1 listener (§11), then `/metrics` + `/healthz` if configured. Returns the bound ports.
 * @throws NodeFault `listen-failed` naming `listen` or `metrics`
 */
async function listenAll(
  cfg: NodeConfig,
  server: JcpServer,
  serveHealth: (metricsCfg: NonNullable<NodeConfig['metrics']>) => Promise<{ server: Server; port: number }>,
): Promise<{ port: number; metrics?: { server: Server; port: number } }> {
  const port = await server.listen(cfg.listen.host, cfg.listen.port).catch((e: Error) => {
    throw new NodeFault(NodeFaultCodes.LISTEN_FAILED, `cannot listen on ${cfg.listen.host}:${cfg.listen.port}: ${e.message}`, 'listen', {
      cause: e,
    });
  });
  let metrics: { server: Server; port: number } | undefined;
  if (cfg.metrics) {
    const mc = cfg.metrics;
    metrics = await serveHealth(mc).catch((e: Error) => {
      throw new NodeFault(NodeFaultCodes.LISTEN_FAILED, `cannot serve metrics on ${mc.host}:${mc.port}: ${e.message}`, 'metrics', {
        cause: e,
      });
    });
  }
  return { port, ...(metrics ? { metrics } : {}) };
}

/**
 * The jcp/1 server (§11) that hands each frame to the enforcer, with the config's limits and TLS
 * files; an address the enforcer refuses `rate-limited` has its new connections refused too.
 */
function jcpServer(cfg: NodeConfig, enforcer: Enforcer, tls: JcpTlsOptions | undefined, metrics: NodeMetrics, logger: Logger): JcpServer {
  return new JcpServer(
    (body, notice, peer) => enforcer.handle(body, notice, peer),
    {
      frameCap: cfg.frameCap,
      readTimeoutMs: cfg.readTimeoutMs,
      idleTimeoutMs: cfg.idleTimeoutMs,
      maxConnections: cfg.maxConnections,
      maxPending: cfg.maxPendingPerConnection,
      tls,
    },
    metrics,
    logger,
    { admits: (peer) => enforcer.admits(peer), charge: (peer) => enforcer.charge(peer) },
  );
}

/** Log growth, for /metrics and /healthz: bytes on disk, receipts per second (from `rate`), the size alarm. */
function logGrowth(cfg: NodeConfig, log: ReceiptLog, rate: RateSampler): () => LogGrowth {
  return () => {
    const bytes = log.sizeBytes();
    return { bytes, receiptsPerS: rate.perSecond, alarm: cfg.logSizeAlarmBytes > 0 && bytes > cfg.logSizeAlarmBytes };
  };
}

/** The "node listening" line: steward, bound addresses, resources, NATS. */
function logListening(cfg: NodeConfig, steward: Actor, port: number, metricsPort: number | undefined, logger: Logger): void {
  logger.info(
    {
      steward: steward.did,
      listen: `${cfg.listen.host}:${port}`,
      ...(metricsPort !== undefined ? { metrics: `${cfg.metrics!.host}:${metricsPort}` } : {}),
      resources: cfg.resources.map((r) => ({ name: r.name, id: r.id, endpoint: r.endpoint !== undefined })),
      nats: cfg.nats ?? null,
    },
    'node listening',
  );
}

/**
 * The record policy for amendments and revocations (node/issuerpolicy.ts; docs/node.md "Amendments and
 * revocations: the record policy"): the trust roots of every served resource are vouched for; a resource with no trust
 * roots leaves the node open to any issuer (size, rate and `abuse.max_revocations` still apply).
 */
function issuerPolicyOf(cfg: NodeConfig, clockS: () => number): IssuerPolicy {
  const roots = cfg.resources.flatMap((r) => r.trustRoots ?? []);
  return new IssuerPolicy(
    cfg.abuse,
    roots,
    clockS,
    cfg.resources.some((r) => r.trustRoots === undefined),
  );
}

/**
 * The node's `n` signature workers (config `workers`): caller-signature checks off the main
 * thread. A worker that exits (a crash, out of memory) is logged (warn, `signature worker
 * exited…`, with `worker`, `code`, `replaced`) and replaced, up to
 * {@link SIGNATURE_WORKER_REPLACEMENTS} times over the node's life; its checks in flight, and any
 * a missing worker would have made, are made on the main thread (a lost worker never turns a good
 * signature into a `bad-signature` deny).
 */
function signaturePool(n: number, logger: Logger): Promise<WorkerPool> {
  return WorkerPool.start(n, {
    replace: SIGNATURE_WORKER_REPLACEMENTS,
    onExit: ({ index, code, replaced }) =>
      logger.warn(
        { worker: index, code, replaced },
        replaced
          ? 'signature worker exited; a new one took its place (its checks in flight were made on the main thread)'
          : 'signature worker exited and was not replaced (replacements used up): its checks run on the main thread',
      ),
  });
}

/**
 * Starts a node from its config. Refuses to start with a typed {@link NodeFault}: `key-file-invalid`,
 * `log-missing`, `log-corrupt`, `log-steward-mismatch`, `config-invalid` (meter section, or a data_dir that cannot be created).
 * The steps, in order: TLS files read, steward, meter, receipt log opened, boot recovery
 * ({@link recoverLog}), meter probe, endpoints, enforcer, snapshots, listeners and feeds.
 */
export async function startNode(cfg: NodeConfig, opts: NodeOptions = {}): Promise<RunningNode> {
  const logger = opts.logger ?? pino({ level: cfg.logLevel, base: { svc: 'jcp-node' } });
  const clockS = opts.clockS ?? (() => Math.floor(Date.now() / 1000));
  // Read before anything opens: a missing certificate stops the node with nothing to clean up.
  const tlsFiles = readTlsFiles(cfg);
  const steward = openSteward(cfg, opts, logger);
  const meter = nodeMeter(cfg, opts);
  const metrics = new NodeMetrics();
  const log = await ReceiptLog.open(cfg.dataDir, {
    steward: steward.did,
    batchMax: cfg.log.batchMax,
    nowS: clockS(),
    onBatch: (n, s) => {
      metrics.batchSize.observe(n);
      metrics.batchSeconds.observe(s);
      logger.debug({ receipts: n, seconds: s }, 'log batch durable');
    },
  });
  const pool = cfg.workers > 0 ? await signaturePool(cfg.workers, logger) : undefined;
  // The request index keeps ids by time: `max_skew_s` plus the margin (node/requestindex.ts).
  const policy = issuerPolicyOf(cfg, clockS);
  const b: BootParts = { cfg, opts, log, steward, pool, windowS: cfg.maxSkewS + cfg.requestIndexMarginS, clockS, logger, policy, metrics };
  const recovered = await recoverLog(b);
  const { replay, revocations, amendments, boot, witnessCheck, tiles } = recovered;
  reportBoot(boot, metrics, logger);
  const probe = await probeMeter(meter, metrics, logger);
  const endpoints = await startEndpoints(cfg, logger, log);
  let server: JcpServer | undefined;
  let metricsServer: Server | undefined;
  let closing: Promise<void> | undefined;
  let snapshots: Snapshotter | undefined;
  let sampler: RateSampler | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      enforcer.stopRetries();
      for (const f of opts.revocationFeeds ?? []) await f.stop().catch(() => undefined);
      await server?.close();
      sampler?.stop();
      await snapshots?.close();
      await new Promise<void>((r) => (metricsServer ? metricsServer.close(() => r()) : r()));
      await Promise.all([...endpoints.values()].map((x) => x.endpoint.close()));
      await pool?.close();
      await log.close().catch(() => undefined);
      logger.info('node stopped');
    })();
    return closing;
  };

  const enforcer = makeEnforcer(b, recovered, { meter, probe, endpoints, metrics }, (e) => {
    opts.onFatal?.(e);
    void close();
  });
  const snapshotter = startSnapshots(b, recovered, metrics);
  snapshots = snapshotter;
  sampler = new RateSampler(() => enforcer.nextSeq);
  const growth = logGrowth(cfg, log, sampler);
  metrics.logSource = growth;

  server = jcpServer(cfg, enforcer, tlsFiles, metrics, logger);
  let bound: Awaited<ReturnType<typeof listenAll>>;
  try {
    const health = () => healthOf(b, enforcer, growth, () => server, snapshotter);
    bound = await listenAll(cfg, server, (mc) =>
      metrics.collectDefaults().then(() => serveMetrics(metrics, health, mc.host, mc.port, tiles)),
    );
    metricsServer = bound.metrics?.server;
    // Feeds bring revocations to the store and amendments (§4.7) to the enforcer, which applies them against its ledger.
    const sink = {
      submit: (sr: SignedRevocation, g?: Grant) => revocations.submit(sr, g, 'cluster'),
      amend: (g: SignedGrant, cp: SignedCheckpoint, sa: SignedAmendment) => enforcer.applyAmendment(g, cp, sa),
    };
    for (const f of opts.revocationFeeds ?? []) await f.start(sink);
  } catch (e) {
    await close();
    throw e;
  }
  logListening(cfg, steward, bound.port, bound.metrics?.port, logger);
  return {
    did: steward.did,
    steward,
    config: cfg,
    port: bound.port,
    host: cfg.listen.host,
    metricsPort: bound.metrics?.port,
    resources: cfg.resources,
    boot,
    probe,
    ledger: replay.ledger,
    enforcer,
    endpoints,
    metrics,
    log,
    snapshots: snapshotter,
    revocations,
    amendments,
    tiles,
    witnessCheck: witnessCheck.said,
    close,
  };
}

/**
 * The start-up check against the witnessed checkpoint (docs/tlog.md): builds the log's tree and
 * holds it to the newest checkpoint of this log peers cosigned. Returns what it did (and the
 * tree, for the tiles). A log that cannot be read as one run from seq 0 (archived receipts) is
 * not checked, with a warning.
 * @throws NodeFault `log-damaged` naming the checkpoint (the log is shorter, or was rewritten below it)
 */
async function checkWitnessed(
  log: ReceiptLog,
  steward: Did,
  witnessed: NodeOptions['witnessed'],
  logger: Logger,
): Promise<{ said: string; tree?: MerkleTree }> {
  if (witnessed === undefined) return { said: 'not asked' };
  let w: WitnessedCheckpoint | undefined;
  try {
    w = await witnessed(steward);
  } catch (e) {
    const said = `no witnessed checkpoint could be read: ${(e as Error).message}`;
    logger.warn({ why: (e as Error).message }, 'tlog start-up check skipped: the witnessed checkpoints could not be read');
    return { said };
  }
  if (w === undefined) return { said: 'no checkpoint of this log was cosigned yet' };
  let tree: MerkleTree;
  try {
    tree = await buildLogTree(log);
  } catch (e) {
    if (!(e instanceof NodeFault && e.code === NodeFaultCodes.LOG_DAMAGED && (await log.firstSeq()) > 0)) throw e;
    logger.warn(
      { why: e.message, checkpoint: w.label },
      'tlog start-up check skipped: the log was archived (its first receipts are not on this path)',
    );
    return { said: `not checked: ${e.message}` };
  }
  checkAgainstCheckpoint(tree, w.checkpoint, w.label);
  logger.info({ size: tree.size, checkpoint: w.label }, 'tlog start-up check: the log holds the witnessed checkpoint');
  return { said: w.label, tree };
}
