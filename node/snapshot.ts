/**
 * Ledger snapshots (spec §8.1): a steward-signed record of what boot replay rebuilds
 * from the receipt log up to one seq, so a start replays only the receipts after it. The
 * receipts stay the evidence: a snapshot is a cache of their replay, bound to the receipt it
 * covers, checked against the log before it is used, and `jcp receipts verify` checks every
 * snapshot against a full replay from seq 0.
 *
 * What it holds (det-CBOR, §3): the seq it covers and the receipt id of the log's bytes at that
 * seq; the next seq and the head (id of the last verified receipt); receipts read, allowed and
 * denied; the spend per grant id (µJ, ancestors included: the ledger as replay rebuilds it); the
 * request index entries at or above its horizon (node/requestindex.ts: older ids are refused
 * anyway); and the receipts that failed verification and the continuity breaks up to that seq
 * (so damage accepted once stays accounted for). Revocations are not in it: they live in the
 * log's `v` keys and are loaded from there on every start, snapshot or not. Nor are the outcome
 * records (node/outcome.ts): the spend is the receipts' debits, and the reversals are applied on
 * top at every start (a reversal may be written after the snapshot of its receipt).
 *
 * File: `<data-dir>/snapshots/snap-<seq, 16 digits>.cbor`, the det-CBOR of
 * `{body, signature}` with an Ed25519 signature by the steward over `canonical_cbor(body)`
 * (core/signed.ts, the pattern of revocations and statements). Written to a temporary file,
 * fsync'd, renamed, and the folder fsync'd; the newest `keep` are kept.
 */
import { existsSync, lstatSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep, setImmediate as yieldTurn } from 'node:timers/promises';
import type { Logger } from 'pino';
import { makeDirs, readFileCapped, removeStaleTemps, writeFileDurably, writeFileDurablyAsync } from '../io/index.ts';
import {
  type Actor,
  type BreakCode,
  type ContentId,
  decode,
  type Did,
  encode,
  isContentId,
  Ledger,
  receiptId,
  type ReceiptRefusalCode,
  signBody,
  verifyBody,
} from '../core/index.ts';
import type { AppendedDurable, ReceiptLog } from './receiptlog.ts';
import { type LogReplay, noOutcomes, replayLog, replaySlice, type SliceRunner } from './replay.ts';
import { REQUEST_KEY_WORDS, TimedRequestIndex } from './requestindex.ts';
import type { SnapshotCandidate, SnapshotCheck, SnapshotJob, SnapshotReply } from './snapshotjob.ts';
import { SnapshotProcess } from './snapshotproc.ts';
import { type BootScheduling, packReceipts, WorkerPool } from './workers.ts';

/** Folder of the snapshots inside a node data folder. */
export const SNAPSHOT_DIR = 'snapshots';
/** The `format` field of a snapshot body. */
export const SNAPSHOT_FORMAT = 'jcp-snapshot/1';
/** Largest snapshot file read (bytes). */
export const SNAPSHOT_CAP_BYTES = 1 << 30;

const NAME = /^snap-(\d{16})\.cbor$/;

/** The file name of the snapshot covering `seq`. */
export function snapshotFileName(seq: number): string {
  return `snap-${String(seq).padStart(16, '0')}.cbor`;
}

/** The snapshot files of `dataDir`, newest (highest seq) first. */
export function listSnapshots(dataDir: string): Array<{ seq: number; file: string }> {
  const dir = path.join(dataDir, SNAPSHOT_DIR);
  if (!existsSync(dir)) return [];
  const out: Array<{ seq: number; file: string }> = [];
  for (const name of readdirSync(dir)) {
    const m = NAME.exec(name);
    if (m) out.push({ seq: Number(m[1]), file: path.join(dir, name) });
  }
  return out.sort((a, b) => b.seq - a.seq);
}

/**
 * {@link listSnapshots}, or why the snapshot folder cannot be read (not a folder, no permission):
 * a start then replays the whole log, as with no usable snapshot, and says why.
 */
export function listSnapshotsOrWhy(dataDir: string): { list: Array<{ seq: number; file: string }>; why?: string } {
  try {
    return { list: listSnapshots(dataDir) };
  } catch (e) {
    return { list: [], why: `the snapshot folder cannot be read: ${(e as Error).message}` };
  }
}

/**
 * Reads a snapshot file: a regular file of at most {@link SNAPSHOT_CAP_BYTES}. A symbolic link (or
 * anything but a regular file) is refused, not followed: a snapshot is the steward's own file in
 * the data folder, like the head mark.
 * @throws Error saying why it was not read.
 */
export function readSnapshotFile(file: string): Uint8Array {
  const st = lstatSync(file);
  if (st.isSymbolicLink()) throw new Error(`${file}: a symbolic link, not a snapshot file; not followed`);
  if (!st.isFile()) throw new Error(`${file}: not a regular file`);
  return readFileCapped(file, SNAPSHOT_CAP_BYTES, 'snapshot');
}

/** Seconds of a snapshot's request index: its window (`max_skew_s` + margin) and horizon. */
export interface SnapshotRequestOptions {
  readonly madeAtS: number;
  /** The window the snapshot records (seconds); the entries kept are those with `now` ≥ `horizon`. */
  readonly windowS: number;
  readonly horizon: number;
}

function u64s(xs: Float64Array): Uint8Array {
  const out = new Uint8Array(xs.length * 8);
  const v = new DataView(out.buffer);
  for (let i = 0; i < xs.length; i++) v.setBigUint64(i * 8, BigInt(xs[i]!));
  return out;
}

function fromU64s(b: Uint8Array, n: number, field: string): Float64Array {
  if (b.length !== n * 8) throw new Error(`${field}: ${b.length} bytes for ${n} entries`);
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const x = v.getBigUint64(i * 8);
    if (x > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error(`${field}: entry ${i} out of range`);
    out[i] = Number(x);
  }
  return out;
}

/**
 * The snapshot body of a replayed state (see the module docs), as a plain det-CBOR value.
 * Deterministic: the same state and options give the same bytes (spend sorted by grant id,
 * request entries by seq), which is how `receipts verify` compares a snapshot to a full replay.
 * @throws Error when the state covers no receipt (`coveredSeq` −1).
 */
export function snapshotBody(r: LogReplay, steward: Did, o: SnapshotRequestOptions): Record<string, unknown> {
  if (r.coveredSeq < 0 || r.coveredId === undefined) throw new Error('snapshot: the log holds no receipt to cover');
  const spent = [...r.ledger.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)).map(([id, uj]) => [id, uj]);
  const e = r.requests.entries(o.horizon);
  const keys = new Uint8Array(e.keys.length * 4);
  const kv = new DataView(keys.buffer);
  for (let i = 0; i < e.keys.length; i++) kv.setUint32(i * 4, e.keys[i]!);
  return {
    format: SNAPSHOT_FORMAT,
    steward,
    seq: r.coveredSeq,
    receipt_id: r.coveredId,
    next_seq: r.nextSeq,
    ...(r.headId !== undefined ? { head_id: r.headId } : {}),
    receipts: r.total,
    allowed: r.allowed,
    denied: r.denied,
    spent,
    requests: { window_s: o.windowS, horizon: o.horizon, count: e.seqs.length, keys, seqs: u64s(e.seqs), ats: u64s(e.ats) },
    rejected: r.rejected.map((x) => ({ seq: x.seq, code: x.code, why: x.why })),
    breaks: r.breaks.map((x) => ({ seq: x.seq, code: x.code, expected_seq: x.expectedSeq, steward: x.steward })),
    made_at_s: o.madeAtS,
  };
}

