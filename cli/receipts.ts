/**
 * `jcp receipts verify|replay|attribute|export|repair <data-dir>`: the receipt log as evidence
 * (§8, §8.1): verify it (good and bad receipts counted, a broken `prev` link named), rebuild the
 * budgets, attribute spend per (grant, subject), export it, or repair a damaged database.
 */
import { createWriteStream, statSync } from 'node:fs';
import path from 'node:path';
import type { Writable } from 'node:stream';
import { ClassicLevel } from 'classic-level';
import { bytesEqual, type Did, delegationTree, encode, openReceipt, receiptId, toHex } from '../core/index.ts';
import {
  type Archived,
  type ArchiveRecord,
  archiveLimit,
  archiveReceipts,
  archiveRecords,
  chooseSnapshot,
  readSegments,
  type SegmentCheck,
  withSegments,
  segmentReceiptAt,
  type HeadCheck,
  type LogReplay,
  listSnapshotsOrWhy,
  SNAPSHOT_DIR,
  makeSnapshot,
  NodeFault,
  openSnapshot,
  ReceiptLog,
  readKeyFile,
  readSnapshotFile,
  replayLog,
  snapshotBody,
  type SliceRunner,
  WorkerPool,
  isLockError,
  readDataMeta,
} from '../node/index.ts';
import { CliError, type Command, UsageError, parse } from './command.ts';
import { errnoOf, ioError, IoError, READ_CAPS, readFileCapped, readStdinCapped } from '../io/index.ts';
import { verifyReceiptFile } from './receiptfile.ts';
import { runTlog, TLOG_HELP, TLOG_VERBS } from './tlog.ts';

const help = `Usage: jcp receipts <verb> <data-dir> [options]
       jcp receipts verify <file | ->

Verbs:
  verify     verify every receipt of the node's log (§8, §8.1): counts of good and bad receipts,
             continuity breaks (a seq gap, a reorder, a broken prev link — named by seq), and
             the outcome records (measurements, reversals; each checked against its receipt).
             Exit 1 when anything is wrong.
  replay     rebuild the budgets from the verified receipts, with reversals applied: µJ spent per
             grant id (ancestors included, §4.2), allowed/denied counts, the next seq.
  attribute  per-(grant_id, subject) attribution: actions allowed, refused, µJ spent (§8.1),
             beside what was charged after reversals and what the node's meter measured
             (per provenance, from the outcome records).
  export     write the receipts in seq order: --format cbor (a CBOR sequence, RFC 8742: the
             COSE_Sign1 items back to back) or json (one object per receipt, verified or not);
             --out file (default stdout; a new file outside the data folder: an existing
             file is never overwritten).
  repair     run LevelDB's repair on a damaged log (the operator's explicit step; a node never
             repairs or recreates its log by itself), then verify it. Not for error [io] (a full
             disk, permissions, a read-only file system): that is no damage; fix it and retry.
  archive    move the receipts below --before SEQ into sealed segment files in --out DIR (a CBOR
             sequence each; first and last seq and BLAKE3 recorded in the log). Only what the
             newest usable snapshot covers (below its seq and its request index's first seq).
  snapshot   write a ledger snapshot now (what a start replays, signed by the steward, bound to
             the last receipt; see docs/node.md "Snapshots"): the newest usable snapshot plus
             the receipts after it. --key steward.key (default <data-dir>/steward.key).

verify also checks every snapshot in <data-dir>/snapshots against the full replay at its seq
(report field 'snapshots'; a snapshot that does not match makes it exit 1). A log with archived
receipts needs --archive DIR: each segment is checked against the log's record (report field
'archive') and replayed before the live log. replay and attribute read the live log only
unless given --archive DIR too: on such a log they warn [archive-needed] on stderr and report
'archived' ({first, last, receipts, included}).

verify <file | ->: receipts from anywhere, e.g. another implementation's: a file (or - for
stdin, at most 64 MiB) holding either a CBOR sequence of COSE_Sign1 receipts (RFC 8742, what
export --format cbor writes) or hex text, one receipt per line (# comments and blank lines
skipped). Each is verified as a JCR-1 receipt (§8): envelope, EdDSA signature under its kid,
core schema; a receipt carrying only §8's fields (no seq, prev, request_id, at) verifies.
Prints {"form", "receipts", "good", "bad", "stewards", "without_log_fields", "items": [{item,
line?, id, verified, steward, verdict, seq | error: {code, why}}]}; exit 1 when any is bad.
Continuity (seq, prev) is checked only for a data folder.

Options:
  --workers n     verify on n worker threads (default 0)
  --format f      export format: cbor | json (default json)
  --out file      export destination (default stdout)
  --key file      the steward key, for snapshot (default <data-dir>/steward.key)
  --keep n        snapshot: snapshots kept, this one included (default 2; give the node's
                  snapshot.keep)
  --before seq    archive: the first seq kept in the live log
  --archive dir   verify, replay, attribute: the folder of archived segments
  --json          verify, replay, attribute: accepted for scripts; they print JSON anyway
  --tree          attribute: add delegation_tree, the delegation tree (root → delegates → their
                  delegates) from the receipts' chain_ids, with spent_uj per link (every link is
                  debited, §4.2), own_uj, allowed and refused per grant (C14, C16)

The node must not be running on the folder (LevelDB takes a lock). Opening the log runs LevelDB's
own recovery, as a node's start does: its write-ahead file is folded into table files, and records
in it that fail their checksum are dropped. The head mark (the folder's 'head' file) still names
what was lost (verify's head_mark), but copy the folder first if you want the damaged files kept.

${TLOG_HELP}`;

