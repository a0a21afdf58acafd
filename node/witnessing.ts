/**
 * Witnessing over NATS (docs/tlog.md "Witnessing over NATS"; C2SP tlog-checkpoint,
 * tlog-cosignature, RFC 9162 §2.1.4): every node publishes its signed checkpoint on the
 * transparency-log stream, every other node checks it against the last checkpoint of that log it
 * cosigned (consistency proof fetched from the publisher) and publishes its cosignature; an
 * inconsistent checkpoint is refused `log-inconsistent`, logged, counted and published as an
 * alarm with both checkpoints as evidence.
 *
 * Stream `<ROOT>_TLOG`, subjects under `<root>.tlog.>` (file storage, limits retention, the last
 * message per subject kept, `deny_delete`, `deny_purge`); every message is UTF-8 JSON:
 * - `<root>.tlog.cp.<log>`: `{"v":1, "steward", "origin", "size", "note"}`, the newest checkpoint;
 * - `<root>.tlog.cosig.<log>.<witness>`: `{"v":1, "steward", "origin", "size", "witness",
 *   "name", "time_s", "note"}`: `note` is the checkpoint with the witness's cosignature line;
 * - `<root>.tlog.alarm.<log>.<witness>`: `{"v":1, "code":"log-inconsistent", "steward",
 *   "origin", "witness", "why", "time_s", "evidence": [previous note, next note]}`.
 * `<log>` / `<witness>` are `blake3(utf8(did))` (64 hex) of the steward / witness did:key.
 * Consistency proofs are asked of the publisher by a NATS request (not stored) on
 * `<root>.tlogq.<log>` with `{"old": n, "new": m}`, answered `{"proof": [hex, …]}` or
 * `{"error": code, "why"}`.
 *
 * A witness's cosigner key name is `jcp-witness/<did>` ({@link witnessName}); its key is the
 * node's steward key (type 0x04 cosignatures never verify as 0x01 note signatures).
 */
import type { JetStreamClient, JetStreamManager, PubAck, StreamConfig } from '@nats-io/jetstream';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import type { Actor } from '../core/index.ts';
import { utf8 } from '../core/index.ts';
import { type Did, isDid, parseDid } from '../core/index.ts';
import { isJcpError } from '../core/index.ts';
import { contentIdOfBytes } from '../core/index.ts';
import { addSignatureLines, openCheckpoint, type SignedLogCheckpoint, verifyCosignature } from '../core/index.ts';
import { witness } from '../core/index.ts';
import { DELIVER, DISCARD, jetStreamLib, NatsUnavailable, RETENTION_LIMITS, STORAGE_FILE } from '../natsio/index.ts';
import type { NodeMetrics } from './metrics.ts';
import { originOf } from './tlog.ts';
import type { TileServer } from './tlogtiles.ts';

const ROOT_RE = /^[a-z][a-z0-9_-]{0,31}$/;

/** `blake3(utf8(did))`: the subject token of a did. */
export const didToken = (did: string): string => contentIdOfBytes(utf8(did));

/** The cosigner key name of the witness with did `did`: `jcp-witness/<did>`. */
export function witnessName(did: Did): string {
  return `jcp-witness/${did}`;
}

/** The stream's name for subject root `root` (`jcp` → `JCP_TLOG`). @throws Error for a bad root */
export function tlogStreamName(root: string): string {
  if (!ROOT_RE.test(root)) throw new Error(`subject root ${JSON.stringify(root)}: expected 1-32 of [a-z0-9_-], a letter first`);
  return `${root.toUpperCase().replaceAll('-', '_')}_TLOG`;
}

/** The stream config this module creates when it is missing (exported for docs and tests). */
export function tlogStreamConfig(root: string, replicas: number): Partial<StreamConfig> & { name: string; subjects: string[] } {
  return {
    name: tlogStreamName(root),
    subjects: [`${root}.tlog.>`],
    storage: STORAGE_FILE,
    retention: RETENTION_LIMITS,
    num_replicas: replicas,
    max_msgs_per_subject: 1,
    discard: DISCARD.old,
    deny_delete: true,
    deny_purge: true,
    allow_direct: false,
  };
}

/** A checkpoint message (`<root>.tlog.cp.<log>`). */
export interface CheckpointMsg {
  readonly v: 1;
  readonly steward: Did;
  readonly origin: string;
  readonly size: number;
  readonly note: string;
}

