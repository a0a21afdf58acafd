/**
 * Receipt-settled budget channels (spec §4.5 OPTIONAL profile, conformance C17, the pure part).
 *
 * N enforcement points spend optimistically against one grant and settle by exchanging signed
 * statements of cumulative local spend. A {@link Statement} is `{grant_id, point, spent_uj, seq}`,
 * signed by `point` over its canonical bytes (docs/design.md "Encodings": `{body, signature}`).
 *
 * {@link ChannelLedger} is the merged view one point keeps for one grant: it admits a statement
 * only if it is for this grant, from a known point (when a membership set is configured), signed
 * by that point, newer than the point's latest (`seq` strictly increasing) and not regressing
 * (`spent_uj` never decreasing). A refused statement leaves the ledger unchanged. The settled
 * spend is the sum of every point's latest statement; an overdraft past the budget is provable to
 * a third party from those signed statements alone ({@link overdraftProof}).
 *
 * The spending rule and its bound (docs/design.md "Budget channels: the bound we prove"): {@link channelAllows} and
 * {@link overdraftBound}. The NATS transport lives in `channel/`.
 */
import type { Actor } from './actor.ts';
import type { Did } from './didkey.ts';
import type { Uj } from './energy.ts';
import { check } from './errors.ts';
import type { ContentId } from './hash.ts';
import { type Result, err, ok } from './result.ts';
import { asArray, asCid, asDid, asObj, asSafeUint, asUint, type Obj, uintOut } from './schema.ts';
import { readSigned, type Signed, signBody, verifyBody } from './signed.ts';

/** A point's signed claim of cumulative spend on one grant (§4.5 profile). */
export interface Statement {
  readonly grant_id: ContentId;
  /** The enforcement point making the claim, and the statement's signer. */
  readonly point: Did;
  /** Cumulative µJ allowed at this point on this grant since the channel opened. */
  readonly spent_uj: Uj;
  /** Strictly increasing per point. */
  readonly seq: number;
}

/** A statement with the point's Ed25519 signature over `canonical_cbor(statement)`. */
export type SignedStatement = Signed<Statement>;

/**
 * Signs a statement as its point (§4.5 profile).
 * @throws JcpError `schema` if `point.did` is not `statement.point`.
 */
export function signStatement(statement: Statement, point: Actor): SignedStatement {
  check(point.did === statement.point, 'statement.point', 'the signing actor is not the statement point');
  return signBody(statement, point);
}

/** True when the signature verifies under `statement.point`. Never throws. */
export function verifyStatement(ss: SignedStatement): boolean {
  return verifyBody(ss, ss.body.point);
}

/** The plain CBOR map of a statement. */
export function statementToCbor(s: Statement): Obj {
  return { grant_id: s.grant_id, point: s.point, spent_uj: uintOut(s.spent_uj), seq: s.seq };
}

/** The plain CBOR map of a signed statement. */
export function signedStatementToCbor(ss: SignedStatement): Obj {
  return { body: statementToCbor(ss.body), signature: ss.signature };
}

/**
 * Reads a decoded CBOR map as a Statement.
 * @throws JcpError `schema` / `did-invalid`, naming the field.
 */
export function readStatement(v: unknown, field = 'statement'): Statement {
  const o = asObj(v, field, ['grant_id', 'point', 'spent_uj', 'seq']);
  return {
    grant_id: asCid(o['grant_id'], `${field}.grant_id`),
    point: asDid(o['point'], `${field}.point`),
    spent_uj: asUint(o['spent_uj'], `${field}.spent_uj`),
    seq: asSafeUint(o['seq'], `${field}.seq`),
  };
}

/**
 * Reads a decoded `{body, signature}` map as a signed statement (the signature is not checked).
 * @throws JcpError `schema` / `did-invalid` / `bad-length`
 */
export function readSignedStatement(v: unknown, field = 'signed_statement'): SignedStatement {
  const s = readSigned(v, field);
  return { body: readStatement(s.body, `${field}.body`), signature: s.signature };
}

/** Refusal codes of {@link ChannelLedger.admit}, one per distinct outcome. */
export const StatementRefusals = {
  /** The statement names another grant. */
  WRONG_GRANT: 'wrong-grant',
  /** A membership set is configured and the point is not in it. */
  UNKNOWN_POINT: 'unknown-point',
  /** The signature does not verify under the statement's point. */
  FORGED: 'forged',
  /** Exactly the point's latest statement again (a redelivery). */
  DUPLICATE: 'duplicate',
  /** `seq` is not greater than the point's latest. */
  STALE: 'stale',
  /** `spent_uj` is below the point's latest: cumulative spend never decreases. */
  REGRESSING: 'regressing',
} as const;

