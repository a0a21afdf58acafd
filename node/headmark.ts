/**
 * The head mark: a witness of the receipt log's head kept outside LevelDB (`<data-dir>/head`), so
 * receipts that LevelDB loses are noticed (§8.1: a ledger that drops entries is not a ledger).
 *
 * LevelDB recovers its write-ahead file (`receipts/*.log`) leniently: a record that fails its
 * checksum is skipped with everything after it in that file, and a missing or cut-short file is
 * simply absent; the database then opens as if those writes never happened. Every receipt in them
 * had been fsync'd and replied, so a node booting on such a log would hand their spend back and
 * reuse their seqs. A marker written inside LevelDB cannot catch this (it would be lost with
 * them), so after each durable batch the log also records, in this small file, the seq of the
 * batch's last receipt and the BLAKE3-256 of its bytes. On open, the receipt at that seq must be
 * in the log with those bytes.
 *
 * The mark is written after the batch it names is durable and before any of that batch's replies
 * leave, so it covers every replied receipt; it never names one that is not durable. It has no
 * fsync of its own (page cache survives a killed process; after a machine crash it may be older,
 * never newer): one 64-byte positioned write per batch. On close it is fsync'd.
 *
 * Layout: two 64-byte slots (offsets 0 and 64), written alternately so a torn write leaves the
 * other intact: `JCPH` | version 1 | 3 zero bytes | counter u64 BE | seq u64 BE | BLAKE3-256 of the
 * receipt (32 bytes) | the first 8 bytes of BLAKE3-256 of the 56 bytes before. The valid slot
 * with the higher counter is the mark.
 */
import { closeSync, constants, fdatasync, fstatSync, openSync, readSync, writeSync } from 'node:fs';
import path from 'node:path';
import { blake3, bytesEqual } from '../core/index.ts';
import { NodeFault, NodeFaultCodes } from './codes.ts';

/** File name of the head mark inside a node data folder. */
export const HEAD_MARK_FILE = 'head';

const SLOT = 64;
const MAGIC = Uint8Array.of(0x4a, 0x43, 0x50, 0x48); // "JCPH"
const VERSION = 1;
/** The seq field of the mark a new log starts with. */
const EMPTY_SEQ = 0xffff_ffff_ffff_ffffn;

/**
 * What the mark says: receipt `seq` was durable, with these bytes' BLAKE3-256. `seq` −1 (all-ones
 * on disk, zero digest) is the mark a new log starts with: nothing to vouch for yet.
 */
export interface HeadMark {
  readonly seq: number;
  /** BLAKE3-256 of the receipt bytes (32 bytes). */
  readonly digest: Uint8Array;
}

function encodeSlot(counter: bigint, mark: HeadMark): Uint8Array {
  const s = new Uint8Array(SLOT);
  const v = new DataView(s.buffer);
  s.set(MAGIC, 0);
  s[4] = VERSION;
  v.setBigUint64(8, counter);
  v.setBigUint64(16, mark.seq < 0 ? EMPTY_SEQ : BigInt(mark.seq));
  s.set(mark.digest, 24);
  s.set(blake3(s.subarray(0, 56)).subarray(0, 8), 56);
  return s;
}

function decodeSlot(s: Uint8Array): { counter: bigint; mark: HeadMark } | undefined {
  if (s.length !== SLOT || !bytesEqual(s.subarray(0, 4), MAGIC) || s[4] !== VERSION) return undefined;
  if (!bytesEqual(blake3(s.subarray(0, 56)).subarray(0, 8), s.subarray(56, 64))) return undefined;
  const v = new DataView(s.buffer, s.byteOffset, s.byteLength);
  const seq = v.getBigUint64(16);
  if (seq === EMPTY_SEQ) return { counter: v.getBigUint64(8), mark: { seq: -1, digest: s.slice(24, 56) } };
  if (seq > BigInt(Number.MAX_SAFE_INTEGER)) return undefined;
  return { counter: v.getBigUint64(8), mark: { seq: Number(seq), digest: s.slice(24, 56) } };
}

/**
 * The head mark file of one data folder, open for reading and writing while the log is open.
 * `note` records a new head (written in the background, the latest one wins); `close` writes the
 * last head and fsyncs.
 */
