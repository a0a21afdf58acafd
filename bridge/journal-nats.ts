/**
 * The call journal shared by bridge replicas (docs/bridge.md "Two MCP eras on the same endpoints
 * (bridge/modern.ts)", its paragraph "Stateless HTTP, replicas"): several
 * bridge processes for the same agent, behind one proxy, agree on each call's `now` and nonce, so
 * a call re-sent to another replica is the same signed request (spec §11 `request_id`), replayed
 * by the node: one decision and one debit.
 *
 * The journal is a NATS JetStream KV bucket (`@nats-io/kv`), reached through the cluster's NATS
 * layer (natsio/: {@link NatsLink}, its TLS options, its deadline):
 *
 * - key: the SHA-256 of the call key (itself a digest of the agent, resource, tool, arguments and
 *   the MCP request id or idempotency key), hex; the arguments never reach NATS;
 * - value: `{"now", "nonce", "signature"?, "state", "scope"?, "tag"}` (unix seconds; 32 hex digits;
 *   128 hex digits, threshold callers only; `open` | `done`; a session digest; an HMAC of the rest
 *   keyed with the call key, see `tagOf`), JSON; an entry whose tag does not verify is unreadable
 *   (taken over as a new call, never taken as a stamp);
 * - a call is opened with a compare-and-set create (`kv.create`): of two replicas racing on one
 *   key, one writes its stamp and the other reads it back, so both sign the same request. A `done`
 *   entry is reused within the answered window by a call that names itself (journal.ts
 *   "Answered": an idempotency key, or the same MCP session, kept as `scope`), so the second of two
 *   replicas handed such a call after the first answered it signs the same request too. A key whose
 *   entry is otherwise `done`, or older than the window, is taken over with a compare-and-set update;
 * - entries expire after the window (the bucket's `max_age`), and the bucket is bounded by a count
 *   of entries sized from the byte bound (`max_msgs`, discard-new; {@link entryBound}): a full
 *   bucket refuses a new call `journal-full` — never a fresh stamp, which would be a second debit
 *   for a re-send — and never drops an open entry (a byte bound did: see `#open`).
 *
 * NATS unreachable (or not answering within the link's deadline): the call is refused
 * `journal-unavailable` before anything is signed or sent. A replica without its journal cannot
 * tell a re-send from a new call, and guessing "new" is a second debit.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { DiscardPolicy } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import { NatsLink, type NatsLinkOpts, checkStreamName } from '../natsio/index.ts';
import {
  type AnsweredScope,
  type CallStamp,
  DEFAULT_ANSWERED_WINDOW_S,
  type Journal,
  JournalError,
  JournalErrorCodes,
  sessionDigest,
} from './journal.ts';

/** The default bucket name (`--journal-bucket`). */
export const DEFAULT_JOURNAL_BUCKET = 'jcp_bridge_journal';
/** The default byte bound of the bucket (`--journal-max-bytes`): 64 MiB, some 106,000 entries ({@link entryBound}). */
export const DEFAULT_JOURNAL_MAX_BYTES = 64 * 1024 * 1024;
/** The largest message (headers and value) the bucket takes, bytes (the stream's `max_msg_size`; an entry is under 300 with its headers). */
const MAX_VALUE_BYTES = 512;
/** A stored record's bytes besides its subject, headers and value (nats-server's file store: 22 of header, 8 of hash). */
const RECORD_OVERHEAD = 30;

/**
 * The number of entries a bucket bounded to `maxBytes` takes: `maxBytes` over the largest record
 * one can take (overhead, subject `$KV.<bucket>.<64 hex>`, {@link MAX_VALUE_BYTES}), so the stream
 * never holds more than `maxBytes` (about 106,000 entries for the default 64 MiB).
 */
export function entryBound(maxBytes: number, bucket: string): number {
  return Math.floor(maxBytes / (RECORD_OVERHEAD + `$KV.${bucket}.`.length + 64 + MAX_VALUE_BYTES));
}
/** Compare-and-set rounds before a key that keeps changing under us is given up (`journal-unavailable`). */
const CAS_ROUNDS = 8;
const NONCE_HEX = /^[0-9a-f]{32}$/;
const SIGNATURE_HEX = /^[0-9a-f]{128}$/;

