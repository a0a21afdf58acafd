/**
 * C2SP signed notes, tlog checkpoints and tlog cosignatures (c2sp.org/signed-note@v1.0.0,
 * c2sp.org/tlog-checkpoint@v1.0.0, c2sp.org/tlog-cosignature@v1.0.0), with Ed25519 keys only.
 *
 * A signed note is its text (UTF-8, ending in a newline), a blank line, and one or more signature
 * lines `— <key name> base64(key id ‖ signature)` (U+2014, a space). The key id is the first 4
 * bytes of SHA-256(name ‖ 0x0A ‖ type ‖ public key): type 0x01 for an Ed25519 note signature (the
 * signature is over the note text), type 0x04 for an Ed25519 cosignature, whose "signature" is a
 * `timestamped_signature` (u64 big-endian POSIX seconds ‖ 64-byte Ed25519 signature) over
 * `cosignature/v1\ntime <seconds>\n` ‖ the checkpoint text.
 *
 * A checkpoint's text is `<origin>\n<tree size>\n<base64 root hash>\n` then optional extension
 * lines. Pure: no I/O.
 */
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesEqual, concat, utf8 } from './bytes.ts';
import { type PublicKey, type SigningKey, sign, verify } from './ed25519.ts';
import { ErrorCodes, JcpError } from './errors.ts';
import type { Hash32 } from './tlog.ts';

/** Signature type byte of an Ed25519 note signature (signed-note §"Signature types"). */
export const SIG_ED25519 = 0x01;
/** Signature type byte of an Ed25519 cosignature/v1 (tlog-cosignature §"Format"). */
export const SIG_COSIGNATURE_V1 = 0x04;

const DASH = '\u2014 ';
const dec = new TextDecoder('utf-8', { fatal: true });

function malformed(why: string): never {
  throw new JcpError(ErrorCodes.NOTE_MALFORMED, why);
}

/** True when `name` is a usable key name: non-empty, no whitespace, no `+` (signed-note). */
export function isKeyName(name: string): boolean {
  return name.length > 0 && !/[\s+]/u.test(name);
}

/**
 * The 4-byte key id of signed-note: SHA-256(name ‖ 0x0A ‖ `type` ‖ `publicKey`)[:4].
 * @throws JcpError `schema` for a name that is not a key name
 */
export function keyId(name: string, type: number, publicKey: Uint8Array): Uint8Array {
  if (!isKeyName(name)) throw new JcpError(ErrorCodes.SCHEMA, `key name ${JSON.stringify(name)}: empty, or has a space or '+'`);
  return sha256(concat(utf8(name), Uint8Array.of(0x0a, type), publicKey)).subarray(0, 4);
}

/** One signature line of a note, decoded (not verified). */
export interface NoteSignature {
  /** The key name. */
  readonly name: string;
  /** The 4-byte key id. */
  readonly keyId: Uint8Array;
  /** The bytes after the key id (an Ed25519 signature, or a timestamped_signature). */
  readonly sig: Uint8Array;
  /** The line as written (without its newline). */
  readonly line: string;
}

/** A signed note split into its text and signature lines. */
export interface Note {
  /** The note text, with its final newline. */
  readonly text: string;
  /** Its signature lines, in order. */
  readonly signatures: readonly NoteSignature[];
}

function b64decode(s: string, what: string): Uint8Array {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(s) || s.length % 4 !== 0) malformed(`${what}: not standard base64`);
  return new Uint8Array(Buffer.from(s, 'base64'));
}

function b64(b: Uint8Array): string {
  return Buffer.from(b).toString('base64');
}

/**
 * Parses a signed note (signed-note §"Format"): text, a blank line, signature lines.
 * @throws JcpError `note-malformed` (not UTF-8, a control character, no signature, a bad line)
 */
export function parseNote(note: string | Uint8Array): Note {
  let s: string;
  try {
    s = typeof note === 'string' ? note : dec.decode(note);
  } catch {
    malformed('the note is not UTF-8');
  }
  if (/[\u0000-\u0009\u000b-\u001f\u007f]/.test(s)) malformed('the note holds a control character other than newline');
  const cut = s.lastIndexOf('\n\n');
  if (cut < 0) malformed('the note has no blank line before its signatures');
  const text = s.slice(0, cut + 1);
  const sigPart = s.slice(cut + 2);
  if (!sigPart.endsWith('\n')) malformed('the last signature line does not end in a newline');
  const signatures: NoteSignature[] = [];
  for (const line of sigPart.slice(0, -1).split('\n')) {
    if (!line.startsWith(DASH)) malformed(`not a signature line: ${JSON.stringify(line.slice(0, 80))}`);
    const rest = line.slice(DASH.length);
    const sp = rest.lastIndexOf(' ');
    if (sp <= 0) malformed(`a signature line without a key name: ${JSON.stringify(line.slice(0, 80))}`);
    const name = rest.slice(0, sp);
    if (!isKeyName(name)) malformed(`a signature line with a bad key name: ${JSON.stringify(name.slice(0, 80))}`);
    const raw = b64decode(rest.slice(sp + 1), `signature of ${name}`);
    if (raw.length < 5) malformed(`the signature of ${name} is too short`);
    signatures.push({ name, keyId: raw.slice(0, 4), sig: raw.slice(4), line });
  }
  if (signatures.length === 0) malformed('the note has no signature');
  return { text, signatures };
}

