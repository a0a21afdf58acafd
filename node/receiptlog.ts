/**
 * The receipt log (spec §8.1: the receipt stream is the write-ahead log), on LevelDB
 * (`classic-level`). Receipts are keyed by `seq`; each receipt's `prev` names the previous
 * receipt's bytes, so a deletion or reordering is detectable when the log is verified.
 *
 * Writes are group-committed: while one fsync'd batch (`batch(ops, {sync: true})`) is in flight,
 * the next decisions queue up and go together in the next one, so durability costs one fsync per
 * batch, not per decision. A write resolves only once its batch is on disk; the node replies only
 * then. A write nobody waits for before a reply (a measurement record, written after the reply
 * left) may be *deferred*: it waits in the queue for the next write's batch, or at most
 * {@link DEFERRED_FLUSH_MS}, so it does not put a second fsync in front of the next decision.
 *
 * Layout of the data folder:
 * - `node.json`: written once, when the log is created (`{format, steward, created_at_s}`); its
 *   presence says a log must be here, so a missing log is an error, never a fresh empty one
 *   (an empty log would hand every budget back);
 * - `head`: the head mark (`headmark.ts`), a witness of the last durable receipt kept outside
 *   LevelDB, so receipts LevelDB loses from its write-ahead file are noticed on open;
 * - `receipts/`: the LevelDB database. Keys: `r` ‖ seq (8 bytes, big-endian) → receipt bytes
 *   (COSE_Sign1); `v` ‖ grant id (hex) → signed revocation (det-CBOR); `s` ‖ request id (hex) →
 *   the endpoint's result bytes, kept for idempotent replies; `g` ‖ steered grant id (hex) → the
 *   steward-signed record of an amendment in force (§4.7, node/amendments.ts).
 *   `m` / `u` ‖ receipt seq (8 bytes,
 *   big-endian) → the steward-signed outcome record of that allow (measurement / reversal,
 *   `outcome.ts`).
 */
