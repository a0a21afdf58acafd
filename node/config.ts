/**
 * The node's configuration (docs/design.md "Folders and layers": node/ owns config): where it listens, where its
 * data lives, the trust roots per resource (§7), the endpoint behind each resource, `max_skew_s`,
 * the frame cap (§11), the receipt log's batching, and the meter's settings (§5).
 *
 * The file is JSON. A bad config is refused at start with the field named ({@link NodeFault}
 * `config-invalid`, `where` = the field path); unknown fields are refused too, so a typo never
 * silently falls back to a default.
 */
import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { IoError, READ_CAPS, readFileCapped } from '../io/index.ts';
import { contentId, type ContentId, type Did, isContentId, isDid } from '../core/index.ts';
import { NodeFault, NodeFaultCodes } from './codes.ts';
import { SNAPSHOT_PAUSE_MAX_MS, type SnapshotBuilderKind, type SnapshotScheduling } from './snapshot.ts';

/** How the node reaches the MCP server behind a resource: a child process over stdio. */
export interface McpStdioEndpointConfig {
  readonly kind: 'mcp-stdio';
  /** Executable; a bare name found in the project's `node_modules/.bin` is resolved there. */
  readonly command: string;
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly cwd: string | undefined;
  /** How long one tool call may take before it is abandoned with a clear error (milliseconds). */
  readonly timeoutMs: number;
}

/**
 * Where a header value of an HTTP endpoint comes from: an environment variable or a file (read
 * at each connect, trimmed), never the config itself. `prefix` goes before it (`"Bearer "`).
 */
export type HeaderSource = { readonly env: string; readonly prefix?: string } | { readonly file: string; readonly prefix?: string };

/** How the node reaches a remote MCP server over Streamable HTTP (MCP 2025-06-18). */
export interface McpHttpEndpointConfig {
  readonly kind: 'mcp-http';
  /** The server's MCP endpoint, `http://` or `https://` (e.g. `http://127.0.0.1:3001/mcp`). */
  readonly url: string;
  /** Request headers (name → source); values are read from env or files, never inlined. */
  readonly headers: Readonly<Record<string, HeaderSource>>;
  /** How long one tool call may take before it is abandoned with a clear error (milliseconds). */
  readonly timeoutMs: number;
}

/**
 * How the node reaches an A2A v1.0 agent behind a resource (docs/a2a.md): its base URL, where its
 * agent card is read from (`<url>/.well-known/agent-card.json`), with request headers from env or
 * files as for `mcp-http` (sent only to the configured URL's origin).
 */
export interface A2aEndpointConfig {
  readonly kind: 'a2a';
  /** The agent's base URL, `http://` or `https://` (e.g. `http://127.0.0.1:41241`). */
  readonly url: string;
  /** Request headers (name → source); values are read from env or files, never inlined. */
  readonly headers: Readonly<Record<string, HeaderSource>>;
  /** How long a non-streaming call may take, and a stream may stay silent between events (milliseconds). */
  readonly timeoutMs: number;
  /** The agent card is read again once it is older than this (seconds; `card_refresh_s`, default 300). */
  readonly cardRefreshS: number;
  /** Most streams (`SendStreamingMessage`, `SubscribeToTask`) open to the agent at once (`max_streams`, default 256). */
  readonly maxStreams: number;
  /**
   * Most streams open at once for one caller (did:key; `max_streams_per_peer`, default 16, the key's
   * old name kept); one peer address may hold max(this, ⌊max_streams / 2⌋) (node/a2a.ts `a2aStreamBounds`).
   */
  readonly maxStreamsPerPeer: number;
}

/** The upstream behind a resource: an MCP server over stdio or Streamable HTTP, or an A2A agent. */
export type EndpointConfig = McpStdioEndpointConfig | McpHttpEndpointConfig | A2aEndpointConfig;

/** One guarded resource: its content id, its trust roots (§7), and its endpoint (if any). */
export interface ResourceConfig {
  /** A name for people and logs. */
  readonly name: string;
  /** The resource's content id (§4): given, or `contentId({jcp_resource: name})`. */
  readonly id: ContentId;
  /** Root issuers honoured for this resource; undefined = unconfigured (open, §7). */
  readonly trustRoots: readonly Did[] | undefined;
  /** The endpoint invoked on allow; undefined = decisions only (the reply carries no result). */
  readonly endpoint: EndpointConfig | undefined;
}

/** Batching of the receipt log's fsync'd writes (§8.1). */
export interface LogBatchConfig {
  /** Most receipts in one fsync'd batch. */
  readonly batchMax: number;
}

/** Ledger snapshots (node/snapshot.ts): when the node writes one, and how many it keeps. */
export interface SnapshotConfig {
  /** Write a snapshot once this many receipts are durable past the last one (0 = not by count). */
  readonly everyReceipts: number;
  /** Write a snapshot once this many seconds passed since the last one, if a receipt is new (0 = not by time). */
  readonly everyS: number;
  /** Snapshot files kept (the newest). */
  readonly keep: number;
  /** How the snapshot worker thread is scheduled: `nice` (nice 19, the default) or `idle` (SCHED_IDLE too); see node/snapshot.ts `SnapshotScheduling`. */
  readonly scheduling: SnapshotScheduling;
  /** Where the snapshot is built: `thread` (a worker thread, the default) or `process` (a process of its own); see node/snapshot.ts `SnapshotBuilderKind`. */
  readonly builder: SnapshotBuilderKind;
  /** Milliseconds the node waits after handing each slice of receipts to the snapshot builder (0, the default: none); see node/snapshot.ts `OffThreadSnapshotOptions.pauseMs`. */
  readonly pauseMs: number;
}