/** The signed snapshot file bytes of a replayed state: det-CBOR `{body, signature}` (core/signed.ts). */
export function encodeSnapshot(r: LogReplay, steward: Actor, o: SnapshotRequestOptions): Uint8Array {
  return encode(signBody(snapshotBody(r, steward.did, o), steward));
}

/** A snapshot that verified: its body, and the state it holds as a replay to continue from. */
export interface OpenedSnapshot {
  readonly seq: number;
  readonly receiptId: ContentId;
  readonly body: Record<string, unknown>;
  readonly windowS: number;
  readonly horizon: number;
  readonly madeAtS: number;
  readonly requestCount: number;
  /** The lowest seq its request index names (undefined: none): receipts below it answer no request id still kept. */
  readonly firstRequestSeq: number | undefined;
  /** Builds the state (a fresh ledger and index): the request index with `windowS` and at least `horizon`. */
  state(windowS: number, horizon: number): LogReplay;
}

/** An unsigned safe integer from a snapshot field `f`. @throws Error "`f`: expected an unsigned integer". */
function snapshotUint(x: unknown, f: string): number {
  if (typeof x !== 'number' || !Number.isSafeInteger(x) || x < 0) throw new Error(`${f}: expected an unsigned integer`);
  return x;
}

/**
 * A snapshot's `requests` map: the request index's window and horizon (seconds), its entry count,
 * the keys (`REQUEST_KEY_WORDS` big-endian u32 words per entry) and the seqs and times (u64 each).
 * @throws Error naming the malformed field.
 */
function readSnapshotRequests(value: unknown): {
  windowS: number;
  horizon: number;
  count: number;
  keys: Uint32Array;
  seqs: Float64Array;
  ats: Float64Array;
} {
  const rq = value as Record<string, unknown>;
  if (typeof rq !== 'object' || rq === null) throw new Error('requests: expected a map');
  const windowS = snapshotUint(rq['window_s'], 'requests.window_s');
  const horizon = snapshotUint(rq['horizon'], 'requests.horizon');
  const count = snapshotUint(rq['count'], 'requests.count');
  const kb = rq['keys'];
  if (!(kb instanceof Uint8Array) || kb.length !== count * REQUEST_KEY_WORDS * 4)
    throw new Error('requests.keys: expected 16 bytes per entry');
  const kv = new DataView(kb.buffer, kb.byteOffset, kb.byteLength);
  const keys = new Uint32Array(count * REQUEST_KEY_WORDS);
  for (let i = 0; i < keys.length; i++) keys[i] = kv.getUint32(i * 4);
  if (!(rq['seqs'] instanceof Uint8Array) || !(rq['ats'] instanceof Uint8Array))
    throw new Error('requests: seqs and ats must be byte strings');
  const seqs = fromU64s(rq['seqs'], count, 'requests.seqs');
  const ats = fromU64s(rq['ats'], count, 'requests.ats');
  return { windowS, horizon, count, keys, seqs, ats };
}

/**
 * A snapshot's `rejected` receipts ({seq, code, why}) and continuity `breaks` ({seq, code,
 * expected_seq, steward}), as the replay keeps them (slice index 0).
 * @throws Error naming the malformed entry.
 */
function readSnapshotRefusals(rej: unknown, brk: unknown): { rejected: LogReplay['rejected']; breaks: LogReplay['breaks'] } {
  if (!Array.isArray(rej) || !Array.isArray(brk)) throw new Error('rejected, breaks: expected arrays');
  const rejected = rej.map((x: Record<string, unknown>, i) => {
    if (typeof x?.['code'] !== 'string' || typeof x['why'] !== 'string') throw new Error(`rejected[${i}]: expected {seq, code, why}`);
    return { index: 0, seq: snapshotUint(x['seq'], `rejected[${i}].seq`), code: x['code'] as ReceiptRefusalCode, why: x['why'] };
  });
  const breaks = brk.map((x: Record<string, unknown>, i) => {
    if (typeof x?.['code'] !== 'string' || typeof x['steward'] !== 'string')
      throw new Error(`breaks[${i}]: expected {seq, code, expected_seq, steward}`);
    return {
      index: 0,
      seq: snapshotUint(x['seq'], `breaks[${i}].seq`),
      code: x['code'] as BreakCode,
      expectedSeq: snapshotUint(x['expected_seq'], `breaks[${i}].expected_seq`),
      steward: x['steward'] as Did,
    };
  });
  return { rejected, breaks };
}

/**
 * Decodes and verifies a snapshot file's bytes: strict det-CBOR, the steward's signature, the
 * format and every field's shape. Never throws: a refusal says why.
 */
export function openSnapshot(bytes: Uint8Array, steward: Did): { ok: true; value: OpenedSnapshot } | { ok: false; why: string } {
  let v: { body?: unknown; signature?: unknown };
  try {
    v = decode(bytes) as typeof v;
  } catch (e) {
    return { ok: false, why: `not det-CBOR: ${(e as Error).message}` };
  }
  if (typeof v !== 'object' || v === null || !(v.signature instanceof Uint8Array) || typeof v.body !== 'object' || v.body === null) {
    return { ok: false, why: 'not a {body, signature} record' };
  }
  const body = v.body as Record<string, unknown>;
  if (body['format'] !== SNAPSHOT_FORMAT) return { ok: false, why: `format is not ${SNAPSHOT_FORMAT}` };
  if (body['steward'] !== steward) return { ok: false, why: `made by ${String(body['steward'])}, not by this steward` };
  if (!verifyBody({ body, signature: v.signature }, steward)) return { ok: false, why: 'the steward signature does not verify' };
  try {
    const int = snapshotUint;
    const seq = int(body['seq'], 'seq');
    const rid = body['receipt_id'];
    if (!isContentId(rid)) throw new Error('receipt_id: expected a content id');
    const head = body['head_id'];
    if (head !== undefined && !isContentId(head)) throw new Error('head_id: expected a content id');
    const nextSeq = int(body['next_seq'], 'next_seq');
    const total = int(body['receipts'], 'receipts');
    const allowed = int(body['allowed'], 'allowed');
    const denied = int(body['denied'], 'denied');
    const spent = body['spent'];
    if (!Array.isArray(spent)) throw new Error('spent: expected an array');
    const debits = spent.map((p, i) => {
      if (!Array.isArray(p) || p.length !== 2 || !isContentId(p[0])) throw new Error(`spent[${i}]: expected [grant id, µJ]`);
      const uj = typeof p[1] === 'bigint' ? p[1] : BigInt(int(p[1], `spent[${i}]`));
      return [p[0] as ContentId, uj] as const;
    });
    const { windowS, horizon, count, keys, seqs, ats } = readSnapshotRequests(body['requests']);
    const { rejected, breaks } = readSnapshotRefusals(body['rejected'], body['breaks']);
    const madeAtS = int(body['made_at_s'], 'made_at_s');
    if (nextSeq <= seq) throw new Error(`next_seq ${nextSeq} is not past seq ${seq}`);
    return {
      ok: true,
      value: {
        seq,
        receiptId: rid,
        body,
        windowS,
        horizon,
        madeAtS,
        requestCount: count,
        firstRequestSeq: count > 0 ? seqs[0] : undefined,
        state(w: number, h: number): LogReplay {
          const ledger = new Ledger();
          for (const [id, uj] of debits) ledger.debit([id], uj);
          const requests = new TimedRequestIndex(w, Math.max(h, horizon));
          requests.insertWords(keys, seqs, ats);
          return {
            ledger,
            requests,
            allowed,
            denied,
            rejected: [...rejected],
            breaks: [...breaks],
            attribution: new Map(),
            revokedSeen: new Set(),
            total,
            nextSeq,
            headId: head as ContentId | undefined,
            coveredSeq: seq,
            coveredId: rid,
            outcomes: noOutcomes(),
            seconds: 0,
          };
        },
      },
    };
  } catch (e) {
    return { ok: false, why: `malformed: ${(e as Error).message}` };
  }
}

