/**
 * Boot replay of the node's own receipt log (spec §8.1, C14, C16): budgets, the request index
 * and the log head come back from the verified receipts; a receipt that fails verification is
 * counted and reported, never applied (core `replayReceipts` does the verifying and applying).
 *
 * The log is replayed in slices of consecutive receipts. Each slice is replayed by
 * `replayReceipts` with `start` = one past the previous slice's last key (0 for the first) and
 * the id of the receipt before it, so continuity (`seq`, `prev`) is checked across slice
 * boundaries too; slices can run on worker
 * threads in parallel (signature verification dominates), and are merged in log order. Memory
 * stays bounded: a slice's receipt bytes are dropped once merged; the request index keeps 128-bit
 * id prefixes and seqs only (`requestindex.ts`).
 */
import {
  type Attribution,
  type ContentId,
  type ContinuityBreak,
  type Did,
  Ledger,
  type Provenance,
  receiptId,
  type RejectedReceipt,
  replayReceipts,
  type Uj,
} from '../core/index.ts';
import { type CheckedOutcome, checkOutcome, type OutcomeKind, OutcomeRefusals } from './outcome.ts';
import type { ReceiptLog } from './receiptlog.ts';
import { REQUEST_KEY_WORDS, requestKeyWords, TimedRequestIndex } from './requestindex.ts';

/** One slice to replay: consecutive receipts with their log keys (seq). */
export interface SliceJob {
  readonly receipts: readonly Uint8Array[];
  readonly seqs: readonly number[];
  readonly steward: Did;
  /** The seq the slice should start at, and the id of the receipt before it (absent at the log's start). */
  readonly start: { readonly seq: number; readonly prev?: ContentId };
  /** Signatures not checked: see {@link ReplayLogOptions.vouched}. */
  readonly vouched?: boolean;
}

/** What one slice contributes (structured-clone friendly: plain data, bigints). */
export interface SliceResult {
  readonly debits: Array<[ContentId, Uj]>;
  readonly allowed: number;
  readonly denied: number;
  /** `index` is within the slice; `seq` is the receipt's log key. */
  readonly rejected: Array<RejectedReceipt & { seq: number }>;
  readonly breaks: Array<ContinuityBreak & { seq: number }>;
  /**
   * request id → log seq of the receipt that decided it (first wins), packed for the request
   * index: the ids' 128-bit prefixes, {@link REQUEST_KEY_WORDS} words each
   * (`requestindex.ts` `requestKeyWords`), and one seq per id. Typed arrays, so a worker hands
   * them over without copying.
   */
  readonly requestKeys: Uint32Array;
  readonly requestSeqs: Float64Array;
  /** One request `now` (the receipt's `at`, unix s) per id, for the time-bounded index. */
  readonly requestAts: Float64Array;
  readonly attribution: Attribution[];
  readonly revokedSeen: ContentId[];
  readonly lastSeq: number | undefined;
  readonly lastId: ContentId | undefined;
  readonly total: number;
}

/** Replays one slice with core `replayReceipts` (pure apart from its own fresh ledger). */
export function replaySlice(job: SliceJob): SliceResult {
  const r = replayReceipts(job.receipts, { steward: job.steward, start: job.start, vouched: job.vouched === true });
  const seqOf = new Map<Uint8Array, number>();
  for (let i = 0; i < job.receipts.length; i++) seqOf.set(job.receipts[i]!, job.seqs[i]!);
  const requestKeys = new Uint32Array(r.requests.size * REQUEST_KEY_WORDS);
  const requestSeqs = new Float64Array(r.requests.size);
  const requestAts = new Float64Array(r.requests.size);
  let n = 0;
  for (const [id, bytes] of r.requests) {
    requestKeyWords(id, requestKeys, n * REQUEST_KEY_WORDS);
    requestAts[n] = r.requestsAt.get(id)!;
    requestSeqs[n++] = seqOf.get(bytes)!;
  }
  return {
    debits: [...r.ledger.entries()],
    allowed: r.allowed,
    denied: r.denied,
    rejected: r.rejected.map((x) => ({ ...x, seq: job.seqs[x.index]! })),
    breaks: r.breaks.map((x) => ({ ...x, seq: job.seqs[x.index]! })),
    requestKeys,
    requestSeqs,
    requestAts,
    attribution: [...r.attribution.values()],
    revokedSeen: [...r.revokedSeen],
    lastSeq: r.lastSeq,
    lastId: r.lastId,
    total: r.total,
  };
}

