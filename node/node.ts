/**
 * Starting and stopping an enforcement node (docs/design.md "The way data flows"): the steward key
 * (created 0600 on first start), the receipt log (opened, never recreated empty), boot replay
 * (§8.1), revocations (§4.3), trust roots (§7), the meter (§5), the MCP endpoints, the jcp/1
 * listener (§11), and `/metrics` + `/healthz`.
 */
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
import { type MeterProbe, type NodeMeter, provenanceCeiling } from './pricing.ts';
import { type BootProblem, readAccepted, recordAccepted, unaccepted } from './accepted.ts';
import { type HeadCheck, ReceiptLog } from './receiptlog.ts';
import { type LogReplay, replayLog } from './replay.ts';
import { AmendmentStore } from './amendments.ts';
import { RevocationStore } from './revocations.ts';
import { chooseSnapshot, Snapshotter } from './snapshot.ts';
import { type JcpTlsOptions, JcpServer } from './server.ts';
import { WorkerPool } from './workers.ts';

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

/**
 * Starts a node from its config. Refuses to start with a typed {@link NodeFault}: `key-file-invalid`,
 * `log-missing`, `log-corrupt`, `log-steward-mismatch`, `config-invalid` (meter section, or a data_dir that cannot be created).
 */
export async function startNode(cfg: NodeConfig, opts: NodeOptions = {}): Promise<RunningNode> {
  const logger = opts.logger ?? pino({ level: cfg.logLevel, base: { svc: 'jcp-node' } });
  const clockS = opts.clockS ?? (() => Math.floor(Date.now() / 1000));
  // Read before anything opens: a missing certificate stops the node with nothing to clean up.
  const tlsFiles = readTlsFiles(cfg);
  try {
    makeDirs(cfg.dataDir, 0o700);
  } catch (e) {
    throw new NodeFault(NodeFaultCodes.CONFIG_INVALID, (e as Error).message, 'data_dir', { cause: e });
  }
  const { actor: steward, created } = loadOrCreateKey(cfg.stewardKey, opts.rng ?? ((n) => new Uint8Array(randomBytes(n))));
  logger.info({ steward: steward.did, key: cfg.stewardKey, created }, created ? 'steward key created' : 'steward key loaded');

  let meter = opts.meter;
  if (meter === undefined) {
    try {
      meter = createMeter(readMeterConfig(cfg.meter));
    } catch (e) {
      const field = isJcpError(e) ? String(e.detail?.['field'] ?? 'meter') : 'meter';
      throw new NodeFault(NodeFaultCodes.CONFIG_INVALID, `config: ${(e as Error).message}`, field, { cause: e });
    }
  }

  const metrics = new NodeMetrics({ defaults: true });
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
  const pool = cfg.workers > 0 ? await WorkerPool.start(cfg.workers) : undefined;
  let replay: LogReplay;
  let revocations: RevocationStore;
  let amendments: AmendmentStore;
  let boot: BootReport;
  let replayPool: WorkerPool | undefined;
  let snapshotSeq = -1;
  let witnessCheck: { said: string; tree?: MerkleTree } = { said: 'not asked' };
  let tiles = new TileServer(log, steward);
  // The request index keeps ids by time: `max_skew_s` plus the margin (node/requestindex.ts).
  const windowS = cfg.maxSkewS + cfg.requestIndexMarginS;
  try {
    // The newest snapshot that verifies and agrees with the log; the rest is replayed from it.
    // One that does not is ignored with its reason, and the replay starts at seq 0.
    const choice = await chooseSnapshot(log, cfg.dataDir, steward.did);
    for (const x of choice.ignored)
      logger.warn({ file: x.file, why: x.why }, 'snapshot ignored: it does not verify or disagrees with the log');
    const from = choice.used?.state(windowS, clockS() - windowS);
    snapshotSeq = choice.used?.seq ?? -1;
    // A big log is replayed on temporary workers (signature checks on every core), stopped after boot.
    const expected = (await log.lastSeq()) - snapshotSeq;
    if (cfg.replayWorkers > (pool?.size ?? 0) && expected >= (opts.replayWorkersFrom ?? REPLAY_WORKERS_MIN_RECEIPTS)) {
      replayPool = await WorkerPool.start(cfg.replayWorkers);
    }
    const runner = replayPool ?? pool;
    replay = await replayLog(log, {
      steward: steward.did,
      expected,
      requestWindowS: windowS,
      requestHorizon: clockS() - windowS,
      ...(from ? { from } : {}),
      ...(runner ? { runner: (job) => runner.replaySlice(job), parallel: runner.size * 2 } : {}),
    });
    await replayPool?.close();
    replayPool = undefined;
    revocations = new RevocationStore((id, bytes) => log.putRevocation(id, bytes));
    const rev = revocations.load(await log.revocations());
    // After the replay: a record re-applies the carry it names (the steered spend cannot change).
    amendments = new AmendmentStore(steward, (id, bytes) => log.putAmendment(id, bytes));
    const amd = amendments.load(await log.amendments());
    const head = await log.checkHead();
    witnessCheck = await checkWitnessed(log, steward.did, opts.witnessed, logger);
    if (witnessCheck.tree) tiles = new TileServer(log, steward, undefined, witnessCheck.tree);
    boot = bootReport(
      replay,
      rev,
      amd,
      head,
      choice.used ? { seq: choice.used.seq, file: choice.used.file, replayed: replay.total - (from?.total ?? 0) } : undefined,
    );
    // Damage stops the start unless the operator accepts it; accepted damage is recorded
    // (accepted.json), so later starts stop only on damage not accepted yet.
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
    if (!head.ok) await log.remark(); // a damaged or missing mark is rewritten from the log as it is
    // Drop the table files the full read mapped into memory (they would stay resident).
    await log.reopen();
  } catch (e) {
    await replayPool?.close();
    await pool?.close();
    await log.close();
    throw e;
  }
  metrics.replaySeconds.set(boot.seconds);
  metrics.replayReceipts.set({ outcome: 'good' }, boot.good);
  metrics.replayReceipts.set({ outcome: 'bad' }, boot.bad);
  const bootLog = { ...boot, problems: boot.problems.slice(0, 5) };
  if (boot.bad > 0 || boot.breaks > 0 || boot.revocations.bad > 0 || boot.amendments.bad > 0 || boot.reversals.bad > 0 || !boot.head.ok) {
    logger.warn(bootLog, 'receipt log replayed with problems: bad receipts were counted, never applied');
  } else logger.info(bootLog, 'receipt log replayed');

  let probe: MeterProbe | undefined;
  try {
    probe = await meter.probe();
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
  } catch (e) {
    logger.warn({ err: (e as Error).message }, 'meter probe failed');
  }

  const endpoints = new Map<ContentId, EndpointBinding>();
  for (const r of cfg.resources) {
    if (r.endpoint === undefined) continue;
    const endpoint =
      r.endpoint.kind === 'mcp-http' ? new McpHttpEndpoint(r.name, r.endpoint, logger) : new McpStdioEndpoint(r.name, r.endpoint, logger);
    endpoints.set(r.id, { name: r.name, endpoint });
  }
  // Started in the background: a slow server does not hold up recovery; a call waits for it.
  void Promise.all([...endpoints.values()].map((b) => b.endpoint.start()));

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
      await Promise.all([...endpoints.values()].map((b) => b.endpoint.close()));
      await pool?.close();
      await log.close().catch(() => undefined);
      logger.info('node stopped');
    })();
    return closing;
  };

  const enforcer = new Enforcer({
    steward,
    log,
    ledger: replay.ledger,
    requests: replay.requests,
    // After an accepted loss of the tail, seqs the node already handed out are never reused.
    nextSeq: Math.max(replay.nextSeq, boot.head.ok ? 0 : (boot.head.markSeq ?? -1) + 1),
    headId: replay.headId,
    trust: new TrustRoots(trustRootsOf(cfg)),
    revocations,
    amendments,
    meter,
    provenanceCeiling: provenanceCeiling(probe?.provenance),
    endpoints,
    resources: new Set(cfg.resources.map((r) => r.id)),
    metrics,
    logger,
    maxSkewS: cfg.maxSkewS,
    clockS,
    pool,
    budgetPolicy: opts.budgetPolicy,
    amendmentOutlets: (opts.revocationFeeds ?? []).flatMap((f) =>
      f.publishAmendment !== undefined ? [{ name: f.name, publish: (id: ContentId, m: Uint8Array) => f.publishAmendment!(id, m) }] : [],
    ),
    limiter: new PeerLimiter(cfg.abuse, clockS),
    revocationOutlets: (opts.revocationFeeds ?? []).flatMap((f) =>
      f.publish !== undefined ? [{ name: f.name, publish: (sr: SignedRevocation) => f.publish!(sr) }] : [],
    ),
    onFatal: (e) => {
      opts.onFatal?.(e);
      void close();
    },
  });

  const bootCovered = replay.coveredSeq;
  snapshots = new Snapshotter({
    log,
    dataDir: cfg.dataDir,
    steward,
    everyReceipts: cfg.snapshot.everyReceipts,
    everyS: cfg.snapshot.everyS,
    keep: cfg.snapshot.keep,
    windowS,
    clockS,
    durableSeq: () => Math.max(bootCovered, log.durableSeq),
    coveredSeq: snapshotSeq,
    runner: pool ? (job) => pool.replaySlice(job) : undefined,
    parallel: pool ? pool.size : 1,
    logger,
    onSnapshot: (made) => {
      metrics.snapshots.inc();
      metrics.snapshotSeq.set(made.seq);
      metrics.snapshotSeconds.set(made.seconds);
    },
  });
  metrics.snapshotSeq.set(snapshotSeq);
  snapshots.start();

  // Log growth, for /metrics and /healthz: bytes on disk, receipts per second, the size alarm.
  const rate = new RateSampler(() => enforcer.nextSeq);
  sampler = rate;
  const growth = (): LogGrowth => {
    const bytes = log.sizeBytes();
    return { bytes, receiptsPerS: rate.perSecond, alarm: cfg.logSizeAlarmBytes > 0 && bytes > cfg.logSizeAlarmBytes };
  };
  metrics.logSource = growth;

  server = new JcpServer(
    (body, notice, peer) => enforcer.handle(body, notice, peer),
    {
      frameCap: cfg.frameCap,
      readTimeoutMs: cfg.readTimeoutMs,
      idleTimeoutMs: cfg.idleTimeoutMs,
      maxConnections: cfg.maxConnections,
      maxPending: cfg.maxPendingPerConnection,
      tls: tlsFiles,
    },
    metrics,
    logger,
  );
  let port: number;
  let metricsPort: number | undefined;
  try {
    port = await server.listen(cfg.listen.host, cfg.listen.port).catch((e: Error) => {
      throw new NodeFault(NodeFaultCodes.LISTEN_FAILED, `cannot listen on ${cfg.listen.host}:${cfg.listen.port}: ${e.message}`, 'listen', {
        cause: e,
      });
    });
    if (cfg.metrics) {
      const m = await serveMetrics(
        metrics,
        () => {
          const g = growth();
          const sources = opts.health ?? [];
          const notReady = sources.flatMap((h) => h.notReady());
          return {
            ok: enforcer.fatal === undefined,
            ready: enforcer.fatal === undefined && notReady.length === 0,
            detail: {
              ready: enforcer.fatal === undefined && notReady.length === 0,
              ...(notReady.length > 0 ? { not_ready: notReady } : {}),
              ...Object.fromEntries(sources.map((h) => [h.name, h.healthDetail()])),
              steward: steward.did,
              seq: enforcer.nextSeq,
              connections: server?.connections ?? 0,
              rss_bytes: process.memoryUsage.rss(),
              log_bytes: g.bytes,
              receipts_per_s: g.receiptsPerS,
              log_size_alarm: g.alarm,
              snapshot_seq: snapshots?.coveredSeq ?? -1,
              ...(enforcer.fatal ? { error: enforcer.fatal.message } : {}),
            },
          };
        },
        cfg.metrics.host,
        cfg.metrics.port,
        tiles,
      ).catch((e: Error) => {
        throw new NodeFault(
          NodeFaultCodes.LISTEN_FAILED,
          `cannot serve metrics on ${cfg.metrics!.host}:${cfg.metrics!.port}: ${e.message}`,
          'metrics',
          {
            cause: e,
          },
        );
      });
      metricsServer = m.server;
      metricsPort = m.port;
    }
    // Feeds bring revocations to the store and amendments (§4.7) to the enforcer, which applies them against its ledger.
    const sink = {
      submit: (sr: SignedRevocation, g?: Grant) => revocations.submit(sr, g),
      amend: (g: SignedGrant, cp: SignedCheckpoint, sa: SignedAmendment) => enforcer.applyAmendment(g, cp, sa),
    };
    for (const f of opts.revocationFeeds ?? []) await f.start(sink);
  } catch (e) {
    await close();
    throw e;
  }
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
  return {
    did: steward.did,
    steward,
    config: cfg,
    port,
    host: cfg.listen.host,
    metricsPort,
    resources: cfg.resources,
    boot,
    probe,
    ledger: replay.ledger,
    enforcer,
    endpoints,
    metrics,
    log,
    snapshots,
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