/** A cosignature message (`<root>.tlog.cosig.<log>.<witness>`). */
export interface CosignatureMsg extends CheckpointMsg {
  readonly witness: Did;
  readonly name: string;
  readonly time_s: number;
}

/** An alarm message (`<root>.tlog.alarm.<log>.<witness>`): a checkpoint refused as inconsistent. */
export interface AlarmMsg {
  readonly v: 1;
  readonly code: 'log-inconsistent';
  readonly steward: Did;
  readonly origin: string;
  readonly witness: Did;
  readonly why: string;
  readonly time_s: number;
  readonly evidence: readonly [previous: string, next: string];
}

function parseJson(data: Uint8Array): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(new TextDecoder().decode(data)) as unknown;
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function asCheckpointMsg(o: Record<string, unknown> | undefined): CheckpointMsg | undefined {
  if (o === undefined || o['v'] !== 1 || !isDid(o['steward']) || typeof o['origin'] !== 'string' || typeof o['note'] !== 'string')
    return undefined;
  if (typeof o['size'] !== 'number' || !Number.isSafeInteger(o['size']) || o['size'] < 0) return undefined;
  return o as unknown as CheckpointMsg;
}

/** A checkpoint of one log that a peer cosigned, verified (the log's key, the witness's cosignature). */
export interface WitnessedCheckpoint {
  readonly checkpoint: SignedLogCheckpoint;
  /** The witnesses whose cosignature over exactly this checkpoint verified. */
  readonly cosigners: readonly Did[];
  /** How the checkpoint is named in errors: origin, size, root, cosigners. */
  readonly label: string;
}

/** Options of {@link TlogStream}. */
export interface TlogStreamOpts {
  /** Subject root (default `jcp`), as the node config's `cluster.subject_root`. */
  readonly root?: string;
  /** Stream replicas (1 for one NATS server). Default 1. */
  readonly replicas?: number;
  /** Per-request timeout, ms. Default 2,000. */
  readonly timeoutMs?: number;
  /**
   * For an auditor: never make the stream; a missing one is {@link TlogStreamMissing}. Default
   * false (a node makes it when it is missing).
   */
  readonly readOnly?: boolean;
}

/** The stable code of {@link TlogStreamMissing}. */
export const TLOG_STREAM_MISSING = 'tlog-stream-missing';

/** A read-only {@link TlogStream} found no `<ROOT>_TLOG` stream (no node published under that subject root). Code `tlog-stream-missing`. */
export class TlogStreamMissing extends Error {
  override readonly name = 'TlogStreamMissing';
  readonly code = TLOG_STREAM_MISSING;
}

/** The transparency-log stream over one NATS connection the caller owns (never closed here). */
export class TlogStream {
  readonly root: string;
  readonly stream: string;
  readonly nc: NatsConnection;
  readonly #replicas: number;
  readonly timeoutMs: number;
  readonly #readOnly: boolean;
  #ensured: Promise<{ jsm: JetStreamManager; js: JetStreamClient }> | undefined;

  constructor(nc: NatsConnection, opts: TlogStreamOpts = {}) {
    this.root = opts.root ?? 'jcp';
    this.stream = tlogStreamName(this.root);
    this.nc = nc;
    this.#replicas = opts.replicas ?? 1;
    this.timeoutMs = opts.timeoutMs ?? 2_000;
    this.#readOnly = opts.readOnly ?? false;
  }

  /** Subject of log `steward`'s checkpoints. */
  cpSubject(steward: string): string {
    return `${this.root}.tlog.cp.${didToken(steward)}`;
  }

  /** Subject of `witness`'s cosignatures over log `steward`. */
  cosigSubject(steward: string, witnessDid: string): string {
    return `${this.root}.tlog.cosig.${didToken(steward)}.${didToken(witnessDid)}`;
  }

  /** Subject of `witness`'s alarms about log `steward`. */
  alarmSubject(steward: string, witnessDid: string): string {
    return `${this.root}.tlog.alarm.${didToken(steward)}.${didToken(witnessDid)}`;
  }

  /** Subject proof requests for log `steward` go to (core NATS, not stored). */
  proofSubject(steward: string): string {
    return `${this.root}.tlogq.${didToken(steward)}`;
  }

