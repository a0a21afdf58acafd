/**
 * Replay of a receipt stream (spec §8.1, conformance C14, C16): the receipt stream is the
 * write-ahead log, so a fresh enforcement point rebuilds its budget state from its own verified
 * receipts, with no external index.
 *
 * For each receipt, in stream order:
 * - it is verified ({@link openReceipt}, optionally pinned to one steward); a receipt that fails
 *   is COUNTED in `rejected` with its index and code — never applied, never silently skipped
 *   (§8.1: "a ledger that drops entries is not a ledger");
 * - a receipt whose exact bytes were already seen is a duplicate log entry: reported in `breaks`
 *   (`duplicate`) and not applied twice;
 * - an allow re-applies its debit (`cost_uj`) to every grant it names: `chain_ids` (root first,
 *   ancestors included) for a multi-hop chain, else `grant_id`; a deny debits nothing;
 * - `request_id` → receipt bytes feeds the idempotency index (the first receipt for a request
 *   wins: it is the response that was sent);
 * - per-(grant_id, subject) attribution counts allowed, refused and µJ spent (§8.1);
 * - per steward, `seq` must run 0, 1, 2… and `prev` must be the id of the previous receipt:
 *   a gap (deletion), a step back (reorder) or a broken link is reported in `breaks`. Verified
 *   receipts are still applied across a break: each is signed evidence of a real decision, and
 *   over-counting spend is the safe side of a budget.
 *
 * Revocations are not carried by receipts (the node persists them separately); the replay only
 * collects, as a hint, the grant ids that deny receipts name with reason `revoked`.
 */
import type { Did } from './didkey.ts';
import type { Uj } from './energy.ts';
import type { ContentId } from './hash.ts';
import { Ledger } from './ledger.ts';
import { type ReceiptCore, type ReceiptRefusalCode, openReceipt, readOwnReceipt, readVouchedReceipt, receiptId } from './receipt.ts';

/** A receipt that failed verification: its position in the stream and why. */
export interface RejectedReceipt {
  /** 0-based index in the input stream. */
  readonly index: number;
  readonly code: ReceiptRefusalCode;
  readonly why: string;
}

/** Kinds of log-continuity break (§8.1 `seq`/`prev` extensions). */
export const BreakCodes = {
  /** `seq` jumped forward: receipts are missing (deleted, or rejected above). */
  SEQ_GAP: 'seq-gap',
  /** `seq` did not advance: receipts are out of order, or a seq was used twice. */
  SEQ_REORDER: 'seq-reorder',
  /** `prev` is not the id of the steward's previous receipt in the stream (or is missing/present wrongly). */
  PREV_MISMATCH: 'prev-mismatch',
  /** The exact same receipt bytes appear again; not applied twice. */
  DUPLICATE: 'duplicate',
} as const;

/** A continuity break code. */
export type BreakCode = (typeof BreakCodes)[keyof typeof BreakCodes];

/** A continuity break at one verified receipt. */
export interface ContinuityBreak {
  readonly index: number;
  readonly code: BreakCode;
  readonly steward: Did;
  /** The seq that continuity expected, and the seq the receipt carries. */
  readonly expectedSeq: number;
  readonly seq: number;
}

/** Per-(grant_id, subject) totals computed from the verified stream (§8.1). */
export interface Attribution {
  readonly grant_id: ContentId;
  readonly subject: Did;
  /** Allow receipts. */
  allowed: number;
  /** Deny receipts. */
  refused: number;
  /** µJ debited by the allow receipts (on this grant, not counting descendants). */
  uj: Uj;
  /** The chain the receipts exercised, root first, leaf last (= `grant_id`): their `chain_ids`; absent for one link. */
  chain_ids?: readonly ContentId[];
}

/** One link of a delegation tree ({@link delegationTree}): a grant and what was spent under it. */
export interface DelegationNode {
  readonly grant_id: ContentId;
  /** The subject of the grant (the agent holding it), when a receipt names it as leaf. */
  readonly subject?: Did;
  /** µJ debited from this grant, its descendants' spending included (§4.2: every link is debited). */
  readonly spent_uj: Uj;
  /** µJ of the calls made with this grant as leaf (its holder's own calls). */
  readonly own_uj: Uj;
  /** Calls allowed and refused with this grant as leaf. */
  readonly allowed: number;
  readonly refused: number;
  /** Grants delegated from this one that were exercised, in first-seen order. */
  readonly children: DelegationNode[];
}