/**
 * Writes snapshot bytes for `seq` durably: a temporary file, fsync, rename, folder fsync. Then
 * removes the older snapshots (seq below `seq`) but the newest `keep` − 1 (keep ≥ 1); files named
 * with a higher seq are left alone and do not count.
 * @throws the file system error (nothing is renamed into place unless it was fsync'd).
 */
export function writeSnapshotFile(dataDir: string, seq: number, bytes: Uint8Array, keep: number): string {
  const dir = path.join(dataDir, SNAPSHOT_DIR);
  makeDirs(dir, 0o700);
  const file = path.join(dir, snapshotFileName(seq));
  writeFileDurably(file, bytes, 0o600);
  pruneSnapshots(dataDir, seq, keep);
  return file;
}

/**
 * Bytes of a snapshot file written between two flushes to the disk while a node runs: the log's
 * fsync'd batches then never wait behind more than this much of the snapshot's dirty data (with
 * the whole 1.2 MB file flushed at once, a batch took 65 ms against ~1 ms: bench/history.ts).
 */
export const SNAPSHOT_SYNC_BYTES = 128 << 10;

/**
 * {@link writeSnapshotFile} with the write and fsyncs on the libuv thread pool (`writeFileDurablyAsync`),
 * so a running node keeps deciding while they wait on the disk. Same file, same pruning.
 * @throws (rejects with) the file system error.
 */
async function writeSnapshotFileOffLoop(dataDir: string, seq: number, bytes: Uint8Array, keep: number): Promise<string> {
  const dir = path.join(dataDir, SNAPSHOT_DIR);
  makeDirs(dir, 0o700);
  const file = path.join(dir, snapshotFileName(seq));
  await writeFileDurablyAsync(file, bytes, 0o600, { syncEveryBytes: SNAPSHOT_SYNC_BYTES });
  pruneSnapshots(dataDir, seq, keep);
  return file;
}

/**
 * Removes the snapshots below `seq` beyond the newest `keep` (the one at `seq` counts). A file named
 * above it is never what this log's replay made (the node only covers higher seqs as it goes): it
 * is left alone, and never counts toward `keep`, so it cannot push out the one just written.
 */
function pruneSnapshots(dataDir: string, seq: number, keep: number): void {
  const older = listSnapshots(dataDir).filter((s) => s.seq < seq);
  for (const old of older.slice(Math.max(0, keep - 1))) {
    // Best effort, after the new snapshot is in place: a name that is not a regular file (a
    // folder someone made) is not a snapshot this node wrote and is left, as is one that cannot
    // be removed; neither makes the snapshot just written count as failed.
    try {
      if (lstatSync(old.file).isFile()) rmSync(old.file, { force: true });
    } catch {
      // gone meanwhile, or not removable: left for the next time
    }
  }
  removeOrphanTemps(dataDir);
}

/**
 * Removes the temporary snapshot files other processes left (io removeStaleTemps): only one
 * process writes a folder's snapshots at a time (the node or `jcp receipts snapshot`, which holds
 * the log's lock).
 */
function removeOrphanTemps(dataDir: string): void {
  removeStaleTemps(path.join(dataDir, SNAPSHOT_DIR), (name) => NAME.test(name));
}

/** Why a snapshot was not used at start (logged), or the one used. */
export interface SnapshotChoice {
  readonly used: (OpenedSnapshot & { readonly file: string }) | undefined;
  readonly ignored: ReadonlyArray<{ readonly file: string; readonly why: string }>;
  /**
   * Set when `used` was made ahead of the clock (see {@link SnapshotClock}) and is used anyway,
   * because the log was archived and cannot be replayed from seq 0: requests whose `now` is
   * below `horizon` (unix s) are refused (`clock-skew`) until the clock has moved past it.
   */
  readonly ahead?: { readonly horizon: number; readonly byS: number };
}

/**
 * The clock a snapshot is chosen against. A snapshot whose `made_at_s` is more than `toleranceS`
 * ahead of `nowS` was made by a node whose clock ran ahead; its request index horizon
 * (`made_at_s` − window) would refuse requests the skew check now accepts, and the ids below it
 * are gone, so it is not used (an older one, or a full replay, rebuilds the index instead). A
 * node passes `toleranceS` = `request_index_margin_s`: a snapshot within it refuses no request
 * with `now` ≥ clock − `max_skew_s`.
 */
export interface SnapshotClock {
  /** Unix seconds. */
  readonly nowS: number;
  /** Seconds a snapshot may be ahead of `nowS` and still be used (≥ 0). */
  readonly toleranceS: number;
}

/**
 * Finds the newest snapshot of `dataDir` that verifies under `steward` and agrees with the log:
 * the log holds a receipt at its seq, with the receipt id it names. Older snapshots are tried in
 * turn; none usable means a full replay. Never throws on a bad snapshot (it lands in `ignored`).
 * With `clock`, a snapshot made ahead of it ({@link SnapshotClock}) is ignored too, unless the log
 * was archived (no full replay is possible) and no other snapshot is usable: then it is used and
 * `ahead` says what it refuses.
 * @throws NodeFault `log-corrupt` when LevelDB cannot read the log.
 */
export async function chooseSnapshot(log: ReceiptLog, dataDir: string, steward: Did, clock?: SnapshotClock): Promise<SnapshotChoice> {
  const { list, why } = listSnapshotsOrWhy(dataDir);
  return chooseAmong(list, why === undefined ? [] : [{ file: path.join(dataDir, SNAPSHOT_DIR), why }], lookupsOf(log), steward, clock);
}