/** Abuse limits per peer address (node/ratelimit.ts): a token bucket charged by failures. */
export interface AbuseConfig {
  /** Tokens per peer: failed or bad-signature requests it may send in a burst (0 = no limit). */
  readonly burst: number;
  /** Tokens a peer gets back per second. */
  readonly refillPerS: number;
  /** Most peers tracked at once. */
  readonly maxPeers: number;
  /**
   * `abuse.deny_burst`: the global bucket of sealed denies a caller can cause at will
   * (`untrusted-root`, any deny on a chain no trust root issued, `bad-signature`), shared by all
   * peers (0 = no global limit). Such a deny also takes one of the peer's tokens.
   */
  readonly denyBurst: number;
  /** `abuse.deny_refill_per_s`: tokens the global deny bucket gets back per second. */
  readonly denyRefillPerS: number;
  /**
   * `abuse.failure_burst`: the global bucket of failed requests, shared by all peers (0 = no
   * global limit): each takes as many tokens here as of its peer's (one per 64 KiB of the message,
   * at least one). While it is empty, addresses that failed within the last 10 s are refused
   * `rate-limited` (node/enforcer.ts `Enforcer.admits`).
   */
  readonly failureBurst: number;
  /** `abuse.failure_refill_per_s`: tokens the global failure bucket gets back per second. */
  readonly failureRefillPerS: number;
  /**
   * `abuse.max_revocations`: most revocations kept (admitted plus waiting). At the bound, new
   * revocations are refused `record-limit` unless their issuer is a trust root of a served
   * resource or an issuer of a grant the node has decided; none is ever evicted.
   */
  readonly maxRevocations: number;
  /**
   * `abuse.max_amendments`: most amendments in force (§4.7). At the bound, a new amendment is
   * refused `record-limit` unless the steered grant's issuer is a trust root of a served
   * resource, an issuer of a grant the node has decided or listed; none is ever evicted.
   */
  readonly maxAmendments: number;
  /**
   * `abuse.record_policy`: `strict` (default) keeps and relays amendments and revocations only
   * from a trust root of a served resource, an issuer of a grant this node decided, or an issuer
   * in `record_issuers`; others are refused `issuer-refused`. `open` takes any issuer (still
   * bounded by size, rate and `max_revocations`).
   */
  readonly recordPolicy: 'strict' | 'open';
  /** `abuse.record_issuers`: did:keys whose records are always kept (besides trust roots and decided issuers). */
  readonly recordIssuers: readonly Did[];
  /** `abuse.record_max_bytes`: largest amendment or revocation message taken (bytes, det-CBOR). */
  readonly recordMaxBytes: number;
  /** `abuse.record_burst`: records one issuer may have taken in a burst (0 = no per-issuer rate limit). */
  readonly recordBurst: number;
  /** `abuse.record_refill_per_s`: records per second one issuer gets back. */
  readonly recordRefillPerS: number;
  /** `abuse.max_issuers`: most issuers tracked (decided issuers remembered, rate buckets). */
  readonly maxIssuers: number;
  /** `abuse.input_pending_per_caller`: MCP calls waiting for input one caller may hold (node/continuations.ts). */
  readonly inputPendingPerCaller: number;
  /** `abuse.input_pending_total`: MCP calls waiting for input the node holds, all callers. */
  readonly inputPendingTotal: number;
  /** `abuse.input_pending_ttl_s`: how long after its first round a call may be continued, seconds. */
  readonly inputPendingTtlS: number;
  /** `abuse.input_rounds_max`: most rounds of one MCP call that may ask for input. */
  readonly inputRoundsMax: number;
}

/** The node's whole configuration, with defaults applied. */
export interface NodeConfig {
  /** TCP listen address for jcp/1 (loopback by default). */
  readonly listen: { readonly host: string; readonly port: number };
  /** Data folder: receipt log (LevelDB), steward key, revocations. */
  readonly dataDir: string;
  /** Steward key file (default `<dataDir>/steward.key`), created 0600 on first start. */
  readonly stewardKey: string;
  /** Prometheus `/metrics` and `/healthz`; undefined = off. */
  readonly metrics: { readonly host: string; readonly port: number } | undefined;
  /** NATS URL for the cluster streams (revocations, budget channels); undefined = standalone. */
  readonly nats: string | undefined;
  /** Largest accepted `|now − node clock|`, seconds (docs/design.md "Decisions and the ledger"; default 30). */
  readonly maxSkewS: number;
  /**
   * Seconds the request index keeps ids beyond `max_skew_s` (default 60): ids of requests whose
   * `now` is older than `clock − max_skew_s − margin` are dropped, and such requests refused.
   */
  readonly requestIndexMarginS: number;
  /** Ledger snapshots. */
  readonly snapshot: SnapshotConfig;
  /** Abuse limits per peer address. */
  readonly abuse: AbuseConfig;
  /** `/healthz` reports `log_size_alarm` (and `/metrics` `jcp_log_size_alarm` 1) once the log is larger (bytes; 0 = no alarm). */
  readonly logSizeAlarmBytes: number;
  /** jcp/1 frame cap in bytes (§11): longer frames are refused before allocation. */
  readonly frameCap: number;
  /** A partial frame must complete within this many ms, or the connection is closed. */
  readonly readTimeoutMs: number;
  /** A connection with no traffic for this many ms is closed. */
  readonly idleTimeoutMs: number;
  /** Most open connections; more are refused with `busy`. */
  readonly maxConnections: number;
  /** Most unanswered requests per connection before the node stops reading from it. */
  readonly maxPendingPerConnection: number;
  /** Worker threads for signature work (0 = all on the main thread). */
  readonly workers: number;
  /** Worker threads for boot replay of a big log (≥ {@link REPLAY_WORKERS_MIN_RECEIPTS}); stopped after boot. */
  readonly replayWorkers: number;
  /** Receipt log batching. */
  readonly log: LogBatchConfig;
  /** pino log level. */
  readonly logLevel: string;
  /** Guarded resources. */
  readonly resources: readonly ResourceConfig[];
  /** Meter settings (§5), handed to the meter as given; `estimates_uj`/`default_uj` price calls. */
  readonly meter: Readonly<Record<string, unknown>>;
  /**
   * Cluster settings (budget channels, streams; docs/cluster.md), handed to node/cluster.ts as
   * given. A non-empty section is refused without `nats` (it would have no effect).
   */
  readonly cluster: Readonly<Record<string, unknown>>;
  /**
   * `revocation_staleness_s` (seconds, default 30; 0 = off): a clustered node that cannot confirm
   * it has seen the latest revocations for longer than this stops allowing (channel/freshness.ts,
   * docs/cluster.md "Revocation staleness"). No effect without `nats`.
   */
  readonly revocationStalenessS: number;
  /** `region` (default `local`): the region label of this node's metrics (docs/cluster.md "Metrics"). */
  readonly region: string;
  /** `tls`: jcp/1 over TLS (docs/tls.md); undefined = plaintext TCP. */
  readonly tls: ServerTlsConfig | undefined;
  /** `nats_tls`: TLS for the NATS client connection (docs/tls.md); undefined = as the URL says. */
  readonly natsTls: NatsTlsConfig | undefined;
}

