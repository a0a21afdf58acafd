/**
 * A running node's snapshot, built on a worker thread (node/snapshot.ts `makeSnapshotOffThread`,
 * docs/node.md "Snapshots"). The state a snapshot holds (the ledger, the request index of the
 * whole window) lives in the worker, not on the decision path: the main thread only reads the log
 * (LevelDB allows one handle, held by the main thread) and hands its receipts over, packed, in
 * slices; the worker chooses the base snapshot (reads and verifies its file), replays and merges
 * the receipts (signature checks included, except for receipts the node vouches for: `vouch`
 * on `snap-open`), and encodes and signs the result. So nothing on the
 * main thread grows with the state: at 1,000,000 request ids in the window, encoding alone takes
 * seconds (bench/history.ts), which the main thread would spend with every decision waiting.
 *
 * The session (one at a time per worker): `snap-open` (the candidates and what the worker needs
 * to choose among them) → `{baseSeq, ignored}`; `snap-chunk` × n (receipts in seq order after
 * `baseSeq`), each answered once the worker has replayed it; `snap-end` → the snapshot bytes, or
 * nothing new to cover. A new `snap-open` drops a session left open.
 *
 * A node keeps its snapshot worker from one snapshot to the next (node/snapshot.ts `Snapshotter`),
 * and the worker keeps the state of the snapshot it made last: when the newest file the main
 * thread lists is that snapshot (its seq, and the log's receipt id there is the one it covers),
 * the next session continues the state in memory instead of reading, verifying and decoding the
 * file, which holds the same state (the bytes made are the same: test/node/snapshot-offthread).
 */
import { readFileSync } from 'node:fs';
import { type Actor, actorFromSeed, type ContentId } from '../core/index.ts';
import { type LogReplay, replayChunks, replaySlice } from './replay.ts';
import { chooseAmong, finishSnapshot, type OpenedSnapshot, type SnapshotBase } from './snapshot.ts';
import type { AppendedDurable } from './receiptlog.ts';
import { unpack } from './workers.ts';

/** A snapshot file the main thread listed, and the receipt id the log holds at its seq (undefined: none there). */
export interface SnapshotCandidate {
  readonly seq: number;
  readonly file: string;
  readonly receiptId: ContentId | undefined;
}

/** The messages of a snapshot session (main thread → worker). */
export type SnapshotJob =
  | {
      readonly t: 'snap-open';
      readonly id: number;
      /** The steward's 32-byte Ed25519 seed: the worker signs the snapshot (same process). */
      readonly stewardSeed: Uint8Array;
      /** The snapshot files, newest first, each with the receipt id at its seq; and what was ignored already (an unreadable folder). */
      readonly candidates: readonly SnapshotCandidate[];
      readonly ignored: ReadonlyArray<{ readonly file: string; readonly why: string }>;
      /** Whether the log has archived receipts (a snapshot made ahead of the clock may then be used). */
      readonly archived: boolean;
      /** Clock (unix s), the seconds a base may be ahead of it, the request window (s), and the last seq to cover. */
      readonly nowS: number;
      readonly aheadS: number;
      readonly windowS: number;
      readonly toSeq: number;
      /**
       * The node appended receipts `fromSeq` through `seq` itself, and holds the id of the one at
       * `seq` (node/receiptlog.ts `appendedDurable`). When every receipt after the chosen base is
       * among them and `seq` is `toSeq`, their signatures are not checked again: their `prev`
       * links must run from the base's receipt id to `id` with no receipt refused, or the session
       * ends `unvouched` and the main thread starts it again without this.
       */
      readonly vouch?: AppendedDurable | undefined;
      /** Receipts the worker replays at a time (default 2,048); the main thread sends fewer when it paces the snapshot (`snapshot.pause_ms`). */
      readonly sliceSize?: number;
    }
  | {
      readonly t: 'snap-chunk';
      readonly id: number;
      /** The receipts back to back; `ends[i]` is where receipt i ends; `seqs[i]` its seq. */
      readonly packed: Uint8Array;
      readonly ends: Uint32Array;
      readonly seqs: Float64Array;
    }
  | { readonly t: 'snap-end'; readonly id: number };

/** The replies: to `snap-open`, to `snap-chunk` (empty: replayed), to `snap-end`. */
export type SnapshotReply =
  | {
      readonly t: 'opened';
      readonly baseSeq: number;
      readonly ignored: Array<{ file: string; why: string }>;
      /** What the session continues (absent from a worker of before 0.2: `file`, or `none` when `baseSeq` is −1). */
      readonly base?: SnapshotBase;
    }
  | { readonly t: 'taken' }
  | {
      readonly t: 'ended';
      /** Undefined: nothing new to cover (or `unvouched`). */
      readonly made?: {
        readonly bytes: Uint8Array;
        readonly seq: number;
        readonly replayed: number;
        readonly requests: number;
        /** How the receipts after the base were checked: `chain` (vouched), `signatures`. */
        readonly checked: SnapshotCheck;
        /** CPU seconds of the thread that made it, since it started or made its last snapshot ({@link threadCpuS}; absent off Linux). */
        readonly cpuS?: number;
        /** Replay slices this session ran (each of `sliceSize` receipts but the last). */
        readonly slices: number;
      };
      /** A vouched session whose receipts did not link to the vouched id: why (nothing made). */
      readonly unvouched?: string;
    };

