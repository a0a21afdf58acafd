/**
 * The node's receipt log served read-only in the C2SP tlog-tiles layout
 * (c2sp.org/tlog-tiles@v1), on the metrics port (docs/tlog.md):
 * - `GET /checkpoint`: the current checkpoint, a C2SP signed note by the steward key;
 * - `GET /tile/<L>/<N>[.p/<W>]`: hash tile at level L (0..63), index N: the 32-byte hashes of the
 *   complete subtrees of 256^L leaves number N·256 … N·256+W−1 (W = 256 for a full tile, 1..255
 *   for a partial one), back to back;
 * - `GET /tile/entries/<N>[.p/<W>]`: entry bundle of leaves N·256 … N·256+W−1, each as a
 *   big-endian u16 length then the receipt's COSE_Sign1 bytes.
 * N is written in 3-digit groups, each but the last prefixed `x` (1234067 → `x001/x234/067`).
 * A malformed path is 400; a tile the tree does not (yet) hold is 404. A partial tile is served
 * while the tree holds at least W of its entries (a smaller one is a prefix of a larger one).
 */
import { type Actor, concat, type MerkleTree } from '../core/index.ts';
import type { ReceiptLog } from './receiptlog.ts';
import { buildLogTree, checkpointOf, originOf } from './tlog.ts';

/** Width of a full tile (tile height 8: 2^8 hashes). */
export const TILE_WIDTH = 256;

/** A parsed tile path. */
export type TilePath =
  | { readonly kind: 'hash'; readonly level: number; readonly index: number; readonly width: number }
  | { readonly kind: 'entries'; readonly index: number; readonly width: number };

/**
 * Parses `/tile/…` (tlog-tiles §"Merkle Tree"): level, index (x-prefixed 3-digit groups),
 * optional `.p/<W>`. Undefined when the path is malformed (→ 400).
 */
export function parseTilePath(p: string): TilePath | undefined {
  const m = /^\/tile\/(entries|[0-9]{1,2})\/((?:x[0-9]{3}\/)*[0-9]{3})(?:\.p\/([0-9]{1,3}))?$/.exec(p);
  if (m === null) return undefined;
  const [, lv, n, w] = m as unknown as [string, string, string, string | undefined];
  if (lv !== 'entries' && (String(Number(lv)) !== lv || Number(lv) > 63)) return undefined;
  const groups = n.split('/').map((g) => g.replace(/^x/, ''));
  if (groups.length > 1 && groups[0] === '000') return undefined; // a leading zero group
  if (groups.length > 6) return undefined; // past 2^53
  const index = Number(groups.join(''));
  let width = TILE_WIDTH;
  if (w !== undefined) {
    width = Number(w);
    if (String(width) !== w || width < 1 || width >= TILE_WIDTH) return undefined;
  }
  return lv === 'entries' ? { kind: 'entries', index, width } : { kind: 'hash', level: Number(lv), index, width };
}

/** Writes tile index `n` in the tlog-tiles path form (`x001/x234/067`). */
export function tileIndexPath(n: number): string {
  const s = String(n);
  const padded = s.padStart(Math.ceil(s.length / 3) * 3, '0');
  const groups = padded.match(/.{3}/g)!;
  return groups.map((g, i) => (i < groups.length - 1 ? `x${g}` : g)).join('/');
}

/** Hashes the tree holds at tree level `8·level` (complete subtrees of 256^level leaves). */
function countAt(tree: MerkleTree, level: number): number {
  return Math.floor(tree.size / TILE_WIDTH ** level);
}

/**
 * The body of hash tile `t` (hashes back to back), or undefined when the tree does not hold it.
 */
export function hashTile(tree: MerkleTree, level: number, index: number, width: number): Uint8Array | undefined {
  const first = index * TILE_WIDTH;
  if (countAt(tree, level) < first + width) return undefined;
  const parts: Uint8Array[] = [];
  for (let i = 0; i < width; i++) parts.push(tree.fullSubtree(8 * level, first + i)!);
  return concat(...parts);
}

/** What {@link TileServer.handle} answers. */
export interface TileReply {
  readonly status: 200 | 400 | 404 | 500 | 503;
  readonly type: string;
  readonly body: Uint8Array | string;
}