/** The signature line (no newline) of `sig` by key `name` with key id `id`. */
function sigLine(name: string, id: Uint8Array, sig: Uint8Array): string {
  return `${DASH}${name} ${b64(concat(id, sig))}`;
}

/**
 * Signs note `text` (ending in a newline) with Ed25519 key `key` under key name `name`; the other
 * signature lines in `keep` are kept after ours. Returns the whole note.
 * @throws JcpError `note-malformed` (text empty or not ending in a newline), `schema` (bad name)
 */
export function signNote(text: string, name: string, key: SigningKey, keep: readonly NoteSignature[] = []): string {
  if (!text.endsWith('\n') || text.length < 2) malformed('a note text is non-empty and ends in a newline');
  const id = keyId(name, SIG_ED25519, key.publicKey.bytes);
  const line = sigLine(name, id, sign(key, utf8(text)));
  return `${text}\n${[line, ...keep.map((k) => k.line)].join('\n')}\n`;
}

/**
 * Checks that `note` carries a valid Ed25519 note signature by (`name`, `pub`); other signature
 * lines are ignored, as signed-note says. Returns the parsed note.
 * @throws JcpError `note-malformed`, `note-unverified` (no line of that name and key id, or its
 *   signature does not verify: signed by another key, or the text was altered)
 */
export function verifyNote(note: string | Uint8Array, name: string, pub: PublicKey): Note {
  const n = parseNote(note);
  const id = keyId(name, SIG_ED25519, pub.bytes);
  const mine = n.signatures.filter((s) => s.name === name && bytesEqual(s.keyId, id));
  if (mine.length === 0) {
    throw new JcpError(
      ErrorCodes.NOTE_UNVERIFIED,
      `the note has no signature by ${name} with this key (key id ${Buffer.from(id).toString('hex')}): signed by another key?`,
    );
  }
  if (!mine.some((s) => s.sig.length === 64 && verify(pub, utf8(n.text), s.sig))) {
    throw new JcpError(ErrorCodes.NOTE_UNVERIFIED, `the signature by ${name} does not verify over this note's text (altered?)`);
  }
  return n;
}

/** A C2SP tlog-checkpoint body. */
export interface Checkpoint {
  /** The log's origin line (a unique name of the log). */
  readonly origin: string;
  /** Number of leaves (receipts). */
  readonly size: number;
  /** RFC 9162 root hash of the tree of `size` leaves. */
  readonly root: Hash32;
  /** Extension lines (each non-empty), after the root. */
  readonly extensions: readonly string[];
}

/**
 * The checkpoint text (tlog-checkpoint §"Note text"): origin, decimal size, base64 root, extensions.
 * @throws JcpError `note-malformed` (an empty origin or extension line, a newline inside one, a bad size or root)
 */
export function checkpointText(c: Checkpoint): string {
  if (c.origin.length === 0 || c.origin.includes('\n')) malformed('a checkpoint origin is one non-empty line');
  if (!Number.isSafeInteger(c.size) || c.size < 0) malformed(`tree size ${c.size}: not a non-negative integer`);
  if (c.root.length !== 32) malformed(`a root hash is 32 bytes, not ${c.root.length}`);
  for (const e of c.extensions) if (e.length === 0 || e.includes('\n')) malformed('a checkpoint extension is one non-empty line');
  return [c.origin, String(c.size), b64(c.root), ...c.extensions].map((l) => `${l}\n`).join('');
}

/**
 * Parses a checkpoint's text (the note text, with its final newline).
 * @throws JcpError `note-malformed` (fewer than 3 lines, a size with a leading zero or sign, a root not 32 bytes of base64)
 */
export function parseCheckpointText(text: string): Checkpoint {
  if (!text.endsWith('\n')) malformed('a checkpoint ends in a newline');
  const lines = text.slice(0, -1).split('\n');
  if (lines.length < 3) malformed('a checkpoint has an origin, a tree size and a root hash line');
  const [origin, size, root, ...extensions] = lines as [string, string, string, ...string[]];
  if (origin.length === 0) malformed('the checkpoint origin is empty');
  if (!/^(0|[1-9][0-9]{0,15})$/.test(size) || !Number.isSafeInteger(Number(size)))
    malformed(`tree size ${JSON.stringify(size.slice(0, 40))}: not a decimal without leading zeros`);
  const r = b64decode(root, 'root hash');
  if (r.length !== 32) malformed(`the root hash is ${r.length} bytes, not 32`);
  for (const e of extensions) if (e.length === 0) malformed('an empty checkpoint extension line');
  return { origin, size: Number(size), root: r, extensions };
}

