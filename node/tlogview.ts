/**
 * What an audit view of the transparency logs needs (docs/tlog.md "For the console"), read-only:
 * a node's latest checkpoint (from its data folder, or from its `/checkpoint` on the metrics
 * port while it runs), who cosigned it, and whether two checkpoints of one log are consistent
 * (with both as evidence when they are not). Every checkpoint returned here has verified under
 * its log's steward key; nothing unverified is reported as a fact.
 */
import {
  type Did,
  type Hash32,
  isJcpError,
  openCheckpoint,
  parseDid,
  type SignedLogCheckpoint,
  verifyConsistency,
  verifyCosignature,
} from '../core/index.ts';
import { readDataMeta, ReceiptLog } from './receiptlog.ts';
import { buildLogTree, originOf } from './tlog.ts';

/** A node's checkpoint as an audit view shows it. */
export interface CheckpointView {
  /** The log's origin (`jcp/<steward did>` by default). */
  readonly origin: string;
  /** The steward whose key signed it. */
  readonly steward: Did;
  /** Tree size (receipts). */
  readonly size: number;
  /** Root hash, hex. */
  readonly root: string;
  /** The signed note, as served (cosignature lines included). */
  readonly note: string;
  /** Cosigners (of those asked about) whose cosignature verifies over this checkpoint. */
  readonly cosigners: ReadonlyArray<{ readonly name: string; readonly timeS: number }>;
  /** Cosigners asked about with a line on the note that does not verify (another checkpoint, another key), with the reason. */
  readonly badCosignatures: ReadonlyArray<{ readonly name: string; readonly why: string }>;
}

/** A cosigner (witness) an auditor trusts: key name and did:key. */
export interface Witness {
  readonly name: string;
  readonly did: Did;
}

function view(c: SignedLogCheckpoint, steward: Did, witnesses: readonly Witness[]): CheckpointView {
  const cosigners: Array<{ name: string; timeS: number }> = [];
  const bad: Array<{ name: string; why: string }> = [];
  for (const w of witnesses) {
    if (!c.parsed.signatures.some((s) => s.name === w.name)) continue;
    try {
      cosigners.push({ name: w.name, timeS: verifyCosignature(c.note, w.name, parseDid(w.did)).timeS });
    } catch (e) {
      if (!isJcpError(e)) throw e;
      bad.push({ name: w.name, why: e.message });
    }
  }
  return {
    origin: c.origin,
    steward,
    size: c.size,
    root: Buffer.from(c.root).toString('hex'),
    note: c.note,
    cosigners,
    badCosignatures: bad,
  };
}

/**
 * Verifies a signed checkpoint note of steward `steward`'s log and reports its cosigners.
 * @throws JcpError `note-malformed`, `note-unverified` (another key, another origin, altered)
 */
export function checkpointView(
  note: string,
  steward: Did,
  witnesses: readonly Witness[] = [],
  origin: string = originOf(steward),
): CheckpointView {
  return view(openCheckpoint(note, parseDid(steward), origin), steward, witnesses);
}

/**
 * Fetches `/checkpoint` from a running node's metrics address (`http://host:port`) and verifies it.
 * @throws Error when the fetch fails or is not 200; JcpError as {@link checkpointView}
 */
export async function fetchCheckpointView(baseUrl: string, steward: Did, witnesses: readonly Witness[] = []): Promise<CheckpointView> {
  const r = await fetch(new URL('/checkpoint', baseUrl));
  const text = await r.text();
  if (r.status !== 200) throw new Error(`${baseUrl}/checkpoint: HTTP ${r.status}: ${text.slice(0, 200)}`);
  return checkpointView(text, steward, witnesses);
}

/**
 * The root and size of the log in a (stopped) node's data folder, computed from its receipts
 * (an unsigned view: the console holds no steward key). Opening takes the LevelDB lock, so a
 * running node's folder is refused (`log-locked`): use {@link fetchCheckpointView} then.
 * @throws NodeFault `log-locked`, `log-missing`, `log-corrupt`, `log-damaged` (a gap, or an archived log)
 */
export async function dataDirTree(dataDir: string): Promise<{ origin: string; steward: Did; size: number; root: string } | undefined> {
  const meta = readDataMeta(dataDir);
  if (meta === undefined) return undefined;
  const log = await ReceiptLog.open(dataDir, { steward: meta.steward, mustExist: true, nowS: 0 });
  try {
    const t = await buildLogTree(log);
    return { origin: originOf(meta.steward), steward: meta.steward, size: t.size, root: Buffer.from(t.root()).toString('hex') };
  } finally {
    await log.close();
  }
}

/** The verdict of {@link compareCheckpoints}. */
export type Consistency =
  | { readonly consistent: true }
  | { readonly consistent: false; readonly why: string; readonly evidence: readonly [older: string, newer: string] };

/**
 * Whether `newer` extends `older` (the same log, checked with the RFC 9162 consistency proof
 * `proof` from older.size to newer.size). Not consistent — a rewritten or forked log — comes back
 * with both signed notes as evidence. Both must already be verified views of the same origin.
 */
export function compareCheckpoints(older: CheckpointView, newer: CheckpointView, proof: readonly Hash32[]): Consistency {
  const evidence = [older.note, newer.note] as const;
  if (older.origin !== newer.origin) return { consistent: false, why: `two logs: ${older.origin} and ${newer.origin}`, evidence };
  if (older.size > newer.size) return { consistent: false, why: `the log shrank from ${older.size} to ${newer.size} receipts`, evidence };
  try {
    verifyConsistency(older.size, newer.size, proof, Buffer.from(older.root, 'hex'), Buffer.from(newer.root, 'hex'));
    return { consistent: true };
  } catch (e) {
    if (!isJcpError(e)) throw e;
    return { consistent: false, why: e.message, evidence };
  }
}
