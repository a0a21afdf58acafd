/**
 * A Merkle tree over a node's receipt log, hashed as RFC 9162 §2.1 says (the RFC 6962 hashing):
 * SHA-256, leaf hash = SHA-256(0x00 ‖ leaf bytes), interior node = SHA-256(0x01 ‖ left ‖ right),
 * the empty tree's hash = SHA-256(""). A leaf is the COSE_Sign1 bytes of one receipt, leaf index =
 * the receipt's `seq` (seq 0 is the first leaf). Inclusion proofs (PATH, §2.1.3.1) and
 * consistency proofs (PROOF, §2.1.4.1), and their verification algorithms (§2.1.3.2, §2.1.4.2).
 *
 * Pure: no I/O. The tree keeps every complete power-of-two subtree hash (level k, index i covers
 * leaves i·2^k ..< (i+1)·2^k), so a root or a proof costs O(log² n) hashes after an O(n) build.
 */
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesEqual } from './bytes.ts';
import { ErrorCodes, JcpError } from './errors.ts';

/** A SHA-256 hash (32 bytes). */
export type Hash32 = Uint8Array;

/** The hash of the empty tree: SHA-256 of no bytes (RFC 9162 §2.1.1). */
export const EMPTY_ROOT: Hash32 = sha256(new Uint8Array(0));

/** RFC 9162 §2.1.1 leaf hash: SHA-256(0x00 ‖ `leaf`). */
export function leafHash(leaf: Uint8Array): Hash32 {
  const b = new Uint8Array(1 + leaf.length);
  b.set(leaf, 1);
  return sha256(b);
}

/** RFC 9162 §2.1.1 interior node hash: SHA-256(0x01 ‖ `left` ‖ `right`). */
export function nodeHash(left: Hash32, right: Hash32): Hash32 {
  const b = new Uint8Array(65);
  b[0] = 1;
  b.set(left, 1);
  b.set(right, 33);
  return sha256(b);
}

