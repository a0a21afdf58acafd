/**
 * A participant's keystore folder (mode 0700):
 *
 * ```
 * <dir>/identity.key                 the participant's own Ed25519 identity (mode 0600)
 * <dir>/*.share, <dir>/shares/*.share share files (mode 0600; dealer files may be dropped in <dir>)
 * <dir>/nonces/<groupTag>-<id>.journal the nonce journal of each share (journal.ts)
 * <dir>/evidence/*.cbor               complaints and equivocations this participant saw
 * <dir>/.lock                         the pid of the process using the keystore
 * ```
 *
 * One process at a time: two processes sharing a journal could each sign with one restored
 * nonce, so the lock is taken on open and refused (`frost-keystore-locked`) while its holder lives.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, openSync, readdirSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { type Actor, actorFromSeed } from '../core/index.ts';
import { ioError, IoError, makeDirs, READ_CAPS, readFileCapped } from '../io/index.ts';
import { FrostError, FrostErrorCodes } from './errors.ts';
import { groupTag } from './group.ts';
import { DEFAULT_NONCE_TTL_MS, journalKey, NonceJournal } from './journal.ts';
import {
  readIdentityFile,
  readShareFile,
  type SealOpts,
  type ShareRecord,
  writeFileAtomic0600,
  writeIdentityFile,
  writeShareFile,
} from './sharefile.ts';

/** Options for {@link Keystore.open}. */
export interface KeystoreOpts extends SealOpts {
  /** Create the folder and an identity if absent (default true). */
  readonly create?: boolean;
  /** Current time (ms) for the journals' TTL; default `Date.now()`. */
  readonly nowMs?: number;
  readonly nonceTtlMs?: number;
}

/** The pid written in a keystore's `.lock` (at most 1 KiB is read), as text; '' when unreadable. */
function lockPid(path: string): string {
  try {
    return readFileCapped(path, READ_CAPS.lockFile, 'lock file').toString('utf8').trim();
  } catch {
    return '';
  }
}

function lockHolderAlive(path: string): boolean {
  try {
    const pid = Number(lockPid(path));
    if (!Number.isInteger(pid) || pid <= 0) return false;
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** An open keystore: identity, shares, their journals. */
export class Keystore {
  readonly dir: string;
  readonly identity: Actor;
  readonly #opts: KeystoreOpts;
  readonly #shares: ShareRecord[] = [];
  readonly #journals = new Map<ShareRecord, NonceJournal>();
  #locked = true;

  private constructor(dir: string, identity: Actor, opts: KeystoreOpts) {
    this.dir = dir;
    this.identity = identity;
    this.#opts = opts;
  }

  /**
   * Opens `dir`: takes the lock, reads the identity (if any) and every share file, and only when
   * they all opened (so the passphrase is proven right) creates what is missing (`shares/`,
   * `nonces/`, `evidence/`, a new `identity.key`) and replays each share's journal. A wrong
   * passphrase therefore leaves the keystore exactly as it was.
   * @throws FrostError `frost-keystore-locked`, and the share-file and journal codes
   *   (`frost-wrong-passphrase`, `frost-file-tampered`, `frost-journal-corrupt`…); IoError (`io`)
   *   when the folder cannot be created or read (a file in the way, permissions, /proc…).
   */
  static open(dir: string, opts: KeystoreOpts = {}): Keystore {
    const create = opts.create ?? true;
    if (create) makeDirs(dir, 0o700);
    else if (!existsSync(dir)) throw new IoError(dir, `keystore ${dir}: no such folder`, 'ENOENT');
    const lock = join(dir, '.lock');
    for (let attempt = 0; ; attempt++) {
      try {
        const fd = openSync(lock, 'wx', 0o600);
        writeSync(fd, String(process.pid));
        closeSync(fd);
        break;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 0) throw ioError(e, 'lock keystore', lock);
        if (lockHolderAlive(lock)) throw new FrostError(FrostErrorCodes.KEYSTORE_LOCKED, `${dir} is in use by process ${lockPid(lock)}`);
        unlinkSync(lock);
      }
    }
    try {
      // 1. Read only: the identity and every share file (each one checks the passphrase).
      const idPath = join(dir, 'identity.key');
      const existing = existsSync(idPath) ? readIdentityFile(idPath, opts.passphrase) : undefined;
      if (existing === undefined && !create) throw new FrostError(FrostErrorCodes.FILE_MALFORMED, `${idPath}: no identity`);
      const recs: ShareRecord[] = [];
      for (const folder of [dir, join(dir, 'shares')]) {
        if (folder !== dir && !existsSync(folder)) continue;
        let names: string[];
        try {
          names = readdirSync(folder).sort();
        } catch (e) {
          throw ioError(e, 'list keystore folder', folder);
        }
        for (const f of names) if (f.endsWith('.share')) recs.push(readShareFile(join(folder, f), opts.passphrase));
      }
      // 2. Everything opened: now write.
      for (const sub of ['shares', 'nonces', 'evidence']) makeDirs(join(dir, sub), 0o700);
      let identity = existing;
      if (identity === undefined) {
        identity = actorFromSeed(new Uint8Array(randomBytes(32)));
        writeIdentityFile(idPath, identity, opts);
      }
      const ks = new Keystore(dir, identity, opts);
      for (const rec of recs) ks.#load(rec);
      return ks;
    } catch (e) {
      unlinkSync(lock);
      throw e;
    }
  }

  #load(rec: ShareRecord): void {
    if (this.#shares.some((s) => s.did === rec.did && s.identifier === rec.identifier)) return;
    const path = join(this.dir, 'nonces', `${groupTag(rec.did)}-${rec.identifier}.journal`);
    const j = NonceJournal.open(
      path,
      journalKey(rec.signingShare, rec.did, rec.identifier),
      this.#opts.nowMs ?? Date.now(),
      this.#opts.nonceTtlMs ?? DEFAULT_NONCE_TTL_MS,
    );
    this.#shares.push(rec);
    this.#journals.set(rec, j);
  }

  /** Every share held. */
  get shares(): readonly ShareRecord[] {
    return this.#shares;
  }

  /** The nonce journal of a held share. */
  journal(rec: ShareRecord): NonceJournal {
    const j = this.#journals.get(rec);
    if (!j) throw new Error('journal: share not held by this keystore');
    return j;
  }

  /** Writes a new share (atomic, 0600, sealed if the keystore has a passphrase) and starts its journal. Returns the file path. */
  addShare(rec: ShareRecord): string {
    const path = join(this.dir, 'shares', `${groupTag(rec.did)}-${rec.identifier}.share`);
    writeShareFile(path, rec, this.#opts);
    this.#load(rec);
    return path;
  }

  /** Keeps evidence bytes under `evidence/` (atomic, 0600). Returns the file path. */
  saveEvidence(name: string, bytes: Uint8Array): string {
    const path = join(this.dir, 'evidence', `${name.replace(/[^A-Za-z0-9_.-]/g, '_')}.cbor`);
    writeFileAtomic0600(path, bytes);
    return path;
  }

  /** Closes the journals and releases the lock. */
  close(): void {
    for (const j of this.#journals.values()) j.close();
    this.#journals.clear();
    if (this.#locked) {
      this.#locked = false;
      try {
        unlinkSync(join(this.dir, '.lock'));
      } catch {
        // already gone
      }
    }
  }
}