/** Runs slices somewhere (a worker pool, or inline). */
export type SliceRunner = (job: SliceJob) => Promise<SliceResult>;

/** The state rebuilt from a log, and what was wrong with it. */
export interface LogReplay {
  readonly ledger: Ledger;
  /** The request index, bounded by time (entries below its horizon are not kept). */
  readonly requests: TimedRequestIndex;
  readonly allowed: number;
  readonly denied: number;
  /** Receipts that failed verification (counted, never applied), with their log seq. */
  readonly rejected: Array<RejectedReceipt & { seq: number }>;
  /** Continuity breaks (gaps, reorders, broken `prev` links, duplicates), with their log seq. */
  readonly breaks: Array<ContinuityBreak & { seq: number }>;
  /** Per-(grant_id, subject) attribution (§8.1) of the receipts replayed here (not those a snapshot covers). */
  readonly attribution: Map<string, Attribution>;
  readonly revokedSeen: Set<ContentId>;
  /** Receipts read (those a snapshot covers included). */
  readonly total: number;
  /**
   * The highest seq read (−1 when none) and the receipt id of its bytes, verified or not: what a
   * snapshot of this state is bound to, and where a replay continuing from it starts.
   */
  readonly coveredSeq: number;
  readonly coveredId: ContentId | undefined;
  /** The next seq to write (one past the highest key), and the id of the last verified receipt. */
  readonly nextSeq: number;
  readonly headId: ContentId | undefined;
  /** The outcome records: reversals applied to `ledger` (after every receipt), measurements when asked for, bad ones. */
  readonly outcomes: OutcomeReplay;
  readonly seconds: number;
}

/** Per-(grant_id, subject) totals from outcome records (`outcome.ts`): what was measured beside what was charged. */
export interface OutcomeAttribution {
  readonly grant_id: ContentId;
  readonly subject: Did;
  /** Allows with an outcome record (measurement or reversal). */
  calls: number;
  /** µJ the node's meter measured for them, in all and per provenance (§5). */
  metered_uj: Uj;
  metered_by_provenance: Partial<Record<Provenance, Uj>>;
  /** Reversals (endpoint-unavailable) and the µJ they handed back. */
  reversals: number;
  refunded_uj: Uj;
}

/** What the outcome records of a log hold, once each was checked against its receipt. */
export interface OutcomeReplay {
  /** Reversals applied to the ledger, and the µJ they handed back. */
  readonly reversals: number;
  readonly refundedUj: Uj;
  /** Measurement records read and verified (0 unless `measurements` was asked for). */
  readonly measurements: number;
  /** Records that failed a check: counted and reported, never applied (§8.1). */
  readonly bad: Array<{ seq: number; kind: OutcomeKind; code: string; why: string }>;
  /** Per (grant_id, subject), keyed `"<grant_id> <subject>"` like the receipt attribution. */
  readonly attribution: Map<string, OutcomeAttribution>;
}

/**
 * Reads the outcome records of a log (`outcome.ts`), checks each against the receipt it names,
 * and applies every good reversal to `ledger` (a credit on each grant the receipt debited).
 * Measurement records are read only when `measurements` is true (they change no budget, so boot
 * skips them). A bad record is counted in `bad` and never applied, and so is a reversal the
 * ledger cannot take (`outcome-bad-refund`: more than was spent). So is a measurement of a seq
 * that also has a reversal (`outcome-duplicate`).
 * @throws NodeFault `log-corrupt` when LevelDB cannot read the log.
 */
