/**
 * The demo's evidence: each node's receipt log, read after the node stopped (LevelDB allows one
 * process at a time), verified and replayed with core `replayReceipts` (§8.1, C14): receipts that
 * fail verification are counted, never used; attribution, denies and energy provenance are
 * computed from the verified receipts only.
 */
import { type ContentId, type Did, openReceipt, type ReceiptCore, replayReceipts } from '../core/index.ts';
import { ReceiptLog } from '../node/index.ts';

/** One node's log, verified. */
export interface NodeEvidence {
  readonly name: string;
  readonly did: Did;
  readonly dataDir: string;
  /** Receipts in the log. */
  readonly total: number;
  /** Receipt cores that verified under the node's steward, in log order. */
  readonly verified: readonly ReceiptCore[];
  /** Receipts that failed verification: `{index, code, why}`. */
  readonly rejected: readonly { readonly index: number; readonly code: string; readonly why: string }[];
  /** Continuity breaks (`seq` gaps, reorders, broken `prev` links, duplicates). */
  readonly breaks: readonly { readonly index: number; readonly code: string }[];
}

/**
 * Reads and verifies the log in `dataDir` (the node must have stopped).
 * @throws NodeFault `log-missing` / `log-corrupt` / `log-steward-mismatch`.
 */
export async function readEvidence(name: string, did: Did, dataDir: string): Promise<NodeEvidence> {
  const log = await ReceiptLog.open(dataDir, { steward: did, mustExist: true, nowS: 0 });
  const receipts: Uint8Array[] = [];
  try {
    for await (const chunk of log.receiptChunks(1024)) for (const [, bytes] of chunk) receipts.push(bytes);
  } finally {
    await log.close();
  }
  const r = replayReceipts(receipts, { steward: did });
  const bad = new Set(r.rejected.map((x) => x.index));
  const verified: ReceiptCore[] = [];
  for (const [i, bytes] of receipts.entries()) {
    if (bad.has(i)) continue;
    const o = openReceipt(bytes, did);
    if (o.ok) verified.push(o.value);
  }
  return {
    name,
    did,
    dataDir,
    total: r.total,
    verified,
    rejected: r.rejected.map((x) => ({ index: x.index, code: x.code, why: x.why })),
    breaks: r.breaks.map((b) => ({ index: b.index, code: b.code })),
  };
}

/** Totals for one party (a worker, the team) from verified receipts. µJ as bigint. */
export interface Tally {
  allowed: number;
  refused: number;
  spentUj: bigint;
  readonly denies: Record<string, number>;
  /** Per grant id: allowed, refused, µJ. */
  readonly grants: Record<ContentId, { allowed: number; refused: number; spentUj: bigint }>;
}

/** An empty tally. */
export function emptyTally(): Tally {
  return { allowed: 0, refused: 0, spentUj: 0n, denies: {}, grants: {} };
}

/** Adds one verified receipt to a tally. */
export function addToTally(t: Tally, c: ReceiptCore): void {
  const g = t.grants[c.grant_id] ?? { allowed: 0, refused: 0, spentUj: 0n };
  t.grants[c.grant_id] = g;
  if (c.verdict === 'allow') {
    t.allowed++;
    t.spentUj += c.cost_uj;
    g.allowed++;
    g.spentUj += c.cost_uj;
  } else {
    t.refused++;
    g.refused++;
    const r = c.deny_reason ?? 'deny';
    t.denies[r] = (t.denies[r] ?? 0) + 1;
  }
}

/** The decision of every verified receipt by request id (§11: one receipt per request). */
export function decisionsByRequest(evidence: readonly NodeEvidence[]): Map<ContentId, ReceiptCore> {
  const m = new Map<ContentId, ReceiptCore>();
  for (const e of evidence) for (const c of e.verified) if (c.request_id !== undefined && !m.has(c.request_id)) m.set(c.request_id, c);
  return m;
}
