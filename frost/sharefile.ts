/**
 * Share and identity files (spec §2.2: a share is readable only by its owner). A file is one
 * canonical CBOR map, written atomically (temp file, fsync, rename, fsync of the folder) with
 * mode 0600, and refused on read if group or others may access it.
 *
 * - Every file carries `digest`, BLAKE3 over all its other fields, so a damaged or edited file is
 *   refused as `frost-file-tampered` before anything else is tried.
 * - Plain: `{format, meta, body, digest}`; a share body is also checked algebraically (its signing
 *   share must match its verifying share, the verifying shares the commitment, the roster its
 *   identity), so an edit that recomputes the digest is refused too.
 * - Sealed with a passphrase: `{format, meta, kdf, nonce, ciphertext, digest}`: scrypt
 *   (N = 2^log_n, r, p; salt 16 bytes) derives 48 bytes, an AES-256-GCM key and a 16-byte
 *   passphrase check; the AEAD's associated data is `{format, meta, kdf, nonce}`. A wrong check
 *   is a wrong passphrase (`frost-wrong-passphrase`); a failing tag is a tampered file.
 *
 * `meta` is public (the group did and identifier of a share) so a keystore can be listed
 * without its passphrase; it is bound by the digest or the AEAD.
 */
import { randomBytes, scryptSync, createCipheriv, createDecipheriv, timingSafeEqual } from 'node:crypto';
import { type Stats, statSync } from 'node:fs';
import {
  type Actor,
  actorFromSeed,
  asBytes,
  asDid,
  asObj,
  asSafeUint,
  asText,
  blake3,
  bytesEqual,
  decode,
  type Did,
  encode,
  type Obj,
} from '../core/index.ts';
import { ioError, READ_CAPS, readFileCapped, writeFileDurably } from '../io/index.ts';
import { ed25519 } from '@noble/curves/ed25519.js';
import { FrostError, FrostErrorCodes } from './errors.ts';
import { checkGroup, Fn, type GroupPublic, groupDid, groupToCbor, readGroup, type ShareSecret } from './group.ts';

/** File format tags. */
export const SHARE_FORMAT = 'jcp-frost-share/1';
export const IDENTITY_FORMAT = 'jcp-frost-identity/1';

/** scrypt cost defaults for sealing: N = 2^15, r = 8, p = 1 (32 MiB, RFC 7914 interactive use). */
export const DEFAULT_LOG_N = 15;
const MIN_LOG_N = 10;
const MAX_LOG_N = 20;

/** Options when writing a secret file. */
export interface SealOpts {
  /** Seal with this passphrase (scrypt + AES-256-GCM); plain file when absent. */
  readonly passphrase?: string;
  /** scrypt cost exponent (10..20); default {@link DEFAULT_LOG_N}. */
  readonly logN?: number;
}

function scryptKey(passphrase: string, salt: Uint8Array, logN: number, r: number, p: number): { key: Buffer; check: Buffer } {
  const out = scryptSync(passphrase.normalize('NFC'), salt, 48, { N: 2 ** logN, r, p, maxmem: 256 * 2 ** logN * r + 1024 * 1024 });
  return { key: out.subarray(0, 32), check: out.subarray(32) };
}

/**
 * Writes `bytes` to `path` atomically with mode 0600: io/'s `writeFileDurably` (exclusive temp
 * file, fsync, rename, fsync of the folder). @throws IoError `io` naming `path`.
 */
export function writeFileAtomic0600(path: string, bytes: Uint8Array): void {
  try {
    writeFileDurably(path, bytes, 0o600);
  } catch (e) {
    throw ioError(e, 'write', path);
  }
}

/**
 * Encodes a secret file (see module docs): `payload` is the canonical CBOR body, `meta` public.
 */
export function encodeSecretFile(format: string, meta: Obj, payload: Uint8Array, opts: SealOpts = {}): Uint8Array {
  if (opts.passphrase === undefined) return withDigest({ format, meta, body: payload });
  const logN = opts.logN ?? DEFAULT_LOG_N;
  if (!Number.isInteger(logN) || logN < MIN_LOG_N || logN > MAX_LOG_N) throw new RangeError(`logN must be ${MIN_LOG_N}..${MAX_LOG_N}`);
  const salt = new Uint8Array(randomBytes(16));
  const { key, check } = scryptKey(opts.passphrase, salt, logN, 8, 1);
  const kdf = { alg: 'scrypt', salt, log_n: logN, r: 8, p: 1, check: new Uint8Array(check) };
  const nonce = new Uint8Array(randomBytes(12));
  const c = createCipheriv('aes-256-gcm', key, nonce);
  c.setAAD(encode({ format, meta, kdf, nonce }));
  const ciphertext = new Uint8Array(Buffer.concat([c.update(payload), c.final(), c.getAuthTag()]));
  return withDigest({ format, meta, kdf, nonce, ciphertext });
}

