/**
 * Observability of the node: Prometheus metrics (`prom-client`) and the `/metrics` + `/healthz`
 * HTTP endpoint on the metrics port. Names carry their units (`_seconds`, `_uj`).
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createBoundedServer, type HttpConnectionCounts, type HttpLimits, readOnlyGuard } from '../io/index.ts';
import { Counter, collectDefaults, Gauge, Histogram, Registry } from './prom.ts';

/** The node's metrics, in their own registry (several nodes may share a process in tests). */
export class NodeMetrics {
  readonly registry = new Registry();
  /** Decisions sealed, by verdict and deny reason (`none` on allow). */
  readonly decisions = new Counter({
    name: 'jcp_decisions_total',
    help: 'Decisions sealed as receipts, by verdict and deny reason',
    labelNames: ['verdict', 'reason'] as const,
    registers: [this.registry],
  });
  /** Error replies (no receipt), by code. */
  readonly errors = new Counter({
    name: 'jcp_error_replies_total',
    help: 'jcp/1 error replies (never a receipt), by code',
    labelNames: ['code'] as const,
    registers: [this.registry],
  });
  /** Idempotent replays answered from the log. */
  readonly replays = new Counter({
    name: 'jcp_idempotent_replays_total',
    help: 'Requests answered with their original response (no second debit)',
    registers: [this.registry],
  });
  /** From the decoded message to the durable receipt. */
  readonly decisionSeconds = new Histogram({
    name: 'jcp_decision_seconds',
    help: 'Time from a decoded request to its durable receipt, seconds',
    buckets: [0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5],
    registers: [this.registry],
  });
  /** µJ debited on allow. */
  readonly debitedUj = new Counter({
    name: 'jcp_debited_uj_total',
    help: 'Microjoules debited from leaf grants on allow',
    registers: [this.registry],
  });
  /** µJ measured by the meter around endpoint calls, by provenance. */
  readonly reversedUj = new Counter({
    name: 'jcp_reversed_uj_total',
    help: 'Microjoules handed back by reversal records: allows whose endpoint could not run the call (endpoint-unavailable)',
    registers: [this.registry],
  });

  readonly meteredUj = new Counter({
    name: 'jcp_metered_uj_total',
    help: 'Microjoules metered around endpoint invocations, by provenance',
    labelNames: ['provenance'] as const,
    registers: [this.registry],
  });
  /** The same energy in joules (Prometheus base units), beside the µJ counters kept for compatibility. */
  readonly debitedJoules = new Counter({
    name: 'jcp_debited_joules_total',
    help: 'Joules debited from leaf grants on allow (jcp_debited_uj_total / 1e6)',
    registers: [this.registry],
  });
  readonly reversedJoules = new Counter({
    name: 'jcp_reversed_joules_total',
    help: 'Joules handed back by reversal records (jcp_reversed_uj_total / 1e6)',
    registers: [this.registry],
  });
  readonly meteredJoules = new Counter({
    name: 'jcp_metered_joules_total',
    help: 'Joules metered around endpoint invocations, by provenance (jcp_metered_uj_total / 1e6)',
    labelNames: ['provenance'] as const,
    registers: [this.registry],
  });