/** jcp/1 over TLS (docs/tls.md): the node's certificate and, optionally, client certificates. */
export interface ServerTlsConfig {
  /** PEM certificate chain file of the node (absolute path). */
  readonly certFile: string;
  /** PEM private key file of the node (absolute path). */
  readonly keyFile: string;
  /** PEM CA bundle that client certificates must chain to; required when `clientCerts` is not `off`. */
  readonly caFile: string | undefined;
  /**
   * `off` (default): no client certificate asked; `request`: asked, and verified when sent;
   * `require`: a connection without a valid client certificate is refused. A client certificate
   * never replaces the caller's signature on each request (§11): it only gates the connection.
   */
  readonly clientCerts: 'off' | 'request' | 'require';
}

/** TLS of the NATS client connection (docs/tls.md): CA to verify the servers, optional client certificate. */
export interface NatsTlsConfig {
  readonly caFile: string | undefined;
  readonly certFile: string | undefined;
  readonly keyFile: string | undefined;
}

/** Command-line overrides (`--listen`, `--data`, `--nats`, `--metrics`, `--upstream`, `--trust-root`). */
export interface ConfigOverrides {
  readonly listen?: string;
  readonly data?: string;
  readonly nats?: string;
  readonly metrics?: string;
  /**
   * `NAME=URL` (Streamable HTTP), `NAME=a2a+URL` (an A2A agent at base URL `URL`, docs/a2a.md) or
   * `NAME=COMMAND ARGS…` (stdio, split at whitespace): each one more resource NAME (id by the same
   * rule as the config: {@link resourceIdOf}) fronting that MCP server or agent, open to any root unless {@link trustRoot} names some (§7).
   */
  readonly upstream?: readonly string[];
  /** `NAME=did:key:…`: a trust root (§7) of the `--upstream` resource NAME; repeatable. */
  readonly trustRoot?: readonly string[];
  /** `--revocation-staleness-s`: decimal seconds (overrides `revocation_staleness_s`). */
  readonly revocationStalenessS?: string;
  /** `--region`. */
  readonly region?: string;
  /** `--tls-cert`, `--tls-key`, `--tls-ca` (jcp/1 over TLS; cert and key go together). */
  readonly tlsCert?: string;
  readonly tlsKey?: string;
  readonly tlsCa?: string;
  /** `--tls-client-certs off|request|require`. */
  readonly tlsClientCerts?: string;
  /** `--nats-ca`, `--nats-cert`, `--nats-key` (NATS client TLS). */
  readonly natsCa?: string;
  readonly natsCert?: string;
  readonly natsKey?: string;
}

/**
 * The config entries of `--upstream` / `--trust-root` flags (see {@link ConfigOverrides}), as
 * `resources[]` JSON; a bad one fails with `where` = the flag, so the CLI reports a usage error.
 * @throws NodeFault `config-invalid`.
 */
export function upstreamResourcesJson(upstream: readonly string[], trustRoot: readonly string[] = []): Json[] {
  const out: Json[] = [];
  for (const u of upstream) {
    const m = /^([^=\s]+)=(.+)$/s.exec(u);
    if (!m) fail('--upstream', `expected NAME=URL or NAME=COMMAND ARGS…, got ${JSON.stringify(u)}`);
    const [, name, spec] = m as unknown as [string, string, string];
    if (out.some((r) => r['name'] === name)) fail('--upstream', `resource ${name} given twice`);
    const words = spec.trim().split(/\s+/);
    const a2a = /^a2a\+(https?:\/\/.+)$/i.exec(spec.trim());
    const endpoint =
      a2a !== null
        ? { kind: 'a2a', url: a2a[1] }
        : /^[a-z][a-z0-9+.-]*:\/\//i.test(spec.trim())
          ? { url: spec.trim() }
          : { command: words[0], args: words.slice(1) };
    out.push({ name, endpoint });
  }
  for (const t of trustRoot) {
    const m = /^([^=\s]+)=(\S+)$/.exec(t);
    if (!m) fail('--trust-root', `expected NAME=did:key:…, got ${JSON.stringify(t)}`);
    const r = out.find((x) => x['name'] === m[1]);
    if (r === undefined) fail('--trust-root', `no --upstream named ${m[1]}`);
    if (!isDid(m[2])) fail('--trust-root', `${m[1]}: not a valid Ed25519 did:key`);
    r['trust_roots'] = [...((r['trust_roots'] as string[] | undefined) ?? []), m[2]];
  }
  return out;
}

/** The content id of a resource named `name` when the config gives no explicit id. */
export function resourceIdOf(name: string): ContentId {
  return contentId({ jcp_resource: name });
}

/** A log with at least this many receipts is replayed on temporary worker threads at boot. */
export const REPLAY_WORKERS_MIN_RECEIPTS = 20_000;

