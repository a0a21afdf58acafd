/**
 * The {@link ChannelBus} over NATS JetStream (`@nats-io/transport-node`, `@nats-io/jetstream` v3).
 *
 * Streams are named and configured by the node itself on start, idempotently ({@link ensureStreams}):
 * the statement stream keeps one message per subject (`max_msgs_per_subject: 1`, the latest signed
 * statement of each (grant, point)); the revocation stream keeps everything. Both use file
 * storage, a 2-minute duplicate window (message ids de-duplicate retried publishes), refuse
 * message deletion and purges, and have `allow_direct: false`, so no client of these streams can
 * read from a follower.
 *
 * Which call is a leader read. `jsm.streams.getMessage(stream, { last_by_subj })` sends
 * `$JS.API.STREAM.MSG.GET.<stream>`; in clustered mode nats-server answers that request only on
 * the stream leader ("If we are in clustered mode we need to be the stream leader to proceed",
 * `jsMsgGetRequest` in server/jetstream_api.go), and likewise `$JS.API.STREAM.INFO.<stream>`
 * (used with `subjects_filter` to discover the points). Direct get (`jsm.direct.getMessage`,
 * `$JS.API.DIRECT.GET.<stream>`) is answered by any replica, followers included, when the stream
 * allows it: it can return a statement older than the latest acked one, which breaks the bound,
 * so this module never uses it and creates the streams with direct get disabled.
 *
 * Publishing is at-least-once with de-duplication: `js.publish` waits for the stream's ack (the
 * message is stored, on a quorum of replicas for R3), is retried with backoff across reconnects
 * and leader elections until a deadline, and carries a message id so a retry that raced a lost
 * ack is stored once. Core NATS publishing (at-most-once) is never used for statements or
 * revocations.
 *
 * The connection is opened in the background and retried forever: a node that starts while NATS
 * is down (or partitioned) still serves everything that needs no settlement; every bus call waits
 * for the connection up to its deadline and then fails (`nats-unavailable`, with the reason of the
 * last attempt), which a channel point treats as a failed settlement. Each attempt first checks
 * that the servers greet as NATS (channel/reach.ts), so a listener that is not NATS costs no
 * leaked socket and is named in the error.
 */
import {
  DeliverPolicy,
  DiscardPolicy,
  type JetStreamClient,
  type JetStreamManager,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
  type StreamConfig,
} from '@nats-io/jetstream';
import { connect, type NatsConnection, nanos } from '@nats-io/transport-node';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Did } from '../core/didkey.ts';
import { type ContentId, contentIdOfBytes } from '../core/hash.ts';
import type { BusEvent, ChannelBus, RevocationFollow, StoredStatement } from './bus.ts';
import {
  type ChannelNames,
  channelNames,
  pointHashOfSubject,
  revocationStreamSubjects,
  revocationSubject,
  closeFilter,
  closeSubject,
  grantSubject,
  statementFilter,
  statementStreamSubjects,
  statementSubject,
} from './names.ts';
import { greetingServers, NatsUnavailable } from './reach.ts';

/** Options of a {@link JetStreamBus}. Times in milliseconds. */
export interface JetStreamBusOpts {
  /** Stream and subject names (default `channelNames('jcp')`). */
  readonly names?: ChannelNames;
  /** Replicas of both streams: 1 for a single server, 3 for a 3-server cluster. Default 1. */
  readonly replicas?: number;
  /** Timeout of one JetStream request (publish ack, message get, stream info). Default 2,000 ms. */
  readonly requestTimeoutMs?: number;
  /** How long one publish or read keeps retrying (across reconnects) before it fails. Default 5,000 ms. */
  readonly deadlineMs?: number;
  /** Client name shown by the server. */
  readonly name?: string;
  /** Pending messages on a subscription that make it a slow consumer (client side). Default 10,000. */
  readonly slowConsumerPending?: number;
  /**
   * TLS of the client connection (docs/tls.md): PEM file paths of the CA that signs the servers'
   * certificates and, when the servers ask for one, the client certificate and key. Undefined =
   * as the URL says (`tls://` asks for TLS with the system CAs).
   */
  readonly tls?: { readonly caFile?: string; readonly certFile?: string; readonly keyFile?: string };
}