const bigintJson = (_k: string, v: unknown) => (typeof v === 'bigint' ? v.toString() : v);

/** The flags of `jcp receipts <verb>` (see `help`). */
const OPTIONS = {
  workers: { type: 'string' },
  format: { type: 'string' },
  out: { type: 'string' },
  key: { type: 'string' },
  before: { type: 'string' },
  archive: { type: 'string' },
  keep: { type: 'string' },
  json: { type: 'boolean' },
  tree: { type: 'boolean' },
} as const;

/** The parsed flags of `jcp receipts <verb>`. */
type ReceiptsValues = ReturnType<typeof parse<typeof OPTIONS>>['values'];

/** The verbs that take a node data folder. */
const DATA_VERBS = ['verify', 'replay', 'attribute', 'export', 'repair', 'snapshot', 'archive'];

/** The numbers the flags give: archive's first kept seq (-1 when not archiving), snapshots kept, replay worker threads. */
interface ReceiptsNumbers {
  readonly before: number;
  readonly keep: number;
  readonly workers: number;
}

/** Whether `out` is the data folder or inside it. */
function insideDataDir(dataDir: string, out: string): boolean {
  const rel = path.relative(dataDir, path.resolve(out));
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

/**
 * Checks the verb and its flags: a known verb; archive's `--before` and `--out` (outside the data
 * folder); export's `--out` outside the data folder; `--keep` in 1..1000; `--workers` in 0..64.
 * @throws UsageError naming the flag.
 */
function checkFlags(verb: string | undefined, values: ReceiptsValues, dataDir: string): ReceiptsNumbers {
  if (!DATA_VERBS.includes(verb ?? '')) {
    throw new UsageError(
      verb === undefined ? 'expected a verb: verify | replay | attribute | export | repair | snapshot | archive' : `unknown verb '${verb}'`,
    );
  }
  let before = -1;
  if (verb === 'archive') {
    // Decimal digits only: Number() would take '' as 0, '0x3' as 3 and '1e3' as 1000.
    before = values.before !== undefined && /^\d+$/.test(values.before) ? Number(values.before) : Number.NaN;
    if (!Number.isSafeInteger(before)) throw new UsageError('archive: --before SEQ (an integer ≥ 0)');
    if (values.out === undefined) throw new UsageError('archive: --out DIR (the segment folder)');
    if (insideDataDir(dataDir, values.out)) {
      throw new UsageError(`--out ${values.out} is inside the data folder ${dataDir}: keep the archive elsewhere`);
    }
  }
  if (values.out !== undefined && verb === 'export') {
    if (insideDataDir(dataDir, values.out)) {
      throw new UsageError(
        `--out ${values.out} is inside the data folder ${dataDir}: write the export elsewhere (the node's own files are never overwritten)`,
      );
    }
  }
  // snapshot --keep: the snapshots kept after this one (the node's snapshot.keep; default 2).
  const keep = values.keep === undefined ? 2 : Number(values.keep);
  if (!Number.isInteger(keep) || keep < 1 || keep > 1000) throw new UsageError('--keep: an integer in 1..1000 (snapshots kept)');
  const workers = values.workers === undefined ? 0 : Number(values.workers);
  if (!Number.isInteger(workers) || workers < 0 || workers > 64) throw new UsageError('--workers: an integer in 0..64');
  return { before, keep, workers };
}

/**
 * Runs LevelDB's repair on the folder's log, unless a running node holds it open (LevelDB's repair
 * would move its live files aside and lose receipts already replied). Resolves to 1 after printing
 * `log-locked`, else undefined.
 */
async function repairLog(dataDir: string): Promise<number | undefined> {
  // Opening first takes (and tests) the lock.
  const probe = new ClassicLevel(path.join(dataDir, 'receipts'), { createIfMissing: false });
  try {
    await probe.open();
  } catch (e) {
    if (isLockError(e)) {
      process.stderr.write(`jcp receipts: error [log-locked]: ${dataDir} is in use by a running node; stop it before repairing\n`);
      return 1;
    }
  } finally {
    await probe.close().catch(() => undefined);
  }
  await ClassicLevel.repair(path.join(dataDir, 'receipts'));
  process.stderr.write(`jcp receipts: LevelDB repair ran on ${path.join(dataDir, 'receipts')}\n`);
  return undefined;
}

/** A replay of the log (§8) for verify, replay or attribute, with the snapshots checked and the archive read. */
interface ReplayRun {
  readonly r: LogReplay;
  readonly snapshots: SnapshotCheck[];
  readonly archive: SegmentCheck[] | undefined;
  readonly records: ArchiveRecord[];
}

/**
 * Replays the log for `verb` (verify also checks the snapshots), from seq 0 through the archived
 * segments of `--archive` when there are any; replay and attribute without `--archive` warn
 * `archive-needed` and count the live log only. Closes `pool` once the replay is done.
 * @throws CliError `archive-needed` when verify meets archived receipts without `--archive`.
 */
async function replayForVerb(
  verb: string,
  values: ReceiptsValues,
  log: ReceiptLog,
  dataDir: string,
  steward: Did,
  pool: WorkerPool | undefined,
  runner: { runner?: SliceRunner; parallel?: number },
): Promise<ReplayRun> {
  let r: LogReplay;
  let snapshots: SnapshotCheck[] = [];
  let archive: SegmentCheck[] | undefined;
  const records = await archiveRecords(log);
  let source: ReturnType<typeof withSegments> | undefined;
  let receiptAt: ((seq: number) => Promise<Uint8Array | undefined>) | undefined;
  if (records.length > 0 && verb !== 'verify' && values.archive === undefined) {
    // replay / attribute read the live log only: say so, or their budgets look complete.
    process.stderr.write(
      `jcp receipts: warning [archive-needed]: receipts ${records[0]!.first}..${records[records.length - 1]!.last} of this log are archived and not counted here; give --archive DIR to include them\n`,
    );
  }
  if (records.length > 0 && (verb === 'verify' || values.archive !== undefined)) {
    if (values.archive === undefined) {
      await pool?.close();
      throw new CliError(
        'archive-needed',
        `receipts ${records[0]!.first}..${records[records.length - 1]!.last} of this log are archived: give --archive DIR (the segment folder) to verify from seq 0`,
      );
    }
    const seg = readSegments(path.resolve(values.archive), records);
    archive = seg.checks;
    source = withSegments(log, seg.receipts);
    receiptAt = segmentReceiptAt(log, seg.receipts);
  }
  try {
    if (verb === 'verify') {
      ({ replay: r, snapshots } = await replayCheckingSnapshots(log, dataDir, steward, {
        ...runner,
        ...(source ? { source, receiptAt } : {}),
      }));
    } else r = await replayLog(log, { steward, ...runner, measurements: verb === 'attribute', ...(source ? { source, receiptAt } : {}) });
  } finally {
    await pool?.close();
  }
  return { r, snapshots, archive, records };
}

/** Prints `jcp receipts replay`'s JSON: counts, the next seq, the head, the budgets rebuilt (µJ per grant) and the outcomes; resolves to 0. */
function printReplay({ r, records, archive }: ReplayRun): number {
  const budgets = [...r.ledger.entries()].map(([grant_id, spent_uj]) => ({ grant_id, spent_uj }));
  const out = {
    receipts: r.total,
    allowed: r.allowed,
    denied: r.denied,
    bad: r.rejected.length,
    next_seq: r.nextSeq,
    head: r.headId ?? null,
    budgets,
    reversals: r.outcomes.reversals,
    refunded_uj: r.outcomes.refundedUj,
    bad_outcomes: r.outcomes.bad.length,
    ...archivedField(records, archive),
  };
  process.stdout.write(`${JSON.stringify(out, bigintJson, 2)}\n`);
  return 0;
}

/**
 * Prints `jcp receipts attribute`'s JSON: spend per (grant, subject), charged and refunded (µJ),
 * metered by provenance; with `tree`, also `delegation_tree` (core `delegationTree`: each exercised
 * grant under its parent, by the receipts' chain_ids, with `spent_uj` per link); resolves to 0.
 */
function printAttribution({ r, records, archive }: ReplayRun, tree = false): number {
  const rows = [...r.attribution.values()].map((a) => {
    const o = r.outcomes.attribution.get(`${a.grant_id} ${a.subject}`);
    const refunded = o?.refunded_uj ?? 0n;
    return {
      grant_id: a.grant_id,
      subject: a.subject,
      allowed: a.allowed,
      refused: a.refused,
      uj: a.uj,
      charged_uj: a.uj - refunded,
      refunded_uj: refunded,
      reversals: o?.reversals ?? 0,
      metered_calls: o?.calls ?? 0,
      metered_uj: o?.metered_uj ?? 0n,
      metered_by_provenance: o?.metered_by_provenance ?? {},
    };
  });
  const outcomes = { measurements: r.outcomes.measurements, reversals: r.outcomes.reversals, bad: r.outcomes.bad.length };
  process.stdout.write(
    `${JSON.stringify(
      {
        receipts: r.total,
        bad: r.rejected.length,
        outcomes,
        attribution: rows,
        ...(tree ? { delegation_tree: delegationTree(r.attribution.values(), (id) => r.ledger.spent(id)) } : {}),
        ...archivedField(records, archive),
      },
      bigintJson,
      2,
    )}\n`,
  );
  return 0;
}

/** Prints `jcp receipts verify`'s JSON report; resolves to 0 when nothing is bad or broken, the head mark holds and every snapshot and segment checks, else 1. */
function printVerify({ r, snapshots, archive }: ReplayRun, head: HeadCheck): number {
  const report = { ...verifyReport(r, head), snapshots, ...(archive ? { archive } : {}) };
  process.stdout.write(`${JSON.stringify(report, bigintJson, 2)}\n`);
  const good =
    report.bad === 0 &&
    report.breaks === 0 &&
    report.outcomes.bad === 0 &&
    head.ok &&
    snapshots.every((x) => x.ok) &&
    (archive ?? []).every((x) => x.ok);
  return good ? 0 : 1;
}

/**
 * The verb on the open log: archive, export, snapshot, or a replay (verify, replay, attribute) on
 * `workers` threads, with the head mark checked (§8). Resolves to the exit code.
 */
async function runOnLog(
  verb: string,
  values: ReceiptsValues,
  log: ReceiptLog,
  dataDir: string,
  steward: Did,
  n: ReceiptsNumbers,
): Promise<number> {
  if (verb === 'archive') return await archiveNow(log, dataDir, steward, n.before, path.resolve(values.out!));
  if (verb === 'export')
    return await exportLog(log, values.format ?? 'json', values.out === undefined ? undefined : path.resolve(values.out));
  const pool = n.workers > 0 ? await WorkerPool.start(n.workers) : undefined;
  const runner = pool ? { runner: ((job) => pool.replaySlice(job)) satisfies SliceRunner, parallel: pool.size * 2 } : {};
  if (verb === 'snapshot') {
    try {
      return await snapshotNow(log, dataDir, steward, values.key ?? path.join(dataDir, 'steward.key'), runner, n.keep);
    } finally {
      await pool?.close();
    }
  }
  const run = await replayForVerb(verb, values, log, dataDir, steward, pool, runner);
  // Receipts the node made durable that the log no longer holds (the head mark, outside LevelDB).
  const head = await log.checkHead();
  if (!head.ok && verb !== 'verify') process.stderr.write(`jcp receipts: warning [log-damaged]: ${head.why}\n`);
  if (verb === 'replay') return printReplay(run);
  if (verb === 'attribute') return printAttribution(run, values.tree === true);
  return printVerify(run, head);
}

/** The `jcp receipts` command. */
export const command: Command = {
  name: 'receipts',
  summary: 'verify, replay, attribute, export, repair or snapshot a node receipt log; checkpoint and prove it as a transparency log',
  help,
  async run(argv) {
    const [verb, ...rest] = argv;
    const tlogVerb = TLOG_VERBS.find((v) => v === verb);
    if (tlogVerb !== undefined) return await runTlog(tlogVerb, rest);
    const { values, positionals } = parse(rest, OPTIONS);
    if (positionals.length !== 1) throw new UsageError('expected one data folder');
    // verify, replay and attribute always print JSON; --json is accepted there (docs/console.md
    // compares the console with `attribute --json`) and changes nothing. export has --format.
    if (values.json && !['verify', 'replay', 'attribute'].includes(verb ?? '')) {
      throw new UsageError(
        `--json is for verify, replay and attribute (which print JSON anyway)${verb === 'export' ? '; export takes --format json' : ''}`,
      );
    }
    if (values.tree && verb !== 'attribute') throw new UsageError('--tree is for attribute');
    if (verb === 'verify' && isReceiptFile(positionals[0]!)) return await verifyFile(positionals[0]!);
    const dataDir = path.resolve(positionals[0]!);
    const n = checkFlags(verb, values, dataDir);
    const v = verb!;
    try {
      const meta = readDataMeta(dataDir);
      if (meta === undefined) {
        process.stderr.write(`jcp receipts: error [not-a-data-folder]: ${dataDir} is not a node data folder (no node.json)\n`);
        return 1;
      }
      if (v === 'repair') {
        const locked = await repairLog(dataDir);
        if (locked !== undefined) return locked;
      }
      const log = await ReceiptLog.open(dataDir, { steward: meta.steward, mustExist: true, nowS: 0 });
      try {
        return await runOnLog(v, values, log, dataDir, meta.steward, n);
      } finally {
        await log.close();
      }
    } catch (e) {
      if (e instanceof NodeFault) {
        process.stderr.write(`jcp receipts: error [${e.code}]: ${e.message}\n`);
        return 1;
      }
      throw e;
    }
  },
};

/**
 * `archived` of the replay and attribute reports on a log with archived receipts: the range, how
 * many, and whether they are counted (only with `--archive DIR`, from the segments that check out;
 * `archive` then lists each segment's check as in verify).
 */
function archivedField(records: readonly ArchiveRecord[], archive: SegmentCheck[] | undefined) {
  if (records.length === 0) return {};
  return {
    archived: {
      first: records[0]!.first,
      last: records[records.length - 1]!.last,
      receipts: records.reduce((n, x) => n + x.count, 0),
      included: archive?.every((x) => x.ok) ?? false,
    },
    ...(archive ? { archive } : {}),
  };
}

/** True when `arg` is `-` (stdin) or names something other than a folder (a file of receipts). */
function isReceiptFile(arg: string): boolean {
  if (arg === '-') return true;
  try {
    return !statSync(arg).isDirectory();
  } catch {
    return false;
  }
}

/** `jcp receipts verify <file | ->`: see the help text and cli/receiptfile.ts. */
async function verifyFile(arg: string): Promise<number> {
  let bytes: Buffer;
  try {
    bytes =
      arg === '-' ? await readStdinCapped(READ_CAPS.receiptFile, 'receipts') : readFileCapped(arg, READ_CAPS.receiptFile, 'receipt file');
  } catch (e) {
    if (e instanceof IoError) throw e;
    throw ioError(e, 'read', arg);
  }
  const report = verifyReceiptFile(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  process.stdout.write(`${JSON.stringify(report, bigintJson, 2)}\n`);
  return report.bad === 0 ? 0 : 1;
}

/**
 * The verify report: counts, every problem named by seq (the first 50), and `head_mark`: whether
 * the log still holds the last receipt the node recorded as durable (`lost` names the loss).
 */
export function verifyReport(r: LogReplay, head: HeadCheck = { ok: true }) {
  const breaks = r.breaks.map((b) => ({
    seq: b.seq,
    code: b.code,
    why:
      b.code === 'prev-mismatch'
        ? `receipt seq ${b.seq}: prev does not name the receipt before it (seq ${b.seq - 1}): a broken prev link`
        : b.code === 'seq-gap'
          ? `receipt seq ${b.seq}: expected seq ${b.expectedSeq}; receipts ${b.expectedSeq}..${b.seq - 1} are missing`
          : b.code === 'seq-reorder'
            ? `receipt seq ${b.seq}: expected seq ${b.expectedSeq}; out of order or reused`
            : `receipt seq ${b.seq}: the same receipt bytes appear twice`,
  }));
  return {
    receipts: r.total,
    good: r.total - r.rejected.length,
    bad: r.rejected.length,
    breaks: r.breaks.length,
    first_break: breaks[0] ?? null,
    rejected: r.rejected.slice(0, 50).map((x) => ({ seq: x.seq, code: x.code, why: x.why })),
    continuity: breaks.slice(0, 50),
    head_mark: head.ok
      ? { ok: true, seq: head.markSeq ?? null }
      : { ok: false, code: head.code, seq: head.markSeq ?? null, log_ends_at: head.lastSeq, why: head.why },
    outcomes: {
      measurements: r.outcomes.measurements,
      reversals: r.outcomes.reversals,
      refunded_uj: r.outcomes.refundedUj,
      bad: r.outcomes.bad.length,
      rejected: r.outcomes.bad.slice(0, 50),
    },
  };
}

/** One snapshot checked by `verify`: it verifies under the steward and equals the full replay at its seq. */
export interface SnapshotCheck {
  readonly file: string;
  readonly seq: number;
  readonly ok: boolean;
  readonly why?: string;
}

/**
 * The full replay from seq 0 (the same as `replayLog`), stopping at every snapshot's seq to
 * compare the snapshot's body with the body of the replayed state at that seq (same horizon,
 * window and made_at_s): anything else (spend, request index, counts, problems, the receipt it is
 * bound to) is a mismatch, named by the first field that differs.
 */
async function replayCheckingSnapshots(
  log: ReceiptLog,
  dataDir: string,
  steward: Did,
  runner: {
    runner?: SliceRunner;
    parallel?: number;
    source?: ReturnType<typeof withSegments>;
    receiptAt?: (seq: number) => Promise<Uint8Array | undefined>;
  },
): Promise<{ replay: LogReplay; snapshots: SnapshotCheck[] }> {
  const checks: SnapshotCheck[] = [];
  const opened: Array<{ file: string; seq: number; snap: NonNullable<ReturnType<typeof openOk>> }> = [];
  const folder = listSnapshotsOrWhy(dataDir);
  if (folder.why !== undefined) checks.push({ file: path.join(dataDir, SNAPSHOT_DIR), seq: -1, ok: false, why: folder.why });
  for (const { seq, file } of folder.list.reverse()) {
    let bytes: Uint8Array;
    try {
      bytes = readSnapshotFile(file);
    } catch (e) {
      checks.push({ file, seq, ok: false, why: `unreadable: ${(e as Error).message}` });
      continue;
    }
    const o = openSnapshot(bytes, steward);
    const snap = openOk(o);
    if (snap === undefined) checks.push({ file, seq, ok: false, why: o.ok ? '' : o.why });
    else if (snap.seq !== seq) checks.push({ file, seq, ok: false, why: `covers seq ${snap.seq}, not the seq its name says` });
    else opened.push({ file, seq, snap });
  }
  let r: LogReplay | undefined;
  for (const { file, seq, snap } of opened) {
    r = await replayLog(log, { steward, toSeq: seq, ...runner, ...(r ? { from: r } : {}) });
    if (r.coveredSeq !== seq) {
      checks.push({ file, seq, ok: false, why: `the log holds no receipt at seq ${seq} (it ends at ${r.coveredSeq})` });
      continue;
    }
    const want = snapshotBody(r, steward, { madeAtS: snap.madeAtS, windowS: snap.windowS, horizon: snap.horizon });
    if (bytesEqual(encode(want), encode(snap.body))) {
      checks.push({ file, seq, ok: true });
      continue;
    }
    const field = Object.keys({ ...want, ...snap.body }).find((k) => {
      const a = want[k];
      const b = snap.body[k];
      return a === undefined || b === undefined || !bytesEqual(encode(a), encode(b));
    });
    checks.push({ file, seq, ok: false, why: `differs from the full replay at seq ${seq} (field ${field ?? '?'})` });
  }
  // The end of the log: the outcome records (reversals, measurements) are checked and applied once, here.
  r = await replayLog(log, { steward, ...runner, measurements: true, ...(r ? { from: r } : {}) });
  return { replay: r, snapshots: checks.sort((a, b) => a.seq - b.seq) };
}

function openOk(o: ReturnType<typeof openSnapshot>) {
  return o.ok ? o.value : undefined;
}

async function archiveNow(log: ReceiptLog, dataDir: string, steward: Did, before: number, outDir: string): Promise<number> {
  const choice = await chooseSnapshot(log, dataDir, steward);
  for (const x of choice.ignored) process.stderr.write(`jcp receipts: snapshot ${x.file} ignored: ${x.why}\n`);
  const snap = choice.used;
  if (snap === undefined)
    throw new CliError(
      'not-covered',
      `no usable snapshot: nothing is archived that a snapshot does not cover (make one: jcp receipts snapshot ${dataDir})`,
    );
  const limit = archiveLimit(snap);
  if (before > limit) {
    throw new CliError(
      'not-covered',
      `--before ${before}: the newest snapshot (seq ${snap.seq}) allows archiving below seq ${limit} at most (its own receipt, and the receipts of request ids it still keeps, stay)`,
    );
  }
  let a: Archived;
  try {
    a = await archiveReceipts(log, before, outDir);
  } catch (e) {
    if (e instanceof NodeFault) throw e;
    throw new CliError('refused', (e as Error).message, { cause: e });
  }
  const segments = a.segments.map((s) => ({
    file: path.join(outDir, s.file),
    first: s.first,
    last: s.last,
    count: s.count,
    blake3: toHex(s.blake3),
  }));
  process.stdout.write(`${JSON.stringify({ archived: a.receipts, segments }, null, 2)}\n`);
  return 0;
}

async function snapshotNow(
  log: ReceiptLog,
  dataDir: string,
  steward: Did,
  keyFile: string,
  runner: { runner?: SliceRunner; parallel?: number },
  keep = 2,
): Promise<number> {
  const actor = readKeyFile(keyFile);
  if (actor.did !== steward)
    throw new CliError('log-steward-mismatch', `${keyFile} is ${actor.did}, not the steward of this log (${steward})`);
  const made = await makeSnapshot(log, dataDir, { steward: actor, nowS: Math.floor(Date.now() / 1000), keep, ...runner });
  if (made === undefined) {
    process.stderr.write(
      'jcp receipts: nothing to snapshot (the log is empty, or the newest snapshot covers its last receipt and no request id it keeps has left the window)\n',
    );
    return 0;
  }
  process.stdout.write(
    `${JSON.stringify({ file: made.file, seq: made.seq, replayed: made.replayed, requests: made.requests, bytes: made.bytes }, null, 2)}\n`,
  );
  return 0;
}

async function write(out: Writable, chunk: string | Uint8Array): Promise<void> {
  if (!out.write(chunk)) {
    await new Promise<void>((resolve, reject) => {
      const onError = (e: Error) => {
        out.off('drain', onDrain);
        reject(e);
      };
      const onDrain = () => {
        out.off('error', onError);
        resolve();
      };
      out.once('drain', onDrain);
      out.once('error', onError);
    });
  }
}

/** Opens `file` as a new file (never an existing one) for the export. @throws CliError `refused` (it exists) or IoError. */
async function newFileStream(file: string): Promise<Writable> {
  const stream = createWriteStream(file, { flags: 'wx', mode: 0o644 });
  const failed = await new Promise<Error | undefined>((resolve) => {
    stream.once('open', () => resolve(undefined));
    stream.once('error', resolve);
  });
  if (failed === undefined) return stream;
  if (errnoOf(failed) === 'EEXIST')
    throw new CliError('refused', `${file} exists: refusing to overwrite it with the export`, { cause: failed });
  throw ioError(failed, 'create', file);
}

async function exportLog(log: ReceiptLog, format: string, outFile: string | undefined): Promise<number> {
  if (format !== 'cbor' && format !== 'json') throw new UsageError('--format: cbor or json');
  const out: Writable = outFile === undefined ? process.stdout : await newFileStream(outFile);
  let failed: Error | undefined;
  out.on('error', (e) => {
    failed = e;
  });
  let n = 0;
  if (format === 'json') await write(out, '{"receipts": [\n');
  for await (const chunk of log.receiptChunks(1024)) {
    for (const [seq, bytes] of chunk) {
      if (format === 'cbor') await write(out, bytes);
      else {
        const opened = openReceipt(bytes);
        const row = {
          seq,
          id: receiptId(bytes),
          verified: opened.ok,
          ...(opened.ok ? { core: opened.value } : { error: opened.error }),
          cbor: toHex(bytes),
        };
        await write(out, `${n > 0 ? ',\n' : ''}${JSON.stringify(row, bigintJson)}`);
      }
      n++;
    }
  }
  if (format === 'json') await write(out, '\n]}\n');
  if (outFile !== undefined) await new Promise<void>((r) => out.end(() => r()));
  if (failed !== undefined) throw ioError(failed, 'write', outFile ?? 'stdout');
  process.stderr.write(`jcp receipts: exported ${n} receipts as ${format}\n`);
  return 0;
}
