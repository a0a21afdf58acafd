/**
 * Threshold approvals at the edges (spec §2.2): the approval policies a holder runs
 * (`--approve rules FILE | prompt | webhook URL | allow-all`), the holder's decision journal, and the
 * JetStream stream decisions are published on. The pure parts (decoding, rules, records) are in
 * `approval.ts`; docs/frost.md "Approvals" documents the formats and subjects.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import {
  closeSync,
  existsSync,
  fdatasync,
  fdatasyncSync,
  fstatSync,
  ftruncateSync,
  openSync,
  readFileSync,
  statSync,
  writeSync,
} from 'node:fs';
import type { Readable, Writable } from 'node:stream';
import { createInterface } from 'node:readline';
import { DeliverPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { contentId, type ContentId, contentIdOfBytes, type Did } from '../core/index.ts';
import { ensureStream, isStreamNotFound, storeNameOf } from '../natsio/index.ts';
import {
  type DecisionBody,
  type DecodedCall,
  DEFAULT_MAX_SKEW_S,
  judgeByRules,
  MAX_REASON_CHARS,
  openDecision,
  parseRules,
  type ReadDecision,
  type Subject,
  type Verdict,
} from './approval.ts';
import { evidenceStream, registryBucket } from './bus.ts';
import { groupTag } from './group.ts';
import { FrostError, FrostErrorCodes } from './errors.ts';

/** The call as a person or a webhook is shown it: the decoded call plus who asks whom. */
export type ShownCall = Subject & { readonly group: Did; readonly holder: Did; readonly session: string };

/** An approval policy: decides one call. Must resolve (never reject); a failure is a refusal. */
export interface Approver {
  /** `rules`, `prompt`, `webhook`, `allow-all`. */
  readonly kind: string;
  /** Content id of the policy (rules: its canonical form; prompt/webhook: `{policy, url?}`). */
  readonly id: ContentId;
  /** Sign raw (non-request) messages too, after the policy approves them. */
  readonly allowRaw: boolean;
  /** Largest |holder clock − request now|, seconds (`Infinity`: no clock check, as allow-all). */
  readonly maxSkewS: number;
  decide(call: ShownCall): Promise<Verdict>;
}

/** Common options of the approvers. `timeoutMs`: how long a person or webhook may take (ms). */
export interface ApproverOpts {
  readonly allowRaw?: boolean;
  readonly timeoutMs?: number;
  readonly maxSkewS?: number;
  /**
   * The webhook's shared HMAC secret ({@link readWebhookSecret}): with it, each request is signed
   * and an answer without a valid {@link WEBHOOK_SIGNATURE_HEADER} is a refusal ({@link webhookMac}).
   */
  readonly webhookSecret?: Uint8Array;
}

/** Header of the webhook request's and answer's HMAC: `v1=<64 hex>` (docs/frost.md "Webhook authentication"). */
export const WEBHOOK_SIGNATURE_HEADER = 'x-jcp-signature';
/** Header of the unix time (seconds) the request or answer was signed at. */
export const WEBHOOK_TIMESTAMP_HEADER = 'x-jcp-timestamp';
/** Largest |holder clock − answer timestamp| accepted, seconds (the webhook should hold requests to the same window). */
export const WEBHOOK_REPLAY_WINDOW_S = 300;
/** Fewest bytes of a webhook secret. */
export const MIN_WEBHOOK_SECRET_BYTES = 32;

/**
 * The HMAC-SHA256 (hex) of one webhook message under `secret`, over the UTF-8 text
 * `<first>\n<second>\n<timestamp>\n<hex SHA-256 of body>`. A request: `first` is the method
 * (`POST`), `second` the URL's path and query. An answer: `first` is `ANSWER`, `second` the
 * request's MAC (hex), so an answer is bound to the one request it answers.
 */
