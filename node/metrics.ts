/**
 * Observability of the node: Prometheus metrics (`prom-client`) and the `/metrics` + `/healthz`
 * HTTP endpoint on the metrics port. Names carry their units (`_seconds`, `_uj`).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

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
  /** Endpoint call outcomes. */
  readonly endpointCalls = new Counter({
    name: 'jcp_endpoint_calls_total',
    help: 'Endpoint invocations after allow, by resource name and outcome (ok, error code)',
    labelNames: ['resource', 'outcome'] as const,
    registers: [this.registry],
  });

  constructor(opts: { defaults?: boolean } = {}) {
    if (opts.defaults) collectDefaultMetrics({ register: this.registry });
  }
}

/** Health as reported on `/healthz`. */
export interface Health {
  readonly ok: boolean;
  readonly detail: Record<string, unknown>;
}

/**
 * Serves `/metrics` (Prometheus text) and `/healthz` (JSON, 200 when healthy, 503 otherwise).
 * Resolves to the server and the bound port.
 */
export async function serveMetrics(
  metrics: NodeMetrics,
  health: () => Health,
  host: string,
  port: number,
): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    const url = req.url ?? '/';
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
    if (url === '/healthz') {
      const h = health();
      res.writeHead(h.ok ? 200 : 503, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ok: h.ok, ...h.detail }));
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('not found: try /metrics or /healthz\n');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return { server, port: (server.address() as AddressInfo).port };
}