/** Encodes `fields` plus `digest` = BLAKE3 of the canonical bytes of `fields`. */
function withDigest(fields: Obj): Uint8Array {
  return encode({ ...fields, digest: blake3(encode(fields)) });
}

/**
 * Decodes a secret file of `format`, returning its body bytes and public meta.
 * @throws FrostError `frost-file-malformed`, `frost-file-tampered`, `frost-passphrase-required`,
 *   `frost-wrong-passphrase`.
 */
export function decodeSecretFile(
  bytes: Uint8Array,
  format: string,
  passphrase?: string,
  what = 'file',
): { payload: Uint8Array; meta: Obj; sealed: boolean } {
  let o: Obj;
  try {
    o = asObj(decode(bytes), what, ['format', 'meta', 'digest'], ['body', 'kdf', 'nonce', 'ciphertext']);
    if (o['format'] !== format) throw new Error(`format is ${String(o['format'])}, expected ${format}`);
    asObj(o['meta'], `${what}.meta`, [], ['group', 'identifier', 'did']);
  } catch (e) {
    // A byte flipped anywhere usually lands here: report it as tampering when the file was ours.
    const code =
      bytes.length > 0 && bytes[0]! >= 0xa0 && bytes[0]! <= 0xbf ? FrostErrorCodes.FILE_TAMPERED : FrostErrorCodes.FILE_MALFORMED;
    throw new FrostError(code, `${what}: not a readable ${format} file (${(e as Error).message})`);
  }
  const meta = o['meta'] as Obj;
  const { digest, ...fields } = o;
  if (!(digest instanceof Uint8Array) || !bytesEqual(digest, blake3(encode(fields)))) {
    throw new FrostError(FrostErrorCodes.FILE_TAMPERED, `${what}: digest mismatch (the file was altered)`);
  }
  if ('body' in o) return { payload: asBytes(o['body'], `${what}.body`), meta, sealed: false };
  if (passphrase === undefined) throw new FrostError(FrostErrorCodes.PASSPHRASE_REQUIRED, `${what}: sealed with a passphrase; none given`);
  let kdf: Obj;
  let nonce: Uint8Array;
  let ciphertext: Uint8Array;
  let logN: number;
  let r: number;
  let p: number;
  try {
    kdf = asObj(o['kdf'], `${what}.kdf`, ['alg', 'salt', 'log_n', 'r', 'p', 'check']);
    if (asText(kdf['alg'], `${what}.kdf.alg`) !== 'scrypt') throw new Error('kdf is not scrypt');
    logN = asSafeUint(kdf['log_n'], `${what}.kdf.log_n`);
    r = asSafeUint(kdf['r'], `${what}.kdf.r`);
    p = asSafeUint(kdf['p'], `${what}.kdf.p`);
    if (logN < MIN_LOG_N || logN > MAX_LOG_N || r < 1 || r > 32 || p < 1 || p > 4) throw new Error('scrypt parameters out of range');
    asBytes(kdf['salt'], `${what}.kdf.salt`, 16);
    asBytes(kdf['check'], `${what}.kdf.check`, 16);
    nonce = asBytes(o['nonce'], `${what}.nonce`, 12);
    ciphertext = asBytes(o['ciphertext'], `${what}.ciphertext`);
    if (ciphertext.length < 16) throw new Error('ciphertext too short');
  } catch (e) {
    throw new FrostError(FrostErrorCodes.FILE_TAMPERED, `${what}: sealed header is damaged (${(e as Error).message})`);
  }
  const { key, check } = scryptKey(passphrase, kdf['salt'] as Uint8Array, logN, r, p);
  if (!timingSafeEqual(check, kdf['check'] as Uint8Array)) {
    throw new FrostError(FrostErrorCodes.WRONG_PASSPHRASE, `${what}: wrong passphrase`);
  }
  try {
    const d = createDecipheriv('aes-256-gcm', key, nonce);
    d.setAAD(encode({ format, meta, kdf, nonce }));
    d.setAuthTag(ciphertext.subarray(ciphertext.length - 16));
    const payload = new Uint8Array(Buffer.concat([d.update(ciphertext.subarray(0, ciphertext.length - 16)), d.final()]));
    return { payload, meta, sealed: true };
  } catch {
    throw new FrostError(FrostErrorCodes.FILE_TAMPERED, `${what}: authentication failed (the file was altered)`);
  }
}