export function webhookMac(secret: Uint8Array, first: string, second: string, timestamp: string, body: Uint8Array | string): string {
  const digest = createHash('sha256').update(body).digest('hex');
  return createHmac('sha256', secret).update(`${first}\n${second}\n${timestamp}\n${digest}`, 'utf8').digest('hex');
}

/**
 * A webhook secret from a file (its bytes, one trailing newline dropped) or, when `file` is
 * undefined, from the environment variable `env`. @throws FrostError `frost-policy-invalid`
 * when the file cannot be read, is readable or writable by group or others (mode & 0o077), or the
 * secret is shorter than {@link MIN_WEBHOOK_SECRET_BYTES} bytes, or the variable is unset.
 */
export function readWebhookSecret(source: { file?: string; env?: string }): Uint8Array {
  let bytes: Buffer;
  if (source.file !== undefined) {
    try {
      const mode = statSync(source.file).mode & 0o777;
      if ((mode & 0o077) !== 0) throw new Error(`mode ${mode.toString(8).padStart(4, '0')} lets group or others read it; chmod 600 it`);
      bytes = readFileSync(source.file);
    } catch (e) {
      throw new FrostError(FrostErrorCodes.POLICY_INVALID, `webhook secret file ${source.file}: ${(e as Error).message}`);
    }
  } else {
    const v = source.env === undefined ? undefined : process.env[source.env];
    if (v === undefined || v === '')
      throw new FrostError(FrostErrorCodes.POLICY_INVALID, `webhook secret: ${source.env ?? '(no variable)'} is not set`);
    bytes = Buffer.from(v, 'utf8');
  }
  if (bytes.at(-1) === 0x0a) bytes = bytes.subarray(0, bytes.length - (bytes.at(-2) === 0x0d ? 2 : 1));
  if (bytes.length < MIN_WEBHOOK_SECRET_BYTES)
    throw new FrostError(FrostErrorCodes.POLICY_INVALID, `webhook secret: at least ${MIN_WEBHOOK_SECRET_BYTES} bytes, got ${bytes.length}`);
  return new Uint8Array(bytes);
}

/** Why an answer's HMAC does not authenticate it, or undefined when it does. */
function answerUnsigned(res: Response, body: string, secret: Uint8Array, requestMac: string, nowS: number): string | undefined {
  const ts = res.headers.get(WEBHOOK_TIMESTAMP_HEADER);
  const sig = res.headers.get(WEBHOOK_SIGNATURE_HEADER);
  if (ts === null || sig === null) return `webhook answer is not signed (no ${WEBHOOK_SIGNATURE_HEADER} / ${WEBHOOK_TIMESTAMP_HEADER})`;
  if (!/^\d{1,12}$/.test(ts) || Math.abs(nowS - Number(ts)) > WEBHOOK_REPLAY_WINDOW_S)
    return `webhook answer timestamp ${ts.slice(0, 20)} is not within ${WEBHOOK_REPLAY_WINDOW_S} s of the holder's clock`;
  const want = Buffer.from(`v1=${webhookMac(secret, 'ANSWER', requestMac, ts, body)}`, 'utf8');
  const got = Buffer.from(sig.trim(), 'utf8');
  if (got.length !== want.length || !timingSafeEqual(got, want)) return 'webhook answer signature does not verify';
  return undefined;
}

/** Default time a person or webhook has to answer (ms): no answer in time is a refusal. */
export const DEFAULT_APPROVE_TIMEOUT_MS = 10_000;

/**
 * A rules-file approver (`--approve rules FILE`). @throws FrostError `frost-policy-invalid`
 * naming the field when the file does not parse, `frost-policy-invalid` when it cannot be read.
 */
export function rulesApprover(path: string, opts: ApproverOpts = {}): Approver {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new FrostError(FrostErrorCodes.POLICY_INVALID, `rules file ${path}: ${(e as Error).message}`);
  }
  const r = parseRules(text);
  if (!r.ok) throw new FrostError(FrostErrorCodes.POLICY_INVALID, `${path}: ${r.error.why}`);
  const rules = r.value;
  return {
    kind: 'rules',
    id: rules.id,
    allowRaw: opts.allowRaw ?? false,
    maxSkewS: opts.maxSkewS ?? rules.max_skew_s,
    decide: async (c) => judgeByRules(rules, c),
  };
}