/**
 * What choosing a snapshot asks of the log: the receipt id of the receipt at a seq (undefined when
 * the log holds none there), and whether any receipts were archived (no full replay is possible).
 * @throws NodeFault `log-corrupt` when LevelDB cannot read the log.
 */
export interface SnapshotLogLookups {
  receiptIdAt(seq: number): Promise<ContentId | undefined>;
  archived(): Promise<boolean>;
}

/** The lookups of a receipt log. */
function lookupsOf(log: ReceiptLog): SnapshotLogLookups {
  return {
    receiptIdAt: async (seq) => {
      const at = await log.getReceipt(seq);
      return at === undefined ? undefined : receiptId(at);
    },
    archived: async () => (await log.archiveRecords()).length > 0,
  };
}

/** {@link chooseSnapshot} over a listing of snapshot files, newest first, and what was already ignored. */
export async function chooseAmong(
  list: ReadonlyArray<{ readonly seq: number; readonly file: string }>,
  alreadyIgnored: ReadonlyArray<{ readonly file: string; readonly why: string }>,
  log: SnapshotLogLookups,
  steward: Did,
  clock?: SnapshotClock,
): Promise<SnapshotChoice> {
  const ignored = [...alreadyIgnored];
  let aheadOne: (OpenedSnapshot & { readonly file: string }) | undefined;
  for (const { seq, file } of list) {
    const checked = await checkSnapshotFile(log, steward, seq, file);
    if (!checked.ok) {
      ignored.push({ file, why: checked.why });
      continue;
    }
    const byS = clock === undefined ? 0 : checked.value.madeAtS - clock.nowS;
    if (clock !== undefined && byS > clock.toleranceS) {
      ignored.push({
        file,
        why: `made at ${checked.value.madeAtS}, ${byS} s ahead of the node clock (${clock.nowS}; ${clock.toleranceS} s allowed): its request index would refuse requests the clock accepts`,
      });
      aheadOne ??= { ...checked.value, file };
      continue;
    }
    return { used: { ...checked.value, file }, ignored };
  }
  if (aheadOne !== undefined && clock !== undefined && (await log.archived())) {
    const i = ignored.findIndex((x) => x.file === aheadOne.file);
    ignored.splice(i, 1);
    return { used: aheadOne, ignored, ahead: { horizon: aheadOne.horizon, byS: aheadOne.madeAtS - clock.nowS } };
  }
  return { used: undefined, ignored };
}

/** Reads, verifies and matches one snapshot file against the log (see {@link chooseSnapshot}). */
async function checkSnapshotFile(
  log: SnapshotLogLookups,
  steward: Did,
  seq: number,
  file: string,
): Promise<{ ok: true; value: OpenedSnapshot } | { ok: false; why: string }> {
  let bytes: Uint8Array;
  try {
    bytes = readSnapshotFile(file);
  } catch (e) {
    return { ok: false, why: `unreadable: ${(e as Error).message}` };
  }
  const o = openSnapshot(bytes, steward);
  if (!o.ok) return o;
  if (o.value.seq !== seq) return { ok: false, why: `covers seq ${o.value.seq}, not the seq its name says (${seq})` };
  const at = await log.receiptIdAt(seq);
  if (at === undefined) return { ok: false, why: `the log holds no receipt at seq ${seq}` };
  if (at !== o.value.receiptId) return { ok: false, why: `the log's receipt at seq ${seq} is not the one the snapshot covers` };
  return o;
}

/** Options of {@link makeSnapshot}. */
export interface MakeSnapshotOptions {
  readonly steward: Actor;
  /** Cover the receipts up to this seq (default: the end of the log). */
  readonly toSeq?: number;
  /** The request index window (`max_skew_s` + margin, s); default the base snapshot's, else keep every entry. */
  readonly windowS?: number;
  /** Clock (unix s): sets the horizon (`clock − window`) and `made_at_s`. */
  readonly nowS: number;
  /**
   * Seconds a base snapshot may have been made ahead of `nowS` and still be continued
   * ({@link SnapshotClock}; default 0; a node passes `request_index_margin_s`).
   */
  readonly aheadS?: number;
  /** Snapshots kept (default 2). */
  readonly keep?: number;
  /** Where slices run (default inline, yielding between slices of 256 receipts). */
  readonly runner?: SliceRunner;
  readonly parallel?: number;
  readonly logger?: Logger;
}

/** What {@link makeSnapshot} wrote. */
export interface MadeSnapshot {
  readonly file: string;
  readonly seq: number;
  /** Receipts replayed to make it (those after the snapshot it continued, if any). */
  readonly replayed: number;
  /** Request ids the snapshot holds (its `requests.count`). */
  readonly requests: number;
  readonly bytes: number;
  readonly seconds: number;
  /**
   * How the receipts after the base were checked (node/snapshotjob.ts {@link SnapshotCheck}):
   * `signatures` (always offline, and on a running node for receipts it did not append itself),
   * `chain` (a running node's own receipts, vouched for by their `prev` links to the id it holds).
   */
  readonly checked: SnapshotCheck;
  /**
   * What it continued: `file` (a snapshot file read and verified), `kept` (the state of the
   * snapshot the same worker made last, held in memory since: node/snapshotjob.ts), `none` (a
   * replay from seq 0).
   */
  readonly base: SnapshotBase;
  /**
   * CPU seconds the snapshot's worker thread (or process's main thread) ran for it: the choice,
   * replay, merge, encoding and signature, and, for a worker just started, its start (Linux
   * `/proc/thread-self/schedstat`; absent elsewhere, and from the offline path).
   */
  readonly cpuSeconds?: number;
}

/** What a snapshot continued (see {@link MadeSnapshot.base}). */
export type SnapshotBase = 'file' | 'kept' | 'none';

const yielding: SliceRunner = async (job) => {
  await yieldTurn(); // let decisions in between slices
  return replaySlice(job);
};

/**
 * Makes a snapshot of the log: the newest usable snapshot (if any) plus the verified receipts
 * after it, up to `toSeq`, replayed and written durably, the state held on this thread (`jcp
 * receipts snapshot`, with the node stopped; a running node uses {@link makeSnapshotOffThread},
 * which writes the same bytes). The state comes from the log, not from a node's memory.
 * Returns undefined when there is nothing new to cover: no receipt after the newest usable
 * snapshot, and no request id it names that the window (`nowS` − `windowS`) has left behind.
 * @throws NodeFault `log-corrupt` when the log cannot be read; the file system error when the
 *   snapshot cannot be written.
 */