/** Options of {@link NatsCallJournal}. */
export interface NatsJournalOptions {
  /** NATS url(s): one, comma-separated, or a list (`--journal-nats`). */
  readonly servers: string | readonly string[];
  /** KV bucket name (`--journal-bucket`; default {@link DEFAULT_JOURNAL_BUCKET}); created if missing, with the options below. */
  readonly bucket?: string;
  /** How long an unanswered call stays re-sendable, seconds (default 300): the entries' lifetime. */
  readonly windowS?: number;
  /** The bucket's byte bound (default {@link DEFAULT_JOURNAL_MAX_BYTES}). */
  readonly maxBytes?: number;
  /**
   * How long after its `now` an answered call re-sent with the same key (and {@link AnsweredScope}) is still the
   * same request, seconds (default {@link DEFAULT_ANSWERED_WINDOW_S}; 0: an answered call's key
   * names a new call at once). See journal.ts "answered".
   */
  readonly answeredWindowS?: number;
  /** The NATS link's options (TLS, request timeout, deadline: the longest a call waits for the journal, default 5,000 ms). */
  readonly link?: NatsLinkOpts;
}

/** One entry of the bucket. */
interface Entry {
  readonly now: number;
  readonly nonce: string;
  readonly signature?: string;
  readonly state: 'open' | 'done';
  /** The digest of the MCP session that opened the call (journal.ts `sessionDigest`), when it had one and no idempotency key. */
  readonly scope?: string;
}

const enc = new TextEncoder();
const dec = new TextDecoder();

/**
 * The entry's tag: HMAC-SHA256 (RFC 2104) keyed with the call key of its fields in a fixed order,
 * hex. Only a journal handed that call key writes an entry that verifies under its NATS key; the
 * call key is keyed with the agent's secret for agents with an Ed25519 key (bridge/agent.ts
 * `keyedCallKey`), so another NATS writer cannot plant one.
 */
function tagOf(callKey: string, e: Entry): string {
  const fields = [e.now, e.nonce, e.signature ?? '', e.state, e.scope ?? ''].join('\n');
  return createHmac('sha256', callKey).update('jcp-bridge-journal-entry\0').update(fields).digest('hex');
}

function readEntry(bytes: Uint8Array, callKey: string): Entry | undefined {
  try {
    const v = JSON.parse(dec.decode(bytes)) as Partial<Entry> & { tag?: unknown };
    if (!Number.isSafeInteger(v.now) || typeof v.nonce !== 'string' || !NONCE_HEX.test(v.nonce)) return undefined;
    if (v.state !== 'open' && v.state !== 'done') return undefined;
    if (v.signature !== undefined && !(typeof v.signature === 'string' && SIGNATURE_HEX.test(v.signature))) return undefined;
    if (v.scope !== undefined && !(typeof v.scope === 'string' && NONCE_HEX.test(v.scope))) return undefined;
    const e: Entry = {
      now: v.now as number,
      nonce: v.nonce,
      ...(v.signature !== undefined ? { signature: v.signature } : {}),
      state: v.state,
      ...(v.scope !== undefined ? { scope: v.scope } : {}),
    };
    if (typeof v.tag !== 'string' || v.tag.length !== 64) return undefined;
    if (!timingSafeEqual(Buffer.from(v.tag), Buffer.from(tagOf(callKey, e)))) return undefined;
    return e;
  } catch {
    return undefined;
  }
}

const write = (callKey: string, e: Entry) => enc.encode(JSON.stringify({ ...e, tag: tagOf(callKey, e) }));
const hexBytes = (h: string) => Uint8Array.from(Buffer.from(h, 'hex'));

/** True for the answer of a compare-and-set that lost (the key changed since it was read). */
function lostRace(e: unknown): boolean {
  const code = (e as { code?: unknown })?.code;
  return code === 10071 || code === 10164 || /wrong last sequence/i.test((e as Error)?.message ?? '');
}

/** The journal error for a failed KV operation: `journal-full` for a bucket at its bound, else `journal-unavailable`. */
function journalError(e: unknown, bucket: string): JournalError {
  if (e instanceof JournalError) return e;
  const m = (e as Error)?.message ?? String(e);
  if (/maximum (bytes|messages)/i.test(m))
    return new JournalError(JournalErrorCodes.FULL, `the shared journal (KV bucket ${bucket}) is full (${m}); nothing was sent`, {
      cause: e,
    });
  return new JournalError(
    JournalErrorCodes.UNAVAILABLE,
    `the shared journal (KV bucket ${bucket}) did not answer: ${m}; nothing was sent`,
    {
      cause: e,
    },
  );
}