/** A checkpoint signed as a note by its log. */
export interface SignedLogCheckpoint extends Checkpoint {
  /** The whole signed note. */
  readonly note: string;
  /** The parsed note (text and every signature line, cosignatures included). */
  readonly parsed: Note;
}

/**
 * Signs checkpoint `c` with the log's key under key name `name` (by tlog-checkpoint, the origin).
 * @throws JcpError `note-malformed`, `schema`
 */
export function signCheckpoint(c: Checkpoint, key: SigningKey, name: string = c.origin): string {
  return signNote(checkpointText(c), name, key);
}

/**
 * Verifies a signed checkpoint under the log's key (`name` defaults to the expected `origin`) and
 * parses it. When `origin` is given, the checkpoint must name it.
 * @throws JcpError `note-malformed`, `note-unverified` (another key, altered text, or another origin)
 */
export function openCheckpoint(note: string | Uint8Array, pub: PublicKey, origin?: string, name?: string): SignedLogCheckpoint {
  const pre = parseNote(note);
  const c = parseCheckpointText(pre.text);
  if (origin !== undefined && c.origin !== origin)
    throw new JcpError(ErrorCodes.NOTE_UNVERIFIED, `the checkpoint is of log ${c.origin}, not ${origin}`);
  const parsed = verifyNote(note, name ?? origin ?? c.origin, pub);
  return { ...c, note: typeof note === 'string' ? note : dec.decode(note), parsed };
}

/** The message an Ed25519 cosignature/v1 signs (tlog-cosignature §"Ed25519 signed message"). */
export function cosignedMessage(checkpoint: string, timeS: number): Uint8Array {
  return utf8(`cosignature/v1\ntime ${timeS}\n${checkpoint}`);
}

/**
 * Cosigns the checkpoint text `checkpoint` (the note text, final newline included) as cosigner
 * `name` at POSIX time `timeS` (seconds). Returns the signature line (no newline), to add to the
 * checkpoint note with {@link addSignatureLines}.
 * @throws JcpError `schema` (bad name, or a time that is not an integer in 0..2^53)
 */
export function cosign(checkpoint: string, name: string, key: SigningKey, timeS: number): string {
  if (!Number.isSafeInteger(timeS) || timeS < 0)
    throw new JcpError(ErrorCodes.SCHEMA, `cosignature time ${timeS}: not a non-negative integer of seconds`);
  const id = keyId(name, SIG_COSIGNATURE_V1, key.publicKey.bytes);
  const ts = new Uint8Array(8);
  new DataView(ts.buffer).setBigUint64(0, BigInt(timeS));
  return sigLine(name, id, concat(ts, sign(key, cosignedMessage(checkpoint, timeS))));
}

/** A verified cosignature. */
export interface Cosignature {
  /** The cosigner's key name. */
  readonly name: string;
  /** When the cosigner signed (POSIX seconds). */
  readonly timeS: number;
  /** The signature line. */
  readonly line: string;
}

/**
 * Finds and verifies the cosignature of (`name`, `pub`) on the signed checkpoint `note` (or on
 * the bare checkpoint text `text` given with a separate signature line).
 * @throws JcpError `note-malformed`, `cosignature-invalid` (no line of that cosigner and key id,
 *   or its signature is over a different checkpoint)
 */
export function verifyCosignature(note: string, name: string, pub: PublicKey): Cosignature {
  const n = parseNote(note);
  const id = keyId(name, SIG_COSIGNATURE_V1, pub.bytes);
  const lines = n.signatures.filter((s) => s.name === name && bytesEqual(s.keyId, id));
  if (lines.length === 0) throw new JcpError(ErrorCodes.COSIGNATURE_INVALID, `the checkpoint has no cosignature by ${name} with this key`);
  for (const s of lines) {
    if (s.sig.length !== 72) continue;
    const t = new DataView(s.sig.buffer, s.sig.byteOffset, 8).getBigUint64(0);
    if (t > BigInt(Number.MAX_SAFE_INTEGER)) continue;
    const timeS = Number(t);
    if (verify(pub, cosignedMessage(n.text, timeS), s.sig.subarray(8))) return { name, timeS, line: s.line };
  }
  throw new JcpError(
    ErrorCodes.COSIGNATURE_INVALID,
    `the cosignature by ${name} is not over this checkpoint (a different checkpoint, or altered)`,
  );
}

/**
 * Adds signature lines (each without its newline) to a signed note, after the ones it has; a
 * line already present is not added twice.
 * @throws JcpError `note-malformed`
 */
export function addSignatureLines(note: string, lines: readonly string[]): string {
  const n = parseNote(note);
  const have = new Set(n.signatures.map((s) => s.line));
  const all = [...n.signatures.map((s) => s.line), ...lines.filter((l) => !have.has(l))];
  for (const l of lines) parseNote(`x\n\n${l}\n`);
  return `${n.text}\n${all.join('\n')}\n`;
}