/**
 * The policy id an allow-all holder names in its decision records: the content id (BLAKE3-256,
 * hex) of the UTF-8 text `jcp-frost-policy/allow-all`; its `policy_kind` is `allow-all`.
 */
export const ALLOW_ALL_POLICY_ID: ContentId = contentIdOfBytes(new TextEncoder().encode('jcp-frost-policy/allow-all'));

/** The reason an allow-all holder gives in each (approving) decision record. */
export const ALLOW_ALL_REASON = 'allow-all: this holder signs whatever an allowed coordinator asks';

/**
 * The explicit "sign anything" policy (`--approve allow-all`; library `signAll: true`): approves
 * every message an allowed coordinator sends (jcp/1 calls whatever their `now`, grants,
 * revocations, raw bytes), the behaviour of a participant before approvals existed. Each decision
 * is still a signed record (policy {@link ALLOW_ALL_POLICY_ID}, reason {@link ALLOW_ALL_REASON})
 * in the journal and on the approvals stream, like any policy's.
 */
export function allowAllApprover(): Approver {
  return {
    kind: 'allow-all',
    id: ALLOW_ALL_POLICY_ID,
    allowRaw: true,
    // No clock check: the old behaviour signed a request whatever its `now` (the node judges it).
    maxSkewS: Number.POSITIVE_INFINITY,
    decide: async () => ({ approve: true, reason: ALLOW_ALL_REASON }),
  };
}

/** One line per field of a decoded call, for a person. */
export function describeCall(c: ShownCall): string {
  if (c.kind === 'raw') return `  raw message ${c.request} (${c.bytes} bytes): ${c.why}\n  group ${c.group}, session ${c.session}`;
  const d: DecodedCall = c;
  const args = d.arguments !== undefined ? JSON.stringify(d.arguments) : d.payload_hex !== undefined ? `0x${d.payload_hex}` : '(none)';
  return [
    `  request   ${d.request}`,
    `  tool      ${d.action} (${d.frame_kind}, ${d.trust})`,
    `  resource  ${d.resource}`,
    `  arguments ${args}`,
    `  cost      ${d.cost_uj} µJ (${d.provenance})`,
    `  caller    ${d.caller}`,
    `  now       ${d.now} (${new Date(d.now * 1000).toISOString()})`,
    ...d.chain.map(
      (g, i) =>
        `  chain[${i}]  ${g.issuer} → ${g.subject}: [${g.actions.join(', ')}] on ${g.resource}, ${g.budget_uj} µJ, expires ${g.expiry}`,
    ),
    `  group     ${c.group}, session ${c.session}`,
  ].join('\n');
}

/**
 * A person at the participant's terminal (`--approve prompt`): shows each call on `output` and
 * reads one line from `input` (`y`/`yes` approves; anything else refuses, the text after `n` is
 * the reason). One question at a time; no answer within `timeoutMs` (or input closed) refuses.
 */