/**
 * Reads a secret file after checking it is a regular file owned by this user with mode 0600
 * (no group/other bits); at most {@link READ_CAPS}.shareFile (4 MiB) of a share file and
 * {@link READ_CAPS}.identityFile (64 KiB) of an identity file is read.
 * @throws FrostError `frost-file-permissions` and the codes of {@link decodeSecretFile}; IoError
 *   (`io`, naming the path) for a missing or unreadable file, or one larger than its cap.
 */
export function readSecretFile(path: string, format: string, passphrase?: string): { payload: Uint8Array; meta: Obj; sealed: boolean } {
  let st: Stats;
  try {
    st = statSync(path);
  } catch (e) {
    throw ioError(e, 'read', path);
  }
  if (!st.isFile()) throw new FrostError(FrostErrorCodes.FILE_MALFORMED, `${path}: not a regular file`);
  if ((st.mode & 0o077) !== 0) {
    throw new FrostError(
      FrostErrorCodes.FILE_PERMISSIONS,
      `${path}: mode ${(st.mode & 0o777).toString(8)} lets others read it; must be 600`,
    );
  }
  if (typeof process.getuid === 'function' && st.uid !== process.getuid()) {
    throw new FrostError(FrostErrorCodes.FILE_PERMISSIONS, `${path}: owned by uid ${st.uid}, not by this user`);
  }
  let bytes: Uint8Array;
  try {
    bytes = new Uint8Array(secretFileBytes(path, format));
  } catch (e) {
    throw ioError(e, 'read', path);
  }
  return decodeSecretFile(bytes, format, passphrase, path);
}

/** The bytes of a share or identity file, read up to the cap of its kind ({@link READ_CAPS}). */
function secretFileBytes(path: string, format: string): Buffer {
  return format === IDENTITY_FORMAT
    ? readFileCapped(path, READ_CAPS.identityFile, 'identity file')
    : readFileCapped(path, READ_CAPS.shareFile, 'share file');
}

/** Everything a participant holds for one group: its share, its own identity, the group package. */
export interface ShareRecord extends ShareSecret {
  readonly did: Did;
  readonly group: GroupPublic;
  /** The participant's own Ed25519 identity for this group (`group.roster[identifier − 1]`). */
  readonly identity: Actor;
}

/** Builds a share record, checking it end to end. @throws FrostError `frost-file-tampered` when inconsistent. */
export function shareRecord(
  group: GroupPublic,
  identifier: number,
  signingShare: Uint8Array,
  identitySeed: Uint8Array,
  what = 'share',
): ShareRecord {
  const g = checkGroup(group);
  if (!g.ok) throw new FrostError(FrostErrorCodes.FILE_TAMPERED, `${what}: ${g.error.why}`);
  return ownShare(group, g.value, identifier, signingShare, actorFromSeed(identitySeed), what);
}

/**
 * Builds a share record from a package this process just computed itself (a finished DKG),
 * skipping the package's algebraic re-check but still checking the share against its verifying
 * share and the identity against the roster. @throws FrostError `frost-file-tampered`.
 */
export function trustedShareRecord(group: GroupPublic, identifier: number, signingShare: Uint8Array, identity: Actor): ShareRecord {
  return ownShare(group, groupDid(group), identifier, signingShare, identity, 'share');
}

function ownShare(group: GroupPublic, did: Did, identifier: number, signingShare: Uint8Array, identity: Actor, what: string): ShareRecord {
  if (!Number.isSafeInteger(identifier) || identifier < 1 || identifier > group.max) {
    throw new FrostError(FrostErrorCodes.FILE_TAMPERED, `${what}: identifier ${identifier} outside 1..${group.max}`);
  }
  let s: bigint;
  try {
    s = Fn.fromBytes(signingShare);
  } catch {
    throw new FrostError(FrostErrorCodes.FILE_TAMPERED, `${what}: signing share is not a canonical scalar`);
  }
  if (s === 0n || !bytesEqual(ed25519.Point.BASE.multiply(s).toBytes(), group.verifyingShares[identifier - 1]!)) {
    throw new FrostError(FrostErrorCodes.FILE_TAMPERED, `${what}: signing share does not match verifying share ${identifier}`);
  }
  if (group.roster[identifier - 1] !== identity.did) {
    throw new FrostError(FrostErrorCodes.FILE_TAMPERED, `${what}: identity ${identity.did} is not roster entry ${identifier}`);
  }
  return { did, group, identifier, signingShare, identity };
}

