/**
 * Fleet records (docs/tlog.md "Fleet records"): one signed statement for a whole team at a point
 * in time. The record is itself a C2SP tlog-checkpoint, signed as a signed note by the team's root
 * key, over an RFC 9162 Merkle tree whose leaves are the member nodes' latest signed checkpoints:
 *
 * - leaf i = the UTF-8 bytes of member i's checkpoint note as its node signed it (checkpoint
 *   text, blank line, the node's own signature line; cosignature lines dropped), members sorted
 *   by origin (byte order), one per origin;
 * - the record's text: origin `jcp-fleet/<root did>`, size = the number of members, the root,
 *   then one extension line `time <POSIX seconds>`;
 * - a member's membership proof is the RFC 9162 inclusion proof of its leaf.
 * Pure: no I/O.
 */
import { utf8 } from './bytes.ts';
import type { Did } from './didkey.ts';
import { parseDid } from './didkey.ts';
import { ErrorCodes, JcpError } from './errors.ts';
import type { SigningKey } from './ed25519.ts';
import { openCheckpoint, parseNote, type SignedLogCheckpoint, signCheckpoint } from './note.ts';
import { type Hash32, leafHash, MerkleTree, verifyInclusion } from './tlog.ts';

/** The fleet record's origin for a team under root `root`. */
export function fleetOrigin(root: Did): string {
  return `jcp-fleet/${root}`;
}

/** One member of a fleet record: a node's checkpoint and its place in the record's tree. */
export interface FleetMember {
  readonly steward: Did;
  readonly origin: string;
  readonly size: number;
  /** Root hash of the member's log, hex. */
  readonly root: string;
  /** The leaf: the member's checkpoint note as its node signed it. */
  readonly note: string;
  readonly index: number;
  /** RFC 9162 inclusion proof of the leaf in the record's tree, hex hashes. */
  readonly proof: readonly string[];
}

/** A fleet record: the signed statement and every member with its membership proof. */
export interface FleetRecord {
  readonly origin: string;
  readonly size: number;
  readonly root: string;
  readonly time_s: number;
  readonly note: string;
  readonly members: readonly FleetMember[];
}

/** The member note without cosignature lines: the text and the signature by the log's own key name. */
function ownNote(c: SignedLogCheckpoint): string {
  const own = c.parsed.signatures.filter((s) => s.name === c.origin);
  return `${c.parsed.text}\n${own.map((s) => `${s.line}\n`).join('')}`;
}

/**
 * Builds and signs the fleet record over the members' checkpoints (each verified under its
 * steward's key, origin `jcp/<did>` or the origin given), at `timeS` (POSIX seconds).
 * @throws JcpError `note-malformed` / `note-unverified` (a member checkpoint that does not verify),
 *   `schema` (two checkpoints of one origin, a time that is not whole seconds)
 */
export function buildFleetRecord(
  members: ReadonlyArray<{ readonly steward: Did; readonly note: string; readonly origin?: string }>,
  root: { readonly did: Did; readonly key: SigningKey },
  timeS: number,
): FleetRecord {
  if (!Number.isSafeInteger(timeS) || timeS < 0) throw new JcpError(ErrorCodes.SCHEMA, `fleet record time ${timeS}: not whole seconds`);
  const opened = members.map((m) => ({
    steward: m.steward,
    c: openCheckpoint(m.note, parseDid(m.steward), m.origin ?? `jcp/${m.steward}`),
  }));
  opened.sort((a, b) => (a.c.origin < b.c.origin ? -1 : a.c.origin > b.c.origin ? 1 : 0));
  for (let i = 1; i < opened.length; i++) {
    if (opened[i]!.c.origin === opened[i - 1]!.c.origin)
      throw new JcpError(ErrorCodes.SCHEMA, `two checkpoints of ${opened[i]!.c.origin} in one fleet record`);
  }
  const tree = new MerkleTree();
  const leaves = opened.map((o) => ownNote(o.c));
  for (const l of leaves) tree.append(utf8(l));
  const origin = fleetOrigin(root.did);
  const rootHash = tree.root();
  const note = signCheckpoint({ origin, size: tree.size, root: rootHash, extensions: [`time ${timeS}`] }, root.key, origin);
  return {
    origin,
    size: tree.size,
    root: Buffer.from(rootHash).toString('hex'),
    time_s: timeS,
    note,
    members: opened.map((o, index) => ({
      steward: o.steward,
      origin: o.c.origin,
      size: o.c.size,
      root: Buffer.from(o.c.root).toString('hex'),
      note: leaves[index]!,
      index,
      proof: tree.inclusionProof(index).map((h) => Buffer.from(h).toString('hex')),
    })),
  };
}

/**
 * Checks a fleet record (as {@link buildFleetRecord} returns it, e.g. parsed from JSON) under the
 * team root `root`: the record note's signature and origin, then for every member its checkpoint
 * under its steward's key and its membership proof against the record's root.
 * Returns the verified record checkpoint.
 * @throws JcpError `note-malformed`, `note-unverified` (the record or a member not signed by its key),
 *   `proof-invalid` (a membership proof that does not verify), `proof-invalid` also when the record's
 *   size, root or time disagree with its note, or a member's fields with its checkpoint)
 */
export function verifyFleetRecord(record: FleetRecord, root: Did): SignedLogCheckpoint {
  const c = openCheckpoint(record.note, parseDid(root), fleetOrigin(root));
  const rootHex = Buffer.from(c.root).toString('hex');
  if (
    c.size !== record.size ||
    rootHex !== record.root ||
    c.extensions[0] !== `time ${record.time_s}` ||
    record.members.length !== c.size
  ) {
    throw new JcpError(ErrorCodes.PROOF_INVALID, "the fleet record's size, root, time or member count disagree with its signed note");
  }
  for (const m of record.members) {
    const mc = openCheckpoint(m.note, parseDid(m.steward), m.origin);
    if (parseNote(m.note).signatures.some((s) => s.name !== mc.origin))
      throw new JcpError(ErrorCodes.PROOF_INVALID, `member ${m.origin}: a leaf carries only its log's own signature`);
    if (mc.size !== m.size || Buffer.from(mc.root).toString('hex') !== m.root)
      throw new JcpError(ErrorCodes.PROOF_INVALID, `member ${m.origin}: size or root disagree with its checkpoint`);
    const proof: Hash32[] = m.proof.map((h) => {
      if (!/^[0-9a-f]{64}$/.test(h))
        throw new JcpError(ErrorCodes.PROOF_INVALID, `member ${m.origin}: a proof hash that is not 64 hex digits`);
      return new Uint8Array(Buffer.from(h, 'hex'));
    });
    verifyInclusion(leafHash(utf8(m.note)), m.index, c.size, proof, c.root);
  }
  return c;
}