/** One of {@link StatementRefusals}. */
export type StatementRefusalCode = (typeof StatementRefusals)[keyof typeof StatementRefusals];

/** Why a statement was not admitted. `why` is for people and logs, never parsed. */
export interface StatementRefusal {
  readonly code: StatementRefusalCode;
  readonly why: string;
}

/** Options for a {@link ChannelLedger}. */
export interface ChannelLedgerOpts {
  /** The points allowed on this channel. Absent = any point whose signature verifies. */
  readonly points?: Iterable<Did>;
}

/**
 * The merged settlement ledger one point keeps for one channel grant (§4.5 profile, C17).
 * Holds the latest admitted signed statement of every point.
 */
export class ChannelLedger {
  /** The channel grant's id. */
  readonly grantId: ContentId;
  readonly #members: ReadonlySet<Did> | undefined;
  readonly #latest = new Map<Did, SignedStatement>();

  constructor(grantId: ContentId, opts: ChannelLedgerOpts = {}) {
    this.grantId = grantId;
    this.#members = opts.points === undefined ? undefined : new Set(opts.points);
  }

  /**
   * Admits a signed statement, or refuses it and leaves the ledger unchanged.
   * Checks, in order: `wrong-grant`, `unknown-point`, `forged`, `duplicate`, `stale`, `regressing`.
   */
  admit(ss: SignedStatement): Result<void, StatementRefusal> {
    const s = ss.body;
    if (s.grant_id !== this.grantId) {
      return err({ code: StatementRefusals.WRONG_GRANT, why: `statement is for grant ${s.grant_id}` });
    }
    if (this.#members !== undefined && !this.#members.has(s.point)) {
      return err({ code: StatementRefusals.UNKNOWN_POINT, why: `${s.point} is not a point of this channel` });
    }
    if (!verifyStatement(ss)) return err({ code: StatementRefusals.FORGED, why: 'signature does not verify under the point' });
    const prev = this.#latest.get(s.point)?.body;
    if (prev !== undefined) {
      if (s.seq === prev.seq && s.spent_uj === prev.spent_uj) {
        return err({ code: StatementRefusals.DUPLICATE, why: `seq ${s.seq} already admitted` });
      }
      if (s.seq <= prev.seq) {
        return err({ code: StatementRefusals.STALE, why: `seq ${s.seq} is not after the latest seq ${prev.seq}` });
      }
      if (s.spent_uj < prev.spent_uj) {
        return err({
          code: StatementRefusals.REGRESSING,
          why: `spent_uj ${s.spent_uj} is below the latest ${prev.spent_uj}`,
        });
      }
    }
    this.#latest.set(s.point, ss);
    return ok(undefined);
  }

  /** The latest admitted statement of `point`, if any. */
  latest(point: Did): SignedStatement | undefined {
    return this.#latest.get(point);
  }