/** A stream config with the fields this module always sets. */
export type StreamSpec = Partial<StreamConfig> & { name: string; subjects: string[]; max_msgs_per_subject: number };

/** The stream configs this bus creates (exported for docs and tests). */
export function streamConfigs(names: ChannelNames, replicas: number): { statements: StreamSpec; revocations: StreamSpec } {
  const common = {
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    num_replicas: replicas,
    duplicate_window: nanos(120_000),
    allow_direct: false,
    deny_delete: true,
    deny_purge: true,
  };
  return {
    statements: {
      ...common,
      name: names.statementStream,
      subjects: statementStreamSubjects(names),
      max_msgs_per_subject: 1,
      discard: DiscardPolicy.Old,
    },
    revocations: {
      ...common,
      name: names.revocationStream,
      subjects: [revocationStreamSubjects(names)],
      max_msgs_per_subject: -1,
      discard: DiscardPolicy.New,
    },
  };
}

/**
 * Creates the two streams if they are missing, or updates a stream whose subjects, per-subject
 * limit or direct-get flag differ; a stream that already matches is left alone. Safe to run from
 * every node at once (a lost creation race re-reads the winner's stream).
 */
export async function ensureStreams(jsm: JetStreamManager, names: ChannelNames, replicas: number): Promise<void> {
  const cfgs = streamConfigs(names, replicas);
  for (const cfg of [cfgs.statements, cfgs.revocations]) {
    const name = cfg.name;
    for (let attempt = 0; ; attempt++) {
      try {
        const info = await jsm.streams.info(name);
        const c = info.config;
        const same =
          JSON.stringify(c.subjects) === JSON.stringify(cfg.subjects) &&
          c.max_msgs_per_subject === cfg.max_msgs_per_subject &&
          (c.allow_direct ?? false) === false &&
          c.deny_delete === true;
        if (!same) {
          await jsm.streams.update(name, {
            subjects: cfg.subjects,
            max_msgs_per_subject: cfg.max_msgs_per_subject,
            allow_direct: false,
            deny_delete: true,
            deny_purge: true,
            discard: cfg.discard!,
          });
        }
        break;
      } catch (e) {
        if (!isNotFound(e) || attempt >= 3) throw e;
        try {
          await jsm.streams.add(cfg);
          break;
        } catch (e2) {
          if (attempt >= 3) throw e2;
          // another node created it first, or the cluster is electing: read it again
          await sleep(50 * (attempt + 1));
        }
      }
    }
  }
}

function isNotFound(e: unknown): boolean {
  const m = String((e as Error)?.message ?? e).toLowerCase();
  return m.includes('not found');
}

/** A {@link ChannelBus} on NATS JetStream. See the module docs for the guarantees. */
export class JetStreamBus implements ChannelBus {
  readonly names: ChannelNames;
  readonly replicas: number;
  readonly #servers: string[];
  readonly #opts: JetStreamBusOpts;
  readonly #listeners: ((e: BusEvent) => void)[] = [];
  readonly #follows = new Set<() => Promise<void>>();
  #nc: NatsConnection | undefined;
  #js: JetStreamClient | undefined;
  #jsm: JetStreamManager | undefined;
  #ready: Promise<void>;
  #closed = false;
  /** Stops the connection attempts (probes, pauses) on close. */
  readonly #abort = new AbortController();
  /** Why the bus is not ready yet (the last failed attempt), for the error a caller sees. */
  #problem: string | undefined;
  /** Counters for metrics and the chaos report. */
  readonly counts = { slowConsumers: 0, disconnects: 0, reconnects: 0, consumerResets: 0, publishRetries: 0 };
  /**
   * Retries and failures (the deadline passed) per operation (`publish statement`, `read statements`,
   * `publish revocation`, …), for `/metrics`. `publishRetries` above counts the retries of all.
   */
  readonly opCounts = new Map<string, { retries: number; failures: number }>();