import { existsSync, writeFileSync, fsyncSync, openSync, closeSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { blake3, bytesEqual, type ContentId, type Did, toHex } from '../core/index.ts';
import { errnoOf, IoError, readFileCapped } from '../io/index.ts';
import { NodeFault, NodeFaultCodes } from './codes.ts';
import { HEAD_MARK_FILE, HeadMarkFile } from './headmark.ts';
import type { OutcomeKind } from './outcome.ts';

/** The `format` tag of `node.json`. */
export const DATA_FORMAT = 'jcp-node/1';

const R = 0x72; // 'r': receipts by seq
const V = 0x76; // 'v': revocations by grant id
const S = 0x73; // 's': endpoint results by request id
const G = 0x67; // 'g': amendments in force, by steered grant id
const A = 0x61; // 'a': archived segments by first seq (node/archive.ts)
const M = 0x6d; // 'm': measurement outcome records by receipt seq (node/outcome.ts)
const U = 0x75; // 'u': reversal outcome records by receipt seq (node/outcome.ts)

/** The key of the outcome record of kind `kind` for receipt `seq`: `m` or `u` ‖ 8-byte big-endian seq. */
export function outcomeKey(kind: OutcomeKind, seq: number): Uint8Array {
  const k = receiptKey(seq);
  k[0] = kind === 'reversal' ? U : M;
  return k;
}

/** Key of receipt `seq`: `r` ‖ 8-byte big-endian seq. */
export function receiptKey(seq: number): Uint8Array {
  const k = new Uint8Array(9);
  k[0] = R;
  new DataView(k.buffer).setBigUint64(1, BigInt(seq));
  return k;
}

function seqOfKey(k: Uint8Array): number {
  return Number(new DataView(k.buffer, k.byteOffset, k.byteLength).getBigUint64(1));
}

function textKey(prefix: number, id: string): Uint8Array {
  const k = new Uint8Array(1 + id.length);
  k[0] = prefix;
  for (let i = 0; i < id.length; i++) k[i + 1] = id.charCodeAt(i) & 0xff;
  return k;
}

type Op = { type: 'put'; key: Uint8Array; value: Uint8Array };

interface Pending {
  readonly ops: Op[];
  /** Nobody waits on it before a reply: it need not start a batch of its own. */
  readonly deferred: boolean;
  readonly resolve: () => void;
  readonly reject: (e: Error) => void;
}

/** Options of {@link ReceiptLog.open}. */
export interface ReceiptLogOptions {
  /** The steward that signs this log's receipts; a log made by another steward is refused. */
  readonly steward: Did;
  /** Most receipts per fsync'd batch. */
  readonly batchMax?: number;
  /** Unix seconds, recorded in `node.json` when the log is created. */
  readonly nowS: number;
  /** Called after each durable batch with its receipt count and fsync time (seconds). */
  readonly onBatch?: (receipts: number, seconds: number) => void;
  /** Open an existing log only; never create one (for `jcp receipts`). */
  readonly mustExist?: boolean;
}

/**
 * What the head mark says about the log (see `headmark.ts`): `ok` (no mark yet, or the marked
 * receipt is there with the same bytes), or the log lost receipts the node had made durable:
 * `tail-lost` (the marked seq is not in the log: receipts `lastSeq + 1 ..= markSeq` are gone),
 * `head-changed` (a receipt is at the marked seq, but not the one written), `mark-damaged` (the
 * mark itself is unreadable) or `mark-missing` (a folder that keeps a mark has receipts but no
 * mark): in both the tail cannot be vouched for.
 */
export type HeadCheck =
  | { readonly ok: true; readonly markSeq?: number }
  | {
      readonly ok: false;
      readonly code: 'tail-lost' | 'head-changed' | 'mark-damaged' | 'mark-missing';
      readonly markSeq?: number;
      readonly lastSeq: number;
      readonly why: string;
    };

/** True when LevelDB refused to open because another process holds the database lock. */
export function isLockError(e: unknown): boolean {
  for (let x: unknown = e; x instanceof Error; x = (x as { cause?: unknown }).cause) {
    // Only a lock another holder has: an OS failure on the LOCK file itself ("…/LOCK: Read-only
    // file system", "Permission denied") is not one (it is `io`, {@link OS_FAILURES}).
    if ((x as { code?: unknown }).code === 'LEVEL_LOCKED' || /\block\b.*(unavailable|held)/i.test(x.message)) return true;
  }
  return false;
}

/**
 * Operating-system failures that say nothing about the log's bytes (full disk, quota, permissions,
 * read-only file system, a failing disk, descriptor or memory limits), with what to do about each.
 * The texts are strerror's (Linux and macOS): LevelDB reports only those, with no code.
 */
const OS_FAILURES: ReadonlyArray<readonly [errno: string, strerror: RegExp, fix: string]> = [
  ['ENOSPC', /No space left on device/i, 'free disk space'],
  ['EDQUOT', /Dis[kc] quota exceeded/i, 'free space or raise the disk quota'],
  ['EACCES', /Permission denied/i, "check the folder's owner and permissions"],
  ['EPERM', /Operation not permitted/i, "check the folder's owner and permissions"],
  ['EROFS', /Read-only file system/i, 'make its file system writable'],
  ['EIO', /Input\/output error/i, 'check the disk (the kernel log names the device)'],
  ['ENFILE', /Too many open files in system/i, "raise the system's open-file limit"],
  ['EMFILE', /Too many open files/i, 'raise the open-file limit (ulimit -n)'],
  ['ENOMEM', /Cannot allocate memory/i, 'free memory'],
];

/**
 * `e` as an {@link IoError} (`io`) when an operating-system failure ({@link OS_FAILURES}) anywhere
 * in its cause chain made `doing` fail: the log is not known to be damaged, so the advice is to fix
 * the cause and retry, never to repair it. Undefined for anything else (a corrupt or missing file).
 */
function osFailure(e: unknown, at: string, doing: string): IoError | undefined {
  const chain: Error[] = [];
  for (let x: unknown = e; x instanceof Error && chain.length < 8; x = x.cause) chain.push(x);
  // The innermost match: the system's own error, not a wrapper that repeats its text.
  for (const x of chain.reverse()) {
    const errno = x instanceof IoError ? x.errno : errnoOf(x);
    const hit = OS_FAILURES.find(([code, text]) => code === errno || (errno === undefined && text.test(x.message)));
    if (hit === undefined) continue;
    const [code, , fix] = hit;
    const why = (x.message.includes(code) ? x.message : `${x.message} (${code})`).replace(/[.\s]+$/, '');
    // An IoError (readFileCapped's) already names its path and what failed.
    const what = x instanceof IoError ? why : `${at}: ${doing}: ${why}`;
    return new IoError(at, `${what}. An operating-system error, not a sign the log is damaged: ${fix}, then retry`, code, { cause: e });
  }
  return undefined;
}

/**
 * Reads `node.json` of a data folder, or undefined when absent.
 * @throws NodeFault `log-corrupt` when unreadable; IoError `io` for an operating-system failure ({@link OS_FAILURES}).
 */
export function readDataMeta(dataDir: string): { format: string; steward: Did; created_at_s: number; head_mark?: number } | undefined {
  const file = path.join(dataDir, 'node.json');
  if (!existsSync(file)) return undefined;
  try {
    const v = JSON.parse(readFileCapped(file, 64 << 10, 'data folder file').toString('utf8')) as {
      format: string;
      steward: Did;
      created_at_s: number;
      head_mark?: number;
    };
    if (v.format !== DATA_FORMAT || typeof v.steward !== 'string') throw new Error(`not a ${DATA_FORMAT} data folder`);
    return v;
  } catch (e) {
    throw (
      osFailure(e, file, 'cannot read') ?? new NodeFault(NodeFaultCodes.LOG_CORRUPT, `${file}: ${(e as Error).message}`, file, { cause: e })
    );
  }
}

/**
 * Receipts a running node appended itself: seqs `fromSeq` through `seq`, and `id`, the receipt id
 * of the one at `seq` as the node wrote it ({@link ReceiptLog.appendedDurable}).
 */
export interface AppendedDurable {
  readonly fromSeq: number;
  readonly seq: number;
  readonly id: ContentId;
}

/** The durable, group-committed receipt log of one node (§8.1). */
/** Longest a deferred write waits for another write's batch before it gets its own (ms). */
export const DEFERRED_FLUSH_MS = 10;

export class ReceiptLog {
  readonly dataDir: string;
  readonly location: string;
  #db: ClassicLevel<Uint8Array, Uint8Array>;
  readonly #mark: HeadMarkFile;
  /** The folder keeps a head mark since it was made (node.json `head_mark`): a missing mark is damage. */
  readonly #marked: boolean;
  readonly #batchMax: number;
  readonly #onBatch: ((receipts: number, seconds: number) => void) | undefined;
  #queue: Pending[] = [];
  #flushing = false;
  #deferTimer: NodeJS.Timeout | undefined;
  #closing = false;
  #failed: Error | undefined;
  #closed = false;
  #durableSeq = -1;
  /** BLAKE3 of the receipt at {@link #durableSeq} (its id, as bytes). */
  #durableDigest: Uint8Array | undefined;
  /** The first receipt seq this process appended (−1 before the first). */
  #appendedFrom = -1;

  private constructor(
    dataDir: string,
    db: ClassicLevel<Uint8Array, Uint8Array>,
    mark: HeadMarkFile,
    marked: boolean,
    opts: ReceiptLogOptions,
  ) {
    this.dataDir = dataDir;
    this.location = db.location;
    this.#db = db;
    this.#mark = mark;
    this.#marked = marked;
    this.#batchMax = opts.batchMax ?? 1024;
    this.#onBatch = opts.onBatch;
  }

  /**
   * Opens the log of `dataDir`, creating it (and `node.json`) only when the folder has never held
   * one.
   * @throws NodeFault `log-missing` (node.json says a log exists but it is gone), `log-corrupt`
   *   (LevelDB refuses to open it: corrupt, locked by another process, unreadable),
   *   `log-steward-mismatch` (made by another steward key); IoError `io` when an operating-system
   *   failure stops it (full disk, quota, permissions, read-only file system, EIO, open-file limit:
   *   {@link OS_FAILURES}), which is not damage: fix the cause and retry, never repair.
   */
  static async open(dataDir: string, opts: ReceiptLogOptions): Promise<ReceiptLog> {
    const location = path.join(dataDir, 'receipts');
    const meta = readDataMeta(dataDir);
    const present = existsSync(location) && readdirSync(location).length > 0;
    if (meta !== undefined && meta.steward !== opts.steward) {
      throw new NodeFault(
        NodeFaultCodes.LOG_STEWARD_MISMATCH,
        `the log in ${dataDir} was written by ${meta.steward}, not by this steward (${opts.steward})`,
        dataDir,
      );
    }
    if ((meta !== undefined || opts.mustExist) && !present) {
      throw new NodeFault(
        NodeFaultCodes.LOG_MISSING,
        `${location}: the receipt log is missing; it is never recreated empty (that would hand every budget back). Restore it, or move the data folder away to start a new node`,
        location,
      );
    }
    const db = new ClassicLevel<Uint8Array, Uint8Array>(location, { keyEncoding: 'view', valueEncoding: 'view' });
    try {
      await db.open({ createIfMissing: !present, errorIfExists: false });
    } catch (e) {
      const cause = (e as { cause?: Error }).cause ?? (e as Error);
      if (isLockError(e)) {
        throw new NodeFault(
          NodeFaultCodes.LOG_LOCKED,
          `${location}: the receipt log is in use by another process (a running node?); stop it first. Nothing was changed`,
          location,
          { cause: e },
        );
      }
      const io = osFailure(e, location, 'cannot open the receipt log');
      if (io !== undefined) throw io;
      throw new NodeFault(
        NodeFaultCodes.LOG_CORRUPT,
        `${location}: cannot open the receipt log: ${cause.message}. Repair it with 'jcp receipts repair ${dataDir}'`,
        location,
        { cause: e },
      );
    }
    if (meta === undefined) {
      const file = path.join(dataDir, 'node.json');
      // `head_mark: 1`: this folder keeps a head mark from its first receipt on, so a mark that
      // goes missing later is damage (folders made before marks existed have none to lose).
      const body = { format: DATA_FORMAT, steward: opts.steward, created_at_s: opts.nowS, head_mark: 1 };
      writeFileSync(file, `${JSON.stringify(body, null, 2)}\n`, { mode: 0o644 });
      const fd = openSync(file, 'r');
      try {
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
    }
    let mark: HeadMarkFile;
    try {
      mark = HeadMarkFile.open(dataDir);
      if (meta === undefined) await mark.reset();
    } catch (e) {
      await db.close();
      const io = osFailure(e, path.join(dataDir, HEAD_MARK_FILE), 'cannot open or write the head mark');
      if (io !== undefined) throw io;
      throw e instanceof NodeFault
        ? e
        : new NodeFault(NodeFaultCodes.LOG_CORRUPT, `${dataDir}: cannot write the head mark: ${(e as Error).message}`, dataDir, {
            cause: e,
          });
    }
    return new ReceiptLog(dataDir, db, mark, meta === undefined || meta.head_mark === 1, opts);
  }

  /**
   * Checks the log against its head mark: the receipt the node last recorded as durable must be
   * in the log with the same bytes. Run after opening, before trusting the log's end as the head.
   * @throws NodeFault `log-corrupt` when LevelDB cannot read the log.
   */
  async checkHead(): Promise<HeadCheck> {
    const m = this.#mark.found;
    const last = await this.lastSeq();
    if (m === undefined) {
      if (!this.#marked || last < 0) return { ok: true };
      return {
        ok: false,
        code: 'mark-missing',
        lastSeq: last,
        why: `${this.#mark.file}: the head mark this folder keeps is gone or empty, so the log's last receipts cannot be vouched for`,
      };
    }
    if (m !== 'damaged' && m.seq < 0) return { ok: true };
    if (m === 'damaged') {
      return {
        ok: false,
        code: 'mark-damaged',
        lastSeq: last,
        why: `${this.#mark.file}: the head mark is damaged, so the log's last receipts cannot be vouched for`,
      };
    }
    let bytes: Uint8Array | undefined;
    try {
      bytes = await this.getReceipt(m.seq);
    } catch (e) {
      throw new NodeFault(NodeFaultCodes.LOG_CORRUPT, `${this.location}: reading the log failed: ${(e as Error).message}`, this.location, {
        cause: e,
      });
    }
    if (bytes === undefined) {
      const lost = last < m.seq ? `receipts ${last + 1}..${m.seq}` : `receipt ${m.seq}`;
      return {
        ok: false,
        code: 'tail-lost',
        markSeq: m.seq,
        lastSeq: last,
        why: `the node made receipts up to seq ${m.seq} durable (head mark), but the log ends at seq ${last}: ${lost} are lost (LevelDB dropped or lost its write-ahead file?)`,
      };
    }
    if (!bytesEqual(blake3(bytes), m.digest)) {
      return {
        ok: false,
        code: 'head-changed',
        markSeq: m.seq,
        lastSeq: last,
        why: `receipt seq ${m.seq} is not the receipt the node made durable at that seq (head mark)`,
      };
    }
    return { ok: true, markSeq: m.seq };
  }

  /**
   * Closes and reopens the database. After a full read (boot replay) this lets go of the table
   * files LevelDB memory-mapped while reading, which otherwise stay in the process's resident
   * memory (file-backed pages: the whole log after a replay). Call only while nothing is queued.
   * @throws NodeFault `log-corrupt` when the log cannot be reopened.
   */
  async reopen(): Promise<void> {
    if (this.#flushing || this.#queue.length > 0) throw new Error('reopen: writes are queued');
    await this.#db.close();
    const db = new ClassicLevel<Uint8Array, Uint8Array>(this.location, { keyEncoding: 'view', valueEncoding: 'view' });
    try {
      await db.open({ createIfMissing: false });
    } catch (e) {
      throw new NodeFault(
        NodeFaultCodes.LOG_CORRUPT,
        `${this.location}: cannot reopen the receipt log: ${(e as Error).message}`,
        this.location,
        {
          cause: e,
        },
      );
    }
    this.#db = db;
  }

  /** Bytes on disk of the log's LevelDB files (a directory listing and a stat per file; 0 when unreadable). */
  sizeBytes(): number {
    let n = 0;
    try {
      for (const f of readdirSync(this.location)) {
        try {
          n += statSync(path.join(this.location, f)).size;
        } catch {
          // a file LevelDB removed meanwhile (compaction)
        }
      }
    } catch {
      return 0;
    }
    return n;
  }

  /** The highest receipt seq made durable by this process's batches (−1 before the first). */
  get durableSeq(): number {
    return this.#durableSeq;
  }

  /**
   * The receipts this process appended and made durable: seqs `fromSeq` through `seq`, and the
   * receipt id of the one at `seq` (BLAKE3 of the bytes it wrote, held in memory since); undefined
   * before the first durable batch. What a snapshot vouches for by `prev` links instead of
   * signatures (node/snapshotjob.ts): the log on disk cannot change that id.
   */
  get appendedDurable(): AppendedDurable | undefined {
    if (this.#durableDigest === undefined || this.#appendedFrom < 0) return undefined;
    return { fromSeq: this.#appendedFrom, seq: this.#durableSeq, id: toHex(this.#durableDigest) };
  }

  /** True once a batch failed: the log can no longer be trusted to hold what the node decides. */
  get failed(): Error | undefined {
    return this.#failed;
  }

  /**
   * Appends receipt `seq` (and optionally the result-free extras `ops`) in the next fsync'd batch.
   * Resolves once durable. Callers append in seq order; batches are written in order.
   */
  appendReceipt(seq: number, receipt: Uint8Array): Promise<void> {
    if (this.#appendedFrom < 0) this.#appendedFrom = seq;
    return this.#write([{ type: 'put', key: receiptKey(seq), value: receipt }]);
  }

  /** Persists an admitted revocation (§4.3) durably, keyed by the grant it revokes. */
  putRevocation(grantId: ContentId, signedRevocation: Uint8Array): Promise<void> {
    return this.#write([{ type: 'put', key: textKey(V, grantId), value: signedRevocation }]);
  }

  /** Persists an amendment record (§4.7, node/amendments.ts) durably, keyed by the steered grant. */
  putAmendment(steeredId: ContentId, record: Uint8Array): Promise<void> {
    return this.#write([{ type: 'put', key: textKey(G, steeredId), value: record }]);
  }

  /** Every persisted amendment record (det-CBOR bytes). @throws NodeFault `log-corrupt` */
  async amendments(): Promise<Uint8Array[]> {
    try {
      return (await this.#db.values({ gte: Uint8Array.of(G), lt: Uint8Array.of(G + 1) }).all()) as Uint8Array[];
    } catch (e) {
      throw new NodeFault(
        NodeFaultCodes.LOG_CORRUPT,
        `${this.location}: reading amendments failed: ${(e as Error).message}`,
        this.location,
        {
          cause: e,
        },
      );
    }
  }

  /** Keeps an endpoint result for idempotent replies; durable with the next batch. */
  putResult(requestId: ContentId, result: Uint8Array): Promise<void> {
    return this.#write([{ type: 'put', key: textKey(S, requestId), value: result }]);
  }

  /**
   * Writes the outcome record of receipt `seq` (`node/outcome.ts`), and the endpoint result kept
   * for idempotent replies when given, in one fsync'd batch: a reversal is never durable without
   * the result that tells a re-sent request about it, nor the other way round. Resolves once durable.
   * With `deferred`, the batch is not started for it: it goes with the next write, or within
   * {@link DEFERRED_FLUSH_MS} (for a write no reply waits on).
   */
  putOutcome(
    kind: OutcomeKind,
    seq: number,
    record: Uint8Array,
    result?: { readonly requestId: ContentId; readonly bytes: Uint8Array },
    opts: { readonly deferred?: boolean } = {},
  ): Promise<void> {
    const ops: Op[] = [{ type: 'put', key: outcomeKey(kind, seq), value: record }];
    if (result !== undefined) ops.push({ type: 'put', key: textKey(S, result.requestId), value: result.bytes });
    return this.#write(ops, opts.deferred === true);
  }

  /** The reversal record of receipt `seq`, if the log holds one. */
  async getReversal(seq: number): Promise<Uint8Array | undefined> {
    return await this.#db.get(outcomeKey('reversal', seq));
  }

  /**
   * Every outcome record of `kind`, in receipt seq order.
   * @throws NodeFault `log-corrupt` when LevelDB cannot read the log.
   */
  async *outcomes(kind: OutcomeKind): AsyncGenerator<{ seq: number; bytes: Uint8Array }> {
    const p = kind === 'reversal' ? U : M;
    const it = this.#db.iterator({ gte: Uint8Array.of(p), lt: Uint8Array.of(p + 1) });
    try {
      for (;;) {
        let e: [Uint8Array, Uint8Array] | undefined;
        try {
          e = (await it.next()) as [Uint8Array, Uint8Array] | undefined;
        } catch (x) {
          throw new NodeFault(
            NodeFaultCodes.LOG_CORRUPT,
            `${this.location}: reading outcome records failed: ${(x as Error).message}`,
            this.location,
            {
              cause: x,
            },
          );
        }
        if (e === undefined) return;
        if (e[0].length !== 9) continue; // not an outcome key of this layout
        yield { seq: seqOfKey(e[0]), bytes: e[1] };
      }
    } finally {
      await it.close();
    }
  }

  /** The kept endpoint result of `requestId`, if any. */
  async getResult(requestId: ContentId): Promise<Uint8Array | undefined> {
    return await this.#db.get(textKey(S, requestId));
  }

  /** Receipt `seq`, if present. */
  async getReceipt(seq: number): Promise<Uint8Array | undefined> {
    return await this.#db.get(receiptKey(seq));
  }

  /**
   * Every receipt from `fromSeq` on, in seq order, in chunks of up to `chunk` (seq, bytes) pairs.
   * @throws NodeFault `log-corrupt` when LevelDB cannot read the log.
   */
  async *receiptChunks(chunk = 4096, fromSeq = 0): AsyncGenerator<Array<[number, Uint8Array]>> {
    const it = this.#db.iterator({ gte: receiptKey(fromSeq), lt: Uint8Array.of(R + 1), highWaterMarkBytes: 4 << 20 });
    try {
      for (;;) {
        let entries: Array<[Uint8Array, Uint8Array]>;
        try {
          entries = (await it.nextv(chunk)) as Array<[Uint8Array, Uint8Array]>;
        } catch (e) {
          throw new NodeFault(
            NodeFaultCodes.LOG_CORRUPT,
            `${this.location}: reading the log failed: ${(e as Error).message}`,
            this.location,
            {
              cause: e,
            },
          );
        }
        if (entries.length === 0) return;
        yield entries.map(([k, v]) => [seqOfKey(k), v]);
      }
    } finally {
      await it.close();
    }
  }

  /** The highest receipt seq in the log, or -1 when it holds none. @throws NodeFault `log-corrupt` */
  async lastSeq(): Promise<number> {
    try {
      const keys = (await this.#db
        .keys({ gte: Uint8Array.of(R), lt: Uint8Array.of(R + 1), reverse: true, limit: 1 })
        .all()) as Uint8Array[];
      return keys.length === 0 ? -1 : seqOfKey(keys[0]!);
    } catch (e) {
      throw new NodeFault(NodeFaultCodes.LOG_CORRUPT, `${this.location}: reading the log failed: ${(e as Error).message}`, this.location, {
        cause: e,
      });
    }
  }

  /**
   * Moves receipts `first..last` (inclusive) out of the live log: in one fsync'd batch, puts the
   * archive `record` (det-CBOR, node/archive.ts) under `a` ‖ first seq and deletes the receipts.
   * Call only once their segment file is durable, with the node stopped (the CLI holds the lock).
   * @throws NodeFault `log-corrupt` when the batch cannot be written.
   */
  async archiveRange(first: number, last: number, record: Uint8Array): Promise<void> {
    const batch = this.#db.batch();
    const key = new Uint8Array(9);
    key[0] = A;
    new DataView(key.buffer).setBigUint64(1, BigInt(first));
    batch.put(key, record);
    for (let seq = first; seq <= last; seq++) batch.del(receiptKey(seq));
    try {
      await batch.write({ sync: true });
    } catch (e) {
      await batch.close().catch(() => undefined);
      throw new NodeFault(NodeFaultCodes.LOG_CORRUPT, `${this.location}: archiving failed: ${(e as Error).message}`, this.location, {
        cause: e,
      });
    }
  }

  /** The archive records (det-CBOR bytes), by first seq. @throws NodeFault `log-corrupt` */
  async archiveRecords(): Promise<Uint8Array[]> {
    try {
      return (await this.#db.values({ gte: Uint8Array.of(A), lt: Uint8Array.of(A + 1) }).all()) as Uint8Array[];
    } catch (e) {
      throw new NodeFault(
        NodeFaultCodes.LOG_CORRUPT,
        `${this.location}: reading archive records failed: ${(e as Error).message}`,
        this.location,
        {
          cause: e,
        },
      );
    }
  }

  /** The lowest receipt seq in the live log, or -1 when it holds none. @throws NodeFault `log-corrupt` */
  async firstSeq(): Promise<number> {
    try {
      const keys = (await this.#db.keys({ gte: Uint8Array.of(R), lt: Uint8Array.of(R + 1), limit: 1 }).all()) as Uint8Array[];
      return keys.length === 0 ? -1 : seqOfKey(keys[0]!);
    } catch (e) {
      throw new NodeFault(NodeFaultCodes.LOG_CORRUPT, `${this.location}: reading the log failed: ${(e as Error).message}`, this.location, {
        cause: e,
      });
    }
  }

  /** Every persisted signed revocation (det-CBOR bytes). @throws NodeFault `log-corrupt` */
  async revocations(): Promise<Uint8Array[]> {
    try {
      return (await this.#db.values({ gte: Uint8Array.of(V), lt: Uint8Array.of(V + 1) }).all()) as Uint8Array[];
    } catch (e) {
      throw new NodeFault(
        NodeFaultCodes.LOG_CORRUPT,
        `${this.location}: reading revocations failed: ${(e as Error).message}`,
        this.location,
        {
          cause: e,
        },
      );
    }
  }

  #write(ops: Op[], deferred = false): Promise<void> {
    if (this.#failed) return Promise.reject(this.#failed);
    if (this.#closed) return Promise.reject(new Error('receipt log is closed'));
    return new Promise<void>((resolve, reject) => {
      this.#queue.push({ ops, deferred, resolve, reject });
      if (this.#flushing) return;
      if (!deferred) void this.#flush();
      else this.#deferTimer ??= setTimeout(() => void this.#flush(), DEFERRED_FLUSH_MS);
    });
  }

  async #flush(): Promise<void> {
    const timed = this.#deferTimer !== undefined;
    if (timed) {
      clearTimeout(this.#deferTimer);
      this.#deferTimer = undefined;
    }
    if (this.#flushing) return;
    this.#flushing = true;
    // Called by the timer (or at close): deferred writes go now.
    let force = timed || this.#closing;
    while (this.#queue.length > 0 && !this.#failed) {
      // Only deferred writes left after a batch: they wait for the next write, or the timer.
      if (!force && this.#queue.every((p) => p.deferred)) {
        this.#deferTimer ??= setTimeout(() => void this.#flush(), DEFERRED_FLUSH_MS);
        break;
      }
      force = this.#closing;
      const take = this.#queue.length <= this.#batchMax ? this.#queue : this.#queue.slice(0, this.#batchMax);
      this.#queue = take === this.#queue ? [] : this.#queue.slice(this.#batchMax);
      const t0 = performance.now();
      // A chained batch: each put goes straight to the native batch. The array form costs about
      // three times the CPU per entry here (it copies and re-validates every op object in JS).
      const batch = this.#db.batch();
      try {
        for (const p of take) for (const op of p.ops) batch.put(op.key, op.value);
        await batch.write({ sync: true });
      } catch (e) {
        await batch.close().catch(() => undefined); // idempotent: frees a batch whose write never ran
        this.#failed = new NodeFault(NodeFaultCodes.LOG_CORRUPT, `writing the receipt log failed: ${(e as Error).message}`, this.location, {
          cause: e,
        });
        for (const p of take) p.reject(this.#failed);
        for (const p of this.#queue) p.reject(this.#failed);
        this.#queue = [];
        break;
      }
      this.#onBatch?.(take.length, (performance.now() - t0) / 1000);
      this.#markHead(take);
      for (const p of take) p.resolve();
    }
    this.#flushing = false;
  }

  /**
   * Rewrites a damaged or missing head mark from the log as it is (its last receipt, or the empty
   * mark): the operator accepted the log (`--accept-damaged-log`). A mark that names lost receipts
   * is left alone: it keeps their seqs from being handed out again until a new receipt passes it.
   * @throws NodeFault `log-corrupt` when LevelDB cannot read the log.
   */
  async remark(): Promise<void> {
    if (this.#mark.found !== 'damaged' && this.#mark.found !== undefined) return;
    const last = await this.lastSeq();
    const bytes = last < 0 ? undefined : await this.getReceipt(last);
    if (bytes === undefined) await this.#mark.reset();
    else this.#mark.note(last, blake3(bytes));
  }

  /** Notes the last receipt of a durable batch in the head mark (receipts are appended in seq order). */
  #markHead(batch: readonly Pending[]): void {
    for (let i = batch.length - 1; i >= 0; i--) {
      const ops = batch[i]!.ops;
      for (let j = ops.length - 1; j >= 0; j--) {
        const op = ops[j]!;
        if (op.key[0] === R && op.key.length === 9) {
          this.#durableSeq = seqOfKey(op.key);
          this.#durableDigest = blake3(op.value);
          this.#mark.note(this.#durableSeq, this.#durableDigest);
          return;
        }
      }
    }
  }

  /** Waits for queued writes, then closes the database and writes the head mark a last time (fsync'd). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closing = true; // deferred writes go now
    if (!this.#flushing && this.#queue.length > 0) void this.#flush();
    while (this.#flushing || this.#queue.length > 0) await new Promise((r) => setTimeout(r, 1));
    this.#closed = true;
    try {
      await this.#db.close();
    } finally {
      await this.#mark.close();
    }
  }
}
