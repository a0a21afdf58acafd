/**
 * Follow-from-start: every stored message of a stream (optionally under a subject filter) in
 * stream order, then new ones as they arrive. An ordered consumer (`deliver_policy: all`): the
 * client recreates it after a gap, a missed heartbeat or a reconnect, resuming after the last
 * delivered stream sequence, so nothing is lost or delivered twice within one follow.
 *
 * The pull requests behind it are short (`pullExpiresMs`, default 5 s) with an idle heartbeat
 * (`heartbeatMs`, default 1 s): a pull request that never reaches the consumer (seen across a
 * NATS gateway right after the consumer is made: the follower then waits, hears no heartbeat, and
 * is caught up on nothing) is noticed after two missed heartbeats and pulled again. With the
 * client's defaults (30 s pulls, 15 s heartbeats) the same loss held the stream's next message
 * back for about 30 s — "revocation 0 did not reach c2 within 30000 ms" in the regions bench —
 * and for as long as no later message arrived to show the gap.
 */
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { DELIVER } from './lib.ts';
import { checkSubject } from './names.ts';

/** A running follow: `caughtUp` resolves once the backlog present at start is delivered. */
export interface Follow {
  readonly caughtUp: Promise<void>;
  /** Stops delivery; resolves after the handler's last call. */
  stop(): Promise<void>;
}

/** One delivered message. */
export interface FollowedMsg {
  readonly subject: string;
  readonly data: Uint8Array;
  /** Its stream sequence. */
  readonly seq: number;
}

/** Options of {@link followFromStart}. */
export interface FollowOpts {
  /** Only subjects matching this filter (wildcards allowed). */
  readonly filter?: string;
  /** Messages pulled per batch. Default 256. */
  readonly batch?: number;
  /** How long one pull request lives on the server (ms, ≥ 1,000). Default 5,000. */
  readonly pullExpiresMs?: number;
  /** The consumer's idle heartbeat (ms, 500..30,000; two missed ones re-pull). Default 1,000. */
  readonly heartbeatMs?: number;
  /** Consumer status changes: `reset` (recreated after a gap or reconnect) and `heartbeats-missed`. */
  readonly onStatus?: (s: { readonly type: 'reset' | 'heartbeats-missed'; readonly detail: string }) => void;
}

/** Default lifetime of one pull request (ms). */
export const PULL_EXPIRES_MS = 5_000;
/** Default idle heartbeat of the follow's pulls (ms): a lost pull is re-sent after two missed ones. */
export const HEARTBEAT_MS = 1_000;

/**
 * Follows `stream` from its first message, calling `onMessage` with each in stream order; a
 * handler that throws does not stop the follow (the caller counts its own refusals).
 * `stream info` is read first (the caller retries it as it wishes), so a missing stream rejects.
 * @throws NatsNameError `nats-bad-subject` for a bad filter; the server's error when the stream is missing.
 */
export async function followFromStart(
  jsm: JetStreamManager,
  js: JetStreamClient,
  stream: string,
  onMessage: (m: FollowedMsg) => void,
  opts: FollowOpts = {},
): Promise<Follow> {
  const filter = opts.filter === undefined ? undefined : checkSubject(opts.filter, { wildcards: true });
  const info = await jsm.streams.info(stream, filter === undefined ? undefined : { subjects_filter: filter });
  // The backlog: every message up to the last sequence at start (unfiltered), or as many as the
  // filter matched at start. The ordered consumer neither skips nor repeats, so either count is exact.
  const lastSeq = info.state.last_seq;
  const backlog = filter === undefined ? info.state.messages : Object.values(info.state.subjects ?? {}).reduce((a, n) => a + n, 0);
  let resolveCaughtUp!: () => void;
  const caughtUp = new Promise<void>((r) => {
    resolveCaughtUp = r;
  });
  if (backlog === 0 || lastSeq === 0) resolveCaughtUp();
  const consumer = await js.consumers.get(stream, {
    deliver_policy: DELIVER.all,
    ...(filter !== undefined ? { filter_subjects: filter } : {}),
  });
  const messages = await consumer.consume({
    max_messages: opts.batch ?? 256,
    expires: opts.pullExpiresMs ?? PULL_EXPIRES_MS,
    idle_heartbeat: opts.heartbeatMs ?? HEARTBEAT_MS,
  });
  void (async () => {
    for await (const s of messages.status()) {
      if (s.type === 'ordered_consumer_recreated' || s.type === 'reset') {
        opts.onStatus?.({ type: 'reset', detail: `consumer ${s.type}` });
      } else if (s.type === 'heartbeats_missed') {
        opts.onStatus?.({ type: 'heartbeats-missed', detail: `consumer missed ${s.count} heartbeats` });
      }
    }
  })().catch(() => {});
  let delivered = 0;
  const loop = (async () => {
    for await (const m of messages) {
      delivered++;
      try {
        onMessage({ subject: m.subject, data: m.data, seq: m.seq });
      } catch {
        // the caller counts and logs its own refusals
      }
      if (m.seq >= lastSeq || delivered >= backlog || m.info.pending === 0) resolveCaughtUp();
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
