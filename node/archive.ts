/**
 * Archival of old receipts: receipts a snapshot covers can be moved out of the live
 * log into sealed segment files, so the log does not grow with history. The receipts stay the
 * evidence (§8.1): a segment is the receipts' exact bytes back to back (a CBOR sequence, RFC
 * 8742), and the log keeps, for each segment, a record of its first and last seq, its receipt
 * count and the BLAKE3-256 of its bytes (key `a` ‖ first seq); `jcp receipts verify --archive
 * DIR` checks each segment against its record and replays it before the live log.
 *
 * Only receipts below the newest usable snapshot's seq are archived (the receipt it is bound to
 * stays, so the snapshot keeps verifying at start), only below the lowest seq its request index
 * names (an archived receipt never answers a request id the node still keeps), and only below
 * the first receipt with a reversal record (node/outcome.ts; every start checks it against its
 * receipt). Outcome records stay in the live log.
 *
 * Segment file: `seg-<first, 16 digits>-<last, 16 digits>.cbor`, written to a temporary file,
 * fsync'd, renamed, folder fsync'd, before its record is written and its receipts deleted from
 * the log in one fsync'd batch. Record: det-CBOR `{format: "jcp-archive/1", first, last, count,
 * blake3, file, bytes}`.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { makeDirs, readFileCapped, writeFileDurably } from '../io/index.ts';
import { blake3, bytesEqual, concat, decode, encode, splitSequence } from '../core/index.ts';
import type { ReceiptLog } from './receiptlog.ts';
import type { OpenedSnapshot } from './snapshot.ts';

/** The `format` of an archive record. */
export const ARCHIVE_FORMAT = 'jcp-archive/1';
/** Receipts per segment file (default). */
export const SEGMENT_RECEIPTS = 100_000;
/** Largest segment file read back (bytes). */
export const SEGMENT_CAP_BYTES = 2 * 1024 ** 3;

/** One archived segment as the log records it. */
export interface ArchiveRecord {
  readonly first: number;
  readonly last: number;
  readonly count: number;
  /** BLAKE3-256 of the segment file's bytes. */
  readonly blake3: Uint8Array;
  /** File name (in the archive folder). */
  readonly file: string;
  readonly bytes: number;
}

/** The file name of the segment holding `first..last`. */
export function segmentFileName(first: number, last: number): string {
  return `seg-${String(first).padStart(16, '0')}-${String(last).padStart(16, '0')}.cbor`;
}

/** Decodes the log's archive records, by first seq. @throws Error when one is malformed (a damaged log). */
export async function archiveRecords(log: ReceiptLog): Promise<ArchiveRecord[]> {
  return (await log.archiveRecords()).map((b) => {
    const v = decode(b) as Record<string, unknown>;
    const ok =
      v['format'] === ARCHIVE_FORMAT &&
      [v['first'], v['last'], v['count'], v['bytes']].every((x) => typeof x === 'number' && Number.isSafeInteger(x)) &&
      v['blake3'] instanceof Uint8Array &&
      typeof v['file'] === 'string';
    if (!ok) throw new Error('an archive record in the log is malformed');
    return v as unknown as ArchiveRecord;
  });
}

/**
 * The highest `--before` the archive may take with snapshot `s`: below its seq (the receipt it is
 * bound to stays) and below the lowest seq its request index names.
 */
export function archiveLimit(s: OpenedSnapshot): number {
  return Math.min(s.seq, s.firstRequestSeq ?? s.seq);
}

/**
 * Writes segment `name` into `dir` durably. A file already there is never overwritten: if it holds
 * exactly `bytes` (a run stopped after the segment was durable, before the log recorded it) it is
 * kept as it is and the run goes on to record it; any other content is refused.
 * @throws Error when a different file is in the way; the file system error when the write fails.
 */
function writeDurable(dir: string, name: string, bytes: Uint8Array): void {
  const file = path.join(dir, name);
  if (existsSync(file)) {
    let same = false;
    try {
      same = bytesEqual(new Uint8Array(readFileCapped(file, SEGMENT_CAP_BYTES, 'archive segment')), bytes);
    } catch {
      same = false;
    }
    if (same) return;
    throw new Error(`${file} exists with other bytes: an archive segment is never overwritten`);
  }
  writeFileDurably(file, bytes, 0o644);
}

/** Why receipt `seq` cannot follow `expect` in a segment: receipts missing before it, or one already archived. */
function gapWhy(expect: number, seq: number): string {
  if (seq < expect) return `receipt ${seq} is in the live log and below the last archived segment (which ends at ${expect - 1})`;
  const missing = seq - expect > 1 ? `receipts ${expect}..${seq - 1} are` : `receipt ${expect} is`;
  return `${missing} missing from the log: a gap is not archived (run 'jcp receipts verify')`;
}

/** What {@link archiveReceipts} moved. */
export interface Archived {
  readonly segments: ArchiveRecord[];
  readonly receipts: number;
}

/**
 * Moves the live log's receipts below `before` into segment files in `outDir` (see the module
 * docs). The caller has checked `before` ≤ {@link archiveLimit} of a usable snapshot and holds
 * the log (node stopped).
 * The range starts at seq 0, or after the last segment the log records: a receipt missing at its
 * start is a gap as much as one in its middle.
 * @throws Error when the receipts to archive are not consecutive from there (a gap is left for
 *   verify to report, never sealed away), or a segment file exists with other bytes; NodeFault
 *   `log-corrupt` when the log fails.
 */