/**
 * How a snapshot's receipts after its base were checked: `signatures` (each one's steward
 * signature), or `chain` (receipts this process sealed, vouched for by their `prev` links to the
 * receipt id it holds for the last: node/receiptlog.ts `appendedDurable`).
 */
export type SnapshotCheck = 'chain' | 'signatures';

/** Receipts per replay slice in the worker (its merges cost the decision path nothing). */
const WORKER_SLICE = 2048;

/** How a message is answered: a reply, or the error that stopped it. */
export type SnapshotAnswer = (r: SnapshotReply | Error) => void;

/** The worker's one open session. */
interface Session {
  readonly steward: Actor;
  /** The base's seq and request count (what `finishSnapshot` compares), or none. */
  readonly base: Pick<OpenedSnapshot, 'requestCount' | 'seq'> | undefined;
  /** Receipts the base covered (the replay's count starts there). */
  readonly baseTotal: number;
  readonly nowS: number;
  readonly windowS: number;
  /** The vouched receipts' last seq and id, when signatures are not checked; with the base's refused and broken counts. */
  readonly vouched: { readonly seq: number; readonly id: ContentId; readonly rejected: number; readonly breaks: number } | undefined;
  /** Chunks handed over and not yet taken by the replay, and the end mark (null). */
  readonly queue: Array<{ chunk: Array<[number, Uint8Array]>; answer: SnapshotAnswer } | null>;
  /** Wakes the replay when it waits for a chunk. */
  wake: (() => void) | undefined;
  /** Set once the replay failed: later chunks are answered with it. */
  failed: Error | undefined;
  replay: Promise<LogReplay> | undefined;
  /** Replay slices run so far. */
  slices: number;
}

let session: Session | undefined;

/**
 * The state of the last snapshot this worker made (see the module docs), with what it is bound
 * to: the seq and receipt id it covers, the request window (s), when it was made
 * (unix s) and how many request ids it holds. Taken by every `snap-open` (the replay changes it in
 * place), and kept again only by a session that made a snapshot.
 */
interface KeptState {
  readonly seq: number;
  readonly receiptId: ContentId;
  readonly windowS: number;
  readonly madeAtS: number;
  readonly requestCount: number;
  readonly state: LogReplay;
}

let kept: KeptState | undefined;

/**
 * CPU seconds the calling thread has run (Linux: the first field of `/proc/thread-self/schedstat`,
 * nanoseconds on a CPU), or undefined where that file cannot be read.
 */
function threadCpuS(): number | undefined {
  try {
    const ns = Number(readFileSync('/proc/thread-self/schedstat', 'latin1').split(' ')[0]);
    return Number.isFinite(ns) ? ns / 1e9 : undefined;
  } catch {
    return undefined;
  }
}

/** This thread's CPU seconds when it made its last snapshot (0: none yet, so the first counts its start). */
let cpuMark = 0;

/**
 * The kept state, when the session `m` may continue it: the newest file listed is the kept
 * snapshot (the log's receipt id at its seq is the one the state covers; a receipt id names one
 * receipt, with its seq and steward), the request window is the same, and it was not made further
 * ahead of the clock than `aheadS` (node/snapshot.ts `SnapshotClock`: the rule `chooseAmong`
 * applies to a file).
 */
function keptFor(k: KeptState | undefined, m: SnapshotJob & { t: 'snap-open' }): KeptState | undefined {
  const newest = m.candidates[0];
  if (k === undefined || newest === undefined) return undefined;
  const usable = newest.receiptId === k.receiptId && k.windowS === m.windowS && k.madeAtS - m.nowS <= m.aheadS;
  return usable ? k : undefined;
}

/**
 * Handles one snapshot message on the worker thread; `answer` is called once for it (for a chunk,
 * once the replay has taken it).
 * @throws (rejects with) Error when no session is open for a chunk or the end, or what the
 *   choice, the replay or the encoding threw.
 */
