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
 * The connection, retry, stream creation and follow are the NATS layer's (natsio/): the
 * connection is opened in the background and retried forever, so a node that starts while NATS
 * is down (or partitioned) still serves everything that needs no settlement; every bus call waits
 * for the connection and the streams up to its deadline and then fails (`nats-unavailable`, with
 * the reason of the last attempt), which a channel point treats as a failed settlement.
 *
 * Each stream's messages have their own typed bus over the one link: {@link JetStreamStatementBus}
 * (statements, channel grants), {@link JetStreamCloseRecordBus} (shard close records, on the
 * statement stream) and {@link JetStreamRevocationBus} (revocations and amendments).
 * {@link JetStreamBus} owns the link, sets up both streams and offers the three as one
 * {@link ChannelBus}. Subjects, stream names, configs, message ids and bytes are those of
 * channel/names.ts and {@link streamConfigs}, unchanged.
 */
import type { JetStreamManager, StreamConfig } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { type ContentId, contentIdOfBytes, type Did } from '../core/index.ts';
import {
  ensureStream,
  followFromStart,
  jetStreamLib,
  NatsLink,
  type NatsLinkOpts,
  type StreamPlacement,
  type StreamSpec,
  streamConfig,
  withDeadline,
} from '../natsio/index.ts';
import type { BusEvent, ChannelBus, CloseRecordBus, RevocationBus, RevocationFollow, StatementBus, StoredStatement } from './bus.ts';
import {
  type ChannelNames,
  channelNames,
  closeFilter,
  closeSubject,
  grantSubject,
  pointHashOfSubject,
  revocationStreamSubjects,
  revocationSubject,
  statementFilter,
  statementStreamSubjects,
  statementSubject,
} from './names.ts';

export type { StreamSpec } from '../natsio/index.ts';

/** Options of a {@link JetStreamBus}. Times in milliseconds. */
export interface JetStreamBusOpts {
  /** Stream and subject names (default `channelNames('jcp')`). */
  readonly names?: ChannelNames;
  /** Replicas of both streams: 1 for a single server, 3 for a 3-server cluster. Default 1. */
  readonly replicas?: number;
  /** Where both streams are placed (JetStream placement: a cluster and server tags); omitted: the server chooses. */
  readonly placement?: StreamPlacement['placement'];
  /** Timeout of one JetStream request (publish ack, message get, stream info). Default 2,000 ms. */
  readonly requestTimeoutMs?: number;
  /** How long one publish or read keeps retrying (across reconnects) before it fails. Default 5,000 ms. */
  readonly deadlineMs?: number;
  /** Client name shown by the server. Default `jcp-channel`. */
  readonly name?: string;
  /** TLS options handed to the NATS client unchanged. */
  readonly tls?: NatsLinkOpts['tls'];
  /** Pending messages on a subscription that make it a slow consumer (client side). Default 10,000. */
  readonly slowConsumerPending?: number;
}

/**
 * The stream configs this bus creates (exported for docs and tests): the statement stream keeps
 * one message per subject and drops old ones; the revocation stream keeps everything and refuses
 * new ones when full. `placement`, when given, is set on both.
 */
export function streamConfigs(
  names: ChannelNames,
  replicas: number,
  placement?: StreamPlacement['placement'],
): { statements: StreamSpec; revocations: StreamSpec } {
  const where = { replicas, ...(placement !== undefined ? { placement } : {}) };
  return {
    statements: streamConfig({
      ...where,
      name: names.statementStream,
      subjects: statementStreamSubjects(names),
      maxMsgsPerSubject: 1,
      discard: 'old',
    }),
    revocations: streamConfig({
      ...where,
      name: names.revocationStream,
      subjects: [revocationStreamSubjects(names)],
      maxMsgsPerSubject: -1,
      discard: 'new',
    }),
  };
}

/**
 * Creates the two streams if they are missing, or updates a stream whose subjects, per-subject
 * limit or direct-get flag differ; a stream that already matches is left alone. Safe to run from
 * every node at once (a lost creation race re-reads the winner's stream).
 * @throws the server's error when a stream can be neither read nor created.
 */
export async function ensureStreams(
  jsm: JetStreamManager,
  names: ChannelNames,
  replicas: number,
  placement?: StreamPlacement['placement'],
): Promise<void> {
  const cfgs = streamConfigs(names, replicas, placement);
  for (const cfg of [cfgs.statements, cfgs.revocations]) {
    await ensureStream(jsm, cfg, {
      reconcile: (c: StreamConfig) => {
        const same =
          JSON.stringify(c.subjects) === JSON.stringify(cfg.subjects) &&
          c.max_msgs_per_subject === cfg.max_msgs_per_subject &&
          (c.allow_direct ?? false) === false &&
          c.deny_delete === true;
        if (same) return undefined;
        return {
          subjects: cfg.subjects,
          max_msgs_per_subject: cfg.max_msgs_per_subject,
          allow_direct: false,
          deny_delete: true,
          deny_purge: true,
          discard: cfg.discard!,
        };
      },
    });
  }
}

