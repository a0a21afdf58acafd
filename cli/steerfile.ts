/**
 * Checkpoint and amendment files for the CLI (spec §4.7; docs/steering.md "From the command line").
 *
 * - checkpoint file: `{"type": "jcp-checkpoint", "id", "cbor", "checkpoint"}`: `cbor` is the hex
 *   of the signed checkpoint's det-CBOR and is what is read back; `id` (the checkpoint id an
 *   amendment names) and `checkpoint` (the fields, for people) are checked against it.
 * - amendment file: `{"type": "jcp-amendment", "id", "cbor", "checkpoint_cbor", "amendment"}`:
 *   the signed amendment and the signed checkpoint it names (both hex det-CBOR), so a
 *   continuation can be issued from this one file.
 * Both are written with `wx` (never overwriting: they are evidence).
 */
import { writeFileSync } from 'node:fs';
import {
  amendmentId,
  checkpointId,
  contentId,
  type ContentId,
  decode,
  encode,
  ErrorCodes,
  fromHex,
  isContentId,
  JcpError,
  readSignedAmendment,
  readSignedCheckpoint,
  type SignedAmendment,
  signedAmendmentToCbor,
  type SignedCheckpoint,
  signedCheckpointToCbor,
  toHex,
} from '../core/index.ts';
import { viewDiffs } from '../client/index.ts';
import { ioError, IoError, READ_CAPS, readFileCapped } from '../io/index.ts';

/** The `type` tag of a checkpoint file. */
export const CHECKPOINT_FILE_TYPE = 'jcp-checkpoint';
/** The `type` tag of an amendment file. */
export const AMENDMENT_FILE_TYPE = 'jcp-amendment';

/** A signed checkpoint and an amendment file's parts. */
export interface AmendmentFile {
  readonly amendment: SignedAmendment;
  readonly checkpoint: SignedCheckpoint;
}

function writeJson(file: string, body: unknown, what: string): void {
  try {
    writeFileSync(file, `${JSON.stringify(body, null, 2)}\n`, { flag: 'wx' });
  } catch (e) {
    if ((e as { code?: string }).code === 'EEXIST')
      throw new JcpError(ErrorCodes.REFUSED, `${file} exists: refusing to overwrite ${what}`, { file });
    throw ioError(e, `write ${what}`, file);
  }
}

function readJson(file: string, type: string, what: string): Record<string, unknown> {
  let v: Record<string, unknown>;
  try {
    v = JSON.parse(readFileCapped(file, READ_CAPS.grantFile, what).toString('utf8')) as Record<string, unknown>;
  } catch (e) {
    if (e instanceof IoError) throw new JcpError(ErrorCodes.SCHEMA, e.message, { file }, { cause: e });
    throw new JcpError(ErrorCodes.SCHEMA, `${file}: not a readable JSON ${what}: ${(e as Error).message}`, { file }, { cause: e });
  }
  if (typeof v !== 'object' || v === null || v['type'] !== type)
    throw new JcpError(ErrorCodes.SCHEMA, `${file}: expected a {"type": "${type}", ...} file`, { file });
  return v;
}

/** The readable view of a signed checkpoint, as a checkpoint file carries it. */
function checkpointView(sc: SignedCheckpoint): Record<string, unknown> {
  const c = sc.body;
  return { grant_id: c.grant_id, state: c.state, ...(c.nonce !== undefined ? { nonce: toHex(c.nonce) } : {}) };
}

/** The readable view of a signed amendment, as an amendment file carries it. */
function amendmentView(sa: SignedAmendment): Record<string, unknown> {
  const a = sa.body;
  return {
    checkpoint: a.checkpoint,
    budget_uj: a.budget_uj.toString(),
    ...(a.instructions !== undefined ? { instructions: a.instructions } : {}),
    nonce: toHex(a.nonce),
  };
}

/**
 * A file's readable view (when present) must say what its signed bytes say, as for chain files.
 * @throws JcpError `chain-file-mismatch` naming the fields.
 */