  /**
   * Creates the stream if it is missing (idempotent, safe to race); read-only, only checks it is there.
   * @throws NatsUnavailable `nats-unavailable` when it can be neither read nor made; TlogStreamMissing
   * `tlog-stream-missing` when read-only and missing; Error from the connection
   */
  async ensure(): Promise<{ jsm: JetStreamManager; js: JetStreamClient }> {
    this.#ensured ??= (async () => {
      const { jetstream, jetstreamManager } = await jetStreamLib();
      const jsm = await jetstreamManager(this.nc, { timeout: this.timeoutMs, checkAPI: false });
      try {
        await jsm.streams.info(this.stream);
      } catch (e) {
        if (
          !String((e as Error).message)
            .toLowerCase()
            .includes('not found')
        )
          throw new NatsUnavailable(`the ${this.stream} stream cannot be read: ${(e as Error).message}`);
        if (this.#readOnly)
          throw new TlogStreamMissing(
            `no ${this.stream} stream on this NATS: no node with subject root '${this.root}' has published a checkpoint here (is the subject root right?)`,
          );
        try {
          await jsm.streams.add(tlogStreamConfig(this.root, this.#replicas));
        } catch (e2) {
          // Lost a creation race (read the winner's), or it cannot be made (another stream holds its subjects).
          await jsm.streams
            .info(this.stream)
            .catch(() =>
              Promise.reject(new NatsUnavailable(`the ${this.stream} stream is missing and cannot be made: ${(e2 as Error).message}`)),
            );
        }
      }
      return { jsm, js: jetstream(this.nc, { timeout: this.timeoutMs }) };
    })();
    this.#ensured.catch(() => {
      this.#ensured = undefined;
    });
    return await this.#ensured;
  }

  /**
   * Publishes one JSON message on `subject` and waits for the stream's ack. A failed publish
   * forgets that the stream was ensured, so the next call makes it again if it was deleted (a
   * JetStream store wiped under a running node). @throws Error when NATS does not ack.
   */
  async publish(subject: string, msg: object): Promise<void> {
    const { js } = await this.ensure();
    let ack: PubAck;
    try {
      ack = await js.publish(subject, JSON.stringify(msg), { timeout: this.timeoutMs });
    } catch (e) {
      this.#ensured = undefined;
      const m = (e as Error).message;
      // What nats.js says when no stream answers (it cannot tell a missing stream from JetStream off).
      if (m.includes('jetstream is not enabled'))
        throw new Error(`${m}: no stream took ${subject} (the ${this.stream} stream is missing, or JetStream is off)`);
      throw e;
    }
    // Another stream holding these subjects acked it: the checkpoint is not where witnesses read.
    if (ack.stream !== this.stream) {
      this.#ensured = undefined;
      throw new Error(`stored by stream ${ack.stream}, not ${this.stream}: another stream holds ${subject}`);
    }
  }

  /** The last stored message of every subject matching `filter` (parsed JSON; unparsable ones dropped). */
  async lastOf(filter: string): Promise<Array<{ subject: string; msg: Record<string, unknown> }>> {
    const { jsm } = await this.ensure();
    const info = await jsm.streams.info(this.stream, { subjects_filter: filter });
    const out: Array<{ subject: string; msg: Record<string, unknown> }> = [];
    for (const subject of Object.keys(info.state.subjects ?? {})) {
      const m = await jsm.streams.getMessage(this.stream, { last_by_subj: subject });
      const msg = m === null ? undefined : parseJson(m.data);
      if (msg !== undefined) out.push({ subject, msg });
    }
    return out;
  }

  /**
   * The newest checkpoint of log `steward` (origin `origin`) that a peer cosigned, from the
   * stream: each stored cosignature is checked (the checkpoint under the steward's key and
   * origin, the cosignature under the witness's key); ones that do not verify are skipped and
   * returned in `ignored`. Undefined when no peer cosigned one.
   * @throws Error when the stream cannot be read
   */
  async newestWitnessed(
    steward: Did,
    origin: string = originOf(steward),
  ): Promise<{ newest: WitnessedCheckpoint | undefined; ignored: string[] }> {
    const found = await this.lastOf(`${this.root}.tlog.cosig.${didToken(steward)}.*`);
    const ignored: string[] = [];
    const bySize = new Map<string, { checkpoint: SignedLogCheckpoint; cosigners: Did[] }>();
    for (const { subject, msg } of found) {
      const c = asCheckpointMsg(msg);
      const w = msg['witness'];
      const name = msg['name'];
      try {
        if (c === undefined || !isDid(w) || typeof name !== 'string') throw new Error('not a cosignature message');
        if (c.steward !== steward) throw new Error(`a cosignature of another log (${c.steward})`);
        const cp = openCheckpoint(c.note, parseDid(steward), origin);
        verifyCosignature(c.note, name, parseDid(w));
        if (name !== witnessName(w)) throw new Error(`cosigner name ${name} is not ${witnessName(w)}`);
        const key = `${cp.size}/${Buffer.from(cp.root).toString('hex')}`;
        const e = bySize.get(key) ?? { checkpoint: cp, cosigners: [] };
        e.cosigners.push(w);
        bySize.set(key, e);
      } catch (e) {
        ignored.push(`${subject}: ${(e as Error).message}`);
      }
    }
    let newest: { checkpoint: SignedLogCheckpoint; cosigners: Did[] } | undefined;
    for (const e of bySize.values()) if (newest === undefined || e.checkpoint.size > newest.checkpoint.size) newest = e;
    if (newest === undefined) return { newest: undefined, ignored };
    const cp = newest.checkpoint;
    const label = `the checkpoint of ${cp.origin} at size ${cp.size} (root ${Buffer.from(cp.root).toString('hex')}) cosigned by ${newest.cosigners.join(', ')}`;
    return { newest: { checkpoint: cp, cosigners: newest.cosigners, label }, ignored };
  }

  /** Every stored alarm (verified: both notes under the log's key), for an audit CLI or console. */
  async alarms(): Promise<AlarmMsg[]> {
    const found = await this.lastOf(`${this.root}.tlog.alarm.>`);
    const out: AlarmMsg[] = [];
    for (const { msg } of found) {
      const ev = msg['evidence'];
      if (msg['code'] !== 'log-inconsistent' || !isDid(msg['steward']) || !isDid(msg['witness']) || !Array.isArray(ev) || ev.length !== 2)
        continue;
      try {
        for (const n of ev) openCheckpoint(String(n), parseDid(msg['steward']), String(msg['origin']));
      } catch {
        continue; // evidence that does not verify proves nothing
      }
      out.push(msg as unknown as AlarmMsg);
    }
    return out;
  }

  /** The latest checkpoint message of every log, and every cosignature message (unverified; callers verify). */
  async latest(): Promise<{ checkpoints: CheckpointMsg[]; cosignatures: CosignatureMsg[] }> {
    const cps = (await this.lastOf(`${this.root}.tlog.cp.*`)).map((x) => asCheckpointMsg(x.msg)).filter((x) => x !== undefined);
    const cos = (await this.lastOf(`${this.root}.tlog.cosig.>`))
      .map((x) => asCheckpointMsg(x.msg))
      .filter((x) => x !== undefined) as CosignatureMsg[];
    return { checkpoints: cps, cosignatures: cos };
  }
}