/** Waits until the link is connected and the streams are in place. @throws NatsUnavailable `nats-unavailable`. */
type StreamsGate = () => Promise<void>;

/** A gate that only waits for the link (for a caller that set up the streams itself). */
function linkGate(link: NatsLink): StreamsGate {
  return async () => {
    await link.ready();
  };
}

/**
 * What the three typed JetStream buses share: the link, the stream names, the gate that waits for
 * the streams, an acked publish retried to the link's deadline, and the leader read of the latest
 * message of every subject under a filter.
 */
abstract class StreamBus {
  protected readonly link: NatsLink;
  protected readonly names: ChannelNames;
  protected readonly gate: StreamsGate;

  /** A bus on `link` for the streams of `names`; `gate` waits for the streams (default: only for the connection). */
  constructor(link: NatsLink, names: ChannelNames, gate: StreamsGate = linkGate(link)) {
    this.link = link;
    this.names = names;
    this.gate = gate;
  }

  /** An acked JetStream publish, de-duplicated by `msgID`, retried as `op` until the link's deadline. */
  protected async publishAcked(op: string, subject: string, bytes: Uint8Array, msgID: string): Promise<void> {
    await this.gate();
    const { js } = await this.link.jetstream();
    await this.link.retry(op, async () => {
      await js.publish(subject, bytes, { msgID, timeout: this.link.requestTimeoutMs });
    });
  }

  /**
   * The latest message of every subject of the statement stream under `filter`, by two leader reads:
   * `STREAM.INFO` with a subject filter lists the subjects, then `STREAM.MSG.GET` with
   * `last_by_subj` fetches each one's latest message. Retried as `op` until the link's deadline.
   */
  protected async latestPerSubject(op: string, filter: string): Promise<{ subject: string; data: Uint8Array }[]> {
    await this.gate();
    const { jsm } = await this.link.jetstream();
    return await this.link.retry(op, async () => {
      const stream = this.names.statementStream;
      const info = await jsm.streams.info(stream, { subjects_filter: filter });
      const msgs = await Promise.all(
        Object.keys(info.state.subjects ?? {}).map((s) => jsm.streams.getMessage(stream, { last_by_subj: s })),
      );
      return msgs.filter((m) => m !== null).map((m) => ({ subject: m.subject, data: m.data }));
    });
  }
}

/** {@link StatementBus} on JetStream: acked, de-duplicated publishes and leader reads of the statement stream. */
export class JetStreamStatementBus extends StreamBus implements StatementBus {
  /** See {@link StatementBus.publishStatement}: an acked, de-duplicated JetStream publish. */
  async publishStatement(grantId: ContentId, point: Did, bytes: Uint8Array, msgId: string): Promise<void> {
    await this.publishAcked('publish statement', statementSubject(this.names, grantId, point), bytes, msgId);
  }

  /**
   * See {@link StatementBus.readLatest}. Two leader reads: `STREAM.INFO` with a subject filter lists
   * every point that has published on the grant, then `STREAM.MSG.GET` with `last_by_subj` fetches
   * each one's latest statement. Both are answered by the stream leader only.
   */
  async readLatest(grantId: ContentId): Promise<StoredStatement[]> {
    const out: StoredStatement[] = [];
    for (const m of await this.latestPerSubject('read statements', statementFilter(this.names, grantId))) {
      const hash = pointHashOfSubject(this.names, m.subject);
      if (hash !== undefined) out.push({ pointHash: hash, bytes: m.data });
    }
    return out;
  }

  /** See {@link StatementBus.publishGrant} (message id `grant.<grant id>`). */
  async publishGrant(grantId: ContentId, bytes: Uint8Array): Promise<void> {
    await this.publishAcked('publish grant', grantSubject(this.names, grantId), bytes, `grant.${grantId}`);
  }

  /** See {@link StatementBus.readGrant} (a leader read, `STREAM.MSG.GET` with `last_by_subj`). */
  async readGrant(grantId: ContentId): Promise<Uint8Array | undefined> {
    const subject = grantSubject(this.names, grantId);
    await this.gate();
    const { jsm } = await this.link.jetstream();
    return await this.link.retry('read grant', async () => {
      const m = await jsm.streams.getMessage(this.names.statementStream, { last_by_subj: subject });
      return m?.data;
    });
  }
}

