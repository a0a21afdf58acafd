/**
 * The nonce journal: how a participant keeps RFC 9591's rule that each signing nonce is used
 * once (§4.1, §5.1), across crashes and restarts.
 *
 * One append-only file per share. Every commitment the participant hands out is recorded
 * (`issued`, with its nonce pair sealed under a key derived from the signing share, so the
 * journal leaks nothing the share file does not), and its consumption is recorded (`used`) and
 * fdatasync'd BEFORE the signature share leaves the process. On restart the journal is replayed:
 * a used commitment is refused forever (`frost-nonce-used`), an unused one can still be signed
 * with once, an unknown one is refused (`frost-nonce-unknown`).
 *
 * Why `issued` is not fsync'd: if it is lost in a crash, the nonce is simply gone and the
 * commitment can never be signed with, which is safe. `used` is the record whose loss would
 * allow a second signature with one nonce, so it is the one that must be durable first.
 *
 * Record framing: 4-byte big-endian length ‖ canonical CBOR record ‖ first 8 bytes of its
 * BLAKE3. A torn last record (a crash mid-append) is cut off on open; damage anywhere else is
 * `frost-journal-corrupt` and the participant refuses to start rather than guess.
 * Caveat (docs/frost.md): restoring a keystore from a backup rolls the journal back; wipe
 * `nonces/` when restoring.
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { closeSync, existsSync, fdatasync, fdatasyncSync, ftruncateSync, openSync, readFileSync, writeSync } from 'node:fs';
import type { Nonces } from './sign.ts';
import {
  asBytes,
  asEnum,
  asObj,
  asSafeUint,
  asText,
  blake3,
  bytesEqual,
  concat,
  type ContentId,
  decode,
  encode,
  err,
  type Obj,
  ok,
  type Result,
  utf8,
} from '../core/index.ts';
import { fault, FrostError, FrostErrorCodes, type FrostFault } from './errors.ts';
import { commitmentId, type SigningCommitment } from './group.ts';
import { writeFileAtomic0600 } from './sharefile.ts';

/** How long an issued, unused commitment stays signable (ms). Older ones are dropped on open. */
export const DEFAULT_NONCE_TTL_MS = 10 * 60_000;
const COMPACT_AFTER = 4096;
const MAX_USED_KEPT = 100_000;

interface Entry {
  readonly session: string;
  /** The did of the coordinator whose request the commitment answered (absent in older journals). */
  readonly coordinator: string | undefined;
  readonly commitment: SigningCommitment;
  readonly atMs: number;
  state: 'issued' | 'used' | 'dropped';
  /** Plain nonces while this process holds them; undefined once used or after a restart (see `sealed`). */
  nonces: Nonces | undefined;
  sealed: { nonce: Uint8Array; ct: Uint8Array } | undefined;
}

/** No record this journal writes comes near this size (an `issued` record is about 350 bytes). */
const MAX_RECORD_BYTES = 4096;

/** Whether the record at `off`, read with body length `len`, ends in the first 8 bytes of its body's BLAKE3. */
function checkMatches(buf: Uint8Array, off: number, len: number): boolean {
  const at = off + 4 + len;
  return bytesEqual(buf.subarray(at, at + 8), blake3(buf.subarray(off + 4, at)).subarray(0, 8));
}

/** Whether some length L ≤ {@link MAX_RECORD_BYTES} makes the bytes at `off` a whole record. */
function wholeRecordAt(buf: Uint8Array, off: number): boolean {
  const most = Math.min(MAX_RECORD_BYTES, buf.length - off - 12);
  for (let len = 0; len <= most; len++) if (checkMatches(buf, off, len)) return true;
  return false;
}

/** The key that seals nonces in the journal: HKDF-SHA-256 of the signing share, bound to the group and identifier. */
export function journalKey(signingShare: Uint8Array, groupDid: string, identifier: number): Uint8Array {
  return new Uint8Array(hkdfSync('sha256', signingShare, utf8('jcp-frost/1 nonce-journal'), encode({ group: groupDid, identifier }), 32));
}

function frame(rec: Obj): Uint8Array {
  const body = encode(rec);
  const len = new Uint8Array(4);
  new DataView(len.buffer).setUint32(0, body.length);
  return concat(len, body, blake3(body).subarray(0, 8));
}

/** The durable record of handed-out and consumed signing commitments for one share. */
export class NonceJournal {
  readonly path: string;
  readonly #key: Uint8Array;
  readonly #entries = new Map<ContentId, Entry>();
  /** Session → the id of the latest commitment issued in it. */
  readonly #bySession = new Map<string, ContentId>();
  #fd: number;
  #records = 0;
  /** `used` records written whose asynchronous fdatasync has not finished yet. */
  #pending = 0;

