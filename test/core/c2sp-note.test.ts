/**
 * C2SP signed-note, tlog-checkpoint and tlog-cosignature (core/note.ts), checked by hand here with
 * node:crypto (key ids, signature bytes, the cosigned message) rather than through our own parser.
 */
import { createHash, createPublicKey, verify as nodeVerify } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  actorFromSeed,
  addSignatureLines,
  checkpointText,
  cosign,
  isJcpError,
  MerkleTree,
  openCheckpoint,
  parseCheckpointText,
  parseNote,
  signCheckpoint,
  verifyCosignature,
  verifyNote,
} from '../../core/internal.ts';

const log = actorFromSeed(new Uint8Array(32).fill(1));
const witness = actorFromSeed(new Uint8Array(32).fill(2));
const mallory = actorFromSeed(new Uint8Array(32).fill(3));
const ORIGIN = `jcp/${log.did}`;

function nodeKey(raw: Uint8Array) {
  return createPublicKey({ key: Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), raw]), format: 'der', type: 'spki' });
}
function codeOf(f: () => unknown): string | undefined {
  try {
    f();
  } catch (e) {
    if (isJcpError(e)) return e.code;
    throw e;
  }
  return undefined;
}
function tree(n: number): MerkleTree {
  const t = new MerkleTree();
  for (let i = 0; i < n; i++) t.append(Buffer.from(`r${i}`));
  return t;
}

describe('c2sp - checkpoint as a signed note', () => {
  it('text is origin, decimal size, base64 root; the signature line is key id ‖ Ed25519 over the text', () => {
    const t = tree(5);
    const note = signCheckpoint({ origin: ORIGIN, size: 5, root: t.root(), extensions: [] }, log.key);
    const [text, sigs] = note.split('\n\n') as [string, string];
    expect(`${text}\n`).toBe(`${ORIGIN}\n5\n${Buffer.from(t.root()).toString('base64')}\n`);
    const m = /^\u2014 (\S+) (\S+)\n$/.exec(sigs);
    expect(m?.[1]).toBe(ORIGIN);
    const raw = Buffer.from(m![2]!, 'base64');
    const id = createHash('sha256')
      .update(Buffer.concat([Buffer.from(ORIGIN), Buffer.from([0x0a, 0x01]), log.key.publicKey.bytes]))
      .digest()
      .subarray(0, 4);
    expect(raw.subarray(0, 4).toString('hex')).toBe(id.toString('hex'));
    expect(nodeVerify(null, Buffer.from(`${text}\n`), nodeKey(log.key.publicKey.bytes), raw.subarray(4))).toBe(true);
    const c = openCheckpoint(note, log.key.publicKey, ORIGIN);
    expect([c.origin, c.size, Buffer.from(c.root).toString('hex')]).toEqual([ORIGIN, 5, Buffer.from(t.root()).toString('hex')]);
  });

  it('refuse / signed by another key, altered text, another origin, malformed text', () => {
    const t = tree(3);
    const note = signCheckpoint({ origin: ORIGIN, size: 3, root: t.root(), extensions: ['ext one'] }, log.key);
    expect(codeOf(() => openCheckpoint(note, mallory.key.publicKey, ORIGIN))).toBe('note-unverified');
    const forged = signCheckpoint({ origin: ORIGIN, size: 3, root: t.root(), extensions: [] }, mallory.key);
    expect(codeOf(() => openCheckpoint(forged, log.key.publicKey, ORIGIN))).toBe('note-unverified');
    expect(codeOf(() => openCheckpoint(note.replace('\n3\n', '\n2\n'), log.key.publicKey, ORIGIN))).toBe('note-unverified');
    expect(codeOf(() => openCheckpoint(note, log.key.publicKey, 'jcp/someone-else'))).toBe('note-unverified');
    expect(() => openCheckpoint(note, log.key.publicKey, 'jcp/someone-else', ORIGIN)).toThrow(/is of log jcp\/did:key/);
    expect(codeOf(() => parseCheckpointText(`${ORIGIN}\n03\n${Buffer.from(t.root()).toString('base64')}\n`))).toBe('note-malformed');
    expect(codeOf(() => parseCheckpointText(`${ORIGIN}\n3\nAAAA\n`))).toBe('note-malformed');
    expect(codeOf(() => parseNote('no blank line\n'))).toBe('note-malformed');
    expect(codeOf(() => parseNote('text\n\nnot a signature\n'))).toBe('note-malformed');
    expect(codeOf(() => checkpointText({ origin: 'a\nb', size: 1, root: t.root(), extensions: [] }))).toBe('note-malformed');
    expect(parseCheckpointText(verifyNote(note, ORIGIN, log.key.publicKey).text).extensions).toEqual(['ext one']);
  });
});