/** {@link CloseRecordBus} on JetStream: shard close records on the statement stream (message id `close.<content id>`). */
export class JetStreamCloseRecordBus extends StreamBus implements CloseRecordBus {
  /** See {@link CloseRecordBus.publishClose}. */
  async publishClose(grantId: ContentId, point: Did, bytes: Uint8Array): Promise<void> {
    await this.publishAcked('publish close', closeSubject(this.names, grantId, point), bytes, `close.${contentIdOfBytes(bytes)}`);
  }

  /** See {@link CloseRecordBus.readCloses} (leader reads, as {@link JetStreamStatementBus.readLatest}). */
  async readCloses(grantId: ContentId): Promise<Uint8Array[]> {
    return (await this.latestPerSubject('read close records', closeFilter(this.names, grantId))).map((m) => m.data);
  }
}

/** {@link RevocationBus} on JetStream: acked publishes to, and follows from the start of, the revocation stream. */
export class JetStreamRevocationBus extends StreamBus implements RevocationBus {
  /** See {@link RevocationBus.publishRevocation}. */
  async publishRevocation(grantId: ContentId, bytes: Uint8Array, msgId: string): Promise<void> {
    await this.publishAcked('publish revocation', revocationSubject(this.names, grantId), bytes, msgId);
  }

  /**
   * See {@link RevocationBus.revocationStreamLastSeq}: one `$JS.API.STREAM.INFO` request (answered
   * by the stream leader in clustered mode, like the statement reads), `timeoutMs` at most, no
   * retry; fails at once while the connection is not open.
   */
  async revocationStreamLastSeq(timeoutMs: number): Promise<number> {
    const nc = this.link.connection;
    if (nc === undefined || nc.isClosed())
      throw new Error(`revocation stream info: NATS not connected${this.link.problem ? ` (${this.link.problem})` : ''}`);
    const { jetstreamManager } = await jetStreamLib();
    const jsm = await jetstreamManager(nc, { timeout: timeoutMs, checkAPI: false });
    const info = await withDeadline(jsm.streams.info(this.names.revocationStream), timeoutMs, 'revocation stream info');
    return info.state.last_seq;
  }

  /**
   * See {@link RevocationBus.followRevocations}: the NATS layer's follow-from-start (an ordered
   * consumer from the first message, resumed after a gap, a missed heartbeat or a reconnect).
   * Resets and missed heartbeats are reported as bus events. Stopped by the link's close.
   */
  async followRevocations(onRevocation: (bytes: Uint8Array, seq: number) => void): Promise<RevocationFollow> {
    await this.gate();
    const { jsm, js } = await this.link.jetstream();
    const stream = this.names.revocationStream;
    await this.link.retry('revocation stream info', () => jsm.streams.info(stream));
    const follow = await followFromStart(jsm, js, stream, (m) => onRevocation(m.data, m.seq), {
      onStatus: (s) => {
        if (s.type === 'reset') this.link.counts.consumerResets++;
        this.link.emit({ type: 'consumer-reset', detail: `revocation ${s.detail}` });
      },
    });
    const remove = this.link.onClose(follow.stop);
    return {
      caughtUp: follow.caughtUp,
      stop: async () => {
        remove();
        await follow.stop();
      },
    };
  }
}

/**
 * A {@link ChannelBus} on NATS JetStream: one {@link NatsLink} it owns, both streams ensured on
 * start, and the three typed buses ({@link statements}, {@link closes}, {@link revocations}) over
 * it. See the module docs for the guarantees.
 */
export class JetStreamBus implements ChannelBus {
  readonly names: ChannelNames;
  readonly replicas: number;
  /** The NATS link (connection, retry, events) all three buses share. */
  readonly link: NatsLink;
  /** Statements and channel grants. */
  readonly statements: JetStreamStatementBus;
  /** Shard close records. */
  readonly closes: JetStreamCloseRecordBus;
  /** Revocations and amendments. */
  readonly revocations: JetStreamRevocationBus;
  readonly #opts: JetStreamBusOpts;
  readonly #ready: Promise<void>;
  #streamsReady = false;

  private constructor(servers: string | readonly string[], opts: JetStreamBusOpts) {
    this.#opts = opts;
    this.names = opts.names ?? channelNames();
    this.replicas = opts.replicas ?? 1;
    this.link = NatsLink.start(servers, {
      name: opts.name ?? 'jcp-channel',
      ...(opts.requestTimeoutMs !== undefined ? { requestTimeoutMs: opts.requestTimeoutMs } : {}),
      ...(opts.deadlineMs !== undefined ? { deadlineMs: opts.deadlineMs } : {}),
      ...(opts.tls !== undefined ? { tls: opts.tls } : {}),
    });
    this.#ready = this.#setUp();
    // A bus that never connects must not crash the process with an unhandled rejection.
    this.#ready.catch(() => {});
    const gate = () => this.ready();
    this.statements = new JetStreamStatementBus(this.link, this.names, gate);
    this.closes = new JetStreamCloseRecordBus(this.link, this.names, gate);
    this.revocations = new JetStreamRevocationBus(this.link, this.names, gate);
  }

