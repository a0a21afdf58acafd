/**
 * The transport a budget channel needs, as a small interface (STYLE "Effects live at the edges"):
 * the settlement engine ({@link ChannelPoint}) and the revocation feed only see a {@link ChannelBus},
 * so they are unit-tested against an in-memory bus (channel/memory.ts) and run in the cluster
 * against JetStream (channel/jetstream.ts).
 *
 * The contract that carries the overdraft bound (docs/design.md "Budget channels: the bound we prove"):
 * - `publishStatement` resolves only once the stream has stored the message (a JetStream ack);
 * - `readLatest` returns, for every point that has published on the grant, the latest stored
 *   statement as the stream LEADER holds it when the read starts: every statement acked before
 *   the read began is visible (or a newer one from the same point). A follower read can miss the
 *   latest statement, and then the bound breaks.
 */
import type { ContentId, Did } from '../core/index.ts';
import type { NatsEvent } from '../natsio/index.ts';

/** One stored statement as read back from the stream: the point-hash token and the raw bytes. */
export interface StoredStatement {
  /** The subject's point-hash token (see `pointHash`); a receiver checks it matches the signer. */
  readonly pointHash: string;
  /** Canonical CBOR of the signed statement `{body, signature}`; unverified. */
  readonly bytes: Uint8Array;
}

/** A live subscription to the revocation stream. */
export interface RevocationFollow {
  /** Resolves once every revocation stored when the follow started has been delivered. */
  readonly caughtUp: Promise<void>;
  /** Stops delivery. */
  stop(): Promise<void>;
}

/**
 * Events the bus reports so that nothing fails silently (logged and counted by the caller): the
 * NATS layer's {@link NatsEvent}s (slow consumers, disconnects and reconnects, consumer resets,
 * publish retries), one type for the link and every bus over it.
 */
export type BusEvent = NatsEvent;

/**
 * The statement stream's channel messages: signed statements and channel grants (spec §4.5
 * profile). Implemented over JetStream by channel/jetstream.ts `JetStreamStatementBus`.
 */
export interface StatementBus {
  /**
   * Stores `bytes` (a signed statement) as the latest statement of `point` on `grantId`.
   * Resolves once stored (acked); `msgId` de-duplicates retries.
   * @throws Error when it cannot be stored before the bus's deadline (the caller's settlement fails).
   */
  publishStatement(grantId: ContentId, point: Did, bytes: Uint8Array, msgId: string): Promise<void>;
  /**
   * The latest statement of every point on `grantId`, read from the stream leader (see module docs).
   * @throws Error when the leader cannot be read (the caller's settlement fails).
   */
  readLatest(grantId: ContentId): Promise<StoredStatement[]>;
  /**
   * Stores the channel grant itself (canonical CBOR of the signed grant) once, so an auditor who
   * knows only the grant id can read its budget. De-duplicated by the grant id.
   */
  publishGrant(grantId: ContentId, bytes: Uint8Array): Promise<void>;
  /** The stored signed grant of `grantId` (unverified bytes), or undefined. */
  readGrant(grantId: ContentId): Promise<Uint8Array | undefined>;
}

/**
 * Shard close records (spec §4.5; shards/close.ts), kept on the statement stream one per
 * (grant, point). Implemented over JetStream by channel/jetstream.ts `JetStreamCloseRecordBus`.
 */
export interface CloseRecordBus {
  /** Stores a point's signed close record of a revoked grant. Resolves once stored (acked, de-duplicated by content id). */
  publishClose(grantId: ContentId, point: Did, bytes: Uint8Array): Promise<void>;
  /** Every point's stored close record of `grantId` (unverified bytes), read from the stream leader. */
  readCloses(grantId: ContentId): Promise<Uint8Array[]>;
}

/**
 * The revocation stream: signed revocations (spec §4.4) and steering amendments, every message
 * kept. Implemented over JetStream by channel/jetstream.ts `JetStreamRevocationBus`.
 */
export interface RevocationBus {
  /**
   * Appends a signed revocation or amendment (canonical CBOR bytes) under `grantId`; `msgId`
   * de-duplicates retries. Resolves once stored.
   */
  publishRevocation(grantId: ContentId, bytes: Uint8Array, msgId: string): Promise<void>;
  /**
   * Delivers every stored message from the start of the stream, then new ones as they arrive,
   * each exactly once per follow (a reconnect resumes where delivery stopped), with its stream
   * sequence (from 1, increasing) where the bus knows it (a bus without it cannot confirm freshness).
   */
  followRevocations(onRevocation: (bytes: Uint8Array, seq?: number) => void): Promise<RevocationFollow>;
  /**
   * The revocation stream's last sequence as the stream leader reports it now (0 = empty): one
   * request, no retry, so a cut-off node learns it within `timeoutMs` (milliseconds). Used to
   * confirm a node has seen the latest revocations (channel/freshness.ts).
   * @throws Error when the leader does not answer within `timeoutMs`.
   */
  revocationStreamLastSeq?(timeoutMs: number): Promise<number>;
}

/**
 * Everything a node moves over NATS for its channels, as one object (the three typed buses
 * above, plus events and release). NATS JetStream in the cluster, memory in tests.
 */
export interface ChannelBus extends StatementBus, CloseRecordBus, RevocationBus {
  /** Registers a listener for bus events (slow consumers, reconnects, consumer resets, retries). */
  onEvent(listener: (e: BusEvent) => void): void;
  /** Releases the bus's resources (subscriptions; the connection if the bus owns it). */
  close(): Promise<void>;
}