export async function handleSnapshotJob(m: SnapshotJob, answer: SnapshotAnswer): Promise<void> {
  if (m.t === 'snap-open') {
    session = undefined;
    const steward = actorFromSeed(m.stewardSeed);
    const k = keptFor(kept, m);
    kept = undefined;
    if (k !== undefined) {
      // The same horizon a file's state would get: the later of its own and clock − window.
      k.state.requests.advance(m.nowS);
      session = open(steward, { seq: k.seq, requestCount: k.requestCount }, k.state, m);
      answer({ t: 'opened', baseSeq: k.seq, ignored: [...m.ignored], base: 'kept' });
      return;
    }
    const ids = new Map(m.candidates.map((c) => [c.seq, c.receiptId]));
    const choice = await chooseAmong(
      m.candidates,
      m.ignored,
      { receiptIdAt: async (seq) => ids.get(seq), archived: async () => m.archived },
      steward.did,
      { nowS: m.nowS, toleranceS: m.aheadS },
    );
    const base = choice.used;
    session = open(steward, base, base?.state(m.windowS, Math.max(0, m.nowS - m.windowS)), m);
    answer({ t: 'opened', baseSeq: base?.seq ?? -1, ignored: [...choice.ignored], base: base === undefined ? 'none' : 'file' });
    return;
  }
  const s = session;
  if (s === undefined) throw new Error(`snapshot: ${m.t} with no session open`);
  if (s.failed !== undefined) throw s.failed;
  if (m.t === 'snap-chunk') {
    const chunk = unpack(m.packed, m.ends).map((bytes, i): [number, Uint8Array] => [m.seqs[i]!, bytes]);
    s.queue.push({ chunk, answer });
    s.wake?.();
    return;
  }
  s.queue.push(null);
  s.wake?.();
  session = undefined;
  const r = await s.replay!;
  const v = s.vouched;
  if (v !== undefined) {
    const why =
      r.rejected.length > v.rejected
        ? `receipt seq ${r.rejected[v.rejected]!.seq} refused: ${r.rejected[v.rejected]!.code}`
        : r.breaks.length > v.breaks
          ? `receipt seq ${r.breaks[v.breaks]!.seq}: ${r.breaks[v.breaks]!.code}`
          : r.coveredSeq !== v.seq || r.coveredId !== v.id
            ? `the log's receipt at seq ${r.coveredSeq} is not the one the node made durable at seq ${v.seq}`
            : undefined;
    if (why !== undefined) {
      answer({ t: 'ended', unvouched: why });
      return;
    }
  }
  const done = finishSnapshot(r, s.base, { steward: s.steward, nowS: s.nowS, windowS: s.windowS });
  const checked: SnapshotCheck = v !== undefined ? 'chain' : 'signatures';
  if (done === undefined) {
    answer({ t: 'ended' });
    return;
  }
  const { bytes, requestCount } = done;
  kept = {
    seq: r.coveredSeq,
    receiptId: r.coveredId!,
    windowS: s.windowS,
    madeAtS: s.nowS,
    requestCount,
    state: r,
  };
  const cpu = threadCpuS();
  const cpuS = cpu === undefined ? undefined : cpu - cpuMark;
  if (cpu !== undefined) cpuMark = cpu;
  answer({
    t: 'ended',
    made: {
      bytes,
      seq: r.coveredSeq,
      replayed: r.total - s.baseTotal,
      requests: requestCount,
      checked,
      ...(cpuS !== undefined ? { cpuS } : {}),
      slices: s.slices,
    },
  });
}

/**
 * Opens a session: the replay from `from`, the state of the base (or from seq 0), waits on the
 * chunks the main thread sends.
 */
function open(
  steward: Actor,
  base: Pick<OpenedSnapshot, 'requestCount' | 'seq'> | undefined,
  from: LogReplay | undefined,
  m: SnapshotJob & { t: 'snap-open' },
): Session {
  const requestHorizon = Math.max(0, m.nowS - m.windowS);
  // Vouched only when the node appended every receipt after the base and the last is the one it holds.
  const vouch = m.vouch;
  const vouched =
    vouch !== undefined && vouch.seq === m.toSeq && (base?.seq ?? -1) + 1 >= vouch.fromSeq
      ? { seq: vouch.seq, id: vouch.id, rejected: from?.rejected.length ?? 0, breaks: from?.breaks.length ?? 0 }
      : undefined;
  const s: Session = {
    steward,
    base,
    baseTotal: from?.total ?? 0,
    nowS: m.nowS,
    windowS: m.windowS,
    vouched,
    queue: [],
    wake: undefined,
    failed: undefined,
    replay: undefined,
    slices: 0,
  };
  async function* source(): AsyncGenerator<Array<[number, Uint8Array]>> {
    for (;;) {
      while (s.queue.length === 0) await new Promise<void>((resolve) => (s.wake = resolve));
      s.wake = undefined;
      const next = s.queue.shift()!;
      if (next === null) return;
      try {
        yield next.chunk;
      } finally {
        // Asked for the next chunk (or stopped): this one is taken (replayed, or in the slice being filled).
        next.answer({ t: 'taken' });
      }
    }
  }
  s.replay = replayChunks(() => source(), {
    steward: steward.did,
    toSeq: m.toSeq,
    sliceSize: m.sliceSize ?? WORKER_SLICE,
    runner: async (job) => {
      s.slices++;
      return replaySlice(job);
    },
    parallel: 1,
    requestWindowS: m.windowS,
    requestHorizon,
    ...(from ? { from } : {}),
    ...(vouched !== undefined ? { vouched: true } : {}),
  });
  // A replay that fails answers the chunks waiting and every later message with its error.
  s.replay.catch((e: Error) => {
    s.failed = e;
    for (const x of s.queue.splice(0)) x?.answer(e);
  });
  return s;
}