describe('c2sp - cosignature/v1', () => {
  it('signs cosignature/v1, time, then the checkpoint text; key id uses type 0x04; timestamp is u64 big-endian', () => {
    const t = tree(9);
    const note = signCheckpoint({ origin: ORIGIN, size: 9, root: t.root(), extensions: [] }, log.key);
    const text = parseNote(note).text;
    const name = 'jcp/witness';
    const line = cosign(text, name, witness.key, 1_700_000_000);
    const raw = Buffer.from(line.split(' ')[2]!, 'base64');
    const id = createHash('sha256')
      .update(Buffer.concat([Buffer.from(name), Buffer.from([0x0a, 0x04]), witness.key.publicKey.bytes]))
      .digest()
      .subarray(0, 4);
    expect(raw.length).toBe(4 + 8 + 64);
    expect(raw.subarray(0, 4).toString('hex')).toBe(id.toString('hex'));
    expect(raw.readBigUInt64BE(4)).toBe(1_700_000_000n);
    const msg = Buffer.from(`cosignature/v1\ntime 1700000000\n${text}`);
    expect(nodeVerify(null, msg, nodeKey(witness.key.publicKey.bytes), raw.subarray(12))).toBe(true);
    const both = addSignatureLines(note, [line]);
    expect(verifyCosignature(both, name, witness.key.publicKey).timeS).toBe(1_700_000_000);
    // the log's own signature still verifies with the cosignature added
    expect(openCheckpoint(both, log.key.publicKey, ORIGIN).size).toBe(9);
  });

  it('refuse / a cosignature over a different checkpoint, or by another key', () => {
    const t = tree(9);
    const note9 = signCheckpoint({ origin: ORIGIN, size: 9, root: t.root(), extensions: [] }, log.key);
    const note8 = signCheckpoint({ origin: ORIGIN, size: 8, root: t.root(8), extensions: [] }, log.key);
    const line8 = cosign(parseNote(note8).text, 'jcp/witness', witness.key, 5);
    expect(codeOf(() => verifyCosignature(addSignatureLines(note9, [line8]), 'jcp/witness', witness.key.publicKey))).toBe(
      'cosignature-invalid',
    );
    const line9 = cosign(parseNote(note9).text, 'jcp/witness', witness.key, 5);
    expect(codeOf(() => verifyCosignature(addSignatureLines(note9, [line9]), 'jcp/witness', mallory.key.publicKey))).toBe(
      'cosignature-invalid',
    );
    expect(codeOf(() => verifyCosignature(note9, 'jcp/witness', witness.key.publicKey))).toBe('cosignature-invalid');
    // a changed timestamp breaks it
    const raw = Buffer.from(line9.split(' ')[2]!, 'base64');
    raw.writeBigUInt64BE(6n, 4);
    const moved = `\u2014 jcp/witness ${raw.toString('base64')}`;
    expect(codeOf(() => verifyCosignature(addSignatureLines(note9, [moved]), 'jcp/witness', witness.key.publicKey))).toBe(
      'cosignature-invalid',
    );
  });
});