/**
 * The delegation tree of an attribution (C14, C16): each grant a receipt exercised, linked to its
 * parent by the receipts' `chain_ids`, with its spending (`spent` per grant id: the ledger, which
 * debits every link) and its own calls. Roots first, in first-seen order. Pure.
 */
export function delegationTree(attribution: Iterable<Attribution>, spent: (id: ContentId) => Uj): DelegationNode[] {
  type Mutable = { -readonly [K in keyof DelegationNode]: DelegationNode[K] } & { subject?: Did };
  const nodes = new Map<ContentId, Mutable>();
  const node = (id: ContentId): Mutable => {
    let n = nodes.get(id);
    if (n === undefined) {
      n = { grant_id: id, spent_uj: spent(id), own_uj: 0n, allowed: 0, refused: 0, children: [] };
      nodes.set(id, n);
    }
    return n;
  };
  const parentOf = new Map<ContentId, ContentId>();
  for (const a of attribution) {
    const chain = a.chain_ids ?? [a.grant_id];
    for (let i = 0; i < chain.length; i++) {
      const n = node(chain[i]!);
      if (i > 0 && !parentOf.has(chain[i]!)) {
        parentOf.set(chain[i]!, chain[i - 1]!);
        node(chain[i - 1]!).children.push(n);
      }
    }
    const leaf = node(a.grant_id);
    leaf.subject = a.subject;
    leaf.own_uj += a.uj;
    leaf.allowed += a.allowed;
    leaf.refused += a.refused;
  }
  return [...nodes.values()].filter((n) => !parentOf.has(n.grant_id));
}

/** Options for {@link replayReceipts}. */
export interface ReplayOptions {
  /** Accept only receipts signed by this steward (others are rejected `wrong-steward`). */
  readonly steward?: Did;
  /** The ledger to replay into (default: a fresh one). */
  readonly ledger?: Ledger;
  /** Where each steward's log is expected to start, when replaying a suffix (default seq 0, no prev). */
  readonly start?: { readonly seq: number; readonly prev?: ContentId };
  /**
   * The caller vouches for the bytes: signatures are not checked. With `steward`, receipts in
   * the shape the steward seals are read lean ({@link readOwnReceipt}: only the fields the
   * replay uses, checked as the full read checks them), any other bytes as
   * {@link readVouchedReceipt} reads them
   * (every check but the signature). The result is only as good as the caller's own check
   * afterwards: no rejected receipt, no break, and the last id the one it holds
   * (node/snapshotjob.ts). Default false.
   */
  readonly vouched?: boolean;
}

/** The state rebuilt from a receipt stream. */
export interface ReplayResult {
  /** Spend per grant id, leaf and ancestor debits restored (µJ). */
  readonly ledger: Ledger;
  /** Verified allow receipts applied. */
  readonly allowed: number;
  /** Verified deny receipts (applied as nothing). */
  readonly denied: number;
  /** Receipts that failed verification: counted, never applied. */
  readonly rejected: RejectedReceipt[];
  /** Continuity breaks among verified receipts (gaps, reorders, broken links, duplicates). */
  readonly breaks: ContinuityBreak[];
  /** request_id → the receipt bytes that decided it (the idempotency index). */
  readonly requests: Map<ContentId, Uint8Array>;
  /** request_id → that receipt's `at` (the request's `now`, unix seconds): what a time-bounded index keys on. */
  readonly requestsAt: Map<ContentId, number>;
  /** Attribution keyed by {@link attributionKey}. */
  readonly attribution: Map<string, Attribution>;
  /** Leaf grant ids of `revoked` denies (the revoked link may be an ancestor): a hint, not an admitted revocation. */
  readonly revokedSeen: Set<ContentId>;
  /** The highest verified seq and its receipt id (the log head a steward appends after), if any. */
  readonly lastSeq: number | undefined;
  readonly lastId: ContentId | undefined;
  /** The head (highest seq, its receipt id) per steward, for streams holding several stewards. */
  readonly heads: Map<Did, { readonly seq: number; readonly id: ContentId }>;
  /** Total receipts read (verified + rejected). */
  readonly total: number;
}

/** The key of one (grant_id, subject) pair in {@link ReplayResult.attribution}. */
export function attributionKey(grantId: ContentId, subject: Did): string {
  return `${grantId} ${subject}`;
}

