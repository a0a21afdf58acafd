/**
 * Damage the operator accepted (`jcp node start --accept-damaged-log`), kept in
 * `<data-dir>/accepted.json` so that later starts stop only on damage nobody has accepted yet.
 *
 * A damaged log stays damaged: the receipts that fail verification, the continuity breaks and the
 * seqs lost from the tail remain evidence, and `jcp receipts verify` keeps reporting them. What
 * the record changes is the start: once the operator accepted a problem, the node starts over it
 * without the flag (the flag would otherwise also accept any later damage unseen). Problems are
 * identified by seq and code; a `seq-gap` is also covered when every seq it misses lies in an
 * accepted lost range (the tail lost before an accepted start leaves exactly such a gap once the
 * node writes its next receipt past the lost seqs).
 *
 * File: `{"format": "jcp-accepted/1", "problems": [{"seq", "code", "accepted_at_s"}], "lost":
 * [[from, to]]}` (ranges inclusive), written to a temporary file, fsync'd and renamed.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { readFileCapped, writeFileDurably } from '../io/index.ts';
import { NodeFault, NodeFaultCodes } from './codes.ts';

/** File name of the accepted-damage record inside a node data folder. */
export const ACCEPTED_FILE = 'accepted.json';
const FORMAT = 'jcp-accepted/1';

/** One problem found at boot: a receipt that fails verification, a continuity break, or the head mark's. */
export interface BootProblem {
  readonly seq: number;
  readonly code: string;
  /** For a `seq-gap`: the first seq the log expected (the gap is `expectedSeq ..= seq - 1`). */
  readonly expectedSeq?: number;
}

/** What the operator has accepted so far. */
export interface AcceptedDamage {
  readonly problems: ReadonlyArray<{ readonly seq: number; readonly code: string; readonly accepted_at_s: number }>;
  /** Seq ranges (inclusive) lost from the log's tail and accepted. */
  readonly lost: ReadonlyArray<readonly [number, number]>;
}

const NONE: AcceptedDamage = { problems: [], lost: [] };

/**
 * Reads the record of `dataDir` (none: nothing accepted).
 * @throws NodeFault `log-damaged` when the file exists but is not a record this node wrote.
 */
export function readAccepted(dataDir: string): AcceptedDamage {
  const file = path.join(dataDir, ACCEPTED_FILE);
  if (!existsSync(file)) return NONE;
  try {
    const v = JSON.parse(readFileCapped(file, 16 << 20, 'accepted-damage record').toString('utf8')) as Partial<AcceptedDamage> & {
      format?: unknown;
    };
    const ok =
      v.format === FORMAT &&
      Array.isArray(v.problems) &&
      v.problems.every((p) => Number.isSafeInteger(p?.seq) && typeof p?.code === 'string') &&
      Array.isArray(v.lost) &&
      v.lost.every((r) => Array.isArray(r) && r.length === 2 && r.every((x) => Number.isSafeInteger(x)));
    if (!ok) throw new Error(`not a ${FORMAT} record`);
    return { problems: v.problems!, lost: v.lost! };
  } catch (e) {
    throw new NodeFault(
      NodeFaultCodes.LOG_DAMAGED,
      `${file}: the record of accepted damage is unreadable (${(e as Error).message}); move it away and start with --accept-damaged-log to accept the log again`,
      file,
      { cause: e },
    );
  }
}

/** The problems `accepted` does not cover (see the module docs), in the order given. */
export function unaccepted(problems: readonly BootProblem[], accepted: AcceptedDamage): BootProblem[] {
  const known = new Set(accepted.problems.map((p) => `${p.seq} ${p.code}`));
  const inLost = (from: number, to: number) => accepted.lost.some(([a, b]) => a <= from && to <= b);
  return problems.filter((p) => {
    if (known.has(`${p.seq} ${p.code}`)) return false;
    if (p.code === 'seq-gap' && p.expectedSeq !== undefined && p.expectedSeq <= p.seq - 1 && inLost(p.expectedSeq, p.seq - 1)) return false;
    return true;
  });
}

/**
 * Adds `problems` (and the lost range, if any) to the record of `dataDir`, durably.
 * @throws NodeFault `log-corrupt` when the record cannot be written.
 */
export function recordAccepted(
  dataDir: string,
  accepted: AcceptedDamage,
  problems: readonly BootProblem[],
  lost: readonly [number, number] | undefined,
  nowS: number,
): void {
  const next = {
    format: FORMAT,
    problems: [...accepted.problems, ...problems.map((p) => ({ seq: p.seq, code: p.code, accepted_at_s: nowS }))],
    lost: lost === undefined ? accepted.lost : [...accepted.lost, lost],
  };
  const file = path.join(dataDir, ACCEPTED_FILE);
  try {
    writeFileDurably(file, Buffer.from(`${JSON.stringify(next, null, 2)}\n`), 0o644);
  } catch (e) {
    throw new NodeFault(NodeFaultCodes.LOG_CORRUPT, `${file}: cannot record the accepted damage: ${(e as Error).message}`, file, {
      cause: e,
    });
  }
}