export async function archiveReceipts(log: ReceiptLog, before: number, outDir: string, perSegment = SEGMENT_RECEIPTS): Promise<Archived> {
  // A reversal is applied at every start against its receipt in the live log (node/outcome.ts):
  // its receipt stays.
  for await (const { seq } of log.outcomes('reversal')) {
    if (seq < before)
      throw new Error(`receipt ${seq} has a reversal record, which every start checks against it: archive below ${seq} at most`);
  }
  makeDirs(outDir, 0o755);
  const segments: ArchiveRecord[] = [];
  let receipts = 0;
  let part: Uint8Array[] = [];
  let first = -1;
  // The range starts where the last segment ended (seq 0 on a log never archived): a receipt
  // missing at its start is a gap too, never sealed away.
  const done = await archiveRecords(log);
  let expect = done.length === 0 ? 0 : done[done.length - 1]!.last + 1;
  const seal = async () => {
    if (part.length === 0) return;
    const last = first + part.length - 1;
    const bytes = concat(...part);
    const rec: ArchiveRecord = {
      first,
      last,
      count: part.length,
      blake3: blake3(bytes),
      file: segmentFileName(first, last),
      bytes: bytes.length,
    };
    writeDurable(outDir, rec.file, bytes);
    await log.archiveRange(first, last, encode({ format: ARCHIVE_FORMAT, ...rec }));
    segments.push(rec);
    receipts += part.length;
    part = [];
  };
  for await (const chunk of log.receiptChunks(4096)) {
    let done = false;
    for (const [seq, bytes] of chunk) {
      if (seq >= before) {
        done = true;
        break;
      }
      if (seq !== expect) throw new Error(gapWhy(expect, seq));
      if (part.length === 0) first = seq;
      part.push(bytes);
      expect = seq + 1;
      if (part.length >= perSegment) await seal();
    }
    if (done) break;
  }
  await seal();
  return { segments, receipts };
}

/** One segment checked against its record. */
export interface SegmentCheck {
  readonly file: string;
  readonly first: number;
  readonly last: number;
  readonly ok: boolean;
  readonly why?: string;
}

/**
 * Checks every archived segment in `dir` against the log's records (present, BLAKE3 equal, the
 * recorded number of CBOR items) and returns the receipts of the good ones, by seq.
 */
export function readSegments(
  dir: string,
  records: readonly ArchiveRecord[],
): { checks: SegmentCheck[]; receipts: Map<number, Uint8Array[]> } {
  const checks: SegmentCheck[] = [];
  const receipts = new Map<number, Uint8Array[]>();
  for (const r of records) {
    const file = path.join(dir, r.file);
    const base = { file, first: r.first, last: r.last };
    let bytes: Uint8Array;
    try {
      bytes = readFileCapped(file, SEGMENT_CAP_BYTES, 'archive segment');
    } catch (e) {
      checks.push({ ...base, ok: false, why: `unreadable: ${(e as Error).message}` });
      continue;
    }
    if (!bytesEqual(blake3(bytes), r.blake3)) {
      checks.push({ ...base, ok: false, why: 'its BLAKE3 is not the one the log recorded' });
      continue;
    }
    const { items, end } = splitSequence(bytes);
    if (end !== bytes.length || items.length !== r.count || r.count !== r.last - r.first + 1) {
      checks.push({ ...base, ok: false, why: `holds ${items.length} whole items, the log recorded ${r.count}` });
      continue;
    }
    checks.push({ ...base, ok: true });
    receipts.set(r.first, items);
  }
  return { checks, receipts };
}

/**
 * A replay source (node/replay.ts `source`): the good segments' receipts, then the live log's,
 * in seq order from `fromSeq`.
 */
export function withSegments(log: ReceiptLog, segments: Map<number, Uint8Array[]>) {
  return async function* (chunk: number, fromSeq: number): AsyncGenerator<Array<[number, Uint8Array]>> {
    for (const first of [...segments.keys()].sort((a, b) => a - b)) {
      const items = segments.get(first)!;
      let out: Array<[number, Uint8Array]> = [];
      for (let i = 0; i < items.length; i++) {
        const seq = first + i;
        if (seq < fromSeq) continue;
        out.push([seq, items[i]!]);
        if (out.length >= chunk) {
          yield out;
          out = [];
        }
      }
      if (out.length > 0) yield out;
    }
    yield* log.receiptChunks(chunk, fromSeq);
  };
}

/** Receipt `seq` from the good segments, else from the live log (for outcome records of archived receipts). */
export function segmentReceiptAt(log: ReceiptLog, segments: Map<number, Uint8Array[]>): (seq: number) => Promise<Uint8Array | undefined> {
  const firsts = [...segments.keys()].sort((a, b) => a - b);
  return async (seq) => {
    for (const f of firsts) {
      const items = segments.get(f)!;
      if (seq >= f && seq < f + items.length) return items[seq - f];
    }
    return await log.getReceipt(seq);
  };
}