export function promptApprover(input: Readable, output: Writable, opts: ApproverOpts = {}): Approver {
  const rl = createInterface({ input, terminal: false });
  const lines: string[] = [];
  let waiter: ((l: string | undefined) => void) | undefined;
  let closed = false;
  rl.on('line', (l) => {
    if (waiter) {
      const w = waiter;
      waiter = undefined;
      w(l);
    } else lines.push(l);
  });
  rl.on('close', () => {
    closed = true;
    waiter?.(undefined);
    waiter = undefined;
  });
  const timeoutMs = opts.timeoutMs ?? DEFAULT_APPROVE_TIMEOUT_MS;
  let queue: Promise<unknown> = Promise.resolve();
  const ask = async (c: ShownCall): Promise<Verdict> => {
    lines.length = 0; // answers typed before the question are not answers to it
    output.write(`\njcp frost: approve this call? [y/N]\n${describeCall(c)}\n> `);
    if (closed) return { approve: false, reason: 'the terminal is closed' };
    let timer: NodeJS.Timeout | undefined;
    const line = await new Promise<string | undefined>((resolve) => {
      waiter = resolve;
      timer = setTimeout(() => {
        waiter = undefined;
        resolve(undefined);
      }, timeoutMs);
    });
    clearTimeout(timer);
    if (line === undefined)
      return { approve: false, reason: closed ? 'the terminal is closed' : `no answer at the terminal within ${timeoutMs} ms` };
    const a = line.trim();
    if (/^(y|yes)$/i.test(a)) return { approve: true, reason: 'approved at the terminal' };
    const why = a.replace(/^(n|no)\b\s*/i, '');
    return { approve: false, reason: `refused at the terminal${why ? `: ${why}` : ''}` };
  };
  return {
    kind: 'prompt',
    id: contentId({ policy: 'prompt' }),
    allowRaw: opts.allowRaw ?? false,
    maxSkewS: opts.maxSkewS ?? DEFAULT_MAX_SKEW_S,
    decide(c) {
      const p = queue.then(() => ask(c));
      queue = p.catch(() => undefined);
      return p.catch((e: unknown) => ({ approve: false, reason: `prompt failed: ${(e as Error).message}` }));
    },
  };
}

/**
 * An external approver (`--approve webhook URL`): POSTs the decoded call as JSON
 * (`{call: ShownCall, policy}`) and waits at most `timeoutMs` for `{"approve": true|false,
 * "reason": "…"}` with status 2xx. No answer in time, another status, another body, a body that is
 * not a JSON object or one over {@link MAX_WEBHOOK_ANSWER_BYTES} refuses. With
 * `opts.webhookSecret`, the request carries {@link WEBHOOK_TIMESTAMP_HEADER} and
 * {@link WEBHOOK_SIGNATURE_HEADER} (`v1=` {@link webhookMac} of `POST`, path, timestamp, body) and
 * an answer without a valid signature of its own (bound to the request's MAC, timestamp within
 * {@link WEBHOOK_REPLAY_WINDOW_S}) refuses; redirects are not followed.
 * @throws FrostError `frost-policy-invalid` for a URL that is not http(s).
 */