  /** Receipts per fsync'd batch. */
  readonly batchSize = new Histogram({
    name: 'jcp_log_batch_receipts',
    help: 'Writes per fsync-ed batch of the receipt log',
    buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024],
    registers: [this.registry],
  });
  /** fsync'd batch latency. */
  readonly batchSeconds = new Histogram({
    name: 'jcp_log_batch_seconds',
    help: 'Time to write and fsync one batch of the receipt log, seconds',
    buckets: [0.0001, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.05, 0.1],
    registers: [this.registry],
  });
  /** Boot replay. */
  readonly replaySeconds = new Gauge({
    name: 'jcp_replay_seconds',
    help: 'Time the last boot took to verify and replay the receipt log, seconds',
    registers: [this.registry],
  });
  readonly replayReceipts = new Gauge({
    name: 'jcp_replay_receipts',
    help: 'Receipts in the log at boot, by outcome (good, bad)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  /** Ledger snapshots written (node/snapshot.ts). */
  readonly snapshots = new Counter({
    name: 'jcp_snapshots_total',
    help: 'Ledger snapshots written since start',
    registers: [this.registry],
  });
  readonly snapshotSeq = new Gauge({
    name: 'jcp_snapshot_seq',
    help: 'The receipt seq the newest snapshot covers (-1: none)',
    registers: [this.registry],
  });
  readonly snapshotSeconds = new Gauge({
    name: 'jcp_snapshot_seconds',
    help: 'Time the last snapshot took to build and write, seconds',
    registers: [this.registry],
  });
  /** The meter rung in use (1 for the rung in use). */
  readonly meterRung = new Gauge({
    name: 'jcp_meter_rung',
    help: 'The energy meter rung in use (value 1), by rung and provenance',
    labelNames: ['rung', 'provenance'] as const,
    registers: [this.registry],
  });
  /** Open jcp/1 connections. */
  readonly connections = new Gauge({
    name: 'jcp_connections',
    help: 'Open jcp/1 connections',
    registers: [this.registry],
  });
  /** jcp/1 TLS connections refused before any frame (plaintext clients, failed handshakes, bad client certificates). */
  readonly tlsRefused = new Counter({
    name: 'jcp_tls_refused_connections_total',
    help: 'jcp/1 connections refused by the TLS listener before any frame: handshake (plaintext or untrusted), client-certificate',
    labelNames: ['why'] as const,
    registers: [this.registry],
  });
  /** jcp/1 connections closed because the node held more than twice its unsent budget (node/server.ts). */
  readonly unsentShed = new Counter({
    name: 'jcp_unsent_shed_connections_total',
    help: 'jcp/1 connections closed, those holding the most unsent reply bytes first, because the node held more than twice its unsent budget',
    registers: [this.registry],
  });
  /**
   * jcp/1 connections closed because their address is refused `rate-limited` and kept sending
   * (node/server.ts), by why: `messages` (64 refused messages within 10 s) or `bytes` (a declared
   * length that would take the refused bytes within 10 s past 256 KiB, its body unread).
   */
  readonly rateLimitedCloses = new Counter({
    name: 'jcp_rate_limited_closes_total',
    help: 'jcp/1 connections closed while their address was refused rate-limited, by why (messages, bytes)',
    labelNames: ['why'] as const,
    registers: [this.registry],
  });
  /** The bounded HTTP listeners whose counts are exported ({@link NodeMetrics.watchHttp}). */
  readonly #http = new Map<string, { counts: () => HttpConnectionCounts; told: HttpConnectionCounts }>();
  /** Open connections of each bounded HTTP listener (io/httplimits.ts), read at each scrape. */
  readonly httpConnections = new Gauge({
    name: 'jcp_http_connections',
    help: 'Open connections of a bounded HTTP listener (listener: metrics)',
    labelNames: ['listener'] as const,
    registers: [this.registry],
    collect: () => this.#collectHttp(),
  });
  /** Connections a bounded HTTP listener closed at once or to make room, by listener and why. */
  readonly httpClosed = new Counter({
    name: 'jcp_http_connections_closed_total',
    help: 'Connections a bounded HTTP listener closed by a bound, by listener and why (peer-bound, total-bound, evicted, pipelined)',
    labelNames: ['listener', 'why'] as const,
    registers: [this.registry],
  });

  /**
   * Exports the counts of the bounded HTTP listener `listener` (io/httplimits.ts
   * `BoundedServer.counts`) as `jcp_http_connections{listener}` and
   * `jcp_http_connections_closed_total{listener, why}`, read at each scrape. A second call for the
   * same name replaces the first.
   */
  watchHttp(listener: string, counts: () => HttpConnectionCounts): void {
    this.#http.set(listener, { counts, told: { open: 0, refusedPeer: 0, refusedTotal: 0, evicted: 0, refusedPipelined: 0 } });
  }

  #collectHttp(): void {
    for (const [listener, w] of this.#http) {
      const now = w.counts();
      this.httpConnections.set({ listener }, now.open);
      const add = (why: string, n: number) => {
        if (n > 0) this.httpClosed.inc({ listener, why }, n);
      };
      // Scrapes read the httpConnections gauge first (its collect), so the counter is current too.
      add('peer-bound', now.refusedPeer - w.told.refusedPeer);
      add('total-bound', now.refusedTotal - w.told.refusedTotal);
      add('evicted', now.evicted - w.told.evicted);
      add('pipelined', now.refusedPipelined - w.told.refusedPipelined);
      w.told = now;
    }
  }

  /** Messages refused `rate-limited` (node/ratelimit.ts), and the peers tracked. */
  readonly rateLimited = new Counter({
    name: 'jcp_rate_limited_total',
    help: 'Messages refused rate-limited: the peer address sent too many failing or bad-signature requests',
    registers: [this.registry],
  });
  /** Amendments and revocations refused by the record policy (node/issuerpolicy.ts), by kind and reason. */
  readonly recordsRefused = new Counter({
    name: 'jcp_records_refused_total',
    help: 'Amendments and revocations not kept nor relayed, by kind (amendment, revocation), source (wire, cluster) and reason (issuer, size, rate, full)',
    labelNames: ['kind', 'source', 'reason'] as const,
    registers: [this.registry],
  });
  /** Endpoint call outcomes. */
  readonly endpointCalls = new Counter({
    name: 'jcp_endpoint_calls_total',
    help: 'Endpoint invocations after allow, by resource name and outcome (ok, error code)',
    labelNames: ['resource', 'outcome'] as const,
    registers: [this.registry],
  });

  /** Transparency-log witnessing over NATS (node/witnessing.ts, docs/tlog.md "Witnessing over NATS"). */
  readonly tlogPublished = new Counter({
    name: 'jcp_tlog_checkpoints_published_total',
    help: "Signed checkpoints of this node's receipt log published on the transparency-log stream",
    registers: [this.registry],
  });
  readonly tlogSize = new Gauge({
    name: 'jcp_tlog_published_size',
    help: 'Tree size (receipts) of the newest checkpoint this node published',
    registers: [this.registry],
  });
  readonly tlogCosigned = new Counter({
    name: 'jcp_tlog_cosignatures_total',
    help: "Cosignatures (C2SP tlog-cosignature) this node made over peers' checkpoints",
    registers: [this.registry],
  });
  readonly tlogRefused = new Counter({
    name: 'jcp_tlog_witness_refusals_total',
    help: 'Peer checkpoints this node refused to cosign, by code (log-inconsistent, note-unverified, note-malformed, proof-unavailable)',
    labelNames: ['code'] as const,
    registers: [this.registry],
  });

  /** Where the log gauges read from (set by the node once its log is open). */
  logSource: (() => LogGrowth) | undefined;
  /** The receipt log's size on disk, bytes (LevelDB files), read at each scrape. */
  readonly logBytes = new Gauge({
    name: 'jcp_log_bytes',
    help: 'Size of the receipt log on disk (LevelDB files), bytes',
    registers: [this.registry],
    collect: () => {
      const g = this.logSource?.();
      if (g) this.logBytes.set(g.bytes);
    },
  });
  /** Receipts appended per second, over the last few seconds. */
  readonly logRate = new Gauge({
    name: 'jcp_log_receipts_per_second',
    help: 'Receipts appended to the log per second (the last 10 s)',
    registers: [this.registry],
    collect: () => {
      const g = this.logSource?.();
      if (g) this.logRate.set(g.receiptsPerS);
    },
  });
  /** 1 once the log is larger than `log_size_alarm_bytes`. */
  readonly logAlarm = new Gauge({
    name: 'jcp_log_size_alarm',
    help: 'Whether the receipt log is larger than log_size_alarm_bytes (1) or not (0)',
    registers: [this.registry],
    collect: () => {
      const g = this.logSource?.();
      if (g) this.logAlarm.set(g.alarm ? 1 : 0);
    },
  });

  #defaults: Promise<void> | undefined;

  /**
   * Adds prom-client's default process metrics (CPU, memory, event-loop lag, GC) to the registry,
   * once; loaded on the first call (the node calls it when its metrics port opens, so a node
   * without `--metrics` neither loads nor samples them).
   */
  collectDefaults(): Promise<void> {
    this.#defaults ??= collectDefaults(this.registry);
    return this.#defaults;
  }
}

