/**
 * The transparency log of one node's receipts (RFC 9162 §2.1 tree, C2SP tlog-checkpoint): the
 * Merkle tree over the receipt log (leaf i = the COSE_Sign1 bytes of receipt seq i), and
 * checkpoints signed by the node's steward key. See docs/tlog.md.
 *
 * Origin: a node's log is named `jcp/<steward did:key>` unless the operator gives another origin;
 * the checkpoint is signed under key name = origin (tlog-checkpoint: the key name SHOULD be the
 * origin). The steward's did:key is the log's identity already (node.json, every receipt's kid),
 * so the origin is stable for the life of the data folder and unique per steward.
 */
import { type Actor, bytesEqual, type Checkpoint, type Did, MerkleTree, signCheckpoint } from '../core/index.ts';
import { NodeFault, NodeFaultCodes } from './codes.ts';
import type { ReceiptLog } from './receiptlog.ts';

/** The default origin (and checkpoint key name) of the log of steward `steward`: `jcp/<did>`. */
export function originOf(steward: Did): string {
  return `jcp/${steward}`;
}

/** A source of receipts in seq order, in chunks of (seq, bytes): the live log, or archive segments then the log. */
export type ReceiptSource = (chunk: number, fromSeq: number) => AsyncGenerator<Array<[number, Uint8Array]>>;

/**
 * Builds the Merkle tree over the receipts of `source` (default: the live log), seq 0 first.
 * @throws NodeFault `log-damaged` when the seqs are not 0, 1, 2, … (a gap: a lost receipt, or
 *   receipts archived and no archive given), `log-corrupt` when LevelDB cannot read the log
 */
export async function buildLogTree(log: ReceiptLog, source?: ReceiptSource): Promise<MerkleTree> {
  const t = new MerkleTree();
  const chunks = source ? source(4096, 0) : log.receiptChunks(4096, 0);
  for await (const chunk of chunks) {
    for (const [seq, bytes] of chunk) {
      if (seq !== t.size) {
        throw new NodeFault(
          NodeFaultCodes.LOG_DAMAGED,
          t.size === 0 && seq > 0
            ? `the log starts at seq ${seq}, not 0: receipts 0..${seq - 1} are archived or lost (give the archive folder)`
            : `receipt ${t.size} is missing from the log (the next is ${seq}): the transparency log covers an unbroken run from seq 0`,
          log.location,
        );
      }
      t.append(bytes);
    }
  }
  return t;
}

/** A signed checkpoint of a node's log. */
export interface LogCheckpoint {
  /** The checkpoint body. */
  readonly checkpoint: Checkpoint;
  /** The C2SP signed note (checkpoint text, blank line, the steward's signature line). */
  readonly note: string;
  /** The tree it was taken from. */
  readonly tree: MerkleTree;
}

/**
 * Takes a checkpoint of the whole tree and signs it with the steward `steward` (its key must be
 * the log's steward; the caller checks that).
 * @throws JcpError `note-malformed` (an origin with a newline), `schema` (an origin that is not a key name)
 */
export function checkpointOf(tree: MerkleTree, steward: Actor, origin: string = originOf(steward.did)): LogCheckpoint {
  const checkpoint: Checkpoint = { origin, size: tree.size, root: tree.root(), extensions: [] };
  return { checkpoint, note: signCheckpoint(checkpoint, steward.key, origin), tree };
}

/**
 * Holds the log's tree to a checkpoint of it that others vouched for (a cosigned one): the log
 * must hold at least its receipts, and its first `checkpoint.size` receipts must hash to its root.
 * `label` names the checkpoint in the error (origin, size, cosigners).
 * @throws NodeFault `log-damaged` (the log is shorter than the checkpoint, or was rewritten below it)
 */
export function checkAgainstCheckpoint(tree: MerkleTree, checkpoint: Checkpoint, label: string): void {
  if (tree.size < checkpoint.size) {
    throw new NodeFault(
      NodeFaultCodes.LOG_DAMAGED,
      `the log holds ${tree.size} receipts, but ${label} says it held ${checkpoint.size}: receipts ${tree.size}..${checkpoint.size - 1} are lost`,
      label,
    );
  }
  if (!bytesEqual(tree.root(checkpoint.size), checkpoint.root)) {
    throw new NodeFault(
      NodeFaultCodes.LOG_DAMAGED,
      `the log's first ${checkpoint.size} receipts are not the ones ${label} vouches for: the log was rewritten`,
      label,
    );
  }
}