export function webhookApprover(url: string, opts: ApproverOpts = {}): Approver {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new FrostError(FrostErrorCodes.POLICY_INVALID, `webhook URL ${url} does not parse`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    throw new FrostError(FrostErrorCodes.POLICY_INVALID, `webhook URL ${url}: only http and https`);
  const timeoutMs = opts.timeoutMs ?? DEFAULT_APPROVE_TIMEOUT_MS;
  const id = contentId({ policy: 'webhook', url: u.href });
  const secret = opts.webhookSecret;
  return {
    kind: 'webhook',
    id,
    allowRaw: opts.allowRaw ?? false,
    maxSkewS: opts.maxSkewS ?? DEFAULT_MAX_SKEW_S,
    async decide(c) {
      try {
        const body = JSON.stringify({ call: c, policy: id });
        const headers: Record<string, string> = { 'content-type': 'application/json' };
        let mac = '';
        if (secret !== undefined) {
          const ts = String(Math.floor(Date.now() / 1000));
          mac = webhookMac(secret, 'POST', u.pathname + u.search, ts, body);
          headers[WEBHOOK_TIMESTAMP_HEADER] = ts;
          headers[WEBHOOK_SIGNATURE_HEADER] = `v1=${mac}`;
        }
        const res = await fetch(u, { method: 'POST', headers, body, signal: AbortSignal.timeout(timeoutMs), redirect: 'error' });
        if (!res.ok) {
          await res.body?.cancel().catch(() => undefined);
          return { approve: false, reason: `webhook answered HTTP ${res.status}` };
        }
        const text = await readCapped(res, MAX_WEBHOOK_ANSWER_BYTES);
        if (text === undefined) return { approve: false, reason: `webhook answer is over ${MAX_WEBHOOK_ANSWER_BYTES} bytes` };
        const unsigned = secret === undefined ? undefined : answerUnsigned(res, text, secret, mac, Math.floor(Date.now() / 1000));
        if (unsigned !== undefined) return { approve: false, reason: unsigned };
        const v = JSON.parse(text) as unknown;
        if (typeof v !== 'object' || v === null || Array.isArray(v))
          return { approve: false, reason: 'webhook answer is not a JSON object' };
        if (!('approve' in v) || typeof v.approve !== 'boolean')
          return { approve: false, reason: 'webhook answer has no boolean "approve"' };
        const reason =
          'reason' in v && typeof v.reason === 'string' && v.reason !== ''
            ? v.reason
            : v.approve
              ? 'approved by webhook'
              : 'refused by webhook';
        return { approve: v.approve, reason: `webhook: ${reason}`.slice(0, 2000) };
      } catch (e) {
        const name = (e as Error).name;
        if (name === 'TimeoutError' || name === 'AbortError')
          return { approve: false, reason: `webhook gave no answer within ${timeoutMs} ms` };
        return { approve: false, reason: `webhook failed: ${(e as Error).message}` };
      }
    },
  };
}

/** Largest webhook answer read (bytes): a longer body is a refusal, not buffered to the deadline. */
export const MAX_WEBHOOK_ANSWER_BYTES = 65_536;

/** The body of `res` as UTF-8 text, or undefined (the rest cancelled) once it passes `max` bytes. */
async function readCapped(res: Response, max: number): Promise<string | undefined> {
  if (!res.body) return '';
  const reader = res.body.getReader();
  const parts: Uint8Array[] = [];
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    n += value.length;
    if (n > max) {
      await reader.cancel().catch(() => undefined);
      return undefined;
    }
    parts.push(value);
  }
  return Buffer.concat(parts).toString('utf8');
}

/**
 * A holder's decision journal (`<keystore>/approvals.journal`, mode 0600): each signed decision
 * record, length-prefixed (4-byte big-endian), appended and fdatasync'd before the share (or the
 * refusal) leaves. Read back at start, it keeps each session bound to the request it decided on,
 * across restarts. A torn last record (a crash mid-append) is cut off when the journal is opened.
 */
export class DecisionJournal {
  readonly path: string;
  readonly #fd: number;
  /** `<groupTag>:<identifier>:<session>` → the last decision taken for it. */
  readonly #bySession = new Map<string, { request: ContentId; approve: boolean; reason: string }>();
  /** Background fdatasyncs still running ({@link appendSealed}). */
  #pending = 0;
  /** The latest background fdatasync. */
  #latest: Promise<void> = Promise.resolve();
  /** Set once a background fdatasync failed: nothing is appended or trusted after it. */
  #failed: FrostError | undefined;

  private constructor(path: string) {
    this.path = path;
    let good: number | undefined;
    if (existsSync(path)) {
      const r = readFrames(new Uint8Array(readFileSync(path)));
      for (const d of r.records) if (d.record) this.#note(d.record);
      good = r.end;
    }
    this.#fd = openSync(path, 'a', 0o600);
    // A record cut short by a crash mid-append is cut off, or the next record would be read as its rest.
    if (good !== undefined && fstatSync(this.#fd).size > good) {
      ftruncateSync(this.#fd, good);
      fdatasyncSync(this.#fd);
    }
  }

  /** Opens (or creates) the journal at `path`. @throws on a file that cannot be read or opened. */
  static open(path: string): DecisionJournal {
    return new DecisionJournal(path);
  }

  #note(d: ReadDecision): void {
    if (!d.valid) return;
    this.#bySession.set(key(d.body.group, d.body.identifier, d.body.session), {
      request: d.body.request,
      approve: d.body.decision === 'approve',
      reason: d.body.reason,
    });
  }