  /** The latest admitted statement of every point, in admission order of first appearance. */
  statements(): SignedStatement[] {
    return [...this.#latest.values()];
  }

  /** Settled spend (µJ): the sum of every point's latest `spent_uj`. */
  settledSpent(): Uj {
    let total = 0n;
    for (const ss of this.#latest.values()) total += ss.body.spent_uj;
    return total;
  }

  /** Settled spend of every point except `point` (µJ): what {@link channelAllows} calls `peersSettled`. */
  peersSettled(point: Did): Uj {
    return this.settledSpent() - (this.#latest.get(point)?.body.spent_uj ?? 0n);
  }

  /**
   * The evidence of this channel's overdraft against `budgetUj` (µJ): the latest signed statement
   * of every point, their total, and `overdraft = max(0, total − budget)`. Statements are
   * cumulative, so the total is a lower bound on what was actually spent: a proven overdraft is
   * at least this much. Check it with {@link verifyOverdraftProof}.
   */
  overdraftProof(budgetUj: Uj): OverdraftProof {
    const total = this.settledSpent();
    return {
      grant_id: this.grantId,
      total,
      budget: budgetUj,
      overdraft: total > budgetUj ? total - budgetUj : 0n,
      statements: this.statements(),
    };
  }
}

/** Signed evidence of a channel's spend against its budget (all amounts µJ). */
export interface OverdraftProof {
  readonly grant_id: ContentId;
  /** Σ spent_uj over `statements`. */
  readonly total: Uj;
  /** The channel grant's budget_uj. */
  readonly budget: Uj;
  /** max(0, total − budget). */
  readonly overdraft: Uj;
  /** One signed statement per point, each for `grant_id`. */
  readonly statements: readonly SignedStatement[];
}

/** Refusal codes of {@link verifyOverdraftProof}. */
export const ProofRefusals = {
  /** A statement is for another grant than the proof's (or the grant given). */
  WRONG_GRANT: 'wrong-grant',
  /** The stated budget is not the grant's budget_uj. */
  WRONG_BUDGET: 'wrong-budget',
  /** A statement's signature does not verify under its point. */
  FORGED: 'forged',
  /** Two statements from one point (a point's spend would be counted twice). */
  DUPLICATE_POINT: 'duplicate-point',
  /** `total` or `overdraft` is not what the statements add up to. */
  WRONG_TOTAL: 'wrong-total',
} as const;

/** One of {@link ProofRefusals}. */
export type ProofRefusalCode = (typeof ProofRefusals)[keyof typeof ProofRefusals];

/** Why an overdraft proof does not hold. */
export interface ProofRefusal {
  readonly code: ProofRefusalCode;
  readonly why: string;
}

/**
 * Verifies an overdraft proof as a third party (§4.5 profile, C17): every statement is for the
 * proof's grant, from a distinct point, and signed by that point; `total` and `overdraft` are
 * what the statements add up to. When the channel grant is given, its id and budget must match.
 * Returns the proven overdraft in µJ (0 when the statements stay within the budget).
 */
export function verifyOverdraftProof(
  proof: OverdraftProof,
  grant?: { readonly id: ContentId; readonly budget_uj: Uj },
): Result<Uj, ProofRefusal> {
  if (grant !== undefined) {
    if (grant.id !== proof.grant_id) return err({ code: ProofRefusals.WRONG_GRANT, why: 'proof is for another grant' });
    if (grant.budget_uj !== proof.budget) {
      return err({ code: ProofRefusals.WRONG_BUDGET, why: `budget ${proof.budget} is not the grant's ${grant.budget_uj}` });
    }
  }
  const points = new Set<Did>();
  let total = 0n;
  for (const [i, ss] of proof.statements.entries()) {
    if (ss.body.grant_id !== proof.grant_id) {
      return err({ code: ProofRefusals.WRONG_GRANT, why: `statement ${i} is for another grant` });
    }
    if (points.has(ss.body.point)) {
      return err({ code: ProofRefusals.DUPLICATE_POINT, why: `statement ${i} repeats point ${ss.body.point}` });
    }
    if (!verifyStatement(ss)) return err({ code: ProofRefusals.FORGED, why: `statement ${i} does not verify` });
    points.add(ss.body.point);
    total += ss.body.spent_uj;
  }
  const overdraft = total > proof.budget ? total - proof.budget : 0n;
  if (total !== proof.total || overdraft !== proof.overdraft) {
    return err({
      code: ProofRefusals.WRONG_TOTAL,
      why: `statements add up to ${total} µJ (overdraft ${overdraft}), proof says ${proof.total} (${proof.overdraft})`,
    });
  }
  return ok(overdraft);
}

/** The plain CBOR map of an overdraft proof (to publish it). */
export function overdraftProofToCbor(p: OverdraftProof): Obj {
  return {
    grant_id: p.grant_id,
    total: uintOut(p.total),
    budget: uintOut(p.budget),
    overdraft: uintOut(p.overdraft),
    statements: p.statements.map(signedStatementToCbor),
  };
}

/**
 * Reads a decoded CBOR map as an overdraft proof (signatures are not checked here).
 * @throws JcpError `schema` / `did-invalid` / `bad-length`, naming the field.
 */
export function readOverdraftProof(v: unknown, field = 'overdraft_proof'): OverdraftProof {
  const o = asObj(v, field, ['grant_id', 'total', 'budget', 'overdraft', 'statements']);
  return {
    grant_id: asCid(o['grant_id'], `${field}.grant_id`),
    total: asUint(o['total'], `${field}.total`),
    budget: asUint(o['budget'], `${field}.budget`),
    overdraft: asUint(o['overdraft'], `${field}.overdraft`),
    statements: asArray(o['statements'], `${field}.statements`, 4096).map((s, i) => readSignedStatement(s, `${field}.statements[${i}]`)),
  };
}

/** Inputs of the channel spending rule (all µJ). */
export interface ChannelSpendState {
  /** This point's cumulative spend on the grant. */
  readonly mySpent: Uj;
  /** This point's cumulative spend when it last settled (published its statement and read its peers'). */
  readonly mySpentAtLastSettle: Uj;
  /** Σ of the peers' latest statements read at that settlement (from the stream leader). */
  readonly peersSettled: Uj;
  /** The channel grant's budget_uj. */
  readonly budget: Uj;
  /** This point's unsettled window W_i. */
  readonly windowUj: Uj;
  /** The cost of the action being decided. */
  readonly cost: Uj;
}

/** Refusal codes of {@link channelAllows}. */
export const ChannelRefusals = {
  /** (a) fails: my spend + cost + peers' settled spend would pass the budget. Maps to the spec's `budget-exceeded`. */
  BUDGET_EXCEEDED: 'budget-exceeded',
  /** (b) fails: my unsettled spend would pass my window; settle first. */
  WINDOW_EXHAUSTED: 'window-exhausted',
} as const;

/** Why a channel spend is refused, with the µJ figures. */
export interface ChannelRefusal {
  readonly code: (typeof ChannelRefusals)[keyof typeof ChannelRefusals];
  readonly why: string;
  readonly requestedUj: Uj;
  /** What is left under the failing rule (µJ, never negative). */
  readonly remainingUj: Uj;
}

/**
 * The channel spending rule (docs/design.md "Budget channels: the bound we prove"): point i allows `cost` only if
 * (a) mySpent + cost + peersSettled ≤ budget, and (b) mySpent + cost − mySpentAtLastSettle ≤ windowUj.
 * A point cut off from settlement therefore stops after W_i. Pure; the caller debits on allow.
 * Refusals: `budget-exceeded` (a), `window-exhausted` (b).
 */
export function channelAllows(s: ChannelSpendState): Result<void, ChannelRefusal> {
  const spendAfter = s.mySpent + s.cost;
  const budgetLeft = s.budget - s.mySpent - s.peersSettled;
  if (spendAfter + s.peersSettled > s.budget) {
    return err({
      code: ChannelRefusals.BUDGET_EXCEEDED,
      why: `cost ${s.cost} µJ over the ${budgetLeft > 0n ? budgetLeft : 0n} µJ the settled view leaves`,
      requestedUj: s.cost,
      remainingUj: budgetLeft > 0n ? budgetLeft : 0n,
    });
  }
  const windowLeft = s.windowUj - (s.mySpent - s.mySpentAtLastSettle);
  if (spendAfter - s.mySpentAtLastSettle > s.windowUj) {
    return err({
      code: ChannelRefusals.WINDOW_EXHAUSTED,
      why: `cost ${s.cost} µJ over the ${windowLeft > 0n ? windowLeft : 0n} µJ left in the unsettled window`,
      requestedUj: s.cost,
      remainingUj: windowLeft > 0n ? windowLeft : 0n,
    });
  }
  return ok(undefined);
}

/**
 * The worst-case overdraft (µJ past the budget) of a channel whose points have unsettled windows
 * `windows` and all follow {@link channelAllows} with leader reads: Σ_{j≠k} W_j, maximised over k,
 * i.e. Σ W − min W (0 for zero or one point).
 *
 * Why (docs/design.md "Budget channels: the bound we prove"): let k be the point whose last allowed spend was checked against
 * the most recent settlement (in the DESIGN's words, the point that settled last). That check
 * gave s_k + Σ_{j≠k} S_j ≤ budget, where S_j is what j had published by then. Every other point
 * j has spent at most W_j since its own last settlement, so s_j ≤ S_j + W_j, and the total is
 * ≤ budget + Σ_{j≠k} W_j. Which point is k depends on the schedule (crashes, pauses, partitions),
 * so a planner cannot choose it; the bound that holds for every schedule takes the largest sum
 * that leaves one point out — all windows minus the smallest — and it is reached (the point with
 * the smallest window settles last while every other point spends its full window unseen).
 */
export function overdraftBound(windows: readonly Uj[]): Uj {
  if (windows.length <= 1) return 0n;
  let sum = 0n;
  let min = windows[0] ?? 0n;
  for (const w of windows) {
    sum += w;
    if (w < min) min = w;
  }
  return sum - min;
}

/** The worst-case total spend (µJ) of a channel: `budgetUj + overdraftBound(windows)`. */
export function spendBound(budgetUj: Uj, windows: readonly Uj[]): Uj {
  return budgetUj + overdraftBound(windows);
}
