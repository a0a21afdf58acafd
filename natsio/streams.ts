/**
 * Create-if-missing JetStream streams with the cluster's fixed settings (docs/cluster.md
 * "Streams"): {@link streamConfig} builds a config, {@link ensureStream} makes it exist.
 *
 * Every stream of the cluster is file-stored, keeps messages by limits, de-duplicates retried
 * publishes by message id within a 2-minute window, refuses message deletion and purges, and
 * has direct get off (`allow_direct: false`): a direct get is answered by any replica, followers
 * included, and can return a message older than the latest acked one.
 */
import type { JetStreamManager, StreamConfig, StreamInfo } from '@nats-io/jetstream';
import { setTimeout as sleep } from 'node:timers/promises';
import { DISCARD, nanos, RETENTION_LIMITS, STORAGE_FILE } from './lib.ts';
import { checkStreamName, checkSubject } from './names.ts';

/** Where a stream's replicas live: the replica count and, optionally, a cluster and server tags (JetStream placement). */
export interface StreamPlacement {
  /** Replicas: 1 for one server, 3 for a 3-server cluster. Default 1. */
  readonly replicas?: number;
  /** Place the stream on this cluster, on servers carrying every tag (omitted: the server chooses). */
  readonly placement?: { readonly cluster: string; readonly tags?: readonly string[] };
}

/** What differs between the cluster's streams. */
export interface StreamShape extends StreamPlacement {
  readonly name: string;
  readonly subjects: readonly string[];
  /** Messages kept per subject (`1`: the latest only; `-1`: all). */
  readonly maxMsgsPerSubject: number;
  /** What a full stream drops: `old` messages, or refuse `new` ones. */
  readonly discard: 'old' | 'new';
}

/** A stream config with the fields this layer always sets. */
export type StreamSpec = Partial<StreamConfig> & { name: string; subjects: string[]; max_msgs_per_subject: number };

/**
 * The full config of a cluster stream (see the module docs for the fixed settings). The
 * `placement` field is present only when a placement is given.
 * @throws NatsNameError `nats-bad-stream-name` / `nats-bad-subject` for a bad name or subject;
 *   RangeError for replicas outside 1–5.
 */
export function streamConfig(shape: StreamShape): StreamSpec {
  const replicas = shape.replicas ?? 1;
  if (!Number.isInteger(replicas) || replicas < 1 || replicas > 5)
    throw new RangeError(`stream ${shape.name}: replicas ${replicas}: expected 1-5`);
  const cfg: StreamSpec = {
    storage: STORAGE_FILE,
    retention: RETENTION_LIMITS,
    num_replicas: replicas,
    duplicate_window: nanos(120_000),
    allow_direct: false,
    deny_delete: true,
    deny_purge: true,
    name: checkStreamName(shape.name),
    subjects: shape.subjects.map((s) => checkSubject(s, { wildcards: true })),
    max_msgs_per_subject: shape.maxMsgsPerSubject,
    discard: DISCARD[shape.discard],
  };
  if (shape.placement !== undefined) {
    cfg.placement = { cluster: shape.placement.cluster, tags: [...(shape.placement.tags ?? [])] };
  }
  return cfg;
}

/** Options of {@link ensureStream}. */
export interface EnsureOpts {
  /**
   * Called with an existing stream's config; returns the fields to update, or undefined when it
   * matches. Default: leave an existing stream alone.
   */
  readonly reconcile?: (existing: StreamConfig) => Partial<StreamConfig> | undefined;
  /** Attempts after a lost creation race or a failed read (default 3), 50 ms apart and growing. */
  readonly attempts?: number;
}

/** The outcome of {@link ensureStream}. */
export type EnsureOutcome = 'created' | 'updated' | 'unchanged';

/** True for JetStream's "stream not found" answer (code 10059). */
export function isStreamNotFound(e: unknown): boolean {
  const x = e as { code?: unknown; api_error?: { err_code?: unknown }; message?: unknown } | undefined;
  if (x?.api_error?.err_code === 10059) return true;
  return String(x?.message ?? e)
    .toLowerCase()
    .includes('not found');
}

/**
 * Makes stream `cfg.name` exist: creates it if it is missing, updates it when `reconcile` asks,
 * else leaves it alone (its creation time and messages stay). Safe to run from every process at
 * once: a lost creation race re-reads the winner's stream.
 * @throws the server's error when the stream can be neither read nor created after the attempts.
 */
export async function ensureStream(
  jsm: JetStreamManager,
  cfg: Partial<StreamConfig> & { name: string },
  opts: EnsureOpts = {},
): Promise<EnsureOutcome> {
  const attempts = opts.attempts ?? 3;
  for (let attempt = 0; ; attempt++) {
    let info: StreamInfo;
    try {
      info = await jsm.streams.info(cfg.name);
    } catch (e) {
      if (!isStreamNotFound(e) || attempt >= attempts) throw e;
      try {
        await jsm.streams.add(cfg);
        return 'created';
      } catch (e2) {
        if (attempt >= attempts) throw e2;
        // another process created it first, or the cluster is electing: read it again
        await sleep(50 * (attempt + 1));
        continue;
      }
    }
    const update = opts.reconcile?.(info.config);
    if (update === undefined) return 'unchanged';
    await jsm.streams.update(cfg.name, update);
    return 'updated';
  }
}