/** Options of {@link TlogWitnessing}. */
export interface WitnessingOpts {
  /** Publish a checkpoint at least this often while the log grows, ms. Default 5,000. */
  readonly everyMs?: number;
  /** …or as soon as this many receipts were added since the last one. Default 1,000. */
  readonly everyReceipts?: number;
  /** The clock, POSIX seconds (cosignature timestamps). Default wall clock. */
  readonly clockS?: () => number;
  /**
   * While checkpoints keep failing to publish, warn again at most this often, ms (the first
   * failure warns at once, a success after failures logs once at info). Default 60,000.
   */
  readonly warnEveryMs?: number;
}

/**
 * One node's part in witnessing: publishes its checkpoints, answers proof requests from its
 * tree, and cosigns peers' checkpoints that are consistent with the last it cosigned.
 */
export class TlogWitnessing {
  readonly #s: TlogStream;
  readonly #me: Actor;
  readonly #tiles: TileServer;
  readonly #metrics: NodeMetrics;
  readonly #log: Logger;
  readonly #everyMs: number;
  readonly #everyReceipts: number;
  readonly #clockS: () => number;
  readonly #warnEveryMs: number;
  /** While checkpoints fail to publish: since when, how many failures, when last warned (ms since the epoch). */
  #unpublished: { since: number; failures: number; warnedAt: number } | undefined;
  /** The last checkpoint note of each log (by steward did) this node cosigned. */
  readonly #cosigned = new Map<string, string>();
  #published: { size: number; at: number } | undefined;
  #timer: NodeJS.Timeout | undefined;
  #proofSub: Subscription | undefined;
  #follow: { close(): Promise<void>; loop: Promise<void> } | undefined;
  #queue: Promise<void> = Promise.resolve();
  #stopped = false;