/** Defaults, also documented in docs/node.md. */
export const CONFIG_DEFAULTS = {
  listen: '127.0.0.1:7400',
  dataDir: '.data/node',
  maxSkewS: 30,
  requestIndexMarginS: 60,
  snapshotEveryReceipts: 100_000,
  snapshotEveryS: 3600,
  snapshotKeep: 2,
  snapshotScheduling: 'nice' as SnapshotScheduling,
  abuseBurst: 200,
  abuseRefillPerS: 20,
  abuseMaxPeers: 65_536,
  abuseDenyBurst: 1000,
  abuseDenyRefillPerS: 100,
  abuseFailureBurst: 2048,
  abuseFailureRefillPerS: 320,
  abuseMaxRevocations: 100_000,
  abuseMaxAmendments: 100_000,
  abuseRecordMaxBytes: 65_536,
  abuseRecordBurst: 20,
  abuseInputPendingPerCaller: 16,
  abuseInputPendingTotal: 1024,
  abuseInputPendingTtlS: 600,
  abuseInputRoundsMax: 16,
  abuseRecordRefillPerS: 1,
  abuseMaxIssuers: 65_536,
  logSizeAlarmBytes: 0,
  frameCap: 1 << 20,
  readTimeoutMs: 10_000,
  idleTimeoutMs: 300_000,
  maxConnections: 4096,
  maxPendingPerConnection: 256,
  workers: 0,
  batchMax: 1024,
  logLevel: 'info',
  endpointTimeoutMs: 10_000,
  a2aCardRefreshS: 300,
  a2aMaxStreams: 256,
  a2aMaxStreamsPerPeer: 16,
  revocationStalenessS: 30,
  region: 'local',
} as const;

function fail(where: string, what: string): never {
  throw new NodeFault(NodeFaultCodes.CONFIG_INVALID, `config: ${where}: ${what}`, where);
}

type Json = Record<string, unknown>;

function obj(v: unknown, where: string, allowed: readonly string[]): Json {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) fail(where, 'expected an object');
  for (const k of Object.keys(v)) if (!allowed.includes(k)) fail(where ? `${where}.${k}` : k, 'unknown field');
  return v as Json;
}

function int(v: unknown, where: string, min: number, max: number, dflt: number): number {
  if (v === undefined) return dflt;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    fail(where, `expected an integer in [${min}, ${max}]`);
  }
  return v;
}

function text(v: unknown, where: string, dflt?: string): string {
  if (v === undefined && dflt !== undefined) return dflt;
  if (typeof v !== 'string' || v.length === 0) fail(where, 'expected a non-empty string');
  return v;
}

/**
 * Parses `host:port` (IPv6 as `[::1]:port`). Port 0 asks the OS for a free port.
 * @throws NodeFault `config-invalid` naming `where`.
 */
export function parseHostPort(s: string, where: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(s);
  if (!m) fail(where, `expected host:port, got ${JSON.stringify(s)}`);
  const host = (m[1] ?? m[2])!;
  const port = Number(m[3]);
  if (port > 65535) fail(where, 'port above 65535');
  return { host, port };
}

function resolveCommand(command: string, base: string): string {
  if (command.includes('/') || command.includes(path.sep)) return path.resolve(base, command);
  // This package's root: node/config.ts in the sources, dist/node/config.js in the build. Its own
  // node_modules/.bin first, then the one its dependencies were hoisted into when it is installed
  // as a dependency (<project>/node_modules/jcp-cluster → <project>/node_modules/.bin).
  const root = fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? '../' : '../../', import.meta.url));
  for (const bin of [path.join(root, 'node_modules', '.bin'), path.join(root, '..', '.bin')]) {
    const local = path.join(bin, command);
    if (existsSync(local)) return local;
  }
  return command;
}

/** Header names whose values are credentials: never inline. */
const SECRET_HEADER = /^(authorization|proxy-authorization|cookie)$|token|key|secret|auth|session|password/i;
/** Inline values that look like credentials: a scheme and a token, or a long run without spaces. */
const SECRET_VALUE = /^(bearer|basic|token|digest)\s|^[A-Za-z0-9._~+/=-]{20,}$/i;

function readHeaders(v: unknown, where: string, base: string): Record<string, HeaderSource> {
  if (v === undefined) return {};
  const o = obj(v, where, Object.keys(v as object));
  const out: Record<string, HeaderSource> = {};
  for (const [name, src] of Object.entries(o)) {
    const at = `${where}.${name}`;
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) fail(at, 'not a valid HTTP header name');
    if (typeof src === 'string') {
      if (SECRET_HEADER.test(name) || SECRET_VALUE.test(src)) {
        fail(at, 'looks like a secret inlined in the config: give {"env": "VAR"} or {"file": "path"} (optional "prefix": "Bearer ")');
      }
      fail(at, 'header values are read from {"env": "VAR"} or {"file": "path"}, never inlined');
    }
    const s = obj(src, at, ['env', 'file', 'prefix']);
    const prefix = s['prefix'] === undefined ? {} : { prefix: text(s['prefix'], `${at}.prefix`) };
    if ((s['env'] === undefined) === (s['file'] === undefined)) fail(at, 'expected exactly one of "env" or "file"');
    if (s['env'] !== undefined) {
      const env = text(s['env'], `${at}.env`);
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(env)) fail(`${at}.env`, 'not an environment variable name');
      if (!process.env[env]) fail(`${at}.env`, `environment variable ${env} is not set`);
      out[name] = { env, ...prefix };
    } else {
      const file = path.resolve(base, text(s['file'], `${at}.file`));
      if (!existsSync(file)) fail(`${at}.file`, `${file} does not exist`);
      out[name] = { file, ...prefix };
    }
  }
  return out;
}

/** The `a2a` endpoint of a resource (docs/a2a.md). @throws NodeFault `config-invalid` naming the field. */
function readA2aEndpoint(o: Json, where: string, base: string): A2aEndpointConfig {
  const http = readHttpEndpoint({ url: o['url'], headers: o['headers'], timeout_ms: o['timeout_ms'] }, where, base);
  return {
    kind: 'a2a',
    url: http.url,
    headers: http.headers,
    timeoutMs: http.timeoutMs,
    cardRefreshS: int(o['card_refresh_s'], `${where}.card_refresh_s`, 1, 86_400 * 7, CONFIG_DEFAULTS.a2aCardRefreshS),
    maxStreams: int(o['max_streams'], `${where}.max_streams`, 1, 1_000_000, CONFIG_DEFAULTS.a2aMaxStreams),
    maxStreamsPerPeer: int(o['max_streams_per_peer'], `${where}.max_streams_per_peer`, 1, 1_000_000, CONFIG_DEFAULTS.a2aMaxStreamsPerPeer),
  };
}