export function checkFileView(file: string, field: string, view: unknown, signed: Record<string, unknown>): void {
  if (view === undefined) return;
  const diffs = viewDiffs(view, signed, field);
  if (diffs.length === 0) return;
  throw new JcpError(
    ErrorCodes.CHAIN_FILE_MISMATCH,
    `${file}: ${field} disagrees with its signed cbor at ${diffs.join(', ')}: the signed bytes are what counts; restore the view or drop it`,
    { file, fields: diffs.map((d) => d.split(' ')[0]) },
  );
}

/**
 * Writes a checkpoint file. @throws JcpError `refused` when the file exists; IoError `io`.
 */
export function writeCheckpointFile(file: string, sc: SignedCheckpoint): void {
  writeJson(
    file,
    {
      type: CHECKPOINT_FILE_TYPE,
      id: checkpointId(sc),
      cbor: toHex(encode(signedCheckpointToCbor(sc))),
      checkpoint: checkpointView(sc),
    },
    'a checkpoint file',
  );
}

/**
 * Reads a checkpoint file (at most 1 MiB).
 * @throws JcpError `schema` (unreadable, not a checkpoint file, id mismatch), `chain-file-mismatch`
 * (the `checkpoint` view disagrees with `cbor`) or the decoder's codes.
 */
export function readCheckpointFile(file: string): SignedCheckpoint {
  const v = readJson(file, CHECKPOINT_FILE_TYPE, 'checkpoint file');
  const sc = readSignedCheckpoint(decode(fromHex(String(v['cbor']), undefined, 'checkpoint.cbor')), 'checkpoint');
  if (v['id'] !== undefined && v['id'] !== checkpointId(sc))
    throw new JcpError(ErrorCodes.SCHEMA, `${file}: id does not match its cbor`, { file });
  checkFileView(file, 'checkpoint', v['checkpoint'], checkpointView(sc));
  return sc;
}

/** Writes an amendment file (the amendment and the checkpoint it names). @throws like {@link writeCheckpointFile}. */
export function writeAmendmentFile(file: string, f: AmendmentFile): void {
  writeJson(
    file,
    {
      type: AMENDMENT_FILE_TYPE,
      id: amendmentId(f.amendment),
      cbor: toHex(encode(signedAmendmentToCbor(f.amendment))),
      checkpoint_cbor: toHex(encode(signedCheckpointToCbor(f.checkpoint))),
      amendment: amendmentView(f.amendment),
    },
    'an amendment file',
  );
}

/** Reads an amendment file (at most 1 MiB). @throws like {@link readCheckpointFile}. */
export function readAmendmentFile(file: string): AmendmentFile {
  const v = readJson(file, AMENDMENT_FILE_TYPE, 'amendment file');
  const amendment = readSignedAmendment(decode(fromHex(String(v['cbor']), undefined, 'amendment.cbor')), 'amendment');
  const checkpoint = readSignedCheckpoint(
    decode(fromHex(String(v['checkpoint_cbor']), undefined, 'amendment.checkpoint_cbor')),
    'checkpoint',
  );
  if (v['id'] !== undefined && v['id'] !== amendmentId(amendment))
    throw new JcpError(ErrorCodes.SCHEMA, `${file}: id does not match its cbor`, { file });
  checkFileView(file, 'amendment', v['amendment'], amendmentView(amendment));
  return { amendment, checkpoint };
}

/**
 * A content id given directly, or the content id of a file's bytes (as a CBOR byte string, the
 * payload-hash convention of §6): how `--state` and `--instructions` name a commitment.
 * @throws IoError `io` when the file cannot be read (at most 64 MiB).
 */
export function commitmentArg(v: string, what: string): ContentId {
  if (isContentId(v)) return v;
  try {
    return contentId(new Uint8Array(readFileCapped(v, READ_CAPS.messageFile, what)));
  } catch (e) {
    if (e instanceof IoError) throw e;
    throw ioError(e, `read ${what}`, v);
  }
}