export async function replayOutcomes(
  log: ReceiptLog,
  steward: Did,
  ledger: Ledger,
  opts: { readonly measurements?: boolean; readonly receiptAt?: (seq: number) => Promise<Uint8Array | undefined> } = {},
): Promise<OutcomeReplay> {
  const receiptAt = opts.receiptAt ?? ((seq: number) => log.getReceipt(seq));
  const bad: OutcomeReplay['bad'] = [];
  const attribution = new Map<string, OutcomeAttribution>();
  const reversed = new Set<number>();
  let reversals = 0;
  let refundedUj = 0n;
  let measurements = 0;
  const attribute = (c: CheckedOutcome) => {
    const key = `${c.receipt.grant_id} ${c.receipt.subject}`;
    let a = attribution.get(key);
    if (a === undefined) {
      a = {
        grant_id: c.receipt.grant_id,
        subject: c.receipt.subject,
        calls: 0,
        metered_uj: 0n,
        metered_by_provenance: {},
        reversals: 0,
        refunded_uj: 0n,
      };
      attribution.set(key, a);
    }
    a.calls++;
    if (c.core.metered_uj !== undefined) {
      a.metered_uj += c.core.metered_uj;
      const p = c.core.metered_provenance!;
      a.metered_by_provenance[p] = (a.metered_by_provenance[p] ?? 0n) + c.core.metered_uj;
    }
    if (c.core.kind === 'reversal') {
      a.reversals++;
      a.refunded_uj += c.core.refund_uj!;
    }
  };
  for await (const { seq, bytes } of log.outcomes('reversal')) {
    const c = checkOutcome(bytes, { kind: 'reversal', seq }, await receiptAt(seq), steward);
    if (!c.ok) {
      bad.push({ seq, kind: 'reversal', ...c.error });
      continue;
    }
    if (!ledger.credit(c.value.debited, c.value.core.refund_uj!)) {
      bad.push({
        seq,
        kind: 'reversal',
        code: OutcomeRefusals.BAD_REFUND,
        why: `refund of ${c.value.core.refund_uj} µJ exceeds what the ledger holds as spent`,
      });
      continue;
    }
    reversed.add(seq);
    reversals++;
    refundedUj += c.value.core.refund_uj!;
    attribute(c.value);
  }
  if (opts.measurements) {
    for await (const { seq, bytes } of log.outcomes('measurement')) {
      if (reversed.has(seq)) {
        bad.push({
          seq,
          kind: 'measurement',
          code: OutcomeRefusals.DUPLICATE,
          why: `receipt seq ${seq} has both a reversal and a measurement`,
        });
        continue;
      }
      const c = checkOutcome(bytes, { kind: 'measurement', seq }, await receiptAt(seq), steward);
      if (!c.ok) {
        bad.push({ seq, kind: 'measurement', ...c.error });
        continue;
      }
      measurements++;
      attribute(c.value);
    }
  }
  bad.sort((x, y) => x.seq - y.seq);
  return { reversals, refundedUj, measurements, bad, attribution };
}

/** The outcome replay of a state that applied none (a snapshot's, or a replay stopped before the end). */
export function noOutcomes(): OutcomeReplay {
  return { reversals: 0, refundedUj: 0n, measurements: 0, bad: [], attribution: new Map() };
}