function readHttpEndpoint(o: Json, where: string, base: string): McpHttpEndpointConfig {
  const url = text(o['url'], `${where}.url`);
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    fail(`${where}.url`, `not a URL: ${JSON.stringify(url)}`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') fail(`${where}.url`, 'expected an http:// or https:// URL');
  if (u.username !== '' || u.password !== '')
    fail(`${where}.url`, 'credentials in the URL: give them as a header from {"env"} or {"file"}');
  return {
    kind: 'mcp-http',
    url,
    headers: readHeaders(o['headers'], `${where}.headers`, base),
    timeoutMs: int(o['timeout_ms'], `${where}.timeout_ms`, 1, 3_600_000, CONFIG_DEFAULTS.endpointTimeoutMs),
  };
}

/**
 * Reads a resource's endpoint: `{kind?: "mcp-http", url, headers?, timeout_ms?}` (Streamable HTTP)
 * or `{kind?: "mcp-stdio", command, args?, env?, cwd?, timeout_ms?}` (a child process over stdio);
 * `kind` may be left out, `url` or `command` says which. An A2A agent is
 * `{kind: "a2a", url, headers?, timeout_ms?, card_refresh_s?, max_streams?, max_streams_per_peer?}`
 * (`kind` required: a bare `url` is an MCP server).
 * @throws NodeFault `config-invalid` naming the field.
 */
export function readEndpoint(v: unknown, where: string, base: string): EndpointConfig {
  const raw = obj(v, where, [
    'kind',
    'command',
    'args',
    'env',
    'cwd',
    'url',
    'headers',
    'timeout_ms',
    'card_refresh_s',
    'max_streams',
    'max_streams_per_peer',
  ]);
  if (raw['kind'] === 'a2a') {
    const keys = ['kind', 'url', 'headers', 'timeout_ms', 'card_refresh_s', 'max_streams', 'max_streams_per_peer'];
    return readA2aEndpoint(obj(raw, where, keys), where, base);
  }
  const kind = raw['kind'] ?? (raw['url'] !== undefined ? 'mcp-http' : raw['command'] !== undefined ? 'mcp-stdio' : undefined);
  if (kind === 'mcp-http') return readHttpEndpoint(obj(raw, where, ['kind', 'url', 'headers', 'timeout_ms']), where, base);
  if (kind !== 'mcp-stdio') fail(`${where}.kind`, 'expected "mcp-stdio" (with command), "mcp-http" (with url) or "a2a" (with url)');
  const o = obj(raw, where, ['kind', 'command', 'args', 'env', 'cwd', 'timeout_ms']);
  const args = o['args'] ?? [];
  if (!Array.isArray(args) || args.some((a) => typeof a !== 'string')) fail(`${where}.args`, 'expected an array of strings');
  const env = o['env'] ?? {};
  if (typeof env !== 'object' || env === null || Array.isArray(env) || Object.values(env).some((x) => typeof x !== 'string')) {
    fail(`${where}.env`, 'expected an object of strings');
  }
  return {
    kind: 'mcp-stdio',
    command: resolveCommand(text(o['command'], `${where}.command`), base),
    args: args as string[],
    env: env as Record<string, string>,
    cwd: o['cwd'] === undefined ? undefined : path.resolve(base, text(o['cwd'], `${where}.cwd`)),
    timeoutMs: int(o['timeout_ms'], `${where}.timeout_ms`, 1, 3_600_000, CONFIG_DEFAULTS.endpointTimeoutMs),
  };
}

function readResources(v: unknown, base: string, upstream: readonly Json[] = []): ResourceConfig[] {
  if (v !== undefined && !Array.isArray(v)) fail('resources', 'expected an array');
  const fromFile = (v ?? []) as unknown[];
  const seen = new Set<string>();
  return [...fromFile, ...upstream].map((r, i) => {
    const where = i < fromFile.length ? `resources[${i}]` : `--upstream ${String((r as Json)['name'])}`;
    const o = obj(r, where, ['name', 'id', 'trust_roots', 'endpoint']);
    const name = text(o['name'], `${where}.name`);
    const id = o['id'] === undefined ? resourceIdOf(name) : o['id'];
    if (!isContentId(id)) fail(`${where}.id`, 'expected a content id (64 lowercase hex chars)');
    if (seen.has(id)) fail(i < fromFile.length ? `${where}.id` : where, 'resource listed twice');
    seen.add(id);
    let trustRoots: Did[] | undefined;
    if (o['trust_roots'] !== undefined) {
      const tr = o['trust_roots'];
      if (!Array.isArray(tr)) fail(`${where}.trust_roots`, 'expected an array of did:key');
      trustRoots = tr.map((d, j) => {
        if (!isDid(d)) fail(`${where}.trust_roots[${j}]`, 'not a valid Ed25519 did:key');
        return d as Did;
      });
    }
    // Paths of a command-line upstream are relative to the working folder, not the config file's.
    const b = i < fromFile.length ? base : process.cwd();
    const endpoint = o['endpoint'] === undefined ? undefined : readEndpoint(o['endpoint'], `${where}.endpoint`, b);
    return { name, id, trustRoots, endpoint };
  });
}

/** The top-level keys of a node config (docs/node.md "Configuration"); any other key is refused. */
const TOP_LEVEL_KEYS = [
  'listen',
  'data_dir',
  'steward_key',
  'metrics',
  'nats',
  'max_skew_s',
  'request_index_margin_s',
  'snapshot',
  'abuse',
  'log_size_alarm_bytes',
  'frame_cap',
  'read_timeout_ms',
  'idle_timeout_ms',
  'max_connections',
  'max_pending_per_connection',
  'workers',
  'replay_workers',
  'log',
  'log_level',
  'resources',
  'meter',
  'cluster',
  'revocation_staleness_s',
  'region',
  'tls',
  'nats_tls',
];

/** The limits and sizes of a node config: skew, request index, snapshots, abuse, log and connection caps. */
type Limits = Pick<
  NodeConfig,
  | 'maxSkewS'
  | 'requestIndexMarginS'
  | 'snapshot'
  | 'abuse'
  | 'logSizeAlarmBytes'
  | 'frameCap'
  | 'readTimeoutMs'
  | 'idleTimeoutMs'
  | 'maxConnections'
  | 'maxPendingPerConnection'
  | 'workers'
  | 'replayWorkers'
  | 'log'
>;

/**
 * Reads the sealed-deny, revocation and record-policy limits of the `abuse` section (docs/node.md
 * "Abuse limits"), with the defaults of {@link CONFIG_DEFAULTS}.
 * @throws NodeFault `config-invalid` naming the field.
 */
function readRecordLimits(abuse: Record<string, unknown>): Omit<AbuseConfig, 'burst' | 'refillPerS' | 'maxPeers'> {
  const policy = abuse['record_policy'] ?? 'strict';
  if (policy !== 'strict' && policy !== 'open') fail('abuse.record_policy', "expected 'strict' or 'open'");
  const issuers = abuse['record_issuers'] ?? [];
  if (!Array.isArray(issuers)) fail('abuse.record_issuers', 'expected an array of did:key');
  return {
    denyBurst: int(abuse['deny_burst'], 'abuse.deny_burst', 0, 10_000_000, CONFIG_DEFAULTS.abuseDenyBurst),
    denyRefillPerS: int(abuse['deny_refill_per_s'], 'abuse.deny_refill_per_s', 0, 10_000_000, CONFIG_DEFAULTS.abuseDenyRefillPerS),
    failureBurst: int(abuse['failure_burst'], 'abuse.failure_burst', 0, 100_000_000, CONFIG_DEFAULTS.abuseFailureBurst),
    failureRefillPerS: int(
      abuse['failure_refill_per_s'],
      'abuse.failure_refill_per_s',
      0,
      100_000_000,
      CONFIG_DEFAULTS.abuseFailureRefillPerS,
    ),
    maxRevocations: int(abuse['max_revocations'], 'abuse.max_revocations', 1, 100_000_000, CONFIG_DEFAULTS.abuseMaxRevocations),
    maxAmendments: int(abuse['max_amendments'], 'abuse.max_amendments', 1, 100_000_000, CONFIG_DEFAULTS.abuseMaxAmendments),
    recordPolicy: policy,
    recordIssuers: issuers.map((d: unknown, i: number) => {
      if (!isDid(d)) fail(`abuse.record_issuers[${i}]`, 'not a valid Ed25519 did:key');
      return d as Did;
    }),
    recordMaxBytes: int(abuse['record_max_bytes'], 'abuse.record_max_bytes', 256, 64 << 20, CONFIG_DEFAULTS.abuseRecordMaxBytes),
    recordBurst: int(abuse['record_burst'], 'abuse.record_burst', 0, 1_000_000, CONFIG_DEFAULTS.abuseRecordBurst),
    recordRefillPerS: int(abuse['record_refill_per_s'], 'abuse.record_refill_per_s', 0, 1_000_000, CONFIG_DEFAULTS.abuseRecordRefillPerS),
    maxIssuers: int(abuse['max_issuers'], 'abuse.max_issuers', 1, 10_000_000, CONFIG_DEFAULTS.abuseMaxIssuers),
    inputPendingPerCaller: int(
      abuse['input_pending_per_caller'],
      'abuse.input_pending_per_caller',
      0,
      1_000_000,
      CONFIG_DEFAULTS.abuseInputPendingPerCaller,
    ),
    inputPendingTotal: int(
      abuse['input_pending_total'],
      'abuse.input_pending_total',
      0,
      10_000_000,
      CONFIG_DEFAULTS.abuseInputPendingTotal,
    ),
    inputPendingTtlS: int(abuse['input_pending_ttl_s'], 'abuse.input_pending_ttl_s', 1, 86_400, CONFIG_DEFAULTS.abuseInputPendingTtlS),
    inputRoundsMax: int(abuse['input_rounds_max'], 'abuse.input_rounds_max', 1, 1_000, CONFIG_DEFAULTS.abuseInputRoundsMax),
  };
}

/**
 * Reads the limits of a node config (`o` the top level; `snap`, `abuse`, `log` its sections), in the
 * order {@link configFromJson} always checked them, with the defaults of {@link CONFIG_DEFAULTS}.
 * @throws NodeFault `config-invalid` naming the first field out of its range.
 */
function readLimits(
  o: Record<string, unknown>,
  snap: Record<string, unknown>,
  abuse: Record<string, unknown>,
  log: Record<string, unknown>,
): Limits {
  return {
    maxSkewS: int(o['max_skew_s'], 'max_skew_s', 0, 86_400, CONFIG_DEFAULTS.maxSkewS),
    requestIndexMarginS: int(o['request_index_margin_s'], 'request_index_margin_s', 0, 86_400 * 30, CONFIG_DEFAULTS.requestIndexMarginS),
    snapshot: {
      everyReceipts: int(
        snap['every_receipts'],
        'snapshot.every_receipts',
        0,
        Number.MAX_SAFE_INTEGER,
        CONFIG_DEFAULTS.snapshotEveryReceipts,
      ),
      everyS: int(snap['every_s'], 'snapshot.every_s', 0, 86_400 * 365, CONFIG_DEFAULTS.snapshotEveryS),
      keep: int(snap['keep'], 'snapshot.keep', 1, 1000, CONFIG_DEFAULTS.snapshotKeep),
      scheduling: snapshotScheduling(snap['scheduling']),
      builder: snapshotBuilder(snap['builder']),
      pauseMs: int(snap['pause_ms'], 'snapshot.pause_ms', 0, SNAPSHOT_PAUSE_MAX_MS, 0),
    },
    abuse: {
      burst: int(abuse['burst'], 'abuse.burst', 0, 1_000_000, CONFIG_DEFAULTS.abuseBurst),
      refillPerS: int(abuse['refill_per_s'], 'abuse.refill_per_s', 0, 1_000_000, CONFIG_DEFAULTS.abuseRefillPerS),
      maxPeers: int(abuse['max_peers'], 'abuse.max_peers', 1, 10_000_000, CONFIG_DEFAULTS.abuseMaxPeers),
      ...readRecordLimits(abuse),
    },
    logSizeAlarmBytes: int(
      o['log_size_alarm_bytes'],
      'log_size_alarm_bytes',
      0,
      Number.MAX_SAFE_INTEGER,
      CONFIG_DEFAULTS.logSizeAlarmBytes,
    ),
    frameCap: int(o['frame_cap'], 'frame_cap', 64, 64 << 20, CONFIG_DEFAULTS.frameCap),
    readTimeoutMs: int(o['read_timeout_ms'], 'read_timeout_ms', 10, 600_000, CONFIG_DEFAULTS.readTimeoutMs),
    idleTimeoutMs: int(o['idle_timeout_ms'], 'idle_timeout_ms', 10, 86_400_000, CONFIG_DEFAULTS.idleTimeoutMs),
    maxConnections: int(o['max_connections'], 'max_connections', 1, 1_000_000, CONFIG_DEFAULTS.maxConnections),
    maxPendingPerConnection: int(
      o['max_pending_per_connection'],
      'max_pending_per_connection',
      1,
      65_536,
      CONFIG_DEFAULTS.maxPendingPerConnection,
    ),
    workers: int(o['workers'], 'workers', 0, 64, CONFIG_DEFAULTS.workers),
    replayWorkers: int(o['replay_workers'], 'replay_workers', 0, 64, availableParallelism()),
    log: { batchMax: int(log['batch_max'], 'log.batch_max', 1, 1_000_000, CONFIG_DEFAULTS.batchMax) },
  };
}

/** `snapshot.builder`: `thread` (the default) or `process`; anything else is `config-invalid`. */
function snapshotBuilder(v: unknown): SnapshotBuilderKind {
  if (v === undefined) return 'thread';
  if (v !== 'process' && v !== 'thread') fail('snapshot.builder', 'expected "process" or "thread"');
  return v;
}

/** `snapshot.scheduling`: `nice` (the default) or `idle`; anything else is `config-invalid`. */
function snapshotScheduling(v: unknown): SnapshotScheduling {
  if (v === undefined) return CONFIG_DEFAULTS.snapshotScheduling;
  if (v !== 'idle' && v !== 'nice') fail('snapshot.scheduling', 'expected "idle" or "nice"');
  return v;
}

/**
 * Reads the revocation staleness limit (seconds; `--revocation-staleness-s` wins) and the region
 * name (`--region` wins) of a node config.
 * @throws NodeFault `config-invalid` naming the field or the flag.
 */
function readPlacement(o: Record<string, unknown>, overrides: ConfigOverrides): { stalenessS: number; region: string } {
  let stalenessS = int(o['revocation_staleness_s'], 'revocation_staleness_s', 0, 86_400, CONFIG_DEFAULTS.revocationStalenessS);
  if (overrides.revocationStalenessS !== undefined) {
    const t = overrides.revocationStalenessS;
    if (!/^\d{1,5}$/.test(t) || Number(t) > 86_400) fail('--revocation-staleness-s', 'expected whole seconds in [0, 86400]');
    stalenessS = Number(t);
  }
  const region = overrides.region ?? text(o['region'], 'region', CONFIG_DEFAULTS.region);
  if (!/^[A-Za-z0-9_.-]{1,64}$/.test(region))
    fail(overrides.region !== undefined ? '--region' : 'region', 'expected 1–64 of A–Z a–z 0–9 _ . -');
  return { stalenessS, region };
}

/**
 * Builds a {@link NodeConfig} from a parsed JSON value, applying defaults and overrides.
 * Relative paths resolve against `base` (the config file's folder).
 * @throws NodeFault `config-invalid` naming the first bad field.
 */
export function configFromJson(v: unknown, overrides: ConfigOverrides = {}, base = process.cwd()): NodeConfig {
  const o = obj(v ?? {}, '', TOP_LEVEL_KEYS);
  const listenS = overrides.listen ?? text(o['listen'], 'listen', CONFIG_DEFAULTS.listen);
  const listen = parseHostPort(listenS, overrides.listen !== undefined ? '--listen' : 'listen');
  const dataDir = path.resolve(base, overrides.data ?? text(o['data_dir'], 'data_dir', CONFIG_DEFAULTS.dataDir));
  const stewardKey = path.resolve(dataDir, text(o['steward_key'], 'steward_key', 'steward.key'));
  const metricsS = overrides.metrics ?? (o['metrics'] === undefined ? undefined : text(o['metrics'], 'metrics'));
  const metrics = metricsS === undefined ? undefined : parseHostPort(metricsS, overrides.metrics !== undefined ? '--metrics' : 'metrics');
  const nats = overrides.nats ?? (o['nats'] === undefined ? undefined : text(o['nats'], 'nats'));
  if (nats !== undefined && !/^(nats|tls|ws|wss):\/\/[^\s]+$/.test(nats)) {
    fail(overrides.nats !== undefined ? '--nats' : 'nats', 'expected a nats:// URL');
  }
  const log = obj(o['log'] ?? {}, 'log', ['batch_max']);
  const snap = obj(o['snapshot'] ?? {}, 'snapshot', ['every_receipts', 'every_s', 'keep', 'scheduling', 'builder', 'pause_ms']);
  const abuse = obj(o['abuse'] ?? {}, 'abuse', [
    'burst',
    'refill_per_s',
    'max_peers',
    'deny_burst',
    'deny_refill_per_s',
    'failure_burst',
    'failure_refill_per_s',
    'max_revocations',
    'max_amendments',
    'record_policy',
    'record_issuers',
    'record_max_bytes',
    'record_burst',
    'record_refill_per_s',
    'max_issuers',
    'input_pending_per_caller',
    'input_pending_total',
    'input_pending_ttl_s',
    'input_rounds_max',
  ]);
  const logLevel = text(o['log_level'], 'log_level', CONFIG_DEFAULTS.logLevel);
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) {
    fail('log_level', 'expected fatal|error|warn|info|debug|trace|silent');
  }
  const meter = o['meter'] ?? {};
  if (typeof meter !== 'object' || meter === null || Array.isArray(meter)) fail('meter', 'expected an object');
  const cluster = o['cluster'] ?? {};
  if (typeof cluster !== 'object' || cluster === null || Array.isArray(cluster)) fail('cluster', 'expected an object');
  // The cluster section only takes effect through NATS (cli/node.ts joins the cluster only with a
  // nats URL): without one it would be ignored in silence, and its channels served as plain grants.
  if (Object.keys(cluster).length > 0 && nats === undefined) {
    fail('cluster', 'needs "nats" (or --nats url): without NATS the node joins no cluster and this section would be ignored');
  }
  const { stalenessS, region } = readPlacement(o, overrides);
  return {
    listen,
    dataDir,
    stewardKey,
    metrics,
    nats,
    revocationStalenessS: stalenessS,
    region,
    tls: readServerTls(o['tls'], overrides, base),
    natsTls: readNatsTls(o['nats_tls'], overrides, base),
    ...readLimits(o, snap, abuse, log),
    logLevel,
    resources: readResources(o['resources'], base, upstreamResourcesJson(overrides.upstream ?? [], overrides.trustRoot ?? [])),
    meter: meter as Record<string, unknown>,
    cluster: cluster as Record<string, unknown>,
  };
}

