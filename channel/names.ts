/**
 * Stream and subject names of the cluster (docs/design.md "Budget channels: the bound we prove"; docs/cluster.md):
 *
 * - statements: stream `<STREAM>_STATEMENTS`, subject `<root>.stmt.<grant id>.<point hash>`, one
 *   message kept per subject (`max_msgs_per_subject = 1`): the latest signed statement of each
 *   (grant, point);
 *   The same stream keeps each channel grant under `<root>.grant.<grant id>` (one message), so an
 *   auditor who knows only the id can read the budget, and each point's close record of a revoked
 *   shard under `<root>.close.<grant id>.<point hash>` (shards/close.ts);
 * - revocations: stream `<STREAM>_REVOCATIONS`, subject `<root>.rev.<grant id>`, every message kept.
 *
 * The point hash is the content id of the point's did:key text (`blake3(utf8(did))`, 64 hex), so a
 * subject token never carries the did's mixed-case base58 and always has one length. Tests use a
 * unique root per run so their streams never collide with the cluster's.
 */
import { type ContentId, contentIdOfBytes, type Did, ErrorCodes, isContentId, JcpError, utf8 } from '../core/index.ts';

/** The names one cluster uses on NATS. */
export interface ChannelNames {
  /** Subject root, e.g. `jcp`. */
  readonly root: string;
  /** The statement stream's name, e.g. `JCP_STATEMENTS`. */
  readonly statementStream: string;
  /** The revocation stream's name, e.g. `JCP_REVOCATIONS`. */
  readonly revocationStream: string;
}

const ROOT_RE = /^[a-z][a-z0-9_-]{0,31}$/;

/**
 * The names for subject root `root` (default `jcp`): streams `<ROOT>_STATEMENTS` and
 * `<ROOT>_REVOCATIONS`, subjects under `<root>.stmt.>` and `<root>.rev.>`.
 * @throws JcpError `schema` when `root` is not 1–32 lowercase letters, digits, `_` or `-`.
 */
export function channelNames(root = 'jcp'): ChannelNames {
  if (!ROOT_RE.test(root)) {
    throw new JcpError(ErrorCodes.SCHEMA, `subject root ${JSON.stringify(root)}: expected 1-32 of [a-z0-9_-], a letter first`);
  }
  const upper = root.toUpperCase().replaceAll('-', '_');
  return { root, statementStream: `${upper}_STATEMENTS`, revocationStream: `${upper}_REVOCATIONS` };
}

/** The subject token for a point: the content id of its did:key text. */
export function pointHash(point: Did): ContentId {
  return contentIdOfBytes(utf8(point));
}

/** `<root>.stmt.<grant>.<point hash>`: where `point` publishes its statements on `grantId`. */
export function statementSubject(n: ChannelNames, grantId: ContentId, point: Did): string {
  return `${n.root}.stmt.${cid(grantId)}.${pointHash(point)}`;
}

/** `<root>.stmt.<grant>.*`: every point's statements on `grantId`. */
export function statementFilter(n: ChannelNames, grantId: ContentId): string {
  return `${n.root}.stmt.${cid(grantId)}.*`;
}

/** `<root>.grant.<grant>`: where the channel grant itself is kept (one message). */
export function grantSubject(n: ChannelNames, grantId: ContentId): string {
  return `${n.root}.grant.${cid(grantId)}`;
}

/** `<root>.close.<grant>.<point hash>`: a point's close record of a revoked grant (shards). */
export function closeSubject(n: ChannelNames, grantId: ContentId, point: Did): string {
  return `${n.root}.close.${cid(grantId)}.${pointHash(point)}`;
}

/** `<root>.close.<grant>.*`: every point's close record of `grantId`. */
export function closeFilter(n: ChannelNames, grantId: ContentId): string {
  return `${n.root}.close.${cid(grantId)}.*`;
}

/** The statement stream's subjects: statements, channel grants and shard close records. */
export function statementStreamSubjects(n: ChannelNames): string[] {
  return [`${n.root}.stmt.>`, `${n.root}.grant.>`, `${n.root}.close.>`];
}

/** `<root>.rev.<grant>`: where revocations of `grantId` are published. */
export function revocationSubject(n: ChannelNames, grantId: ContentId): string {
  return `${n.root}.rev.${cid(grantId)}`;
}

/** `<root>.rev.>`: the revocation stream's subjects. */
export function revocationStreamSubjects(n: ChannelNames): string {
  return `${n.root}.rev.>`;
}

/** The last token of a statement subject (the point hash), or undefined for another subject. */
export function pointHashOfSubject(n: ChannelNames, subject: string): string | undefined {
  const parts = subject.split('.');
  if (parts.length !== 4 || parts[0] !== n.root || parts[1] !== 'stmt') return undefined;
  return parts[3];
}

function cid(id: ContentId): ContentId {
  if (!isContentId(id)) throw new JcpError(ErrorCodes.SCHEMA, 'grant id: expected a content id (64 lowercase hex chars)');
  return id;
}
