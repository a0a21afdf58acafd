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
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { type Actor, actorFromSeed } from '../core/actor.ts';
import { FrostError, FrostErrorCodes } from './errors.ts';
import { groupTag } from './group.ts';
import { DEFAULT_NONCE_TTL_MS, journalKey, NonceJournal } from './journal.ts';
import { readIdentityFile, readShareFile, type SealOpts, type ShareRecord, writeFileAtomic0600, writeIdentityFile, writeShareFile } from './sharefile.ts';

/** Options for {@link Keystore.open}. */
export interface KeystoreOpts extends SealOpts {
  /** Create the folder and an identity if absent (default true). */
  readonly create?: boolean;
  /** Current time (ms) for the journals' TTL; default `Date.now()`. */
  readonly nowMs?: number;
  readonly nonceTtlMs?: number;
}

function lockHolderAlive(path: string): boolean {
  try {
    const pid = Number(readFileSync(path, 'utf8').trim());
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
   * Opens `dir`: takes the lock, reads (or creates) the identity, reads every share file and
   * replays its journal. @throws FrostError `frost-keystore-locked`, and the share-file and
   * journal codes (`frost-wrong-passphrase`, `frost-file-tampered`, `frost-journal-corrupt`…).
   */
  static open(dir: string, opts: KeystoreOpts = {}): Keystore {
    if (opts.create ?? true) mkdirSync(dir, { recursive: true, mode: 0o700 });
    for (const sub of ['shares', 'nonces', 'evidence']) mkdirSync(join(dir, sub), { recursive: true, mode: 0o700 });
    const lock = join(dir, '.lock');
    for (let attempt = 0; ; attempt++) {
      try {
        const fd = openSync(lock, 'wx', 0o600);
        writeSync(fd, String(process.pid));
        closeSync(fd);
        break;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 0) throw e;
        if (lockHolderAlive(lock)) throw new FrostError(FrostErrorCodes.KEYSTORE_LOCKED, `${dir} is in use by process ${readFileSync(lock, 'utf8').trim()}`);
        unlinkSync(lock);
      }
    }
    try {
      const idPath = join(dir, 'identity.key');
      let identity: Actor;
      if (existsSync(idPath)) identity = readIdentityFile(idPath, opts.passphrase);
      else if (opts.create ?? true) {
        identity = actorFromSeed(new Uint8Array(randomBytes(32)));
        writeIdentityFile(idPath, identity, opts);
      } else throw new FrostError(FrostErrorCodes.FILE_MALFORMED, `${idPath}: no identity`);
      const ks = new Keystore(dir, identity, opts);
      for (const folder of [dir, join(dir, 'shares')]) {
        for (const f of readdirSync(folder).sort()) if (f.endsWith('.share')) ks.#load(readShareFile(join(folder, f), opts.passphrase));
      }
      return ks;
    } catch (e) {
      unlinkSync(lock);
      throw e;
    }
  }

  #load(rec: ShareRecord): void {
    if (this.#shares.some((s) => s.did === rec.did && s.identifier === rec.identifier)) return;
    const path = join(this.dir, 'nonces', `${groupTag(rec.did)}-${rec.identifier}.journal`);
    const j = NonceJournal.open(path, journalKey(rec.signingShare, rec.did, rec.identifier), this.#opts.nowMs ?? Date.now(), this.#opts.nonceTtlMs ?? DEFAULT_NONCE_TTL_MS);
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