  private constructor(path: string, key: Uint8Array, fd: number) {
    this.path = path;
    this.#key = key;
    this.#fd = fd;
  }

  /**
   * Opens (creating if absent, mode 0600) and replays the journal at `path`. Issued commitments
   * older than `ttlMs` at `nowMs` are dropped. Compacts the file when it has grown long.
   * @throws FrostError `frost-journal-corrupt` when a record other than the last is damaged.
   */
  static open(path: string, key: Uint8Array, nowMs: number, ttlMs = DEFAULT_NONCE_TTL_MS): NonceJournal {
    let good = 0;
    const recs: Obj[] = [];
    if (existsSync(path)) {
      const buf = new Uint8Array(readFileSync(path));
      let off = 0;
      while (off < buf.length) {
        // Cut inside the length field: a crash during the last append.
        if (off + 4 > buf.length) break;
        const len = new DataView(buf.buffer, buf.byteOffset + off).getUint32(0);
        const pastEnd = off + 12 + len > buf.length;
        // A length no record has, or one running past the end while a whole record starts here
        // under some other length (its check matches): the length field is damaged, and the
        // record behind it may be a `used` one. Otherwise running past the end is the last append
        // cut short by a crash.
        if (len > MAX_RECORD_BYTES || (pastEnd && wholeRecordAt(buf, off))) {
          throw new FrostError(FrostErrorCodes.JOURNAL_CORRUPT, `${path}: the length of the record at byte ${off} is damaged`);
        }
        if (pastEnd) break;
        let rec: Obj | undefined;
        if (checkMatches(buf, off, len)) {
          try {
            rec = decode(buf.subarray(off + 4, off + 4 + len)) as Obj;
          } catch {
            rec = undefined;
          }
        }
        if (!rec) {
          // A complete record that fails its check is damage wherever it is: dropping it could
          // forget a `used` record and let a nonce be signed with twice. The one exception is a
          // last record cut short and then zero-filled by the file system (zeros from its check
          // bytes to the end of the file).
          if (buf.subarray(off + 4 + len).every((x) => x === 0)) break;
          throw new FrostError(FrostErrorCodes.JOURNAL_CORRUPT, `${path}: record at byte ${off} is damaged`);
        }
        recs.push(rec);
        off += 12 + len;
        good = off;
      }
    }
    const fd = openSync(path, 'a+', 0o600);
    ftruncateSync(fd, good);
    const j = new NonceJournal(path, key, fd);
    for (const r of recs) j.#apply(r);
    for (const e of j.#entries.values()) if (e.state === 'issued' && nowMs - e.atMs > ttlMs) e.state = 'dropped';
    if (j.#records > COMPACT_AFTER) j.#compact();
    return j;
  }

  #apply(r: Obj): void {
    try {
      const k = asEnum(r['k'], 'k', ['issued', 'used', 'dropped']);
      const cid = asText(r['cid'], 'cid', 64);
      this.#records++;
      if (k === 'issued') {
        const o = asObj(r, 'issued', ['k', 'cid', 'session', 'identifier', 'hiding', 'binding', 'at_ms', 'nonce', 'ct'], ['coordinator']);
        const commitment = {
          identifier: asSafeUint(o['identifier'], 'identifier'),
          hiding: asBytes(o['hiding'], 'hiding', 32),
          binding: asBytes(o['binding'], 'binding', 32),
        };
        const session = asText(o['session'], 'session');
        this.#bySession.set(session, cid);
        this.#entries.set(cid, {
          session,
          coordinator: o['coordinator'] === undefined ? undefined : asText(o['coordinator'], 'coordinator', 256),
          commitment,
          atMs: asSafeUint(o['at_ms'], 'at_ms'),
          state: 'issued',
          nonces: undefined,
          sealed: { nonce: asBytes(o['nonce'], 'nonce', 12), ct: asBytes(o['ct'], 'ct') },
        });
        return;
      }
      const e = this.#entries.get(cid);
      if (k === 'used') {
        // A used record stands on its own (compaction keeps it without its issued record).
        const session = asText(r['session'], 'session');
        const o = asObj(r, 'used', ['k', 'cid', 'session', 'at_ms', 'identifier', 'hiding', 'binding']);
        if (e) {
          e.state = 'used';
          e.nonces = undefined;
          e.sealed = undefined;
        } else {
          const commitment = {
            identifier: asSafeUint(o['identifier'], 'identifier'),
            hiding: asBytes(o['hiding'], 'hiding', 32),
            binding: asBytes(o['binding'], 'binding', 32),
          };
          this.#entries.set(cid, {
            session,
            coordinator: undefined,
            commitment,
            atMs: asSafeUint(o['at_ms'], 'at_ms'),
            state: 'used',
            nonces: undefined,
            sealed: undefined,
          });
          this.#bySession.set(session, cid);
        }
      } else if (e && e.state === 'issued') {
        e.state = 'dropped';
        e.nonces = undefined;
        e.sealed = undefined;
      }
    } catch (x) {
      throw new FrostError(FrostErrorCodes.JOURNAL_CORRUPT, `${this.path}: bad record (${(x as Error).message})`);
    }
  }

  #append(rec: Obj, durable: boolean): void {
    writeSync(this.#fd, frame(rec));
    this.#records++;
    if (durable) fdatasyncSync(this.#fd);
  }

  /**
   * Records a commitment about to be handed out for `session`, at the request of `coordinator`
   * (its did), with its nonces sealed. Call before the commitment leaves the process.
   */
  issue(session: string, commitment: SigningCommitment, nonces: Nonces, nowMs: number, coordinator: string): void {
    const cid = commitmentId(commitment);
    const nonce = new Uint8Array(randomBytes(12));
    const c = createCipheriv('aes-256-gcm', this.#key, nonce);
    c.setAAD(utf8(cid));
    const ct = new Uint8Array(
      Buffer.concat([c.update(encode({ hiding: nonces.hiding, binding: nonces.binding })), c.final(), c.getAuthTag()]),
    );
    this.#append(
      {
        k: 'issued',
        cid,
        session,
        coordinator,
        identifier: commitment.identifier,
        hiding: commitment.hiding,
        binding: commitment.binding,
        at_ms: nowMs,
        nonce,
        ct,
      },
      false,
    );
    this.#entries.set(cid, { session, coordinator, commitment, atMs: nowMs, state: 'issued', nonces, sealed: { nonce, ct } });
    this.#bySession.set(session, cid);
  }

  /**
   * Consumes the nonces behind `commitment` for `session`: refuses a commitment that is unknown
   * or belongs to another session (`frost-nonce-unknown`) or was already used or dropped
   * (`frost-nonce-used`); otherwise appends `used`, fdatasyncs, and returns the nonces, which
   * the caller must use for exactly one share.
   */
  take(session: string, commitment: SigningCommitment, nowMs: number): Result<Nonces, FrostFault> {
    const r = this.#consume(session, commitment, nowMs);
    if (r.ok) fdatasyncSync(this.#fd);
    return r;
  }

  /**
   * {@link take} with the fdatasync running in the background, so the caller can compute its
   * share while the disk works: the `used` record is appended and the commitment marked used
   * before this returns (a second claim is refused at once), and `durable` resolves once the
   * record is on stable storage (rejects with the I/O error). The share must not leave the
   * process before `durable` resolves.
   */
  claim(session: string, commitment: SigningCommitment, nowMs: number): Result<{ nonces: Nonces; durable: Promise<void> }, FrostFault> {
    const r = this.#consume(session, commitment, nowMs);
    if (!r.ok) return r;
    this.#pending++;
    const durable = new Promise<void>((resolve, reject) => {
      fdatasync(this.#fd, (e) => {
        this.#pending--;
        if (e) reject(new FrostError(FrostErrorCodes.JOURNAL_IO, `${this.path}: fdatasync failed: ${e.message}`));
        else resolve();
      });
    });
    return ok({ nonces: r.value, durable });
  }

  #consume(session: string, commitment: SigningCommitment, nowMs: number): Result<Nonces, FrostFault> {
    const cid = commitmentId(commitment);
    const e = this.#entries.get(cid);
    if (!e) return err(fault(FrostErrorCodes.NONCE_UNKNOWN, `commitment ${cid.slice(0, 16)}… was never issued by this participant`));
    if (e.state === 'used')
      return err(fault(FrostErrorCodes.NONCE_USED, `commitment ${cid.slice(0, 16)}… was already used (session ${e.session})`));
    if (e.state === 'dropped')
      return err(fault(FrostErrorCodes.NONCE_USED, `commitment ${cid.slice(0, 16)}… was released unused; it cannot be signed with`));
    if (e.session !== session)
      return err(
        fault(FrostErrorCodes.NONCE_UNKNOWN, `commitment ${cid.slice(0, 16)}… was issued for session ${e.session}, not ${session}`),
      );
    let nonces = e.nonces;
    if (!nonces && e.sealed) {
      try {
        const d = createDecipheriv('aes-256-gcm', this.#key, e.sealed.nonce);
        d.setAAD(utf8(cid));
        d.setAuthTag(e.sealed.ct.subarray(e.sealed.ct.length - 16));
        const pt = Buffer.concat([d.update(e.sealed.ct.subarray(0, e.sealed.ct.length - 16)), d.final()]);
        const o = asObj(decode(new Uint8Array(pt)), 'nonces', ['hiding', 'binding']);
        nonces = {
          hiding: new Uint8Array(asBytes(o['hiding'], 'hiding', 32)),
          binding: new Uint8Array(asBytes(o['binding'], 'binding', 32)),
        };
      } catch {
        nonces = undefined;
      }
    }
    if (!nonces) return err(fault(FrostErrorCodes.NONCE_UNKNOWN, `commitment ${cid.slice(0, 16)}…: its nonces cannot be recovered`));
    const c = e.commitment;
    this.#append({ k: 'used', cid, session, at_ms: nowMs, identifier: c.identifier, hiding: c.hiding, binding: c.binding }, false);
    e.state = 'used';
    e.nonces = undefined;
    e.sealed = undefined;
    return ok(nonces);
  }

  /** Releases every unused commitment of `session` (coordinator said done); they can never be signed with. */
  release(session: string): void {
    const cid = this.#bySession.get(session);
    const e = cid === undefined ? undefined : this.#entries.get(cid);
    if (cid === undefined || !e || e.state !== 'issued') return;
    this.#append({ k: 'dropped', cid }, false);
    e.state = 'dropped';
    e.nonces = undefined;
    e.sealed = undefined;
  }

  /**
   * The commitment this journal issued for `session` (the most recent one), with its state and
   * the coordinator it was issued to (undefined for records of older journals), or undefined
   * when none was. Lets a participant answer a repeated request with the same
   * commitment and tell a replayed package (`used`) from an unknown one.
   */
  forSession(
    session: string,
  ): { commitment: SigningCommitment; state: 'issued' | 'used' | 'dropped'; coordinator: string | undefined } | undefined {
    const cid = this.#bySession.get(session);
    const found = cid === undefined ? undefined : this.#entries.get(cid);
    return found ? { commitment: found.commitment, state: found.state, coordinator: found.coordinator } : undefined;
  }

  /** Counts by state (for tests and metrics). */
  counts(): { issued: number; used: number; dropped: number } {
    const c = { issued: 0, used: 0, dropped: 0 };
    for (const e of this.#entries.values()) c[e.state]++;
    return c;
  }

  /** Rewrites the file with the live issued records and the most recent used ids (atomic). */
  #compact(): void {
    const parts: Uint8Array[] = [];
    const used = [...this.#entries].filter(([, e]) => e.state === 'used').slice(-MAX_USED_KEPT);
    const kept = new Set(used.map(([cid]) => cid));
    for (const [cid, e] of used) {
      const c = e.commitment;
      parts.push(
        frame({ k: 'used', cid, session: e.session, at_ms: e.atMs, identifier: c.identifier, hiding: c.hiding, binding: c.binding }),
      );
    }
    for (const [cid, e] of this.#entries) {
      if (e.state === 'issued' && e.sealed) {
        const c = e.commitment;
        parts.push(
          frame({
            k: 'issued',
            cid,
            session: e.session,
            ...(e.coordinator !== undefined ? { coordinator: e.coordinator } : {}),
            identifier: c.identifier,
            hiding: c.hiding,
            binding: c.binding,
            at_ms: e.atMs,
            nonce: e.sealed.nonce,
            ct: e.sealed.ct,
          }),
        );
      }
    }
    for (const [cid, e] of [...this.#entries]) {
      if (e.state === 'dropped' || (e.state === 'used' && !kept.has(cid))) {
        this.#entries.delete(cid);
        if (this.#bySession.get(e.session) === cid) this.#bySession.delete(e.session);
      }
    }
    closeSync(this.#fd);
    writeFileAtomic0600(this.path, concat(...parts));
    this.#fd = openSync(this.path, 'a', 0o600);
    this.#records = parts.length;
  }

  /** Closes the file. */
  close(): void {
    // A claim whose background fdatasync is still running: make its record durable here, so
    // closing (and the fd number being reused) can never leave a sent share without its record.
    if (this.#pending > 0) fdatasyncSync(this.#fd);
    closeSync(this.#fd);
  }
}