/** A file path of a TLS section or flag, resolved (flags against the working folder). */
function tlsPath(v: unknown, where: string, base: string): string {
  return path.resolve(base, text(v, where));
}

/**
 * A TLS file: the command-line flag's value (relative to the working folder) when given, else the
 * config field `section.field` (relative to the config file's folder `base`), else undefined.
 * @throws NodeFault `config-invalid` naming the flag or the field for a value that is not text.
 */
function tlsFile(
  flag: string | undefined,
  flagName: string,
  t: Record<string, unknown>,
  section: string,
  field: string,
  base: string,
): string | undefined {
  if (flag !== undefined) return tlsPath(flag, flagName, process.cwd());
  return t[field] !== undefined ? tlsPath(t[field], `${section}.${field}`, base) : undefined;
}

/** The `tls` section with `--tls-*` overrides; undefined when neither gives a certificate. @throws NodeFault `config-invalid`. */
function readServerTls(v: unknown, ov: ConfigOverrides, base: string): ServerTlsConfig | undefined {
  const t = obj(v ?? {}, 'tls', ['cert_file', 'key_file', 'ca_file', 'client_certs']);
  const cert = tlsFile(ov.tlsCert, '--tls-cert', t, 'tls', 'cert_file', base);
  const key = tlsFile(ov.tlsKey, '--tls-key', t, 'tls', 'key_file', base);
  const ca = tlsFile(ov.tlsCa, '--tls-ca', t, 'tls', 'ca_file', base);
  const mode = ov.tlsClientCerts ?? (t['client_certs'] === undefined ? 'off' : text(t['client_certs'], 'tls.client_certs'));
  const modeWhere = ov.tlsClientCerts !== undefined ? '--tls-client-certs' : 'tls.client_certs';
  if (mode !== 'off' && mode !== 'request' && mode !== 'require') fail(modeWhere, 'expected off|request|require');
  if (cert === undefined && key === undefined) {
    if (ca !== undefined || mode !== 'off')
      fail(ov.tlsCa !== undefined ? '--tls-ca' : 'tls', 'needs cert_file and key_file (--tls-cert, --tls-key)');
    return undefined;
  }
  if (cert === undefined) fail(ov.tlsKey !== undefined ? '--tls-cert' : 'tls.cert_file', 'a key without a certificate');
  if (key === undefined) fail(ov.tlsCert !== undefined ? '--tls-key' : 'tls.key_file', 'a certificate without a key');
  if (mode !== 'off' && ca === undefined) fail(modeWhere, 'client certificates need ca_file (--tls-ca) to verify them');
  return { certFile: cert, keyFile: key, caFile: ca, clientCerts: mode };
}