export async function makeSnapshot(log: ReceiptLog, dataDir: string, o: MakeSnapshotOptions): Promise<MadeSnapshot | undefined> {
  const t0 = performance.now();
  const choice = await chooseSnapshot(log, dataDir, o.steward.did, { nowS: o.nowS, toleranceS: o.aheadS ?? 0 });
  for (const x of choice.ignored) o.logger?.warn({ file: x.file, why: x.why }, 'snapshot ignored');
  const base = choice.used;
  const toSeq = o.toSeq ?? (await log.lastSeq());
  if (toSeq < 0 || (base !== undefined && base.seq > toSeq)) return undefined;
  const windowS = o.windowS ?? base?.windowS ?? Number.MAX_SAFE_INTEGER;
  // Request ids older than the window are dropped before the snapshot is encoded: skipping them
  // as they are read keeps a long tail of old receipts from filling the index first.
  const requestHorizon = Math.max(0, o.nowS - windowS);
  const from = base?.state(windowS, requestHorizon);
  const r = await replayLog(log, {
    steward: o.steward.did,
    toSeq,
    sliceSize: o.runner ? 2048 : 256,
    runner: o.runner ?? yielding,
    parallel: o.runner ? (o.parallel ?? 2) : 1,
    requestWindowS: windowS,
    requestHorizon,
    ...(from ? { from } : {}),
  });
  await yieldTurn(); // decisions waiting behind the last merge go first
  const done = finishSnapshot(r, base, { steward: o.steward, nowS: o.nowS, windowS });
  if (done === undefined) return undefined;
  const { bytes, requestCount } = done;
  await yieldTurn();
  const file = await writeSnapshotFileOffLoop(dataDir, r.coveredSeq, bytes, o.keep ?? 2);
  const replayed = r.total - (from?.total ?? 0);
  return {
    file,
    seq: r.coveredSeq,
    replayed,
    requests: requestCount,
    bytes: bytes.length,
    seconds: (performance.now() - t0) / 1000,
    checked: 'signatures',
    base: base === undefined ? 'none' : 'file',
  };
}

/**
 * The signed snapshot bytes of a replayed state `r` (the base snapshot it continued, if any), with
 * the number of request ids they hold (`requests.count`, what a worker keeping the state compares
 * against next time: node/snapshotjob.ts): the request index moved up to `nowS` − `windowS`
 * first. Undefined when there is nothing new to
 * cover: `r` covers no receipt, or covers the base's seq and the clock has moved the request
 * window past no id the base names (then the base is written again at the same seq, so a quiet
 * log can still be archived).
 */
export function finishSnapshot(
  r: LogReplay,
  base: Pick<OpenedSnapshot, 'requestCount' | 'seq'> | undefined,
  o: { readonly steward: Actor; readonly nowS: number; readonly windowS: number },
): { readonly bytes: Uint8Array; readonly requestCount: number } | undefined {
  if (r.coveredSeq < 0) return undefined;
  r.requests.advance(o.nowS);
  const horizon = Math.max(0, r.requests.horizon);
  if (base !== undefined && r.coveredSeq === base.seq && r.requests.entries(horizon).seqs.length === base.requestCount) return undefined;
  const body = snapshotBody(r, o.steward.did, { madeAtS: o.nowS, windowS: Math.min(o.windowS, Number.MAX_SAFE_INTEGER), horizon });
  const requestCount = (body['requests'] as { count: number }).count;
  return { bytes: encode(signBody(body, o.steward)), requestCount };
}

/** Receipts per replay slice of a running node's snapshot (the main thread's share of each slice is one short task). */
export const SNAPSHOT_SLICE = 256;

/** The longest pause `snapshot.pause_ms` may set between two slices (ms). */
export const SNAPSHOT_PAUSE_MAX_MS = 1000;

/** Options of {@link makeSnapshotOffThread}. */
export interface OffThreadSnapshotOptions {
  readonly steward: Actor;
  /** Cover the receipts up to this seq (the node's durable seq when it starts). */
  readonly toSeq: number;
  /** The request index window (`max_skew_s` + margin, s). */
  readonly windowS: number;
  /** Clock (unix s): the horizon (`clock − window`) and `made_at_s`. */
  readonly nowS: number;
  /** Seconds a base snapshot may have been made ahead of `nowS` and still be continued (default 0). */
  readonly aheadS?: number;
  /** Snapshots kept (default 2). */
  readonly keep?: number;
  readonly logger?: Logger;
  /**
   * Milliseconds to wait after handing each slice of {@link SNAPSHOT_SLICE} receipts to the
   * builder but the last, at most {@link SNAPSHOT_PAUSE_MAX_MS} (`snapshot.pause_ms`; default 0,
   * none). With a pause the builder also replays one slice at a time instead of eight, so its work
   * comes in short bursts spread over a longer snapshot. Same file, same bytes. A snapshot then
   * covers at most 256,000 ÷ `pauseMs` receipts a second: one that takes in more falls behind.
   */
  readonly pauseMs?: number;
  /** Ends a pause early when aborted (the node stopping): the snapshot then rejects with the abort's reason. */
  readonly signal?: AbortSignal;
  /**
   * The receipts this node appended and the id it holds for the last (node/receiptlog.ts
   * `appendedDurable`): those after the base are checked by their `prev` links to that id instead
   * of their signatures when `seq` is `toSeq` (node/snapshotjob.ts). Should the links not hold, a
   * warning `snapshot: receipts not as the node wrote them` is logged and the snapshot is made
   * again with every signature checked.
   */
  readonly vouch?: AppendedDurable | undefined;
}

/**
 * A running node's snapshot: the file {@link makeSnapshot} would write, built on `pool`'s first
 * worker (node/snapshotjob.ts), so nothing that grows with the state runs on the decision path.
 * This thread lists the snapshot files and looks up the receipt id at each one's seq, reads the
 * receipts after the base the worker chose, in slices of {@link SNAPSHOT_SLICE} (one event-loop
 * turn each, at most two with the worker), and writes the bytes the worker signed off the event
 * loop (`writeFileDurablyAsync`). Undefined when there is nothing new to cover.
 * @throws NodeFault `log-corrupt` when the log cannot be read; Error `worker: …` from the worker
 *   (a replay or encoding failure); the file system error when the file cannot be written.
 */
export async function makeSnapshotOffThread(
  log: ReceiptLog,
  dataDir: string,
  pool: Pick<SnapshotBuilder, 'snapshotJob'>,
  o: OffThreadSnapshotOptions,
): Promise<MadeSnapshot | undefined> {
  const t0 = performance.now();
  if (o.toSeq < 0) return undefined;
  let session = await snapshotSession(log, dataDir, pool, o, o.vouch);
  if (session.unvouched !== undefined) {
    o.logger?.warn({ why: session.unvouched, toSeq: o.toSeq }, 'snapshot: receipts not as the node wrote them; checking every signature');
    session = await snapshotSession(log, dataDir, pool, o, undefined);
  }
  return session.made && { ...session.made, seconds: (performance.now() - t0) / 1000 };
}

/** Waits `ms`; rejects with `signal`'s reason as soon as it is aborted. */
async function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  try {
    await sleep(ms, undefined, signal !== undefined ? { signal } : {});
  } catch (e) {
    throw signal?.aborted ? signal.reason : e;
  }
}