/** The canonical bytes of a share file for `rec`. */
export function encodeShareFile(rec: ShareRecord, opts: SealOpts = {}): Uint8Array {
  const payload = encode({
    group: groupToCbor(rec.group),
    identifier: rec.identifier,
    signing_share: rec.signingShare,
    identity: rec.identity.key.seed,
  });
  return encodeSecretFile(SHARE_FORMAT, { did: rec.did, identifier: rec.identifier }, payload, opts);
}

function shareFromPayload(payload: Uint8Array, meta: Obj, what: string): ShareRecord {
  let o: Obj;
  let group: GroupPublic;
  try {
    o = asObj(decode(payload), `${what}.body`, ['group', 'identifier', 'signing_share', 'identity']);
    group = readGroup(o['group'], `${what}.body.group`);
    asBytes(o['signing_share'], `${what}.signing_share`, 32);
    asBytes(o['identity'], `${what}.identity`, 32);
    asSafeUint(o['identifier'], `${what}.identifier`);
  } catch (e) {
    throw new FrostError(FrostErrorCodes.FILE_TAMPERED, `${what}: body is damaged (${(e as Error).message})`);
  }
  const rec = shareRecord(group, o['identifier'] as number, o['signing_share'] as Uint8Array, o['identity'] as Uint8Array, what);
  if (meta['did'] !== rec.did || meta['identifier'] !== rec.identifier) {
    throw new FrostError(FrostErrorCodes.FILE_TAMPERED, `${what}: public header does not match the share`);
  }
  return rec;
}

/** Parses share-file bytes (see {@link decodeSecretFile} for the codes) and checks the share. */
export function decodeShareFile(bytes: Uint8Array, passphrase?: string, what = 'share file'): ShareRecord {
  const { payload, meta } = decodeSecretFile(bytes, SHARE_FORMAT, passphrase, what);
  return shareFromPayload(payload, meta, what);
}

/** Writes a share file (mode 0600, atomic). */
export function writeShareFile(path: string, rec: ShareRecord, opts: SealOpts = {}): void {
  writeFileAtomic0600(path, encodeShareFile(rec, opts));
}

/** Reads and checks a share file. @throws FrostError (see {@link readSecretFile}, {@link shareRecord}). */
export function readShareFile(path: string, passphrase?: string): ShareRecord {
  const { payload, meta } = readSecretFile(path, SHARE_FORMAT, passphrase);
  return shareFromPayload(payload, meta, path);
}

/**
 * Public header of a share file (group did, identifier) without opening it (at most 4 MiB is read).
 * @throws FrostError `frost-file-malformed` (unreadable, larger than 4 MiB, not a share file).
 */
export function peekShareFile(path: string): { did: Did; identifier: number; sealed: boolean } {
  try {
    const o = asObj(
      decode(new Uint8Array(secretFileBytes(path, SHARE_FORMAT))),
      path,
      ['format', 'meta', 'digest'],
      ['body', 'kdf', 'nonce', 'ciphertext'],
    );
    const meta = asObj(o['meta'], `${path}.meta`, ['did', 'identifier']);
    return { did: asDid(meta['did'], 'did'), identifier: asSafeUint(meta['identifier'], 'identifier'), sealed: 'ciphertext' in o };
  } catch (e) {
    throw new FrostError(FrostErrorCodes.FILE_MALFORMED, `${path}: not a share file (${(e as Error).message})`);
  }
}

/** Writes an identity file holding an Ed25519 seed (mode 0600, atomic, optionally sealed). */
export function writeIdentityFile(path: string, actor: Actor, opts: SealOpts = {}): void {
  writeFileAtomic0600(path, encodeSecretFile(IDENTITY_FORMAT, { did: actor.did }, encode({ seed: actor.key.seed }), opts));
}

/** Reads an identity file. @throws FrostError as {@link readSecretFile}; `frost-file-tampered` if the seed does not give the recorded did. */
export function readIdentityFile(path: string, passphrase?: string): Actor {
  const { payload, meta } = readSecretFile(path, IDENTITY_FORMAT, passphrase);
  let actor: Actor;
  try {
    const o = asObj(decode(payload), `${path}.body`, ['seed']);
    actor = actorFromSeed(asBytes(o['seed'], `${path}.seed`, 32));
  } catch (e) {
    throw new FrostError(FrostErrorCodes.FILE_TAMPERED, `${path}: body is damaged (${(e as Error).message})`);
  }
  if (meta['did'] !== actor.did) throw new FrostError(FrostErrorCodes.FILE_TAMPERED, `${path}: seed does not match the recorded did`);
  return actor;
}