/** See the module comment. */
export class NatsCallJournal implements Journal {
  /** See {@link Journal.shared}. */
  readonly shared = true;
  readonly #link: NatsLink;
  readonly #bucket: string;
  readonly #windowS: number;
  readonly #maxBytes: number;
  readonly #answeredS: number;
  #kv: Promise<KV> | undefined;

  /**
   * Starts the NATS link in the background (it retries forever) and returns at once; the bucket is
   * opened, or created, on the first call. @throws NatsNameError `nats-bad-stream-name` for a bad
   * bucket name; RangeError for a bad window or bound.
   */
  constructor(opts: NatsJournalOptions) {
    this.#bucket = checkStreamName(opts.bucket ?? DEFAULT_JOURNAL_BUCKET);
    this.#windowS = opts.windowS ?? 300;
    this.#maxBytes = opts.maxBytes ?? DEFAULT_JOURNAL_MAX_BYTES;
    this.#answeredS = opts.answeredWindowS ?? DEFAULT_ANSWERED_WINDOW_S;
    if (!Number.isSafeInteger(this.#answeredS) || this.#answeredS < 0)
      throw new RangeError('answeredWindowS: expected a non-negative integer');
    if (!Number.isSafeInteger(this.#windowS) || this.#windowS < 0) throw new RangeError('windowS: expected a non-negative integer');
    if (!Number.isSafeInteger(this.#maxBytes) || this.#maxBytes < 4096) throw new RangeError('maxBytes: expected an integer ≥ 4096');
    this.#link = NatsLink.start(opts.servers, { name: 'jcp-bridge-journal', ...opts.link });
  }

  /** The bucket's name. */
  get bucket(): string {
    return this.#bucket;
  }

  /**
   * Opens (or creates) the bucket now rather than on the first call, so a bridge started without
   * its journal says so at once. @throws JournalError `journal-unavailable`.
   */
  async ready(): Promise<void> {
    await this.#with(async () => undefined);
  }

  /**
   * The bucket, opened (created if missing: history 1, max age the window, discard new) once per
   * process, and bounded by a count of entries ({@link entryBound}), not by `max_bytes`. At
   * `max_bytes` the server (2.9) admits a write on its payload and header size but stores the
   * subject and record overhead too, and then drops the oldest messages of the stream to get back
   * under the bound; a `done` update of a key is always admitted at the bound (it replaces the
   * key's message), so answered calls evicted *open* ones. At `max_msgs` with discard new a create
   * is refused (`maximum messages exceeded`: `journal-full`) and an update, which replaces its
   * key's message, keeps the count: no entry is ever dropped before it expires. A bucket an earlier
   * bridge created with a byte bound is converted (its `max_bytes` becomes the count's bound).
   */
  #open(): Promise<KV> {
    this.#kv ??= (async () => {
      const { js } = await this.#link.jetstream();
      const { Kvm } = await import('@nats-io/kv');
      const kv = await new Kvm(js).create(this.#bucket, {
        history: 1,
        // The entry outlives the window by a little: the window is checked on `now` as well.
        ttl: (Math.max(this.#windowS, 1) + 5) * 1000,
        maxValueSize: MAX_VALUE_BYTES,
        timeout: this.#link.requestTimeoutMs,
      });
      const jsm = await js.jetstreamManager();
      const stream = `KV_${this.#bucket}`;
      const { config } = await jsm.streams.info(stream);
      if (config.max_bytes > 0 || !(config.max_msgs > 0) || config.discard !== DiscardPolicy.New) {
        const bound = config.max_bytes > 0 ? config.max_bytes : this.#maxBytes;
        const maxMsgs = config.max_msgs > 0 ? config.max_msgs : entryBound(bound, this.#bucket);
        await jsm.streams.update(stream, { ...config, max_msgs: maxMsgs, max_bytes: -1, discard: DiscardPolicy.New });
      }
      return kv;
    })();
    const kv = this.#kv;
    kv.catch(() => {
      if (this.#kv === kv) this.#kv = undefined;
    });
    return kv;
  }

  /** `op` on the bucket; its failure as a {@link JournalError}. */
  async #with<T>(op: (kv: KV) => Promise<T>): Promise<T> {
    try {
      return await op(await this.#open());
    } catch (e) {
      throw journalError(e, this.#bucket);
    }
  }

  /** The KV key of a call: SHA-256 of the call key, hex. */
  #key(callKey: string): string {
    return createHash('sha256').update('jcp-bridge-journal\0').update(callKey).digest('hex');
  }

  /** See {@link Journal.open}. @throws JournalError `journal-unavailable` | `journal-full`. */
  open(callKey: string, _contentKey: string, clockS: number, answered?: AnsweredScope): Promise<CallStamp> {
    const key = this.#key(callKey);
    const scope = answered?.session === undefined ? undefined : sessionDigest(answered.session);
    return this.#with(async (kv) => {
      const fresh: Entry = {
        now: clockS,
        nonce: randomBytes(16).toString('hex'),
        state: 'open',
        ...(scope !== undefined ? { scope } : {}),
      };
      for (let round = 0; round < CAS_ROUNDS; round++) {
        try {
          await kv.create(key, write(callKey, fresh));
          return stampOf(fresh, false);
        } catch (e) {
          if (!lostRace(e)) throw e;
        }
        const got = await kv.get(key);
        if (got === null || got.operation !== 'PUT') continue; // gone meanwhile (expired, deleted): create again
        const had = readEntry(got.value, callKey);
        if (had !== undefined && had.state === 'open' && had.now >= clockS - this.#windowS) return stampOf(had, true);
        // Answered, within the answered window, a call that names itself (idempotency key, or its session): the same request again.
        const replay = answered !== undefined && had !== undefined && had.state === 'done' && this.#answeredS > 0;
        if (replay && had.now >= clockS - this.#answeredS && had.scope === scope) return stampOf(had, true);
        try {
          // Answered earlier or for another session, past the window, or unreadable: this call is a new one.
          await kv.update(key, write(callKey, fresh), got.revision);
          return stampOf(fresh, false);
        } catch (e) {
          if (!lostRace(e)) throw e;
        }
      }
      throw new JournalError(JournalErrorCodes.UNAVAILABLE, `the shared journal entry of this call kept changing (${CAS_ROUNDS} rounds)`);
    });
  }

  /** See {@link Journal.signed}: the first signature recorded for the open call wins. @throws JournalError. */
  signed(callKey: string, signature: Uint8Array): Promise<Uint8Array | undefined> {
    const key = this.#key(callKey);
    const g = Buffer.from(signature).toString('hex');
    return this.#with(async (kv) => {
      for (let round = 0; round < CAS_ROUNDS; round++) {
        const got = await kv.get(key);
        const had = got !== null && got.operation === 'PUT' ? readEntry(got.value, callKey) : undefined;
        // An answered call replayed keeps the signature it was answered for.
        if (had?.signature !== undefined) return hexBytes(had.signature);
        if (got === null || had === undefined || had.state !== 'open')
          throw new JournalError(JournalErrorCodes.UNAVAILABLE, 'the shared journal lost this open call before it was signed; not sent');
        try {
          await kv.update(key, write(callKey, { ...had, signature: g }), got.revision);
          return undefined;
        } catch (e) {
          if (!lostRace(e)) throw e;
        }
      }
      throw new JournalError(JournalErrorCodes.UNAVAILABLE, `the shared journal entry of this call kept changing (${CAS_ROUNDS} rounds)`);
    });
  }

  /** See {@link Journal.end}: marks the entry `done` (kept for the answered window: see {@link open}); a failure leaves it open (re-sendable) until it expires. */
  async end(callKey: string): Promise<void> {
    const key = this.#key(callKey);
    await this.#with(async (kv) => {
      const got = await kv.get(key);
      const had = got !== null && got.operation === 'PUT' ? readEntry(got.value, callKey) : undefined;
      if (got === null || had === undefined || had.state !== 'open') return;
      await kv.update(key, write(callKey, { ...had, state: 'done' }), got.revision);
    }).catch(() => undefined);
  }

  /** Closes the NATS link (the bucket and its entries stay: other replicas use them). */
  async close(): Promise<void> {
    await this.#link.close();
  }
}

function stampOf(e: Entry, resent: boolean): CallStamp {
  return {
    nowS: e.now,
    salt: 0,
    nonce: hexBytes(e.nonce),
    resent,
    ...(resent && e.signature !== undefined ? { signature: hexBytes(e.signature) } : {}),
  };
}