/** One session of {@link makeSnapshotOffThread}: the file written, or why the vouched receipts did not link. */
async function snapshotSession(
  log: ReceiptLog,
  dataDir: string,
  pool: Pick<SnapshotBuilder, 'snapshotJob'>,
  o: OffThreadSnapshotOptions,
  vouch: OffThreadSnapshotOptions['vouch'],
): Promise<{ made?: Omit<MadeSnapshot, 'seconds'>; unvouched?: string }> {
  o.signal?.throwIfAborted();
  const { list, why } = listSnapshotsOrWhy(dataDir);
  const lookups = lookupsOf(log);
  const pauseMs = Math.min(SNAPSHOT_PAUSE_MAX_MS, Math.max(0, o.pauseMs ?? 0));
  const candidates: SnapshotCandidate[] = [];
  for (const { seq, file } of list) candidates.push({ seq, file, receiptId: await lookups.receiptIdAt(seq) });
  const opened = await pool.snapshotJob({
    t: 'snap-open',
    id: 0,
    stewardSeed: o.steward.key.seed,
    candidates,
    ignored: why === undefined ? [] : [{ file: path.join(dataDir, SNAPSHOT_DIR), why }],
    archived: await lookups.archived(),
    nowS: o.nowS,
    aheadS: o.aheadS ?? 0,
    windowS: o.windowS,
    toSeq: o.toSeq,
    ...(vouch !== undefined ? { vouch } : {}),
    ...(pauseMs > 0 ? { sliceSize: SNAPSHOT_SLICE } : {}),
  });
  if (opened.t !== 'opened') throw new Error(`snapshot: the worker answered ${opened.t} to snap-open`);
  for (const x of opened.ignored) o.logger?.warn({ file: x.file, why: x.why }, 'snapshot ignored');
  if (opened.baseSeq > o.toSeq) return {};
  let pending: Promise<SnapshotReply> | undefined;
  for await (const chunk of log.receiptChunks(SNAPSHOT_SLICE, opened.baseSeq + 1)) {
    const part = chunk[chunk.length - 1]![0] <= o.toSeq ? chunk : chunk.filter(([seq]) => seq <= o.toSeq);
    if (part.length > 0) {
      await yieldTurn(); // one slice's share of this thread per event-loop turn
      const { packed, ends } = packReceipts(part.map(([, bytes]) => bytes));
      const seqs = Float64Array.from(part, ([seq]) => seq);
      const before = pending;
      pending = pool.snapshotJob({ t: 'snap-chunk', id: 0, packed, ends, seqs }, [
        packed.buffer as ArrayBuffer,
        ends.buffer as ArrayBuffer,
        seqs.buffer as ArrayBuffer,
      ]);
      // Handled now: when `before` rejects first (a worker that died fails both), this one is
      // never awaited, and an unhandled rejection would end the node.
      pending.catch(() => undefined);
      if (before !== undefined) await before;
      // No pause after the last slice: the snapshot's end need not wait.
      if (pauseMs > 0 && part[part.length - 1]![0] < o.toSeq) await pause(pauseMs, o.signal);
    }
    if (part.length < chunk.length) break;
  }
  if (pending !== undefined) await pending;
  const ended = await pool.snapshotJob({ t: 'snap-end', id: 0 });
  if (ended.t !== 'ended') throw new Error(`snapshot: the worker answered ${ended.t} to snap-end`);
  if (ended.unvouched !== undefined) return { unvouched: ended.unvouched };
  if (ended.made === undefined) return {};
  const { bytes, seq, replayed, requests, checked, cpuS } = ended.made;
  const file = await writeSnapshotFileOffLoop(dataDir, seq, bytes, o.keep ?? 2);
  const base: SnapshotBase = opened.base ?? (opened.baseSeq < 0 ? 'none' : 'file');
  return {
    made: { file, seq, replayed, requests, bytes: bytes.length, checked, base, ...(cpuS !== undefined ? { cpuSeconds: cpuS } : {}) },
  };
}

/** The scheduling priority (nice) of the worker thread a running node's snapshot replays on. */
export const SNAPSHOT_WORKER_NICE = 19;

/**
 * How a running node's snapshot worker thread is scheduled (config `snapshot.scheduling`; Linux):
 * `nice` (the default) runs it at nice 19 in the normal class. `idle` also puts it in the
 * SCHED_IDLE class once its modules have loaded: the kernel then preempts it as soon as a
 * decision wakes, which on a host where the node has the cores to itself kept the open loop's p99
 * near its value without snapshots, but the thread shares locks with the main thread (libuv's
 * thread pool, the message ports it answers on), and on cores that other processes of the same
 * scheduling group keep busy it can wait seconds for CPU while holding one, and the main thread
 * with it (SCHED_IDLE's weight is 3 against nice 19's 15 and nice 0's 1,024). docs/node.md
 * "Snapshots" has the figures.
 */
export type SnapshotScheduling = 'idle' | 'nice';

/**
 * Where a running node's snapshot is built (config `snapshot.builder`): `thread` (the default) on
 * a worker thread of the node's process, `process` in a process of its own (node/snapshotproc.ts),
 * which shares no lock with the main thread, so `scheduling: idle` cannot stall the decisions
 * through one. Either is kept between snapshots that come close together ({@link Snapshotter}).
 * The process costs a Node start (about 0.3 s of CPU at nice 19) when it starts, and each slice of
 * receipts is copied through a pipe instead of transferred.
 */
export type SnapshotBuilderKind = 'process' | 'thread';

/**
 * What builds a running node's snapshot: a one-worker {@link WorkerPool} or a
 * {@link SnapshotProcess}. `snapshotJob` carries the session (node/snapshotjob.ts).
 */
export interface SnapshotBuilder {
  snapshotJob(job: SnapshotJob, transfer?: ArrayBuffer[]): Promise<SnapshotReply>;
  bootScheduling(): Promise<BootScheduling[]>;
  close(): Promise<void>;
  /** Whether it has ended (a thread that exited, a process that died): a kept one is then replaced. Absent: never asked. */
  readonly exited?: boolean;
}

/**
 * Seconds a running node keeps its snapshot worker after a snapshot (node/snapshotjob.ts): a
 * snapshot that comes within this time continues the state the worker holds, with no worker start
 * (about 0.12 s of CPU here) and no reading of the base file; after it, the worker is ended and its
 * memory (the state of the whole request window) returned.
 */
export const SNAPSHOT_WORKER_IDLE_S = 60;

/** Longest wait (seconds) between the timer's tries after snapshots failed in a row (1, 2, 4, … s up to it). */
export const SNAPSHOT_RETRY_MAX_S = 300;