/** The largest power of two strictly below `n` (n ≥ 2), the `k` of RFC 9162 §2.1.1. */
function splitPoint(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

function isPow2(n: number): boolean {
  return n > 0 && (n & (n - 1)) === 0;
}

function checkSize(what: string, n: number, max: number): void {
  if (!Number.isSafeInteger(n) || n < 0 || n > max) {
    throw new JcpError(ErrorCodes.TLOG_RANGE, `${what} ${n} is outside the tree (0..${max})`, { field: what, value: n, max });
  }
}

/**
 * An append-only Merkle tree of leaf hashes (RFC 9162 §2.1). Build it with {@link MerkleTree.append}
 * (leaf bytes) or {@link MerkleTree.appendHash} (a leaf hash from elsewhere, e.g. a tile).
 */
export class MerkleTree {
  /** levels[k][i]: hash of the complete subtree of 2^k leaves starting at leaf i·2^k. */
  readonly #levels: Hash32[][] = [[]];

  /** Number of leaves. */
  get size(): number {
    return this.#levels[0]!.length;
  }

  /** Appends one leaf (its bytes, hashed with the 0x00 prefix). Returns its index. */
  append(leaf: Uint8Array): number {
    return this.appendHash(leafHash(leaf));
  }

  /** Appends one leaf by its leaf hash (32 bytes). Returns its index. @throws JcpError `bad-length` */
  appendHash(h: Hash32): number {
    if (h.length !== 32) throw new JcpError(ErrorCodes.BAD_LENGTH, `a leaf hash is 32 bytes, not ${h.length}`);
    const idx = this.size;
    this.#levels[0]!.push(h);
    let k = 0;
    let i = idx;
    let cur = h;
    while (i % 2 === 1) {
      const left = this.#levels[k]![i - 1]!;
      cur = nodeHash(left, cur);
      k++;
      i = (i - 1) / 2;
      if (this.#levels.length <= k) this.#levels.push([]);
      this.#levels[k]!.push(cur);
    }
    return idx;
  }

  /** Leaf hash of leaf `i`. @throws JcpError `tlog-range` */
  leafHashAt(i: number): Hash32 {
    checkSize('leaf index', i, this.size - 1);
    return this.#levels[0]![i]!;
  }

  /**
   * The stored hash of the complete subtree at level `level`, index `index` (leaves
   * index·2^level ..< (index+1)·2^level), or undefined when that subtree is not complete yet. These
   * are the hashes a C2SP tlog-tiles tile holds.
   */
  fullSubtree(level: number, index: number): Hash32 | undefined {
    return this.#levels[level]?.[index];
  }

  /** MTH(D[lo:hi]) (RFC 9162 §2.1.1) for 0 ≤ lo < hi ≤ size. */
  #hash(lo: number, hi: number): Hash32 {
    const n = hi - lo;
    if (isPow2(n) && lo % n === 0) {
      const level = Math.log2(n);
      return this.#levels[level]![lo / n]!;
    }
    const k = splitPoint(n);
    return nodeHash(this.#hash(lo, lo + k), this.#hash(lo + k, hi));
  }

  /** Root hash of the tree of the first `size` leaves (default: all). @throws JcpError `tlog-range` */
  root(size: number = this.size): Hash32 {
    checkSize('tree size', size, this.size);
    return size === 0 ? EMPTY_ROOT : this.#hash(0, size);
  }

  /**
   * RFC 9162 §2.1.3.1 inclusion proof (PATH) of leaf `index` in the tree of the first `size`
   * leaves: the audit path, bottom-up.
   * @throws JcpError `tlog-range` (index ≥ size, or size past the tree)
   */
  inclusionProof(index: number, size: number = this.size): Hash32[] {
    checkSize('tree size', size, this.size);
    if (size === 0)
      throw new JcpError(ErrorCodes.TLOG_RANGE, 'the empty tree has no leaves to prove', { field: 'leaf index', value: index, max: -1 });
    checkSize('leaf index', index, size - 1);
    const out: Hash32[] = [];
    const path = (m: number, lo: number, hi: number): void => {
      if (hi - lo === 1) return;
      const k = splitPoint(hi - lo);
      if (m - lo < k) {
        path(m, lo, lo + k);
        out.push(this.#hash(lo + k, hi));
      } else {
        path(m, lo + k, hi);
        out.push(this.#hash(lo, lo + k));
      }
    };
    path(index, 0, size);
    return out;
  }

  /**
   * RFC 9162 §2.1.4.1 consistency proof (PROOF) between the trees of the first `oldSize` and
   * `newSize` leaves. Empty when oldSize is 0 or equals newSize.
   * @throws JcpError `tlog-range` (oldSize > newSize, or newSize past the tree)
   */
  consistencyProof(oldSize: number, newSize: number = this.size): Hash32[] {
    checkSize('tree size', newSize, this.size);
    checkSize('old tree size', oldSize, newSize);
    const out: Hash32[] = [];
    if (oldSize === 0 || oldSize === newSize) return out;
    const sub = (m: number, lo: number, hi: number, whole: boolean): void => {
      if (m === hi - lo) {
        if (!whole) out.push(this.#hash(lo, hi));
        return;
      }
      const k = splitPoint(hi - lo);
      if (m <= k) {
        sub(m, lo, lo + k, whole);
        out.push(this.#hash(lo + k, hi));
      } else {
        sub(m - k, lo + k, hi, false);
        out.push(this.#hash(lo, lo + k));
      }
    };
    sub(oldSize, 0, newSize, true);
    return out;
  }
}

function fail(what: string, detail?: Record<string, unknown>): never {
  throw new JcpError(ErrorCodes.PROOF_INVALID, what, detail);
}

/**
 * Verifies an RFC 9162 inclusion proof (§2.1.3.2): leaf hash `leaf` is leaf `index` of the tree
 * of `size` leaves whose root is `root`.
 * @throws JcpError `tlog-range` (index ≥ size), `bad-length` (a hash not 32 bytes),
 *   `proof-invalid` (the path is too long or too short, or the computed root differs)
 */
export function verifyInclusion(leaf: Hash32, index: number, size: number, proof: readonly Hash32[], root: Hash32): void {
  if (!Number.isSafeInteger(size) || size < 1)
    throw new JcpError(ErrorCodes.TLOG_RANGE, `tree size ${size}: no leaf to prove`, { field: 'tree size', value: size });
  checkSize('leaf index', index, size - 1);
  for (const h of [leaf, root, ...proof])
    if (h.length !== 32) throw new JcpError(ErrorCodes.BAD_LENGTH, `a hash is 32 bytes, not ${h.length}`);
  let fn = index;
  let sn = size - 1;
  let r = leaf;
  for (const p of proof) {
    if (sn === 0) fail(`the inclusion proof is longer than a tree of ${size} leaves needs`);
    if (fn % 2 === 1 || fn === sn) {
      r = nodeHash(p, r);
      if (fn % 2 === 0) {
        while (fn % 2 === 0 && fn !== 0) {
          fn = Math.floor(fn / 2);
          sn = Math.floor(sn / 2);
        }
      }
    } else {
      r = nodeHash(r, p);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  if (sn !== 0) fail(`the inclusion proof is shorter than a tree of ${size} leaves needs`);
  if (!bytesEqual(r, root)) fail(`leaf ${index} is not in the tree of ${size} leaves with that root`);
}

/**
 * Verifies an RFC 9162 consistency proof (§2.1.4.2): the tree of `oldSize` leaves with root
 * `oldRoot` is a prefix of the tree of `newSize` leaves with root `newRoot`. By RFC 9162 the
 * proof for oldSize = newSize, or oldSize = 0, is empty (then equal roots, resp. nothing, is checked).
 * @throws JcpError `tlog-range` (oldSize > newSize), `bad-length`, `proof-invalid`
 */
export function verifyConsistency(oldSize: number, newSize: number, proof: readonly Hash32[], oldRoot: Hash32, newRoot: Hash32): void {
  checkSize('tree size', newSize, Number.MAX_SAFE_INTEGER);
  checkSize('old tree size', oldSize, newSize);
  for (const h of [oldRoot, newRoot, ...proof])
    if (h.length !== 32) throw new JcpError(ErrorCodes.BAD_LENGTH, `a hash is 32 bytes, not ${h.length}`);
  if (oldSize === 0 || oldSize === newSize) {
    if (proof.length !== 0) fail(`a consistency proof from ${oldSize} to ${newSize} leaves is empty`);
    if (oldSize === newSize && !bytesEqual(oldRoot, newRoot))
      fail(`two trees of ${newSize} leaves with different roots: the log was rewritten`);
    return;
  }
  if (proof.length === 0) fail('the consistency proof is empty');
  const path = isPow2(oldSize) ? [oldRoot, ...proof] : [...proof];
  let fn = oldSize - 1;
  let sn = newSize - 1;
  while (fn % 2 === 1) {
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  let fr = path[0]!;
  let sr = path[0]!;
  for (const c of path.slice(1)) {
    if (sn === 0) fail(`the consistency proof is longer than ${oldSize} → ${newSize} leaves needs`);
    if (fn % 2 === 1 || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      if (fn % 2 === 0) {
        while (fn % 2 === 0 && fn !== 0) {
          fn = Math.floor(fn / 2);
          sn = Math.floor(sn / 2);
        }
      }
    } else {
      sr = nodeHash(sr, c);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  if (sn !== 0) fail(`the consistency proof is shorter than ${oldSize} → ${newSize} leaves needs`);
  if (!bytesEqual(fr, oldRoot))
    fail(`the proof does not lead to the old root: the tree of ${oldSize} leaves is not a prefix of the new one`);
  if (!bytesEqual(sr, newRoot)) fail(`the proof does not lead to the new root of ${newSize} leaves`);
}