/**
 * The tiles of one node's log. It follows the log: before each answer it appends the receipts
 * made durable since the last one (in seq order), so it never serves what is not on disk.
 */
export class TileServer {
  readonly #log: ReceiptLog;
  readonly #steward: Actor;
  readonly #origin: string;
  #tree: MerkleTree | undefined;
  #sync: Promise<void> = Promise.resolve();
  #broken: string | undefined;
  #note: { size: number; note: string } | undefined;

  /**
   * `origin` defaults to `jcp/<steward did>` (node/tlog.ts); `tree`, when given, is the log's
   * tree already built (the start-up check's), followed from its size on.
   */
  constructor(log: ReceiptLog, steward: Actor, origin: string = originOf(steward.did), tree?: MerkleTree) {
    this.#log = log;
    this.#steward = steward;
    this.#origin = origin;
    this.#tree = tree;
  }

  /** Brings the tree up to the log's durable receipts. @throws NodeFault `log-damaged` (a gap, an archived log) */
  async #catchUp(): Promise<MerkleTree> {
    if (this.#tree === undefined) this.#tree = await buildLogTree(this.#log);
    const t = this.#tree;
    const durable = this.#log.durableSeq;
    if (durable >= t.size) {
      for await (const c of this.#log.receiptChunks(4096, t.size)) {
        for (const [seq, b] of c) {
          if (seq > durable) return t;
          if (seq !== t.size) throw new Error(`receipt ${t.size} is missing from the log`);
          t.append(b);
        }
      }
    }
    return t;
  }

  /** The tree, caught up with the log (serialised: one catch-up at a time). */
  async tree(): Promise<MerkleTree> {
    const run = this.#sync.then(() => this.#catchUp());
    this.#sync = run.then(
      () => undefined,
      () => undefined,
    );
    return await run;
  }

  /** The current checkpoint as a signed note (re-signed only when the tree grew). */
  async checkpoint(): Promise<string> {
    const t = await this.tree();
    if (this.#note?.size !== t.size) this.#note = { size: t.size, note: checkpointOf(t, this.#steward, this.#origin).note };
    return this.#note.note;
  }

  /** Answers a GET of `url` (path and optional query; the query is ignored). Never throws. */
  async handle(url: string): Promise<TileReply> {
    const p = url.split('?')[0]!;
    if (this.#broken !== undefined) return { status: 503, type: 'text/plain', body: `${this.#broken}\n` };
    try {
      if (p === '/checkpoint') return { status: 200, type: 'text/plain; charset=utf-8', body: await this.checkpoint() };
      const tp = parseTilePath(p);
      if (tp === undefined)
        return { status: 400, type: 'text/plain', body: 'malformed tile path: /tile/<L>/<N>[.p/<W>] or /tile/entries/<N>[.p/<W>]\n' };
      const t = await this.tree();
      if (tp.kind === 'hash') {
        const body = hashTile(t, tp.level, tp.index, tp.width);
        return body === undefined
          ? { status: 404, type: 'text/plain', body: 'no such tile in the tree (yet)\n' }
          : { status: 200, type: 'application/octet-stream', body };
      }
      const first = tp.index * TILE_WIDTH;
      if (t.size < first + tp.width) return { status: 404, type: 'text/plain', body: 'no such entry bundle in the tree (yet)\n' };
      const parts: Uint8Array[] = [];
      for (let i = 0; i < tp.width; i++) {
        const leaf = await this.#log.getReceipt(first + i);
        if (leaf === undefined) throw new Error(`receipt ${first + i} is missing from the log`);
        if (leaf.length > 0xffff)
          return { status: 500, type: 'text/plain', body: `receipt ${first + i} is longer than an entry bundle carries (65535 bytes)\n` };
        parts.push(Uint8Array.of(leaf.length >> 8, leaf.length & 0xff), leaf);
      }
      return { status: 200, type: 'application/octet-stream', body: concat(...parts) };
    } catch (e) {
      // A gap or an archived log: the tiles cannot be served from this log (docs/tlog.md).
      this.#broken = `the transparency log cannot be served: ${(e as Error).message}`;
      return { status: 503, type: 'text/plain', body: `${this.#broken}\n` };
    }
  }
}