/** Options of {@link Snapshotter}. */
export interface SnapshotterOptions {
  readonly log: ReceiptLog;
  readonly dataDir: string;
  readonly steward: Actor;
  /** Snapshot once this many receipts were made durable since the last one (0 = not by count). */
  readonly everyReceipts: number;
  /** Snapshot once this many seconds passed since the last one, if any receipt is new (0 = not by time). */
  readonly everyS: number;
  readonly keep: number;
  /** The request index window (`max_skew_s` + margin, seconds). */
  readonly windowS: number;
  /** Seconds a snapshot may have been made ahead of the clock and still be continued (`request_index_margin_s`). */
  readonly aheadS?: number;
  readonly clockS: () => number;
  /** The highest seq known durable (the log's batches, or boot replay's end). */
  readonly durableSeq: () => number;
  /** The seq the newest usable snapshot covers at start (−1: none). */
  readonly coveredSeq: number;
  /**
   * Ignored (kept for callers that pass the node's signature workers): the replay's slices run on
   * the snapshot's own worker thread at {@link SNAPSHOT_WORKER_NICE}, so the
   * main thread only reads the log and decides, and the signature workers only serve decisions.
   */
  readonly runner?: SliceRunner | undefined;
  readonly parallel?: number;
  /** The snapshot worker's scheduling ({@link SnapshotScheduling}; default `nice`). */
  readonly scheduling?: SnapshotScheduling;
  /** Where the snapshot is built ({@link SnapshotBuilderKind}; default `thread`). */
  readonly builder?: SnapshotBuilderKind;
  /** Milliseconds between two slices handed to the builder (`snapshot.pause_ms`; default 0): {@link OffThreadSnapshotOptions.pauseMs}. */
  readonly pauseMs?: number;
  /** Seconds the worker is kept after a snapshot (default {@link SNAPSHOT_WORKER_IDLE_S}, or `everyS` + 10 when `everyS` is 1–600). */
  readonly workerIdleS?: number;
  readonly logger: Logger;
  /** Called after each snapshot written (metrics). */
  readonly onSnapshot?: (s: MadeSnapshot) => void;
}

/**
 * Writes snapshots of a running node's log every N receipts or T seconds. The check
 * runs on a 1-second timer; a snapshot is built from the log ({@link makeSnapshotOffThread}),
 * never from the live ledger, so the decision path is not paused: the choice of the base, the
 * replay, the merge, the encoding and the signature run on a worker thread (or, with
 * `builder: 'process'`, a process: {@link SnapshotProcess}) at the lowest scheduling priority (the
 * main thread reads the log and writes the file), and one snapshot is built at a time. The worker
 * is kept, with the state it made last, for the next snapshot that comes within its idle time
 * (`workerIdleS`; default {@link SNAPSHOT_WORKER_IDLE_S}, or `every_s` + 10 s when `every_s` is at
 * most 600), and replaced when it has ended meanwhile. A failure is logged and retried at the next trigger, after a wait that doubles with each
 * failure in a row (1 s up to {@link SNAPSHOT_RETRY_MAX_S}); it never stops the node.
 */
