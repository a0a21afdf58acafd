/**
 * io/files.ts writeFileDurably, the one durable file writer (node snapshots, archives, FROST
 * share, identity and journal files): the file appears whole with its mode, and a failed write
 * leaves no temporary file behind.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writeFileDurably } from '../../io/index.ts';

const root = mkdtempSync(join(tmpdir(), 'jcp-durable-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('writeFileDurably', () => {
  it('replaces the file whole, with the mode given, and leaves only the file', () => {
    const dir = join(root, 'ok');
    mkdirSync(dir);
    const file = join(dir, 'share.bin');
    writeFileSync(file, 'old');
    writeFileDurably(file, Uint8Array.of(1, 2, 3), 0o600);
    expect([...readFileSync(file)]).toEqual([1, 2, 3]);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readdirSync(dir)).toEqual(['share.bin']);
  });

  it('refuse / a rename that fails (a folder in the way) throws the fs error and removes its temporary file', () => {
    const dir = join(root, 'blocked');
    mkdirSync(join(dir, 'target', 'inside'), { recursive: true });
    expect(() => writeFileDurably(join(dir, 'target'), Uint8Array.of(9))).toThrow(/EISDIR|ENOTEMPTY|EEXIST/);
    expect(readdirSync(dir)).toEqual(['target']);
  });
});
