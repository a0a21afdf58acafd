/**
 * Share and identity files (frost/sharefile.ts) and the keystore lock (frost/keystore.ts): mode
 * 0600, sealing with a passphrase, and every altered byte refused with a clear code.
 */
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { blake3, encode, seededRng } from '../../core/index.ts';
import {
  deal,
  decodeShareFile,
  encodeShareFile,
  Fn,
  FrostErrorCodes,
  groupToCbor,
  isFrostError,
  Keystore,
  peekShareFile,
  readIdentityFile,
  readShareFile,
  shareRecord,
  writeShareFile,
} from '../../frost/internal.ts';
import { readMessage } from '../../cli/internal.ts';

const root = mkdtempSync(join(tmpdir(), 'jcp-frost-share-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const d = deal({ min: 2, max: 3 }, seededRng('test/frost/share'));
if (!d.ok) throw new Error(d.error.why);
const s1 = d.value.shares[0]!;
const rec = shareRecord(s1.group, s1.identifier, s1.signingShare, s1.identitySeed);
const FAST = { logN: 10 };

function codeOf(fn: () => unknown): string {
  try {
    fn();
    return 'accepted';
  } catch (e) {
    if (isFrostError(e)) return e.code;
    const code = (e as { code?: unknown }).code;
    return code === 'io' ? 'io' : `untyped: ${(e as Error).message}`;
  }
}

describe('share files / writing and reading', () => {
  it('a plain share file is written with mode 0600 and reads back as the same share', () => {
    const path = join(root, 'plain.share');
    writeShareFile(path, rec);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const back = readShareFile(path);
    expect(back.did).toBe(d.value.did);
    expect(back.signingShare).toEqual(rec.signingShare);
    expect(back.identity.did).toBe(rec.identity.did);
  });

  it('a sealed share file reads back only with its passphrase', () => {
    const path = join(root, 'sealed.share');
    writeShareFile(path, rec, { passphrase: 'open sesame', ...FAST });
    expect(readShareFile(path, 'open sesame').signingShare).toEqual(rec.signingShare);
    expect(codeOf(() => readShareFile(path, 'open sesamE'))).toBe(FrostErrorCodes.WRONG_PASSPHRASE);
    expect(codeOf(() => readShareFile(path))).toBe(FrostErrorCodes.PASSPHRASE_REQUIRED);
    expect(readFileSync(path).includes(Buffer.from(rec.signingShare))).toBe(false);
  });

  it('refuse / a share file readable by group or others', () => {
    const path = join(root, 'open.share');
    writeShareFile(path, rec);
    chmodSync(path, 0o644);
    expect(codeOf(() => readShareFile(path))).toBe(FrostErrorCodes.FILE_PERMISSIONS);
  });

  it('refuse / any single flipped byte of a plain or sealed file (never accepted, always a typed code)', () => {
    const plain = encodeShareFile(rec);
    const sealed = encodeShareFile(rec, { passphrase: 'pw', ...FAST });
    fc.assert(
      fc.property(fc.boolean(), fc.nat(), fc.integer({ min: 1, max: 255 }), (useSealed, pos, mask) => {
        const bytes = Uint8Array.from(useSealed ? sealed : plain);
        const i = pos % bytes.length;
        bytes[i] = bytes[i]! ^ mask;
        const code = codeOf(() => decodeShareFile(bytes, 'pw'));
        return code === FrostErrorCodes.FILE_TAMPERED || code === FrostErrorCodes.FILE_MALFORMED;
      }),
      { numRuns: 300 },
    );
  });

  it('refuse / a plain file whose share was changed and digest recomputed (the share no longer matches its verifying share)', () => {
    const payload = encode({
      group: groupToCbor(rec.group),
      identifier: 1,
      signing_share: Fn.toBytes(Fn.add(Fn.fromBytes(rec.signingShare), 1n)),
      identity: rec.identity.key.seed,
    });
    const fields = { format: 'jcp-frost-share/1', meta: { did: rec.did, identifier: 1 }, body: payload };
    const forged = encode({ ...fields, digest: blake3(encode(fields)) });
    expect(codeOf(() => decodeShareFile(forged))).toBe(FrostErrorCodes.FILE_TAMPERED);
  });

  it('refuse / a share file claiming another identity than its roster entry', () => {
    const s2 = d.value.shares[1]!;
    expect(codeOf(() => shareRecord(s1.group, 1, s1.signingShare, s2.identitySeed))).toBe(FrostErrorCodes.FILE_TAMPERED);
  });
});

describe('keystore / one process at a time', () => {
  it('refuse / a second open while the first holder lives; a stale lock of a dead process is taken over', () => {
    const dir = join(root, 'ks');
    const a = Keystore.open(dir);
    expect(codeOf(() => Keystore.open(dir))).toBe(FrostErrorCodes.KEYSTORE_LOCKED);
    const did = a.identity.did;
    a.close();
    writeFileSync(join(dir, '.lock'), '2147483646');
    const b = Keystore.open(dir);
    expect(b.identity.did).toBe(did);
    expect(statSync(join(dir, 'identity.key')).mode & 0o777).toBe(0o600);
    b.close();
  });

  it('adds a share as a 0600 file under shares/ that a reopened keystore loads', () => {
    const dir = join(root, 'ks2');
    const a = Keystore.open(dir);
    const path = a.addShare(rec);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    a.close();
    const b = Keystore.open(dir);
    expect(b.shares.map((s) => s.did)).toEqual([rec.did]);
    b.close();
  });
});

describe('keystore / a wrong passphrase changes nothing', () => {
  it('the first open with a wrong passphrase writes nothing (no identity.key, folders or lock); the right one then works', () => {
    const dir = join(root, 'ks-pass');
    mkdirSync(dir, { mode: 0o700 });
    writeShareFile(join(dir, 'participant-1.share'), rec, { passphrase: 'right', ...FAST });
    expect(codeOf(() => Keystore.open(dir, { passphrase: 'wrong', ...FAST }))).toBe(FrostErrorCodes.WRONG_PASSPHRASE);
    expect(codeOf(() => Keystore.open(dir, FAST))).toBe(FrostErrorCodes.PASSPHRASE_REQUIRED);
    expect(readdirSync(dir)).toEqual(['participant-1.share']);
    const a = Keystore.open(dir, { passphrase: 'right', ...FAST });
    expect(a.shares.map((x) => x.did)).toEqual([rec.did]);
    a.close();
    expect(readIdentityFile(join(dir, 'identity.key'), 'right').did).toBe(a.identity.did);
    const b = Keystore.open(dir, { passphrase: 'right', ...FAST });
    expect(b.identity.did).toBe(a.identity.did);
    b.close();
  });

  it('a share file in shares/ is checked before anything is written too', () => {
    const dir = join(root, 'ks-pass-sub');
    mkdirSync(join(dir, 'shares'), { recursive: true, mode: 0o700 });
    writeShareFile(join(dir, 'shares', 'x.share'), rec, { passphrase: 'right', ...FAST });
    expect(codeOf(() => Keystore.open(dir, { passphrase: 'wrong', ...FAST }))).toBe(FrostErrorCodes.WRONG_PASSPHRASE);
    expect(readdirSync(dir)).toEqual(['shares']);
  });
});

describe('files and folders / failures are code io naming the path', () => {
  it('refuse / a keystore path that is a file; a missing identity or share file; a share written into a missing folder', () => {
    const file = join(root, 'not-a-folder');
    writeFileSync(file, 'x');
    expect(codeOf(() => Keystore.open(file))).toBe('io');
    expect(() => Keystore.open(file)).toThrow(`${file} exists and is not a folder`);
    const missing = join(root, 'missing.key');
    expect(codeOf(() => readIdentityFile(missing))).toBe('io');
    expect(() => readIdentityFile(missing)).toThrow(`cannot read ${missing}: no such file or folder (ENOENT)`);
    expect(codeOf(() => readShareFile(missing))).toBe('io');
    const nowhere = join(root, 'no-folder', 'p.share');
    expect(codeOf(() => writeShareFile(nowhere, rec))).toBe('io');
    expect(() => writeShareFile(nowhere, rec)).toThrow(`cannot write ${nowhere}`);
    expect(existsSync(join(root, 'no-folder'))).toBe(false);
  });
});

describe('files / read through a size cap, never whole when too large', () => {
  /** A 0600 sparse file of `bytes` zero bytes (nothing on disk). */
  const sparse = (name: string, bytes: number) => {
    const f = join(root, name);
    writeFileSync(f, '', { mode: 0o600 });
    truncateSync(f, bytes);
    return f;
  };

  it('refuse / a share file over 4 MiB, an identity file over 64 KiB: code io naming the cap (EFBIG)', () => {
    const share = sparse('huge.share', (4 << 20) + 1);
    expect(codeOf(() => readShareFile(share))).toBe('io');
    expect(() => readShareFile(share)).toThrow(`share file ${share}: larger than 4 MiB, the most a share file may be; not read (EFBIG)`);
    expect(codeOf(() => peekShareFile(share))).toBe(FrostErrorCodes.FILE_MALFORMED);
    expect(() => peekShareFile(share)).toThrow(/larger than 4 MiB/);
    const id = sparse('huge-identity.key', (64 << 10) + 1);
    expect(() => readIdentityFile(id)).toThrow(`identity file ${id}: larger than 64 KiB, the most an identity file may be`);
  });

  it('refuse / a --message file over 64 MiB (the most one NATS message carries): code io', () => {
    const m = sparse('huge.msg', (64 << 20) + 1);
    expect(codeOf(() => readMessage(m))).toBe('io');
    expect(() => readMessage(m)).toThrow(/message file .*huge\.msg: larger than 64 MiB/);
  });
});