export class Snapshotter {
  readonly #o: SnapshotterOptions;
  #covered: number;
  #lastAt: number;
  #timer: NodeJS.Timeout | undefined;
  /** The snapshot being built (awaited only for it to settle). */
  #running: Promise<unknown> | undefined;
  /** Aborted by close(): the snapshotter is closed, and a paced snapshot's pause (`snapshot.pause_ms`) ends at once. */
  readonly #stopping = new AbortController();
  get #closed(): boolean {
    return this.#stopping.signal.aborted;
  }
  /** Failures in a row, and the clock (unix s) before which the timer does not try again. */
  #failures = 0;
  #retryAt = Number.NEGATIVE_INFINITY;
  /**
   * The snapshot worker (or process), kept from one snapshot to the next while they come within
   * {@link SNAPSHOT_WORKER_IDLE_S} of each other, with how it runs (`idle`, `nice <n>`); ended
   * by {@link close}, by that idle time, or by a failed snapshot.
   */
  #builder: { readonly b: SnapshotBuilder; readonly ranAs: string } | undefined;
  #idleTimer: NodeJS.Timeout | undefined;
  #refusedIdle = false;

  constructor(o: SnapshotterOptions) {
    this.#o = o;
    this.#covered = o.coveredSeq;
    this.#lastAt = o.clockS();
  }

  /** Starts the periodic check (no-op when both triggers are 0). */
  start(): void {
    if (this.#o.everyReceipts === 0 && this.#o.everyS === 0) return;
    this.#timer = setInterval(() => void this.#tick(), 1000);
    this.#timer.unref();
  }

  /** The seq the newest snapshot written (or found at start) covers; −1 when none. */
  get coveredSeq(): number {
    return this.#covered;
  }

  #due(): boolean {
    const head = this.#o.durableSeq();
    if (head <= this.#covered) return false;
    if (this.#o.everyReceipts > 0 && head - this.#covered >= this.#o.everyReceipts) return true;
    return this.#o.everyS > 0 && this.#o.clockS() - this.#lastAt >= this.#o.everyS;
  }

  async #tick(): Promise<void> {
    if (this.#running !== undefined || this.#closed || this.#o.clockS() < this.#retryAt || !this.#due()) return;
    await this.snapshotNow().catch((e: Error) => this.#o.logger.warn({ err: e.message }, 'snapshot failed; retried at the next trigger'));
  }

  /**
   * Writes a snapshot covering the receipts durable now (waits for one in progress first).
   * Resolves to what was written, or undefined when nothing new was durable.
   * @throws the error that stopped it (the log unreadable, the file not writable).
   */
  async snapshotNow(): Promise<MadeSnapshot | undefined> {
    while (this.#running !== undefined) await this.#running.catch(() => undefined);
    if (this.#closed) return undefined;
    const toSeq = this.#o.durableSeq();
    if (toSeq <= this.#covered) return undefined;
    // The receipts this process appended, and the id it holds for the last (used if it reaches toSeq).
    const vouch = this.#o.log.appendedDurable;
    // What was written, and how its worker thread was scheduled (`idle` or `nice <n>`, logged with it).
    const build = async (): Promise<{ made: MadeSnapshot; ranAs: string } | undefined> => {
      const t0 = performance.now();
      this.#stopIdleTimer();
      if (this.#builder?.b.exited === true) {
        // The kept worker ended meanwhile (a crash, a killed process): a new one, no failed snapshot.
        const gone = this.#builder.b;
        this.#builder = undefined;
        this.#o.logger.warn({ builder: this.#o.builder ?? 'thread' }, 'snapshot worker: the kept worker had ended; starting a new one');
        await gone.close();
      }
      const builder = this.#builder ?? (await this.#startBuilder());
      // Closed while the worker started: abandoned, as a snapshot ended by close() (below).
      if (builder === undefined) throw new Error('snapshot: the node stopped while its worker started');
      try {
        const made = await makeSnapshotOffThread(this.#o.log, this.#o.dataDir, builder.b, {
          steward: this.#o.steward,
          toSeq,
          windowS: this.#o.windowS,
          nowS: this.#o.clockS(),
          ...(this.#o.aheadS !== undefined ? { aheadS: this.#o.aheadS } : {}),
          keep: this.#o.keep,
          logger: this.#o.logger,
          vouch,
          ...(this.#o.pauseMs ? { pauseMs: this.#o.pauseMs, signal: this.#stopping.signal } : {}),
        });
        // Seconds from the start (the worker's start too, when one was started) to the file in place.
        return made && { made: { ...made, seconds: (performance.now() - t0) / 1000 }, ranAs: builder.ranAs };
      } catch (e) {
        // A failed session may leave the worker anywhere: the next snapshot starts a new one.
        this.#builder = undefined;
        await builder.b.close();
        throw e;
      } finally {
        if (this.#builder !== undefined) this.#startIdleTimer();
      }
    };
    const p = build();
    this.#running = p;
    try {
      let built: Awaited<typeof p>;
      try {
        built = await p;
      } catch (e) {
        if (this.#closed) {
          // Ended by close(): the snapshot is only a cache of the log; the next start makes one.
          this.#o.logger.info({ seq: toSeq }, 'snapshot abandoned: the node is stopping');
          return undefined;
        }
        // Each try replays the log after the last usable snapshot: a lasting fault (a full disk,
        // a folder not writable) waits 1, 2, 4, … s (at most SNAPSHOT_RETRY_MAX_S) between tries.
        this.#failures++;
        this.#retryAt = this.#o.clockS() + Math.min(SNAPSHOT_RETRY_MAX_S, 2 ** (this.#failures - 1));
        throw e;
      }
      this.#failures = 0;
      this.#retryAt = Number.NEGATIVE_INFINITY;
      this.#lastAt = this.#o.clockS();
      if (built === undefined) return undefined;
      const { made, ranAs } = built;
      this.#covered = made.seq;
      const { seq, file, replayed, requests, bytes, seconds, checked, base, cpuSeconds } = made;
      this.#o.logger.info(
        {
          seq,
          file,
          replayed,
          requests,
          bytes,
          seconds,
          ...(cpuSeconds !== undefined ? { cpu_s: Number(cpuSeconds.toFixed(4)) } : {}),
          scheduling: ranAs,
          builder: this.#o.builder ?? 'thread',
          ...(this.#o.pauseMs ? { pause_ms: this.#o.pauseMs } : {}),
          checked,
          base,
        },
        'snapshot written',
      );
      this.#warnIfBehind(made);
      this.#o.onSnapshot?.(made);
      return made;
    } finally {
      this.#running = undefined;
    }
  }

  /**
   * Logs `snapshot falling behind` (warn) when, by the count trigger (`snapshot.every_receipts`),
   * the next snapshot is due at once and longer than this one: more receipts became durable while
   * it was written (`arrived`) than it replayed, and at least `every_receipts`. Snapshots then run
   * back to back, each replaying more than the last, until the load drops; with
   * `snapshot.pause_ms` set the line says so (a paced snapshot covers at most 256,000 ÷ `pause_ms`
   * receipts a second). Fields: `seq`, `replayed`, `arrived` (receipts), `seconds`, `pause_ms`.
   */
  #warnIfBehind(made: MadeSnapshot): void {
    const arrived = this.#o.durableSeq() - made.seq;
    if (this.#o.everyReceipts === 0 || arrived < this.#o.everyReceipts || arrived <= made.replayed) return;
    const pauseMs = this.#o.pauseMs ?? 0;
    this.#o.logger.warn(
      { seq: made.seq, replayed: made.replayed, arrived, seconds: made.seconds, pause_ms: pauseMs },
      pauseMs > 0
        ? 'snapshot falling behind: more receipts came in while it was written than it replayed (snapshot.pause_ms paces it; a lower pause keeps up)'
        : 'snapshot falling behind: more receipts came in while it was written than it replayed',
    );
  }

  /**
   * Stops the timer and abandons a snapshot in progress: its worker thread is ended (at the lowest
   * priority on busy cores it could take minutes to finish, and the node's stop would wait for it);
   * one whose bytes are made and being written to its file completes (a bounded write).
   */
  async close(): Promise<void> {
    this.#stopping.abort(new Error('snapshot: the node is stopping'));
    if (this.#timer) clearInterval(this.#timer);
    this.#stopIdleTimer();
    const builder = this.#builder;
    this.#builder = undefined;
    await builder?.b.close();
    await this.#running?.catch(() => undefined);
  }

  /**
   * Starts the snapshot worker (a thread, or a process with `builder: 'process'`) at the lowest
   * priority and keeps it; undefined when the snapshotter was closed meanwhile (the worker is ended).
   */
  async #startBuilder(): Promise<{ readonly b: SnapshotBuilder; readonly ranAs: string } | undefined> {
    // A worker of its own at the lowest priority (never the decision path's signature workers: a
    // replay slice queued there would hold up the caller-signature checks behind it).
    const idle = (this.#o.scheduling ?? 'nice') === 'idle';
    const b: SnapshotBuilder =
      this.#o.builder === 'process'
        ? await SnapshotProcess.start({ idle })
        : await WorkerPool.start(1, { nice: SNAPSHOT_WORKER_NICE, idle });
    if (this.#closed) {
      await b.close();
      return undefined;
    }
    this.#builder = { b, ranAs: 'unknown' };
    let ran: BootScheduling | undefined;
    try {
      [ran] = await b.bootScheduling();
    } catch (e) {
      // Died while starting: not kept (the next snapshot starts a new one).
      if (this.#builder?.b === b) this.#builder = undefined;
      await b.close();
      throw e;
    }
    const ranAs = ran?.idle ? 'idle' : `nice ${ran?.nice ?? 'unknown'}`;
    if (idle && ran?.idle === false && !this.#refusedIdle) {
      this.#refusedIdle = true;
      this.#o.logger.warn({ scheduling: ranAs }, 'snapshot worker: the SCHED_IDLE class was refused; it runs at its nice');
    }
    if (this.#builder?.b !== b) return undefined; // closed while it answered
    this.#builder = { b, ranAs };
    return this.#builder;
  }

  /**
   * Seconds the worker is kept after a snapshot: `workerIdleS`, else {@link SNAPSHOT_WORKER_IDLE_S},
   * or `every_s` + 10 when snapshots are timed at most 10 minutes apart (so a worker is not ended
   * just before the next one is due, as with `every_s: 60`).
   */
  get workerIdleS(): number {
    if (this.#o.workerIdleS !== undefined) return this.#o.workerIdleS;
    const every = this.#o.everyS;
    return every > 0 && every <= 600 ? Math.max(SNAPSHOT_WORKER_IDLE_S, every + 10) : SNAPSHOT_WORKER_IDLE_S;
  }

  /** Ends the kept worker once no snapshot has come for {@link workerIdleS} seconds (its memory holds the last state). */
  #startIdleTimer(): void {
    this.#stopIdleTimer();
    this.#idleTimer = setTimeout(() => {
      this.#idleTimer = undefined;
      if (this.#running !== undefined) return; // a snapshot started meanwhile: it starts the timer again
      const builder = this.#builder;
      this.#builder = undefined;
      void builder?.b.close();
    }, this.workerIdleS * 1000);
    this.#idleTimer.unref();
  }

  #stopIdleTimer(): void {
    if (this.#idleTimer !== undefined) clearTimeout(this.#idleTimer);
    this.#idleTimer = undefined;
  }
}