  private constructor(servers: string[], opts: JetStreamBusOpts) {
    this.#servers = servers;
    this.#opts = opts;
    this.names = opts.names ?? channelNames();
    this.replicas = opts.replicas ?? 1;
    this.#ready = this.#open();
    // A bus that never connects must not crash the process with an unhandled rejection.
    this.#ready.catch(() => {});
  }

  /**
   * Starts a bus on `servers` (loopback NATS urls). Returns at once; the connection and the
   * streams are set up in the background ({@link ready}).
   */
  static start(servers: string | readonly string[], opts: JetStreamBusOpts = {}): JetStreamBus {
    const list = (typeof servers === 'string' ? servers.split(',') : [...servers]).map((s) => s.trim()).filter(Boolean);
    return new JetStreamBus(list, opts);
  }

  /** Starts a bus and waits until it is connected with its streams in place. */
  static async connect(servers: string | readonly string[], opts: JetStreamBusOpts = {}, timeoutMs = 15_000): Promise<JetStreamBus> {
    const bus = JetStreamBus.start(servers, opts);
    try {
      await bus.ready(timeoutMs);
    } catch (e) {
      await bus.close();
      throw e;
    }
    return bus;
  }

  /** Resolves once connected with both streams ensured; rejects after `timeoutMs`. */
  async ready(timeoutMs = this.#deadline()): Promise<void> {
    await withDeadline(this.#ready, timeoutMs, 'NATS connection', () => this.#problem);
  }

  /** True once connected and the streams are ensured, while the connection is not closed. */
  get connected(): boolean {
    return this.#nc !== undefined && !this.#nc.isClosed() && this.#jsm !== undefined;
  }

  async #open(): Promise<void> {
    let nc: NatsConnection | undefined;
    // The first connection is retried here (not with waitOnFirstConnect) so close() can stop it.
    for (let attempt = 0; nc === undefined; attempt++) {
      if (this.#closed) throw new Error('bus closed');
      // connect() leaks its socket when a listener accepts but never speaks NATS (channel/reach.ts),
      // which kept processes alive forever: such a server is left out of this attempt. A server
      // that is down stays in (connect() fails fast there, and the pool keeps it for reconnects).
      const { greeted, usable, problems } = await greetingServers(this.#servers, this.#requestTimeout(), this.#abort.signal);
      if (this.#closed) throw new Error('bus closed');
      if (greeted.length === 0) {
        this.#problem = problems.join('; ') || 'no NATS url given';
        await this.#pause(Math.min(1_000, 50 * 2 ** Math.min(attempt, 5)));
        continue;
      }
      try {
        nc = await connect({
          servers: usable,
          name: this.#opts.name ?? 'jcp-channel',
          maxReconnectAttempts: -1,
          reconnectTimeWait: 250,
          // Only the urls given: a node behind a proxy must not bypass it through gossiped servers.
          ignoreClusterUpdates: true,
          pingInterval: 5_000,
          maxPingOut: 2,
          timeout: this.#requestTimeout(),
          ...(this.#opts.tls !== undefined
            ? {
                tls: {
                  ...(this.#opts.tls.caFile !== undefined ? { caFile: this.#opts.tls.caFile } : {}),
                  ...(this.#opts.tls.certFile !== undefined ? { certFile: this.#opts.tls.certFile } : {}),
                  ...(this.#opts.tls.keyFile !== undefined ? { keyFile: this.#opts.tls.keyFile } : {}),
                },
              }
            : {}),
        });
      } catch (e) {
        this.#problem = `${usable.join(',')}: ${(e as Error).message}`;
        await this.#pause(Math.min(1_000, 50 * 2 ** Math.min(attempt, 5)));
      }
    }
    if (this.#closed) {
      await nc.close();
      throw new Error('bus closed');
    }
    this.#nc = nc;
    void this.#watch(nc);
    const jsm = await jetstreamManager(nc, { timeout: this.#requestTimeout(), checkAPI: false });
    for (let attempt = 0; ; attempt++) {
      try {
        await ensureStreams(jsm, this.names, this.replicas);
        break;
      } catch (e) {
        if (this.#closed) throw e;
        this.#problem = `connected, but the JetStream streams could not be set up: ${(e as Error).message}`;
        this.#emit({ type: 'publish-retry', detail: `ensure streams: ${(e as Error).message}` });
        await this.#pause(Math.min(2_000, 100 * 2 ** Math.min(attempt, 4)));
      }
    }
    this.#jsm = jsm;
    this.#js = jetstream(nc, { timeout: this.#requestTimeout() });
    this.#problem = undefined;
  }

  /** Sleeps `ms`, or less if the bus is closed meanwhile. */
  async #pause(ms: number): Promise<void> {
    await sleep(ms, undefined, { signal: this.#abort.signal }).catch(() => undefined);
  }

  async #watch(nc: NatsConnection): Promise<void> {
    for await (const s of nc.status()) {
      switch (s.type) {
        case 'slowConsumer':
          this.counts.slowConsumers++;
          this.#emit({ type: 'slow-consumer', detail: `subscription ${s.sub.getSubject()} has ${s.pending} pending messages` });
          break;
        case 'error':
          if (/slow consumer/i.test(s.error.message)) {
            this.counts.slowConsumers++;
            this.#emit({ type: 'slow-consumer', detail: `server: ${s.error.message}` });
          }
          break;
        case 'disconnect':
          this.counts.disconnects++;
          this.#emit({ type: 'disconnect', detail: s.server });
          break;
        case 'reconnect':
          this.counts.reconnects++;
          this.#emit({ type: 'reconnect', detail: s.server });
          break;
        default:
          break;
      }
    }
  }

  #requestTimeout(): number {
    return this.#opts.requestTimeoutMs ?? 2_000;
  }

  #deadline(): number {
    return this.#opts.deadlineMs ?? 5_000;
  }

  #emit(e: BusEvent): void {
    for (const l of this.#listeners) {
      try {
        l(e);
      } catch {
        // a listener's failure is not the bus's
      }
    }
  }

  /** See {@link ChannelBus.onEvent}. */
  onEvent(listener: (e: BusEvent) => void): void {
    this.#listeners.push(listener);
  }

  /** Runs `op` until it succeeds or the deadline passes, retrying with backoff. */
  async #retry<T>(what: string, op: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + this.#deadline();
    try {
      await withDeadline(this.#ready, this.#deadline(), 'NATS connection', () => this.#problem);
    } catch (e) {
      this.#op(what).failures++;
      throw e;
    }
    let last: unknown;
    for (let attempt = 0; Date.now() < deadline; attempt++) {
      if (this.#closed) throw new Error('bus closed');
      try {
        return await op();
      } catch (e) {
        last = e;
        this.counts.publishRetries++;
        this.#op(what).retries++;
        this.#emit({ type: 'publish-retry', detail: `${what}: ${(e as Error).message}` });
        const wait = Math.min(500, 25 * 2 ** Math.min(attempt, 5));
        await sleep(Math.max(0, Math.min(wait, deadline - Date.now())));
      }
    }
    this.#op(what).failures++;
    throw new Error(`${what} failed within ${this.#deadline()} ms: ${(last as Error | undefined)?.message ?? 'no attempt'}`);
  }

  #op(what: string): { retries: number; failures: number } {
    let c = this.opCounts.get(what);
    if (c === undefined) {
      c = { retries: 0, failures: 0 };
      this.opCounts.set(what, c);
    }
    return c;
  }

  /** See {@link ChannelBus.publishStatement}: an acked, de-duplicated JetStream publish. */
  async publishStatement(grantId: ContentId, point: Did, bytes: Uint8Array, msgId: string): Promise<void> {
    const subject = statementSubject(this.names, grantId, point);
    await this.#retry('publish statement', async () => {
      await this.#js!.publish(subject, bytes, { msgID: msgId, timeout: this.#requestTimeout() });
    });
  }

  /**
   * See {@link ChannelBus.readLatest}. Two leader reads: `STREAM.INFO` with a subject filter lists
   * every point that has published on the grant, then `STREAM.MSG.GET` with `last_by_subj` fetches
   * each one's latest statement. Both are answered by the stream leader only.
   */
  async readLatest(grantId: ContentId): Promise<StoredStatement[]> {
    return await this.#retry('read statements', async () => {
      const jsm = this.#jsm!;
      const stream = this.names.statementStream;
      const info = await jsm.streams.info(stream, { subjects_filter: statementFilter(this.names, grantId) });
      const subjects = Object.keys(info.state.subjects ?? {});
      const msgs = await Promise.all(subjects.map((s) => jsm.streams.getMessage(stream, { last_by_subj: s })));
      const out: StoredStatement[] = [];
      for (const m of msgs) {
        if (m === null) continue;
        const hash = pointHashOfSubject(this.names, m.subject);
        if (hash !== undefined) out.push({ pointHash: hash, bytes: m.data });
      }
      return out;
    });
  }

  /** See {@link ChannelBus.publishGrant}. */
  async publishGrant(grantId: ContentId, bytes: Uint8Array): Promise<void> {
    const subject = grantSubject(this.names, grantId);
    await this.#retry('publish grant', async () => {
      await this.#js!.publish(subject, bytes, { msgID: `grant.${grantId}`, timeout: this.#requestTimeout() });
    });
  }