/** The `nats_tls` section with `--nats-*` overrides; undefined when neither gives anything. @throws NodeFault `config-invalid`. */
function readNatsTls(v: unknown, ov: ConfigOverrides, base: string): NatsTlsConfig | undefined {
  const t = obj(v ?? {}, 'nats_tls', ['ca_file', 'cert_file', 'key_file']);
  const caFile = tlsFile(ov.natsCa, '--nats-ca', t, 'nats_tls', 'ca_file', base);
  const certFile = tlsFile(ov.natsCert, '--nats-cert', t, 'nats_tls', 'cert_file', base);
  const keyFile = tlsFile(ov.natsKey, '--nats-key', t, 'nats_tls', 'key_file', base);
  if ((certFile === undefined) !== (keyFile === undefined))
    fail(ov.natsCert !== undefined || ov.natsKey !== undefined ? '--nats-cert' : 'nats_tls', 'cert_file and key_file go together');
  if (caFile === undefined && certFile === undefined) return undefined;
  return { caFile, certFile, keyFile };
}

/**
 * Reads and checks a JSON config file (or only the defaults and overrides when `file` is undefined).
 * At most {@link READ_CAPS}.configFile (4 MiB) is read.
 * @throws NodeFault `config-invalid`: the file is unreadable, a folder, larger than 4 MiB (or
 *   endless, such as /dev/zero) or not JSON (where = the file), or a field is wrong (where = the field).
 */
export function loadConfig(file: string | undefined, overrides: ConfigOverrides = {}): NodeConfig {
  if (file === undefined) return configFromJson({}, overrides);
  let raw: string;
  try {
    raw = readFileCapped(file, READ_CAPS.configFile, 'config file').toString('utf8');
  } catch (e) {
    const why = e instanceof IoError ? e.message : `cannot read ${file}: ${(e as Error).message}`;
    throw new NodeFault(NodeFaultCodes.CONFIG_INVALID, `config: ${why}`, file, { cause: e });
  }
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch (e) {
    throw new NodeFault(NodeFaultCodes.CONFIG_INVALID, `config: ${file} is not JSON: ${(e as Error).message}`, file, { cause: e });
  }
  return configFromJson(v, overrides, path.dirname(path.resolve(file)));
}

/** The trust-root table (§7) of a config: resource id → honoured root issuers, configured resources only. */
export function trustRootsOf(cfg: NodeConfig): Record<ContentId, Did[]> {
  const out: Record<ContentId, Did[]> = {};
  for (const r of cfg.resources) if (r.trustRoots !== undefined) out[r.id] = [...r.trustRoots];
  return out;
}