export class HeadMarkFile {
  readonly file: string;
  /**
   * The mark found when the file was opened: undefined when there is none yet (a new log, or one
   * made before marks existed); `damaged` when the file holds bytes but no valid slot.
   */
  readonly found: HeadMark | 'damaged' | undefined;
  readonly #fd: number;
  #counter: bigint;
  #failed: Error | undefined;

  private constructor(file: string, fd: number, found: { counter: bigint; mark: HeadMark } | 'damaged' | undefined) {
    this.file = file;
    this.#fd = fd;
    this.found = found === 'damaged' ? found : found?.mark;
    this.#counter = found === 'damaged' ? 0n : (found?.counter ?? 0n);
  }

  /**
   * Opens (creating when absent) the head mark of `dataDir` and reads it. A symbolic link or
   * anything but a regular file is refused (a mark written to /dev/null would vouch for nothing).
   * @throws NodeFault `log-corrupt` when it cannot be opened or read, or is not a regular file.
   */
  static open(dataDir: string): HeadMarkFile {
    const file = path.join(dataDir, HEAD_MARK_FILE);
    let fd: number;
    try {
      fd = openSync(file, constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK, 0o644);
    } catch (e) {
      throw new NodeFault(NodeFaultCodes.LOG_CORRUPT, `${file}: cannot open the head mark: ${(e as Error).message}`, file, { cause: e });
    }
    try {
      if (!fstatSync(fd).isFile()) throw new Error('not a regular file');
      const buf = new Uint8Array(2 * SLOT);
      let n = 0;
      for (let r = -1; r !== 0 && n < buf.length; n += r) r = readSync(fd, buf, n, buf.length - n, n);
      const slots = [decodeSlot(buf.subarray(0, SLOT)), decodeSlot(buf.subarray(SLOT, 2 * SLOT))].filter((x) => x !== undefined);
      // Bytes but no valid slot: the mark itself was damaged (a file that was created but never
      // written holds nothing, or zeros).
      if (slots.length === 0 && buf.subarray(0, n).some((b) => b !== 0)) return new HeadMarkFile(file, fd, 'damaged');
      const best = slots.sort((a, b) => (a.counter < b.counter ? 1 : -1))[0];
      return new HeadMarkFile(file, fd, best);
    } catch (e) {
      closeSync(fd);
      throw new NodeFault(NodeFaultCodes.LOG_CORRUPT, `${file}: cannot read the head mark: ${(e as Error).message}`, file, { cause: e });
    }
  }

  /**
   * Records that receipt `seq` with BLAKE3-256 `digest` is durable: one positioned write into the
   * older slot, done before returning (so before the batch's replies). A failed write is kept in
   * {@link failed} and stops the mark from moving; the log itself is unaffected.
   */
  note(seq: number, digest: Uint8Array): void {
    if (this.#failed !== undefined) return;
    this.#counter++;
    try {
      writeSync(this.#fd, encodeSlot(this.#counter, { seq, digest }), 0, SLOT, Number(this.#counter % 2n) * SLOT);
    } catch (e) {
      this.#failed = e as Error;
    }
  }

  /**
   * Writes the mark of an empty log (seq −1) and fsyncs it: for a new log (so that a mark that
   * later goes missing is noticed) and for a log that holds no receipt to vouch for.
   * @throws the write or fsync error.
   */
  async reset(): Promise<void> {
    this.note(-1, new Uint8Array(32));
    if (this.#failed !== undefined) throw this.#failed;
    await new Promise<void>((resolve, reject) => fdatasync(this.#fd, (e) => (e ? reject(e) : resolve())));
  }

  /** The first write failure, if any (the mark then stops moving; the log itself is unaffected). */
  get failed(): Error | undefined {
    return this.#failed;
  }

  /** Fsyncs the file and closes it. @throws the first write error, or the fsync error. */
  async close(): Promise<void> {
    try {
      if (this.#failed) throw this.#failed;
      await new Promise<void>((resolve, reject) => fdatasync(this.#fd, (e) => (e ? reject(e) : resolve())));
    } finally {
      closeSync(this.#fd);
    }
  }
}
