/**
 * The console's view of transparency logs (node/tlogview.ts): verified checkpoints, their
 * cosigners (good and bad), and consistency verdicts with both checkpoints as evidence.
 */
import { describe, expect, test } from 'vitest';
import { actorFromSeed, addSignatureLines, cosign, MerkleTree, parseNote, signCheckpoint } from '../../core/internal.ts';
import { checkpointView, compareCheckpoints } from '../../node/index.ts';

const log = actorFromSeed(new Uint8Array(32).fill(7));
const w1 = actorFromSeed(new Uint8Array(32).fill(8));
const w2 = actorFromSeed(new Uint8Array(32).fill(9));
const origin = `jcp/${log.did}`;
const witnesses = [
  { name: 'jcp/w1', did: w1.did },
  { name: 'jcp/w2', did: w2.did },
];

function treeOf(n: number, salt = ''): MerkleTree {
  const t = new MerkleTree();
  for (let i = 0; i < n; i++) t.append(Buffer.from(`${salt}r${i}`));
  return t;
}
const noteOf = (t: MerkleTree, n = t.size) => signCheckpoint({ origin, size: n, root: t.root(n), extensions: [] }, log.key);

describe('tlog view - checkpoints for an audit console', () => {
  test('cosigners that verify are listed; a cosignature over another checkpoint is listed as bad', () => {
    const t = treeOf(12);
    const n12 = noteOf(t);
    const n11 = noteOf(t, 11);
    const good = cosign(parseNote(n12).text, 'jcp/w1', w1.key, 100);
    const stale = cosign(parseNote(n11).text, 'jcp/w2', w2.key, 90);
    const v = checkpointView(addSignatureLines(n12, [good, stale]), log.did, witnesses);
    expect([v.size, v.origin]).toEqual([12, origin]);
    expect(v.cosigners).toEqual([{ name: 'jcp/w1', timeS: 100 }]);
    expect(v.badCosignatures.map((b) => b.name)).toEqual(['jcp/w2']);
    expect(() => checkpointView(n12, w1.did)).toThrow(/no signature|another origin|not jcp/);
  });

  test('consistent growth is consistent; a rewritten or shrunk log is not, with both notes as evidence', () => {
    const t = treeOf(20);
    const old = checkpointView(noteOf(t, 9), log.did);
    const cur = checkpointView(noteOf(t), log.did);
    expect(compareCheckpoints(old, cur, t.consistencyProof(9, 20))).toEqual({ consistent: true });
    const forked = treeOf(20, 'x');
    const fork = checkpointView(noteOf(forked), log.did);
    const r = compareCheckpoints(old, fork, forked.consistencyProof(9, 20));
    expect(r.consistent).toBe(false);
    if (!r.consistent) expect(r.evidence).toEqual([old.note, fork.note]);
    const shrunk = compareCheckpoints(cur, old, []);
    expect(shrunk).toMatchObject({ consistent: false, why: expect.stringContaining('shrank') });
  });
});