  /** The last decision taken for this share's `session`, if any. */
  forSession(group: Did, identifier: number, session: string): { request: ContentId; approve: boolean; reason: string } | undefined {
    return this.#bySession.get(key(group, identifier, session));
  }

  /**
   * Appends a record (durably: fdatasync) and indexes it (once its signature verifies).
   * @throws FrostError `frost-journal-io`; the decoder's JcpError for bytes that are not a record.
   */
  append(record: Uint8Array): void {
    const d = openDecision(record);
    this.#write(record);
    this.#note(d);
  }

  /**
   * {@link append} for a record this process has just sealed ({@link sealDecision} of `body`),
   * with the fdatasync in the background: the record is written and indexed before this returns
   * (so the session is bound to its request at once), indexed from `body` (its reason cut as the
   * record's is) rather than read back and re-verified, and the returned promise resolves once
   * it is on stable storage (rejects with `frost-journal-io`). The caller must not let the share
   * or refusal the decision governs leave before then ({@link settled} waits for every record).
   * @throws FrostError `frost-journal-io` when the write fails.
   */
  appendSealed(record: Uint8Array, body: DecisionBody): Promise<void> {
    this.#write(record, false);
    this.#bySession.set(key(body.group, body.identifier, body.session), {
      request: body.request,
      approve: body.decision === 'approve',
      reason: body.reason.slice(0, MAX_REASON_CHARS),
    });
    this.#pending++;
    const durable = new Promise<void>((resolve, reject) => {
      fdatasync(this.#fd, (e) => {
        this.#pending--;
        // A failed fdatasync may have dropped the dirty pages (a later one can then succeed
        // without them): the journal is not trusted again in this process.
        if (e) this.#failed ??= new FrostError(FrostErrorCodes.JOURNAL_IO, `${this.path}: fdatasync failed: ${e.message}`);
        if (this.#failed) reject(this.#failed);
        else resolve();
      });
    });
    this.#latest = durable;
    durable.catch(() => undefined); // awaited by the caller; never an unhandled rejection here
    return durable;
  }

  /**
   * Resolves once every record appended so far is on stable storage (each background fdatasync
   * covers every write before it, so the latest one is enough); rejects with `frost-journal-io`
   * after any fdatasync of this journal failed.
   */
  async settled(): Promise<void> {
    if (this.#failed) throw this.#failed;
    await this.#latest;
  }

  #write(record: Uint8Array, durable = true): void {
    if (this.#failed) throw this.#failed;
    const head = new Uint8Array(4);
    new DataView(head.buffer).setUint32(0, record.length, false);
    try {
      writeSync(this.#fd, Buffer.concat([head, record]));
      if (durable) fdatasyncSync(this.#fd);
    } catch (e) {
      throw new FrostError(FrostErrorCodes.JOURNAL_IO, `${this.path}: ${(e as Error).message}`);
    }
  }

  /** Closes the file, making a record whose background fdatasync is still running durable first. */
  close(): void {
    try {
      if (this.#pending > 0 && !this.#failed) fdatasyncSync(this.#fd);
    } finally {
      closeSync(this.#fd);
    }
  }
}

function key(group: Did, identifier: number, session: string): string {
  return `${groupTag(group)}:${identifier}:${session}`;
}

/**
 * Every record in a decision journal file, verified, in order (`seq` counts from 1); a frame
 * that is not a decision record is returned as `malformed`; a torn last frame is ignored.
 * @throws the file system's error when the file cannot be read.
 */
export function readDecisionFile(path: string): StreamedDecision[] {
  return readFrames(new Uint8Array(readFileSync(path))).records;
}

/** The frames of a journal's bytes, and the offset where the last complete frame ends. */
function readFrames(buf: Uint8Array): { records: StreamedDecision[]; end: number } {
  const out: StreamedDecision[] = [];
  let off = 0;
  while (off + 4 <= buf.length) {
    const n = new DataView(buf.buffer, buf.byteOffset + off, 4).getUint32(0, false);
    if (off + 4 + n > buf.length) break;
    try {
      out.push({ seq: out.length + 1, record: openDecision(buf.subarray(off + 4, off + 4 + n)) });
    } catch (e) {
      out.push({ seq: out.length + 1, malformed: (e as Error).message });
    }
    off += 4 + n;
  }
  return { records: out, end: off };
}

/**
 * Every JetStream stream the FROST layer makes under `prefix`: the group registry's KV stream, the
 * evidence stream and the approvals stream — what a run deletes to leave a shared NATS as it found it.
 */
export function frostStreams(prefix: string): string[] {
  return [`KV_${registryBucket(prefix)}`, evidenceStream(prefix), approvalsStream(prefix)];
}

/** The approvals stream name for `prefix`: `<prefix>_approvals` (the NATS layer's name rule). */
export function approvalsStream(prefix: string): string {
  return `${storeNameOf(prefix)}_approvals`;
}

/** The subject a holder publishes its decisions on: `<prefix>.approvals.<groupTag>.<identifier>`. */
export function approvalsSubject(prefix: string, group: Did, identifier: number): string {
  return `${prefix}.approvals.${groupTag(group)}.${identifier}`;
}

/**
 * Publishes a decision record on the JetStream stream `<prefix>_approvals` (subjects
 * `<prefix>.approvals.>`, created if absent by the NATS layer's create-if-missing, so two
 * holders racing to create it both succeed; kept 30 days). Returns the stream sequence.
 * @throws FrostError `frost-transport`.
 */
export async function publishDecision(
  nc: NatsConnection,
  prefix: string,
  group: Did,
  identifier: number,
  record: Uint8Array,
): Promise<number> {
  const subject = approvalsSubject(prefix, group, identifier);
  try {
    const known = approvalsStreams.get(nc);
    if (known?.has(prefix)) {
      try {
        return (await jetstream(nc).publish(subject, record)).seq;
      } catch {
        // The stream went away (deleted, or the server lost it): make sure of it again below.
        known.delete(prefix);
      }
    }
    const jsm = await jetstreamManager(nc);
    await ensureStream(jsm, { name: approvalsStream(prefix), subjects: [`${prefix}.approvals.>`], max_age: 30 * 24 * 3600 * 1e9 });
    const ack = await jetstream(nc).publish(subject, record);
    const set = approvalsStreams.get(nc) ?? new Set<string>();
    approvalsStreams.set(nc, set);
    if (set.size < 64) set.add(prefix);
    return ack.seq;
  } catch (e) {
    throw new FrostError(FrostErrorCodes.TRANSPORT, `approvals stream: ${(e as Error).message}`, [], undefined, { cause: e });
  }
}

/**
 * Per connection, the prefixes whose approvals stream a publish has already found or made: later
 * decisions go straight to the stream (one request each, not three: the account check and the
 * stream look-up were most of a decision's NATS traffic). A publish that fails drops the entry,
 * so a stream deleted meanwhile is made again. At most 64 prefixes per connection.
 */
const approvalsStreams = new WeakMap<NatsConnection, Set<string>>();

/** One message of the approvals stream (or record of a journal): a record read back, or why it is not one. */
export interface StreamedDecision {
  readonly seq: number;
  readonly record?: ReadDecision;
  readonly malformed?: string;
}

/**
 * Every decision record on the approvals stream of `prefix` (optionally only `group`'s), each
 * verified; `seq` is the stream sequence. An absent stream is no records.
 * @throws FrostError `frost-transport` (also when the stream cannot be read for another reason than its absence).
 */
export async function readDecisionStream(nc: NatsConnection, prefix: string, group?: Did): Promise<StreamedDecision[]> {
  const out: StreamedDecision[] = [];
  try {
    const jsm = await jetstreamManager(nc);
    const name = approvalsStream(prefix);
    let last: number;
    try {
      last = (await jsm.streams.info(name)).state.last_seq;
    } catch (e) {
      if (isStreamNotFound(e)) return [];
      throw e;
    }
    const filter = group ? `${prefix}.approvals.${groupTag(group)}.*` : `${prefix}.approvals.>`;
    for (let seq = 1; seq <= last; seq++) {
      let m: Awaited<ReturnType<typeof jsm.streams.getMessage>>;
      try {
        m = await jsm.streams.getMessage(name, { seq });
      } catch {
        continue; // deleted or aged out
      }
      if (!m) continue;
      if (group && !m.subject.startsWith(filter.slice(0, -1))) continue;
      try {
        out.push({ seq, record: openDecision(m.data) });
      } catch (e) {
        out.push({ seq, malformed: (e as Error).message });
      }
    }
  } catch (e) {
    throw new FrostError(FrostErrorCodes.TRANSPORT, `approvals stream: ${(e as Error).message}`, [], undefined, { cause: e });
  }
  return out;
}

/** Most records {@link readHolderDecisions} reads from one holder's subject per call. */
export const MAX_DECISIONS_SCANNED = 4096;

/** Options of {@link readHolderDecisions}. */
export interface HolderDecisionsOpts {
  /** Read records the NATS server stored at or after this time (a window, so the read is bounded by time, not by history). */
  readonly since: Date;
  /** How long to wait for records that are not there yet (ms, default 1000; each fetch waits at least 1 s). */
  readonly waitMs?: number;
  /** Stop reading (once the records present are all read) when this holds for the records so far. */
  readonly enough?: (records: readonly StreamedDecision[]) => boolean;
  /** Most records read (default {@link MAX_DECISIONS_SCANNED}). */
  readonly max?: number;
}

/**
 * Every record on one holder's subject `<prefix>.approvals.<groupTag>.<identifier>` stored since
 * `opts.since`, oldest first, each verified (`record.valid`) or `malformed`; `seq` is the stream
 * sequence. Anyone who can publish on the bus can add records there, so a caller keeps only those
 * that verify under the holder's roster identity — reading every one, not the last, so a forged
 * record published after the holder's does not hide it. Stops when `enough` holds and no more are
 * pending, at `max` records, or after `waitMs`. An absent stream (no holder published yet) is
 * waited for, then no records.
 */
export async function readHolderDecisions(
  nc: NatsConnection,
  prefix: string,
  group: Did,
  identifier: number,
  opts: HolderDecisionsOpts,
): Promise<StreamedDecision[]> {
  const deadline = Date.now() + (opts.waitMs ?? 1000);
  const max = opts.max ?? MAX_DECISIONS_SCANNED;
  const js = jetstream(nc);
  const out: StreamedDecision[] = [];
  let consumer: Awaited<ReturnType<typeof js.consumers.get>> | undefined;
  while (consumer === undefined) {
    try {
      consumer = await js.consumers.get(approvalsStream(prefix), {
        filter_subjects: approvalsSubject(prefix, group, identifier),
        deliver_policy: DeliverPolicy.StartTime,
        opt_start_time: opts.since.toISOString(),
      });
    } catch {
      if (Date.now() >= deadline) return out; // no stream yet: no holder published
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  try {
    while (out.length < max) {
      const batch = await consumer.fetch({ max_messages: Math.min(256, max - out.length), expires: Math.max(1000, deadline - Date.now()) });
      let done = false;
      for await (const m of batch) {
        try {
          out.push({ seq: m.seq, record: openDecision(m.data) });
        } catch (e) {
          out.push({ seq: m.seq, malformed: (e as Error).message });
        }
        if (out.length >= max || (m.info.pending === 0 && opts.enough?.(out) === true)) {
          done = true;
          batch.stop();
        }
      }
      if (done || Date.now() >= deadline) break;
    }
  } finally {
    await consumer.delete().catch(() => undefined);
  }
  return out;
}
