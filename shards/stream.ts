/**
 * The shard assignment stream on NATS JetStream (spec §4.5; docs/cluster.md "Shards and
 * rebalancing"): stream `<ROOT>_SHARDS`, subjects under `<root>.shard.>`, kept like the revocation
 * stream (everything, `discard: new`, file storage, 2-minute duplicate window, `deny_delete`,
 * `deny_purge`, `allow_direct: false`):
 *
 * - `<root>.shard.set.<parent id>.<holder hash>`: signed assignments (shards/assignment.ts), read by
 *   every node with an ordered consumer from the first message;
 * - `<root>.shard.ack.<assignment id>.<point hash>`: each point's signed acknowledgement, read with
 *   leader reads (`STREAM.INFO` with a subject filter, then `STREAM.MSG.GET` `last_by_subj`).
 *
 * `<holder hash>` / `<point hash>` are `blake3(utf8(did))` (64 hex), as in the statement stream.
 * Publishes wait for the stream's ack and carry a message id (the record's content id), and are
 * retried with backoff until a deadline; the stream is created if missing and followed from the
 * start, all by the NATS layer (natsio/). It runs on a connection the caller owns (a node's or
 * the CLI's `JetStreamBus.connection`) and never closes it.
 */
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { type ContentId, contentIdOfBytes, type Did, utf8 } from '../core/index.ts';
import {
  ensureStream,
  followFromStart,
  NatsLink,
  retryUntil,
  rootStreamName,
  type StreamPlacement,
  type StreamSpec,
  streamConfig,
} from '../natsio/index.ts';
import { assignmentId, encodeShardAck, encodeShardAssignment, type SignedShardAck, type SignedShardAssignment } from './assignment.ts';

/** `blake3(utf8(did))`: the subject token of a did. */
const didHash = (did: Did): ContentId => contentIdOfBytes(utf8(did));

/** The stream's name for subject root `root` (`jcp` → `JCP_SHARDS`). @throws JcpError `schema` */
export function shardStreamName(root: string): string {
  return rootStreamName(root, 'SHARDS');
}

/** The stream config this module creates (exported for docs and tests); `placement` only when given. */
export function shardStreamConfig(root: string, replicas: number, placement?: StreamPlacement['placement']): StreamSpec {
  return streamConfig({
    name: shardStreamName(root),
    subjects: [`${root}.shard.>`],
    replicas,
    ...(placement !== undefined ? { placement } : {}),
    maxMsgsPerSubject: -1,
    discard: 'new',
  });
}

/** A running follow of the assignments: `caughtUp` resolves once the backlog at start is delivered. */
export interface AssignmentFollow {
  readonly caughtUp: Promise<void>;
  stop(): Promise<void>;
}

/** What minting and rebalancing need to hand out an assignment (implemented by {@link ShardAssignmentStream}). */
export interface AssignmentTransport {
  publishAssignment(sa: SignedShardAssignment): Promise<void>;
  readAcks(assignment: ContentId): Promise<Uint8Array[]>;
}

/** Options of {@link ShardAssignmentStream}. Times in milliseconds. */
export interface ShardStreamOpts {
  /** Subject root (default `jcp`), as the node config's `cluster.subject_root`. */
  readonly root?: string;
  /** Stream replicas: 1 for one NATS server, 3 for a 3-server cluster. Default 1. */
  readonly replicas?: number;
  /** Where the stream is placed (JetStream placement: a cluster and server tags); omitted: the server chooses. */
  readonly placement?: StreamPlacement['placement'];
  /** Per-request timeout. Default 2,000 ms. */
  readonly requestTimeoutMs?: number;
  /** How long a publish or read is retried. Default 5,000 ms. */
  readonly deadlineMs?: number;
}

/** The assignment stream over one NATS connection: the typed bus of shard assignments and acknowledgements. See the module docs. */
export class ShardAssignmentStream implements AssignmentTransport {
  readonly root: string;
  readonly stream: string;
  readonly #link: NatsLink;
  readonly #replicas: number;
  readonly #placement: StreamPlacement['placement'] | undefined;
  #ensured: Promise<{ jsm: JetStreamManager; js: JetStreamClient }> | undefined;