/** Options of {@link replayLog}. */
export interface ReplayLogOptions {
  /** The steward whose receipts these must be. */
  readonly steward: Did;
  /** Where slices run; default inline on this thread. */
  readonly runner?: SliceRunner;
  /** Receipts per slice (default 2048). */
  readonly sliceSize?: number;
  /** Slices in flight at once (default 4). */
  readonly parallel?: number;
  /** Receipts the log is expected to hold (sizes the request index once; default 1024). */
  readonly expected?: number;
  /**
   * Continue from this state instead of seq 0 (a verified snapshot, or an earlier replay): its
   * ledger and request index are taken over and filled further; replay starts at
   * `from.coveredSeq + 1`, continuity checked against `from.coveredId`.
   */
  readonly from?: LogReplay;
  /**
   * Where the receipts come from (default the live log, `log.receiptChunks`): chunks of (seq,
   * bytes) in seq order from `fromSeq` on, e.g. archived segments before the live log.
   */
  readonly source?: (chunk: number, fromSeq: number) => AsyncIterable<Array<[number, Uint8Array]>>;
  /** Stop after this seq (default: the end of the log). */
  readonly toSeq?: number;
  /**
   * The receipts' signatures are not checked (core `replayReceipts` `vouched`): only for receipts
   * the caller vouches for by their `prev` links to an id it holds (node/snapshotjob.ts), which it
   * must check in the result (no new rejected receipt or break, `coveredId` that id). Default false.
   */
  readonly vouched?: boolean;
  /**
   * The request index's window and horizon (seconds; node/requestindex.ts `TimedRequestIndex`)
   * when not continuing `from`: default no horizon (every request id kept).
   */
  readonly requestWindowS?: number;
  readonly requestHorizon?: number;
  /** Also read and check the measurement records (`jcp receipts verify|attribute`; boot does not need them). */
  readonly measurements?: boolean;
  /**
   * Apply the outcome records (reversals) after the receipts (default: when replaying to the end
   * of the log, i.e. without `toSeq`). A snapshot holds the receipts' state only: the reversals
   * are applied on top at every start, as they may be written after the snapshot was made.
   */
  readonly outcomes?: boolean;
  /** Where outcome records find their receipt (default the live log; with archived segments, those first). */
  readonly receiptAt?: (seq: number) => Promise<Uint8Array | undefined>;
}

const inline: SliceRunner = async (job) => replaySlice(job);

/**
 * Adds one slice's per-(grant, subject) tallies (allowed and refused counts, µJ) into the
 * running map keyed `"<grant_id> <subject>"`; a key seen for the first time gets a copy.
 */
function addAttribution(into: Map<string, Attribution>, from: readonly Attribution[]): void {
  for (const a of from) {
    const key = `${a.grant_id} ${a.subject}`;
    const m = into.get(key);
    if (m === undefined) into.set(key, { ...a });
    else {
      m.allowed += a.allowed;
      m.refused += a.refused;
      m.uj += a.uj;
      if (m.chain_ids === undefined && a.chain_ids !== undefined) m.chain_ids = a.chain_ids;
    }
  }
}

/**
 * Verifies and replays the whole log (§8.1) and returns the rebuilt state.
 * @throws NodeFault `log-corrupt` when LevelDB cannot read the log.
 */
export async function replayLog(log: ReceiptLog, opts: ReplayLogOptions): Promise<LogReplay> {
  const t0 = performance.now();
  const r = await replayChunks(opts.source ?? ((size, fromSeq) => log.receiptChunks(size, fromSeq)), opts);
  // Reversals apply on top of every receipt's debit (a reversal is written after its receipt).
  const outcomes =
    (opts.outcomes ?? opts.toSeq === undefined)
      ? await replayOutcomes(log, opts.steward, r.ledger, {
          measurements: opts.measurements ?? false,
          ...(opts.receiptAt ? { receiptAt: opts.receiptAt } : {}),
        })
      : noOutcomes();
  return { ...r, outcomes, seconds: (performance.now() - t0) / 1000 };
}

/**
 * The receipts part of {@link replayLog}: verifies and replays the receipts `source` gives (chunks
 * of (seq, bytes) in seq order, from `opts.from`'s next seq or 0) up to `opts.toSeq`, with no
 * outcome records (`outcomes` is {@link noOutcomes}). Needs no log: a snapshot's worker thread
 * replays the chunks the main thread reads for it (node/snapshotjob.ts).
 * @throws what `source` throws (NodeFault `log-corrupt` for the live log).
 */