/** The grant ids an allow receipt debits (§8.1): `chain_ids` for a multi-hop chain, else `[grant_id]`. */
export function debitedIds(core: Pick<ReceiptCore, 'chain_ids' | 'grant_id'>): readonly ContentId[] {
  return core.chain_ids ?? [core.grant_id];
}

/**
 * Replays a receipt stream into a ledger (§8.1, C14, C16); see the module docs for the rules.
 * Pure apart from the ledger it fills; never throws on bad receipts (they land in `rejected`).
 */
export function replayReceipts(receipts: Iterable<Uint8Array>, opts: ReplayOptions = {}): ReplayResult {
  const ledger = opts.ledger ?? new Ledger();
  const rejected: RejectedReceipt[] = [];
  const breaks: ContinuityBreak[] = [];
  const requests = new Map<ContentId, Uint8Array>();
  const requestsAt = new Map<ContentId, number>();
  const attribution = new Map<string, Attribution>();
  const revokedSeen = new Set<ContentId>();
  const seen = new Set<ContentId>();
  const heads = new Map<Did, { seq: number; id: ContentId }>();
  const startSeq = opts.start?.seq ?? 0;
  let allowed = 0;
  let denied = 0;
  let lastSeq: number | undefined;
  let lastId: ContentId | undefined;
  let index = -1;
  const steward = opts.steward;
  // Vouched receipts of one steward are read lean (only the fields used below).
  const open: (bytes: Uint8Array, steward?: Did) => ReturnType<typeof readOwnReceipt> =
    opts.vouched !== true ? openReceipt : steward !== undefined ? (b) => readOwnReceipt(b, steward) : readVouchedReceipt;

  for (const bytes of receipts) {
    index++;
    const opened = open(bytes, steward);
    if (!opened.ok) {
      rejected.push({ index, code: opened.error.code, why: opened.error.why });
      continue;
    }
    const core = opened.value;
    const id = receiptId(bytes);
    if (seen.has(id)) {
      breaks.push({ index, code: BreakCodes.DUPLICATE, steward: core.steward, expectedSeq: core.seq, seq: core.seq });
      continue;
    }
    seen.add(id);

    const head = heads.get(core.steward);
    const expectedSeq = head ? head.seq + 1 : startSeq;
    const expectedPrev = head ? head.id : opts.start?.prev;
    // (no closure per receipt: this loop runs once per receipt of the whole log at boot)
    const code: BreakCode | undefined =
      core.seq > expectedSeq
        ? BreakCodes.SEQ_GAP
        : core.seq < expectedSeq
          ? BreakCodes.SEQ_REORDER
          : core.prev !== expectedPrev
            ? BreakCodes.PREV_MISMATCH
            : undefined;
    if (code !== undefined) breaks.push({ index, code, steward: core.steward, expectedSeq, seq: core.seq });
    if (!head) heads.set(core.steward, { seq: core.seq, id });
    else if (core.seq > head.seq) {
      head.seq = core.seq;
      head.id = id;
    }

    const key = attributionKey(core.grant_id, core.subject);
    let a = attribution.get(key);
    if (!a) {
      a = { grant_id: core.grant_id, subject: core.subject, allowed: 0, refused: 0, uj: 0n };
      attribution.set(key, a);
    }
    if (a.chain_ids === undefined && core.chain_ids !== undefined) a.chain_ids = core.chain_ids;
    if (core.verdict === 'allow') {
      ledger.debit(debitedIds(core), core.cost_uj);
      a.allowed++;
      a.uj += core.cost_uj;
      allowed++;
    } else {
      a.refused++;
      denied++;
      if (core.deny_reason === 'revoked') revokedSeen.add(core.grant_id);
    }
    if (core.request_id !== undefined && !requests.has(core.request_id)) {
      requests.set(core.request_id, bytes);
      requestsAt.set(core.request_id, core.at);
    }
    if (lastSeq === undefined || core.seq > lastSeq) {
      lastSeq = core.seq;
      lastId = id;
    }
  }
  return {
    ledger,
    allowed,
    denied,
    rejected,
    breaks,
    requests,
    requestsAt,
    attribution,
    revokedSeen,
    lastSeq,
    lastId,
    heads,
    total: index + 1,
  };
}
