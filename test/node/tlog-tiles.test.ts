/**
 * C2SP tlog-tiles on the metrics port (node/tlogtiles.ts): tile paths, hash tiles against a naive
 * RFC 9162 MTH (node:crypto), and a running node whose tiles give an inclusion proof that
 * verifies against its signed /checkpoint. Malformed tile paths → 400, missing tiles → 404.
 */
import { createHash } from 'node:crypto';
import { afterAll, describe, expect, test } from 'vitest';
import { MerkleTree, openCheckpoint, parseDid, verifyInclusion } from '../../core/index.ts';
import { JcpClient } from '../../client/index.ts';
import { fetchCheckpointView, hashTile, parseTilePath, tileIndexPath } from '../../node/index.ts';
import { cast, liveNode, mint, tempDir } from './fixtures.ts';

const { rng, alice, bob } = cast('tlog-tiles');
const dirs: Array<() => void> = [];
afterAll(() => {
  for (const d of dirs) d();
});

const H = (...p: Buffer[]) => createHash('sha256').update(Buffer.concat(p)).digest();
/** RFC 9162 MTH over leaf hashes (already 0x00-hashed). */
function MTHh(L: Buffer[]): Buffer {
  if (L.length === 1) return L[0]!;
  let k = 1;
  while (k * 2 < L.length) k *= 2;
  return H(Buffer.from([1]), MTHh(L.slice(0, k)), MTHh(L.slice(k)));
}
function PATHh(m: number, L: Buffer[]): Buffer[] {
  if (L.length === 1) return [];
  let k = 1;
  while (k * 2 < L.length) k *= 2;
  return m < k ? [...PATHh(m, L.slice(0, k)), MTHh(L.slice(k))] : [...PATHh(m - k, L.slice(k)), MTHh(L.slice(0, k))];
}
const split = (b: Buffer): Buffer[] => Array.from({ length: b.length / 32 }, (_, i) => b.subarray(32 * i, 32 * i + 32));

describe('tlog tiles - paths and hash tiles', () => {
  test('tile index paths are x-prefixed 3-digit groups; malformed paths parse to nothing', () => {
    expect(tileIndexPath(1234067)).toBe('x001/x234/067');
    expect(tileIndexPath(5)).toBe('005');
    expect(parseTilePath('/tile/0/x001/x234/067')).toEqual({ kind: 'hash', level: 0, index: 1234067, width: 256 });
    expect(parseTilePath('/tile/2/000.p/7')).toEqual({ kind: 'hash', level: 2, index: 0, width: 7 });
    expect(parseTilePath('/tile/entries/001.p/255')).toEqual({ kind: 'entries', index: 1, width: 255 });
    for (const bad of [
      '/tile/0/0',
      '/tile/0/000.p/0',
      '/tile/0/000.p/256',
      '/tile/0/000.p/07',
      '/tile/64/000',
      '/tile/01/000',
      '/tile/0/x000/001',
      '/tile/0/001/002',
      '/tile/0/000/',
      '/tile/x/000',
    ]) {
      expect(parseTilePath(bad), bad).toBeUndefined();
    }
  });

  test('level-0 tiles hold leaf hashes, level-1 tiles the roots of 256-leaf subtrees; tiles past the tree are absent', () => {
    const t = new MerkleTree();
    const leaves = Array.from({ length: 600 }, (_, i) => Buffer.from(`leaf ${i}`));
    for (const l of leaves) t.append(l);
    const lh = leaves.map((l) => H(Buffer.from([0]), l));
    expect(split(Buffer.from(hashTile(t, 0, 1, 256)!)).map((x) => x.toString('hex'))).toEqual(
      lh.slice(256, 512).map((x) => x.toString('hex')),
    );
    expect(split(Buffer.from(hashTile(t, 0, 2, 88)!)).map((x) => x.toString('hex'))).toEqual(
      lh.slice(512, 600).map((x) => x.toString('hex')),
    );
    expect(split(Buffer.from(hashTile(t, 1, 0, 2)!)).map((x) => x.toString('hex'))).toEqual(
      [MTHh(lh.slice(0, 256)), MTHh(lh.slice(256, 512))].map((x) => x.toString('hex')),
    );
    expect(hashTile(t, 0, 2, 256)).toBeUndefined();
    expect(hashTile(t, 0, 2, 89)).toBeUndefined();
    expect(hashTile(t, 1, 0, 3)).toBeUndefined();
    expect(hashTile(t, 2, 0, 1)).toBeUndefined();
  });
});

describe('tlog tiles - a running node', () => {
  test('an inclusion proof built from fetched tiles verifies against the signed /checkpoint; bad requests are 400/404/405', async () => {
    const t = tempDir('tiles');
    dirs.push(t.cleanup);
    const node = await liveNode({ metrics: '127.0.0.1:0' }, {}, t.dir);
    try {
      const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
      const c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
      for (let i = 0; i < 5; i++) await c.call({ chain: [g], action: 'read', payload: { i }, cost: { uj: 1n, provenance: 'Estimator' } });
      const base = `http://127.0.0.1:${node.metricsPort}`;
      const get = async (p: string) => {
        const r = await fetch(base + p);
        return { status: r.status, body: Buffer.from(await r.arrayBuffer()) };
      };
      const cpR = await get('/checkpoint');
      expect(cpR.status).toBe(200);
      const cp = openCheckpoint(cpR.body.toString('utf8'), parseDid(node.steward.did), `jcp/${node.steward.did}`);
      expect(cp.size).toBe(5);
      expect(await fetchCheckpointView(base, node.steward.did)).toMatchObject({ size: 5, root: Buffer.from(cp.root).toString('hex') });

      const tile = await get('/tile/0/000.p/5');
      expect(tile.status).toBe(200);
      const hashes = split(tile.body);
      const entries = await get('/tile/entries/000.p/5');
      expect(entries.status).toBe(200);
      const items: Buffer[] = [];
      for (let o = 0; o < entries.body.length; ) {
        const n = entries.body.readUInt16BE(o);
        items.push(entries.body.subarray(o + 2, o + 2 + n));
        o += 2 + n;
      }
      expect(items.length).toBe(5);
      expect(items.map((e) => H(Buffer.from([0]), e).toString('hex'))).toEqual(hashes.map((h) => h.toString('hex')));
      expect(MTHh(hashes).toString('hex')).toBe(Buffer.from(cp.root).toString('hex'));
      verifyInclusion(hashes[2]!, 2, cp.size, PATHh(2, hashes), cp.root);

      for (const [p, want] of [
        ['/tile/0/0', 400],
        ['/tile/0/000.p/0', 400],
        ['/tile/0/000.p', 400],
        ['/tile/99/000', 400],
        ['/tile/0/000.p/6', 404],
        ['/tile/0/000', 404],
        ['/tile/0/001.p/1', 404],
        ['/tile/entries/000.p/6', 404],
        ['/tile/1/000.p/1', 404],
      ] as const) {
        expect((await get(p)).status, p).toBe(want);
      }
      expect((await fetch(`${base}/checkpoint`, { method: 'POST', body: 'x' })).status).toBe(405);

      // The tiles follow the log.
      await c.call({ chain: [g], action: 'read', payload: { i: 5 }, cost: { uj: 1n, provenance: 'Estimator' } });
      await c.close();
      const cp6 = openCheckpoint((await get('/checkpoint')).body.toString('utf8'), parseDid(node.steward.did));
      expect(cp6.size).toBe(6);
      expect((await get('/tile/0/000.p/6')).status).toBe(200);
    } finally {
      await node.close();
    }
  }, 60_000);
});