export async function replayChunks(
  source: (chunk: number, fromSeq: number) => AsyncIterable<Array<[number, Uint8Array]>>,
  opts: Omit<ReplayLogOptions, 'source' | 'outcomes' | 'measurements' | 'receiptAt'>,
): Promise<LogReplay> {
  const t0 = performance.now();
  const runner = opts.runner ?? inline;
  const parallel = Math.max(1, opts.parallel ?? 4);
  const from = opts.from;
  const ledger = from?.ledger ?? new Ledger();
  const requests = from?.requests ?? new TimedRequestIndex(opts.requestWindowS ?? Number.MAX_SAFE_INTEGER, opts.requestHorizon ?? 0);
  const attribution = new Map<string, Attribution>();
  const revokedSeen = new Set<ContentId>();
  const rejected: Array<RejectedReceipt & { seq: number }> = [...(from?.rejected ?? [])];
  const breaks: Array<ContinuityBreak & { seq: number }> = [...(from?.breaks ?? [])];
  let allowed = from?.allowed ?? 0;
  let denied = from?.denied ?? 0;
  let total = from?.total ?? 0;
  let maxSeq = from !== undefined ? from.nextSeq - 1 : -1;
  let headId: ContentId | undefined = from?.headId;
  let prevId: ContentId | undefined = from?.coveredId;
  let nextStart = from !== undefined ? from.coveredSeq + 1 : 0;
  let coveredSeq = from?.coveredSeq ?? -1;
  const toSeq = opts.toSeq ?? Number.POSITIVE_INFINITY;

  const inFlight: Array<Promise<SliceResult>> = [];
  const merge = (r: SliceResult) => {
    for (const [id, uj] of r.debits) ledger.debit([id], uj);
    allowed += r.allowed;
    denied += r.denied;
    for (const x of r.rejected) rejected.push(x);
    for (const x of r.breaks) breaks.push(x);
    requests.insertWords(r.requestKeys, r.requestSeqs, r.requestAts);
    addAttribution(attribution, r.attribution);
    for (const id of r.revokedSeen) revokedSeen.add(id);
    if (r.lastId !== undefined) headId = r.lastId;
    total += r.total;
  };

  const size = opts.sliceSize ?? 2048;
  let receipts: Uint8Array[] = [];
  let seqs: number[] = [];
  const dispatch = async () => {
    if (receipts.length === 0) return;
    const job: SliceJob = {
      receipts,
      seqs,
      steward: opts.steward,
      start: { seq: nextStart, ...(prevId !== undefined ? { prev: prevId } : {}) },
      ...(opts.vouched === true ? { vouched: true } : {}),
    };
    nextStart = seqs[seqs.length - 1]! + 1;
    prevId = receiptId(receipts[receipts.length - 1]!);
    receipts = [];
    seqs = [];
    const slice = runner(job);
    // Handled now: a slice that fails while the loop reads the log or awaits an earlier one (a
    // worker that exited fails all it had) would otherwise be an unhandled rejection, which ends
    // the process; its error still reaches the caller when the slice is awaited in turn.
    slice.catch(() => undefined);
    inFlight.push(slice);
    while (inFlight.length >= parallel) merge(await inFlight.shift()!);
  };
  let done = false;
  const chunks = source(size, nextStart);
  for await (const chunk of chunks) {
    for (const [seq, bytes] of chunk) {
      if (seq > toSeq) {
        done = true;
        break;
      }
      receipts.push(bytes);
      seqs.push(seq);
      if (seq > maxSeq) maxSeq = seq;
      if (receipts.length >= size) await dispatch();
    }
    if (done) break;
  }
  await dispatch();
  coveredSeq = nextStart - 1;
  while (inFlight.length > 0) merge(await inFlight.shift()!);
  return {
    ledger,
    requests,
    allowed,
    denied,
    rejected,
    breaks,
    attribution,
    revokedSeen,
    total,
    nextSeq: maxSeq + 1,
    headId,
    coveredSeq,
    coveredId: prevId,
    outcomes: noOutcomes(),
    seconds: (performance.now() - t0) / 1000,
  };
}