  /** See {@link ChannelBus.readGrant} (a leader read, `STREAM.MSG.GET` with `last_by_subj`). */
  async readGrant(grantId: ContentId): Promise<Uint8Array | undefined> {
    return await this.#retry('read grant', async () => {
      const m = await this.#jsm!.streams.getMessage(this.names.statementStream, { last_by_subj: grantSubject(this.names, grantId) });
      return m?.data;
    });
  }

  /** See {@link ChannelBus.publishClose}. */
  async publishClose(grantId: ContentId, point: Did, bytes: Uint8Array): Promise<void> {
    const subject = closeSubject(this.names, grantId, point);
    const msgID = `close.${contentIdOfBytes(bytes)}`;
    await this.#retry('publish close', async () => {
      await this.#js!.publish(subject, bytes, { msgID, timeout: this.#requestTimeout() });
    });
  }

  /** See {@link ChannelBus.readCloses} (leader reads, as {@link readLatest}). */
  async readCloses(grantId: ContentId): Promise<Uint8Array[]> {
    return await this.#retry('read close records', async () => {
      const jsm = this.#jsm!;
      const stream = this.names.statementStream;
      const info = await jsm.streams.info(stream, { subjects_filter: closeFilter(this.names, grantId) });
      const msgs = await Promise.all(Object.keys(info.state.subjects ?? {}).map((s) => jsm.streams.getMessage(stream, { last_by_subj: s })));
      return msgs.filter((m) => m !== null).map((m) => m.data);
    });
  }

  /** See {@link ChannelBus.publishRevocation}. */
  async publishRevocation(grantId: ContentId, bytes: Uint8Array, msgId: string): Promise<void> {
    const subject = revocationSubject(this.names, grantId);
    await this.#retry('publish revocation', async () => {
      await this.#js!.publish(subject, bytes, { msgID: msgId, timeout: this.#requestTimeout() });
    });
  }

  /**
   * See {@link ChannelBus.followRevocations}. An ordered consumer from the first message: the
   * client recreates it after a gap, a missed heartbeat or a reconnect, resuming after the last
   * delivered stream sequence, so nothing is lost or delivered twice. Resets and missed
   * heartbeats are reported as bus events.
   */
  async followRevocations(onRevocation: (bytes: Uint8Array, seq: number) => void): Promise<RevocationFollow> {
    await withDeadline(this.#ready, this.#deadline(), 'NATS connection', () => this.#problem);
    const jsm = this.#jsm!;
    const js = this.#js!;
    const stream = this.names.revocationStream;
    const info = await this.#retry('revocation stream info', () => jsm.streams.info(stream));
    const backlog = info.state.last_seq;
    let resolveCaughtUp!: () => void;
    const caughtUp = new Promise<void>((r) => {
      resolveCaughtUp = r;
    });
    if (backlog === 0 || info.state.messages === 0) resolveCaughtUp();
    const consumer = await js.consumers.get(stream, { deliver_policy: DeliverPolicy.All });
    const messages = await consumer.consume({ max_messages: 256 });
    void (async () => {
      for await (const s of messages.status()) {
        if (s.type === 'ordered_consumer_recreated' || s.type === 'reset') {
          this.counts.consumerResets++;
          this.#emit({ type: 'consumer-reset', detail: `revocation consumer ${s.type}` });
        } else if (s.type === 'heartbeats_missed') {
          this.#emit({ type: 'consumer-reset', detail: `revocation consumer missed ${s.count} heartbeats` });
        }
      }
    })().catch(() => {});
    const loop = (async () => {
      for await (const m of messages) {
        try {
          onRevocation(m.data, m.seq);
        } catch {
          // the caller counts and logs its own refusals
        }
        if (m.seq >= backlog) resolveCaughtUp();
      }
    })().catch(() => {});
    const stop = async () => {
      await messages.close().catch(() => {});
      await loop;
    };
    this.#follows.add(stop);
    return {
      caughtUp,
      stop: async () => {
        this.#follows.delete(stop);
        await stop();
      },
    };
  }

  /**
   * See {@link ChannelBus.revocationStreamLastSeq}: one `$JS.API.STREAM.INFO` request (answered
   * by the stream leader in clustered mode, like the statement reads), `timeoutMs` at most, no
   * retry; fails at once while the connection is not open.
   */
  async revocationStreamLastSeq(timeoutMs: number): Promise<number> {
    const nc = this.#nc;
    if (nc === undefined || nc.isClosed() || this.#jsm === undefined) throw new Error(`revocation stream info: NATS not connected${this.#problem ? ` (${this.#problem})` : ''}`);
    const jsm = await jetstreamManager(nc, { timeout: timeoutMs, checkAPI: false });
    const info = await withDeadline(jsm.streams.info(this.names.revocationStream), timeoutMs, 'revocation stream info');
    return info.state.last_seq;
  }

  /** The NATS connection, once open (for tools that share it, e.g. the KV baseline). */
  get connection(): NatsConnection | undefined {
    return this.#nc;
  }

  /** Stops every revocation follow and closes the connection. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#abort.abort();
    for (const stop of [...this.#follows]) await stop();
    this.#follows.clear();
    if (this.#nc && !this.#nc.isClosed()) await this.#nc.close().catch(() => {});
  }

  /** Deletes both streams (tests and `cluster down --purge` only: this destroys the evidence). */
  async deleteStreams(): Promise<void> {
    await withDeadline(this.#ready, this.#deadline(), 'NATS connection', () => this.#problem);
    for (const name of [this.names.statementStream, this.names.revocationStream]) {
      await this.#jsm!.streams.delete(name).catch(() => false);
    }
  }
}

/**
 * Same as `p`, but rejects after `ms` milliseconds with a {@link NatsUnavailable} naming `what`
 * and, when `why` says one, the reason of the last failed attempt.
 */
async function withDeadline<T>(p: Promise<T>, ms: number, what: string, why?: () => string | undefined): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          const reason = why?.();
          reject(new NatsUnavailable(`${what}: not ready within ${ms} ms${reason ? ` (${reason})` : ''}`));
        }, ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
