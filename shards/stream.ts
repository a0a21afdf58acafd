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
 * retried with backoff until a deadline. It runs on a connection the caller owns (a node's or
 * the CLI's `JetStreamBus.connection`) and never closes it.
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
import { type NatsConnection, nanos } from '@nats-io/transport-node';
import { setTimeout as sleep } from 'node:timers/promises';
import { type ContentId, contentIdOfBytes, type Did, ErrorCodes, JcpError, utf8 } from '../core/index.ts';
import { assignmentId, encodeShardAck, encodeShardAssignment, type SignedShardAck, type SignedShardAssignment } from './assignment.ts';

const ROOT_RE = /^[a-z][a-z0-9_-]{0,31}$/;

/** `blake3(utf8(did))`: the subject token of a did. */
const didHash = (did: Did): ContentId => contentIdOfBytes(utf8(did));

/** The stream's name for subject root `root` (`jcp` → `JCP_SHARDS`). @throws JcpError `schema` */
export function shardStreamName(root: string): string {
  if (!ROOT_RE.test(root)) throw new JcpError(ErrorCodes.SCHEMA, `subject root ${JSON.stringify(root)}: expected 1-32 of [a-z0-9_-], a letter first`);
  return `${root.toUpperCase().replaceAll('-', '_')}_SHARDS`;
}

/** The stream config this module creates (exported for docs and tests). */
export function shardStreamConfig(root: string, replicas: number): Partial<StreamConfig> & { name: string; subjects: string[] } {
  return {
    name: shardStreamName(root),
    subjects: [`${root}.shard.>`],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    num_replicas: replicas,
    duplicate_window: nanos(120_000),
    allow_direct: false,
    deny_delete: true,
    deny_purge: true,
    max_msgs_per_subject: -1,
    discard: DiscardPolicy.New,
  };
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
  /** Per-request timeout. Default 2,000 ms. */
  readonly requestTimeoutMs?: number;
  /** How long a publish or read is retried. Default 5,000 ms. */
  readonly deadlineMs?: number;
}

/** The assignment stream over one NATS connection. See the module docs. */
export class ShardAssignmentStream implements AssignmentTransport {
  readonly root: string;
  readonly stream: string;
  readonly #nc: NatsConnection;
  readonly #replicas: number;
  readonly #timeoutMs: number;
  readonly #deadlineMs: number;
  #ensured: Promise<{ jsm: JetStreamManager; js: JetStreamClient }> | undefined;

  constructor(nc: NatsConnection, opts: ShardStreamOpts = {}) {
    this.root = opts.root ?? 'jcp';
    this.stream = shardStreamName(this.root);
    this.#nc = nc;
    this.#replicas = opts.replicas ?? 1;
    this.#timeoutMs = opts.requestTimeoutMs ?? 2_000;
    this.#deadlineMs = opts.deadlineMs ?? 5_000;
  }

  /** Creates the stream if it is missing (idempotent, safe to race). Retried until the deadline. */
  async ensure(): Promise<{ jsm: JetStreamManager; js: JetStreamClient }> {
    this.#ensured ??= this.#retry('ensure the shard stream', async () => {
      const jsm = await jetstreamManager(this.#nc, { timeout: this.#timeoutMs, checkAPI: false });
      try {
        await jsm.streams.info(this.stream);
      } catch (e) {
        if (!String((e as Error).message).toLowerCase().includes('not found')) throw e;
        try {
          await jsm.streams.add(shardStreamConfig(this.root, this.#replicas));
        } catch (e2) {
          // another process created it first: it must be readable now
          await jsm.streams.info(this.stream).catch(() => Promise.reject(e2));
        }
      }
      return { jsm, js: jetstream(this.#nc, { timeout: this.#timeoutMs }) };
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
      await js.publish(subject, encodeShardAssignment(sa), { msgID, timeout: this.#timeoutMs });
    });
  }

  /** Stores a point's signed acknowledgement (acked, de-duplicated). @throws Error after the deadline. */
  async publishAck(ack: SignedShardAck): Promise<void> {
    const { js } = await this.ensure();
    const subject = `${this.root}.shard.ack.${ack.body.assignment}.${didHash(ack.body.point)}`;
    const msgID = `ack.${ack.body.assignment}.${didHash(ack.body.point)}`;
    await this.#retry('publish shard acknowledgement', async () => {
      await js.publish(subject, encodeShardAck(ack), { msgID, timeout: this.#timeoutMs });
    });
  }

  /** Every point's stored acknowledgement of `assignment` (unverified bytes), by leader reads. */
  async readAcks(assignment: ContentId): Promise<Uint8Array[]> {
    const { jsm } = await this.ensure();
    return await this.#retry('read shard acknowledgements', async () => {
      const info = await jsm.streams.info(this.stream, { subjects_filter: `${this.root}.shard.ack.${assignment}.*` });
      const msgs = await Promise.all(Object.keys(info.state.subjects ?? {}).map((s) => jsm.streams.getMessage(this.stream, { last_by_subj: s })));
      return msgs.filter((m) => m !== null).map((m) => m.data);
    });
  }

  /**
   * Follows every assignment from the first message (an ordered consumer: recreated after a gap
   * or a reconnect, nothing lost or delivered twice), calling `onAssignment` with each message's
   * bytes in stream order. @throws Error when the stream cannot be reached before the deadline.
   */
  async follow(onAssignment: (bytes: Uint8Array) => void): Promise<AssignmentFollow> {
    const { jsm, js } = await this.ensure();
    const filter = `${this.root}.shard.set.>`;
    const info = await this.#retry('shard stream info', () => jsm.streams.info(this.stream, { subjects_filter: filter }));
    const backlog = Object.values(info.state.subjects ?? {}).reduce((a, n) => a + n, 0);
    let resolveCaughtUp!: () => void;
    const caughtUp = new Promise<void>((r) => {
      resolveCaughtUp = r;
    });
    if (backlog === 0) resolveCaughtUp();
    const consumer = await js.consumers.get(this.stream, { deliver_policy: DeliverPolicy.All, filter_subjects: filter });
    const messages = await consumer.consume({ max_messages: 256 });
    let delivered = 0;
    const loop = (async () => {
      for await (const m of messages) {
        delivered++;
        try {
          onAssignment(m.data);
        } catch {
          // the caller counts and logs its own refusals
        }
        if (delivered >= backlog || m.info.pending === 0) resolveCaughtUp();
      }
    })().catch(() => {});
    return {
      caughtUp,
      stop: async () => {
        await messages.close().catch(() => {});
        await loop;
      },
    };
  }

  async #retry<T>(what: string, op: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + this.#deadlineMs;
    let last: unknown;
    for (let attempt = 0; attempt === 0 || Date.now() < deadline; attempt++) {
      if (this.#nc.isClosed()) throw new Error(`${what}: the NATS connection is closed`);
      try {
        return await op();
      } catch (e) {
        last = e;
        await sleep(Math.max(0, Math.min(25 * 2 ** Math.min(attempt, 5), deadline - Date.now())));
      }
    }
    throw new Error(`${what} failed within ${this.#deadlineMs} ms: ${(last as Error | undefined)?.message ?? 'no attempt'}`);
  }
}