  /** @throws JcpError `schema` for a bad subject root. */
  constructor(nc: NatsConnection, opts: ShardStreamOpts = {}) {
    this.root = opts.root ?? 'jcp';
    this.stream = shardStreamName(this.root);
    this.#link = NatsLink.over(nc, {
      ...(opts.requestTimeoutMs !== undefined ? { requestTimeoutMs: opts.requestTimeoutMs } : {}),
      ...(opts.deadlineMs !== undefined ? { deadlineMs: opts.deadlineMs } : {}),
    });
    this.#replicas = opts.replicas ?? 1;
    this.#placement = opts.placement;
  }

  /** Creates the stream if it is missing (idempotent, safe to race). Retried until the deadline. */
  async ensure(): Promise<{ jsm: JetStreamManager; js: JetStreamClient }> {
    this.#ensured ??= this.#retry('ensure the shard stream', async () => {
      const { jsm, js } = await this.#link.jetstream();
      await ensureStream(jsm, shardStreamConfig(this.root, this.#replicas, this.#placement), { attempts: 1 });
      return { jsm, js };
    });
    this.#ensured.catch(() => {
      this.#ensured = undefined;
    });
    return await this.#ensured;
  }

  /** Stores a signed assignment (acked, de-duplicated by its id). @throws Error after the deadline. */
  async publishAssignment(sa: SignedShardAssignment): Promise<void> {
    const { js } = await this.ensure();
    const subject = `${this.root}.shard.set.${sa.body.parent_id}.${didHash(sa.body.holder)}`;
    const msgID = `set.${assignmentId(sa.body)}`;
    await this.#retry('publish shard assignment', async () => {
      await js.publish(subject, encodeShardAssignment(sa), { msgID, timeout: this.#link.requestTimeoutMs });
    });
  }

  /** Stores a point's signed acknowledgement (acked, de-duplicated). @throws Error after the deadline. */
  async publishAck(ack: SignedShardAck): Promise<void> {
    const { js } = await this.ensure();
    const subject = `${this.root}.shard.ack.${ack.body.assignment}.${didHash(ack.body.point)}`;
    const msgID = `ack.${ack.body.assignment}.${didHash(ack.body.point)}`;
    await this.#retry('publish shard acknowledgement', async () => {
      await js.publish(subject, encodeShardAck(ack), { msgID, timeout: this.#link.requestTimeoutMs });
    });
  }

  /** Every point's stored acknowledgement of `assignment` (unverified bytes), by leader reads. */
  async readAcks(assignment: ContentId): Promise<Uint8Array[]> {
    const { jsm } = await this.ensure();
    return await this.#retry('read shard acknowledgements', async () => {
      const info = await jsm.streams.info(this.stream, { subjects_filter: `${this.root}.shard.ack.${assignment}.*` });
      const msgs = await Promise.all(
        Object.keys(info.state.subjects ?? {}).map((s) => jsm.streams.getMessage(this.stream, { last_by_subj: s })),
      );
      return msgs.filter((m) => m !== null).map((m) => m.data);
    });
  }

  /**
   * Follows every assignment from the first message (the NATS layer's follow-from-start: an
   * ordered consumer, recreated after a gap or a reconnect, nothing lost or delivered twice),
   * calling `onAssignment` with each message's bytes in stream order.
   * @throws Error when the stream cannot be reached before the deadline.
   */
  async follow(onAssignment: (bytes: Uint8Array) => void): Promise<AssignmentFollow> {
    const { jsm, js } = await this.ensure();
    const filter = `${this.root}.shard.set.>`;
    await this.#retry('shard stream info', () => jsm.streams.info(this.stream, { subjects_filter: filter }));
    return await followFromStart(jsm, js, this.stream, (m) => onAssignment(m.data), { filter });
  }

  /**
   * Like {@link follow}, but read-only: the stream is not created when it is missing (an auditor's
   * read, e.g. the console's grant tree).
   * @throws Error when the stream does not exist or cannot be reached before the deadline.
   */
  async watch(onAssignment: (bytes: Uint8Array) => void): Promise<AssignmentFollow> {
    const { jsm, js } = await this.#link.jetstream();
    const filter = `${this.root}.shard.set.>`;
    await this.#retry('shard stream info', () => jsm.streams.info(this.stream, { subjects_filter: filter }));
    return await followFromStart(jsm, js, this.stream, (m) => onAssignment(m.data), { filter });
  }

  /** {@link retryUntil} to this stream's deadline; stops at once when the caller's connection is closed. */
  async #retry<T>(what: string, op: () => Promise<T>): Promise<T> {
    const nc = this.#link.connection!;
    return await retryUntil(what, op, {
      deadlineMs: this.#link.deadlineMs,
      capMs: 800,
      stopped: () => (nc.isClosed() ? 'the NATS connection is closed' : undefined),
    });
  }
}