/** The log's growth as `/metrics` and `/healthz` report it. */
export interface LogGrowth {
  /** Bytes on disk. */
  readonly bytes: number;
  /** Receipts appended per second over the last 10 s (0 before two samples). */
  readonly receiptsPerS: number;
  /** True once `bytes` exceeds the configured `log_size_alarm_bytes` (never when it is 0). */
  readonly alarm: boolean;
}

/**
 * Receipts per second from the log's next seq, sampled once a second (a timer that does not keep
 * the process alive): the rate over the last 10 samples.
 */
export class RateSampler {
  readonly #read: () => number;
  readonly #samples: Array<[number, number]> = [];
  readonly #timer: NodeJS.Timeout;

  constructor(read: () => number) {
    this.#read = read;
    this.#sample();
    this.#timer = setInterval(() => this.#sample(), 1000);
    this.#timer.unref();
  }

  #sample(): void {
    this.#samples.push([performance.now(), this.#read()]);
    if (this.#samples.length > 11) this.#samples.shift();
  }

  /** Receipts per second over the samples kept (0 with fewer than two). */
  get perSecond(): number {
    if (this.#samples.length < 2) return 0;
    const [t0, n0] = this.#samples[0]!;
    const [t1, n1] = this.#samples[this.#samples.length - 1]!;
    return t1 > t0 ? ((n1 - n0) * 1000) / (t1 - t0) : 0;
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}

/** Health as reported on `/healthz`. */
export interface Health {
  /** Alive: the receipt log works (`/healthz` 200; 503 once it failed). */
  readonly ok: boolean;
  /** Ready to allow (`/readyz` 200; 503 otherwise, e.g. `revocation-stale`). Default: `ok`. */
  readonly ready?: boolean;
  readonly detail: Record<string, unknown>;
}

/** A read-only responder for the transparency log's paths (`/checkpoint`, `/tile/…`; node/tlogtiles.ts). */
export interface TlogResponder {
  handle(url: string): Promise<{ readonly status: number; readonly type: string; readonly body: Uint8Array | string }>;
}

/**
 * Serves `/metrics` (Prometheus text), `/healthz` (JSON, 200 while alive, 503 once the log
 * failed) and `/readyz` (the same JSON, 200 while ready to allow, 503 otherwise),
 * and, when `tlog` is given, `/checkpoint` and `/tile/…` (C2SP tlog-tiles, GET only). Like the
 * console (io/http.ts): any method but GET and HEAD is 405; a `Host` naming neither loopback nor
 * `host` is 421 (DNS rebinding), unless `host` is a wildcard (`0.0.0.0`, `::`). Connections are
 * bounded by `limits` (io/httplimits.ts; default `HTTP_LIMITS`: 1024 in all, 64 per peer
 * address, 10 s for the headers): one over a bound is closed as it is accepted, so a slow-loris
 * peer cannot take the node's file handles; its counts are exported as `jcp_http_connections` and
 * `jcp_http_connections_closed_total` with `listener="metrics"`. Resolves to the server and the
 * bound port.
 */
export async function serveMetrics(
  metrics: NodeMetrics,
  health: () => Health,
  host: string,
  port: number,
  tlog?: TlogResponder,
  limits: HttpLimits = {},
): Promise<{ server: Server; port: number }> {
  const guard = readOnlyGuard(host);
  const { server, counts } = createBoundedServer((req, res) => {
    const url = req.url ?? '/';
    // What the console does (io/http.ts): GET and HEAD only, and no foreign Host (DNS rebinding).
    const refused = guard(req.method, req.headers.host);
    if (refused !== undefined) {
      res.writeHead(refused.status, { 'content-type': 'text/plain', ...(refused.status === 405 ? { allow: 'GET, HEAD' } : {}) });
      res.end(
        refused.status === 405
          ? 'read-only: GET and HEAD only\n'
          : 'misdirected: the Host names neither loopback nor the address the metrics port listens on\n',
      );
      return;
    }
    if (tlog !== undefined && (url === '/checkpoint' || url.startsWith('/checkpoint?') || url.startsWith('/tile/'))) {
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        res.writeHead(405, { 'content-type': 'text/plain', allow: 'GET, HEAD' });
        res.end('the transparency log is read-only\n');
        return;
      }
      void tlog.handle(url).then((r) => {
        res.writeHead(r.status, { 'content-type': r.type });
        res.end(req.method === 'HEAD' ? undefined : r.body);
      });
      return;
    }
    if (url === '/metrics' || url.startsWith('/metrics?')) {
      metrics.registry.metrics().then(
        (text) => {
          res.writeHead(200, { 'content-type': metrics.registry.contentType });
          res.end(text);
        },
        (e: Error) => {
          res.writeHead(500, { 'content-type': 'text/plain' });
          res.end(e.message);
        },
      );
      return;
    }
    if (url === '/healthz' || url === '/readyz') {
      const h = health();
      const up = url === '/healthz' ? h.ok : (h.ready ?? h.ok);
      res.writeHead(up ? 200 : 503, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ok: h.ok, ...h.detail }));
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end(tlog ? 'not found: try /metrics, /healthz, /checkpoint or /tile/…\n' : 'not found: try /metrics or /healthz\n');
  }, limits);
  metrics.watchHttp('metrics', counts);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return { server, port: (server.address() as AddressInfo).port };
}