  constructor(stream: TlogStream, me: Actor, tiles: TileServer, metrics: NodeMetrics, logger: Logger, opts: WitnessingOpts = {}) {
    this.#s = stream;
    this.#me = me;
    this.#tiles = tiles;
    this.#metrics = metrics;
    this.#log = logger;
    this.#everyMs = opts.everyMs ?? 5_000;
    this.#everyReceipts = opts.everyReceipts ?? 1_000;
    this.#clockS = opts.clockS ?? (() => Math.floor(Date.now() / 1000));
    this.#warnEveryMs = opts.warnEveryMs ?? 60_000;
  }

  /** The last checkpoint of log `steward` this node cosigned (signed note), if any. */
  lastCosigned(steward: string): string | undefined {
    return this.#cosigned.get(steward);
  }

  /**
   * Starts: ensures the stream, reads back this node's own last cosignatures (its memory of each
   * log), answers proof requests, follows peers' checkpoints and publishes its own.
   * @throws Error when NATS cannot be reached
   */
  async start(): Promise<void> {
    const { js } = await this.#s.ensure();
    for (const { msg } of await this.#s.lastOf(`${this.#s.root}.tlog.cosig.*.${didToken(this.#me.did)}`)) {
      const c = asCheckpointMsg(msg);
      if (c === undefined) continue;
      try {
        openCheckpoint(c.note, parseDid(c.steward), c.origin);
        this.#cosigned.set(c.steward, c.note);
      } catch {
        // not a checkpoint of that log: not a memory to hold anyone to
      }
    }
    this.#proofSub = this.#s.nc.subscribe(this.#s.proofSubject(this.#me.did), {
      callback: (_err, m) => {
        void this.#answerProof(m.data).then((reply) => m.respond(JSON.stringify(reply)));
      },
    });
    const consumer = await js.consumers.get(this.#s.stream, {
      deliver_policy: DELIVER.lastPerSubject,
      filter_subjects: `${this.#s.root}.tlog.cp.*`,
    });
    const messages = await consumer.consume({ max_messages: 64 });
    const loop = (async () => {
      for await (const m of messages) {
        const data = m.data;
        this.#queue = this.#queue
          .then(() => this.#onCheckpoint(data))
          .catch((e: Error) => this.#log.warn({ why: e.message }, 'tlog: witnessing a checkpoint failed'));
      }
    })().catch(() => undefined);
    this.#follow = { close: () => messages.close().then(() => undefined), loop };
    await this.publishNow();
    const tick = Math.max(50, Math.min(this.#everyMs, 500));
    this.#timer = setInterval(() => void this.#maybePublish(), tick);
    this.#timer.unref();
  }

  /** Publishes the current checkpoint now (when the tree grew since the last, or none was published). */
  async publishNow(): Promise<void> {
    const note = await this.#tiles.checkpoint();
    const cp = openCheckpoint(note, this.#me.key.publicKey);
    if (this.#published?.size === cp.size) return;
    await this.#s.publish(this.#s.cpSubject(this.#me.did), {
      v: 1,
      steward: this.#me.did,
      origin: cp.origin,
      size: cp.size,
      note,
    } satisfies CheckpointMsg);
    this.#published = { size: cp.size, at: Date.now() };
    this.#metrics.tlogPublished.inc();
    this.#metrics.tlogSize.set(cp.size);
  }

  /** True while a tick's publish is in flight: the next tick skips (a publish may wait seconds for its ack). */
  #publishing = false;

  async #maybePublish(): Promise<void> {
    if (this.#stopped || this.#publishing) return;
    this.#publishing = true;
    try {
      await this.#publishIfDue();
    } finally {
      this.#publishing = false;
    }
  }

  async #publishIfDue(): Promise<void> {
    const size = (await this.#tiles.tree().catch(() => undefined))?.size;
    const last = this.#published;
    if (size === undefined || (last !== undefined && size === last.size)) return;
    if (last !== undefined && size - last.size < this.#everyReceipts && Date.now() - last.at < this.#everyMs) return;
    try {
      await this.publishNow();
    } catch (e) {
      this.#publishFailed(e as Error);
      return;
    }
    const u = this.#unpublished;
    if (u === undefined) return;
    this.#unpublished = undefined;
    this.#log.info({ failures: u.failures, after_s: Math.round((Date.now() - u.since) / 1000) }, 'tlog: checkpoint published again');
  }

  /** One failed publish: warns at the first, then at most every `warnEveryMs` with the count (a NATS without JetStream fails every tick). */
  #publishFailed(e: Error): void {
    const now = Date.now();
    const u = this.#unpublished;
    if (u === undefined) {
      this.#unpublished = { since: now, failures: 1, warnedAt: now };
      this.#log.warn({ why: e.message }, 'tlog: checkpoint not published');
      return;
    }
    u.failures++;
    if (now - u.warnedAt < this.#warnEveryMs) return;
    u.warnedAt = now;
    this.#log.warn(
      { why: e.message, failures: u.failures, since: new Date(u.since).toISOString() },
      'tlog: checkpoint still not published',
    );
  }

  async #answerProof(data: Uint8Array): Promise<object> {
    const q = parseJson(data);
    const oldSize = q?.['old'];
    const newSize = q?.['new'];
    if (typeof oldSize !== 'number' || typeof newSize !== 'number' || !Number.isSafeInteger(oldSize) || !Number.isSafeInteger(newSize)) {
      return { error: 'proof-malformed', why: 'expected {"old": n, "new": m}' };
    }
    try {
      const t = await this.#tiles.tree();
      return { proof: t.consistencyProof(oldSize, newSize).map((h) => Buffer.from(h).toString('hex')) };
    } catch (e) {
      return { error: isJcpError(e) ? e.code : 'proof-unavailable', why: (e as Error).message };
    }
  }

  #refuse(code: string, why: string, extra: Record<string, unknown>): void {
    this.#metrics.tlogRefused.inc({ code });
    this.#log.error({ code, why, ...extra }, `tlog: refused to cosign a peer's checkpoint: ${why}`);
  }

  async #onCheckpoint(data: Uint8Array): Promise<void> {
    const c = asCheckpointMsg(parseJson(data));
    if (c === undefined) return this.#refuse('note-malformed', 'a checkpoint message that is not {v, steward, origin, size, note}', {});
    if (c.steward === this.#me.did) return;
    const previous = this.#cosigned.get(c.steward);
    let next: SignedLogCheckpoint;
    try {
      next = openCheckpoint(c.note, parseDid(c.steward), c.origin);
    } catch (e) {
      return this.#refuse(isJcpError(e) ? e.code : 'note-malformed', (e as Error).message, { steward: c.steward });
    }
    let proof: Uint8Array[] = [];
    if (previous !== undefined) {
      const p = openCheckpoint(previous, parseDid(c.steward), c.origin);
      if (p.size === next.size && Buffer.from(p.root).equals(Buffer.from(next.root))) return; // cosigned already
      if (p.size < next.size) {
        try {
          const r = await this.#s.nc.request(this.#s.proofSubject(c.steward), JSON.stringify({ old: p.size, new: next.size }), {
            timeout: this.#s.timeoutMs,
          });
          const body = parseJson(r.data);
          const hex = body?.['proof'];
          if (!Array.isArray(hex) || !hex.every((h) => typeof h === 'string' && /^[0-9a-f]{64}$/.test(h)))
            throw new Error(String(body?.['why'] ?? 'no proof in the reply'));
          proof = hex.map((h: string) => new Uint8Array(Buffer.from(h, 'hex')));
        } catch (e) {
          return this.#refuse(
            'proof-unavailable',
            `no consistency proof from ${c.steward} (${p.size} → ${next.size}): ${(e as Error).message}`,
            { steward: c.steward },
          );
        }
      }
    }
    const timeS = this.#clockS();
    const v = witness(
      c.note,
      previous,
      proof,
      { key: parseDid(c.steward), origin: c.origin },
      { name: witnessName(this.#me.did), key: this.#me.key, timeS },
    );
    if (!v.ok) {
      this.#refuse(v.code, v.why, { steward: c.steward, previous: v.evidence[0], next: v.evidence[1] });
      const alarm: AlarmMsg = {
        v: 1,
        code: v.code,
        steward: c.steward,
        origin: c.origin,
        witness: this.#me.did,
        why: v.why,
        time_s: timeS,
        evidence: v.evidence,
      };
      await this.#s.publish(this.#s.alarmSubject(c.steward, this.#me.did), alarm);
      return;
    }
    const cosigned = addSignatureLines(v.checkpoint.note, [v.cosignature]);
    const msg: CosignatureMsg = { ...c, note: cosigned, witness: this.#me.did, name: witnessName(this.#me.did), time_s: timeS };
    await this.#s.publish(this.#s.cosigSubject(c.steward, this.#me.did), msg);
    this.#cosigned.set(c.steward, c.note);
    this.#metrics.tlogCosigned.inc();
    this.#log.info({ steward: c.steward, size: next.size }, 'tlog: cosigned a peer checkpoint');
  }

  /** Stops publishing, following and answering (the connection stays open: the caller owns it). */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearInterval(this.#timer);
    await this.#proofSub?.drain().catch(() => undefined);
    await this.#follow?.close().catch(() => undefined);
    await this.#follow?.loop;
    await this.#queue;
  }
}

/** One node's latest checkpoint on the stream, verified, and who cosigned exactly it. */
export interface WitnessAuditLog {
  readonly steward: Did;
  readonly origin: string;
  readonly size: number;
  readonly root: string;
  readonly note: string;
  readonly cosigned_by: readonly Did[];
  /** Cosigned checkpoints of this log older than the latest (witnesses that have not caught up), by witness. */
  readonly behind: ReadonlyArray<{ readonly witness: Did; readonly size: number }>;
}

/** What `witness-audit --json` prints. */
export interface WitnessAudit {
  readonly logs: readonly WitnessAuditLog[];
  readonly alarms: ReadonlyArray<{ steward: Did; origin: string; witness: Did; why: string; time_s: number; evidence: readonly string[] }>;
  /** Messages that did not verify (a checkpoint not signed by its log, a cosignature over another checkpoint): never counted. */
  readonly ignored: readonly string[];
}

/**
 * Reads the stream: every log's latest checkpoint (verified under its steward), its cosigners
 * (cosignatures verified), the alarms (evidence verified).
 * @throws Error when the stream cannot be read
 */
export async function witnessAudit(s: TlogStream): Promise<WitnessAudit> {
  const { checkpoints, cosignatures } = await s.latest();
  const ignored: string[] = [];
  const logs: WitnessAuditLog[] = [];
  for (const c of checkpoints) {
    let cp: ReturnType<typeof openCheckpoint>;
    try {
      cp = openCheckpoint(c.note, parseDid(c.steward), c.origin);
    } catch (e) {
      ignored.push(`checkpoint of ${c.steward}: ${(e as Error).message}`);
      continue;
    }
    const cosigned: Did[] = [];
    const behind: Array<{ witness: Did; size: number }> = [];
    for (const w of cosignatures.filter((x) => x.steward === c.steward)) {
      try {
        if (!isDid(w.witness)) throw new Error('no witness did');
        const wc = openCheckpoint(w.note, parseDid(c.steward), c.origin);
        verifyCosignature(w.note, witnessName(w.witness), parseDid(w.witness));
        if (wc.size === cp.size && Buffer.from(wc.root).equals(Buffer.from(cp.root))) cosigned.push(w.witness);
        else behind.push({ witness: w.witness, size: wc.size });
      } catch (e) {
        ignored.push(`cosignature of ${c.steward} by ${String(w.witness)}: ${(e as Error).message}`);
      }
    }
    logs.push({
      steward: c.steward,
      origin: cp.origin,
      size: cp.size,
      root: Buffer.from(cp.root).toString('hex'),
      note: c.note,
      cosigned_by: cosigned,
      behind,
    });
  }
  logs.sort((a, b) => (a.origin < b.origin ? -1 : 1));
  const alarms = (await s.alarms()).map((a) => ({
    steward: a.steward,
    origin: a.origin,
    witness: a.witness,
    why: a.why,
    time_s: a.time_s,
    evidence: a.evidence,
  }));
  return { logs, alarms, ignored };
}