  /**
   * Starts a bus on `servers` (NATS urls). Returns at once; the connection and the streams are
   * set up in the background ({@link ready}).
   */
  static start(servers: string | readonly string[], opts: JetStreamBusOpts = {}): JetStreamBus {
    return new JetStreamBus(servers, opts);
  }

  /** Starts a bus and waits until it is connected with its streams in place. @throws NatsUnavailable after `timeoutMs`. */
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

  /** Resolves once connected with both streams ensured. @throws NatsUnavailable `nats-unavailable` after `timeoutMs`. */
  async ready(timeoutMs = this.link.deadlineMs): Promise<void> {
    await withDeadline(this.#ready, timeoutMs, 'NATS connection', () => this.#problem ?? this.link.problem);
  }

  #problem: string | undefined;

  /** True once connected and the streams are ensured, while the connection is not closed. */
  get connected(): boolean {
    return this.link.connected && this.#streamsReady;
  }

  /** Counters for metrics and the chaos report (the link's). */
  get counts(): NatsLink['counts'] {
    return this.link.counts;
  }

  async #setUp(): Promise<void> {
    await this.link.opened();
    const { jsm } = await this.link.jetstream();
    for (let attempt = 0; ; attempt++) {
      try {
        await ensureStreams(jsm, this.names, this.replicas, this.#opts.placement);
        break;
      } catch (e) {
        if (this.link.closed) throw e;
        this.#problem = `connected, but the JetStream streams could not be set up: ${(e as Error).message}`;
        this.link.emit({ type: 'publish-retry', detail: `ensure streams: ${(e as Error).message}` });
        await this.link.pause(Math.min(2_000, 100 * 2 ** Math.min(attempt, 4)));
      }
    }
    this.#problem = undefined;
    this.#streamsReady = true;
  }

  /** See {@link ChannelBus.onEvent}. */
  onEvent(listener: (e: BusEvent) => void): void {
    this.link.onEvent(listener);
  }

  /** See {@link StatementBus.publishStatement}. */
  publishStatement(grantId: ContentId, point: Did, bytes: Uint8Array, msgId: string): Promise<void> {
    return this.statements.publishStatement(grantId, point, bytes, msgId);
  }

  /** See {@link StatementBus.readLatest}. */
  readLatest(grantId: ContentId): Promise<StoredStatement[]> {
    return this.statements.readLatest(grantId);
  }

  /** See {@link StatementBus.publishGrant}. */
  publishGrant(grantId: ContentId, bytes: Uint8Array): Promise<void> {
    return this.statements.publishGrant(grantId, bytes);
  }

  /** See {@link StatementBus.readGrant}. */
  readGrant(grantId: ContentId): Promise<Uint8Array | undefined> {
    return this.statements.readGrant(grantId);
  }

  /** See {@link CloseRecordBus.publishClose}. */
  publishClose(grantId: ContentId, point: Did, bytes: Uint8Array): Promise<void> {
    return this.closes.publishClose(grantId, point, bytes);
  }

  /** See {@link CloseRecordBus.readCloses}. */
  readCloses(grantId: ContentId): Promise<Uint8Array[]> {
    return this.closes.readCloses(grantId);
  }

  /** See {@link RevocationBus.publishRevocation}. */
  publishRevocation(grantId: ContentId, bytes: Uint8Array, msgId: string): Promise<void> {
    return this.revocations.publishRevocation(grantId, bytes, msgId);
  }

  /** See {@link RevocationBus.revocationStreamLastSeq}. */
  revocationStreamLastSeq(timeoutMs: number): Promise<number> {
    return this.revocations.revocationStreamLastSeq(timeoutMs);
  }

  /** Retries and failures per operation (natsio/ `NatsLink.opCounts`), for `/metrics`. */
  get opCounts(): NatsLink['opCounts'] {
    return this.link.opCounts;
  }

  /** See {@link RevocationBus.followRevocations}. */
  followRevocations(onRevocation: (bytes: Uint8Array, seq: number) => void): Promise<RevocationFollow> {
    return this.revocations.followRevocations(onRevocation);
  }

  /** The NATS connection, once open (for tools that share it, e.g. the KV baseline and the shard stream). */
  get connection(): NatsConnection | undefined {
    return this.link.connection;
  }

  /** Stops every revocation follow and closes the connection. */
  async close(): Promise<void> {
    await this.link.close();
  }

  /** Deletes both streams (tests and `cluster down --purge` only: this destroys the evidence). */
  async deleteStreams(): Promise<void> {
    await this.ready();
    const { jsm } = await this.link.jetstream();
    for (const name of [this.names.statementStream, this.names.revocationStream]) {
      await jsm.streams.delete(name).catch(() => false);
    }
  }
}
