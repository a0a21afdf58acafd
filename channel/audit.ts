/**
 * The channel audit (spec §4.5 profile, C17: "after settlement the overdraft is provable from the
 * signed statements"): read every point's latest statement of one grant from the stream leader,
 * verify each, merge them, and — when the budget is known — build and check the overdraft proof.
 *
 * The budget comes from the caller, or from the signed channel grant the points store on the
 * stream (`StatementBus.readGrant`), which is checked against the id before it is believed.
 *
 * Membership: a statement is signed by its own `point`, so a signature proves only who wrote it,
 * not that the writer is one of the channel's enforcement points. Anyone who can publish on the
 * statement subjects could otherwise add a self-signed line under its own subject and inflate
 * (or, as the proof's only "overdraft", fabricate) the total. Given the channel's members (the
 * nodes its points run on: `cluster.channels[].points`, the nodes of a cluster state file, the
 * nodes of a chaos run), a statement by any other key is refused `unknown-point` and listed in
 * `refused`, never merged. Without a member list every verifying point counts and the audit says
 * so (`membersSource: 'unknown'`).
 */
import {
  ChannelLedger,
  type ContentId,
  decode,
  type Did,
  grantId as grantIdOf,
  type OverdraftProof,
  readSignedGrant,
  toHex,
  type Uj,
  verifyGrantSignature,
  verifyOverdraftProof,
} from '../core/index.ts';
import type { StatementBus, StoredStatement } from './bus.ts';
import { admitStored, type ReadRefusal } from './settlement.ts';

/** One point's line in the merged ledger. */
export interface AuditLine {
  readonly point: Did;
  /** Cumulative µJ the point's latest statement claims. */
  readonly spentUj: Uj;
  readonly seq: number;
}

/** The result of {@link auditChannel}. All amounts µJ. */
export interface ChannelAudit {
  readonly grantId: ContentId;
  /** The grant's budget, when known; undefined otherwise. */
  readonly budgetUj: Uj | undefined;
  /** Where the budget came from. */
  readonly budgetSource: 'given' | 'stream' | 'unknown';
  /** The merged ledger: every point's latest admitted statement. */
  readonly lines: readonly AuditLine[];
  /** Σ of the lines. */
  readonly totalUj: Uj;
  /** max(0, total − budget), when the budget is known. */
  readonly overdraftUj: Uj | undefined;
  /** The proof (the signed statements) when the budget is known; checked with core's verifier. */
  readonly proof: OverdraftProof | undefined;
  /** True when the proof verifies (and undefined without a budget). */
  readonly proofVerifies: boolean | undefined;
  /** Statements on the stream that failed verification: counted and shown, never merged. */
  readonly refused: readonly ReadRefusal[];
  /** The channel's members the statements were checked against (sorted); undefined when unknown. */
  readonly members: readonly Did[] | undefined;
  /** Where the member list came from: the caller, or nowhere (every verifying point counted). */
  readonly membersSource: 'given' | 'unknown';
}

/** Options of {@link auditChannel}. */
export interface AuditOpts {
  /** The grant's budget (µJ); overrides the budget read from the stored grant. */
  readonly budgetUj?: Uj;
  /**
   * The channel's members (did:key of each point's steward). When given, a statement by any other
   * key is refused `unknown-point` (§4.5 profile: only the channel's points settle).
   */
  readonly members?: Iterable<Did>;
}

/**
 * Merges `stored` statements of `grantId` (already read) into a ledger: malformed, misplaced,
 * forged, stale, regressing or wrong-grant statements are refused and listed, and so, when
 * `members` is given, is every statement whose point is not a member (`unknown-point`).
 */
export function mergeStatements(
  grantId: ContentId,
  stored: readonly StoredStatement[],
  members?: Iterable<Did>,
): { ledger: ChannelLedger; refused: ReadRefusal[] } {
  const ledger = new ChannelLedger(grantId, members === undefined ? {} : { points: members });
  const refused = admitStored(ledger, stored);
  return { ledger, refused };
}

/**
 * Audits the channel on `grantId` over `bus` (leader reads). The third argument is the budget
 * (µJ, overriding the one read from the stored grant) or {@link AuditOpts} (budget and members).
 * @throws the bus's error when the stream cannot be read.
 */
export async function auditChannel(bus: StatementBus, grantId: ContentId, budgetOrOpts?: Uj | AuditOpts): Promise<ChannelAudit> {
  const o: AuditOpts = typeof budgetOrOpts === 'bigint' ? { budgetUj: budgetOrOpts } : (budgetOrOpts ?? {});
  const members = o.members === undefined ? undefined : [...new Set(o.members)].sort();
  const stored = await bus.readLatest(grantId);
  const { ledger, refused } = mergeStatements(grantId, stored, members);
  const membership = { members, membersSource: members === undefined ? ('unknown' as const) : ('given' as const) };
  let budget = o.budgetUj;
  let budgetSource: ChannelAudit['budgetSource'] = budget === undefined ? 'unknown' : 'given';
  if (budget === undefined) {
    const bytes = await bus.readGrant(grantId);
    if (bytes) {
      try {
        const sg = readSignedGrant(decode(bytes));
        if (grantIdOf(sg.grant) === grantId && verifyGrantSignature(sg)) {
          budget = sg.grant.budget_uj;
          budgetSource = 'stream';
        }
      } catch {
        // an unreadable stored grant leaves the budget unknown
      }
    }
  }
  const lines = ledger
    .statements()
    .map((ss) => ({ point: ss.body.point, spentUj: ss.body.spent_uj, seq: ss.body.seq }))
    .sort((a, b) => (a.point < b.point ? -1 : 1));
  const totalUj = ledger.settledSpent();
  if (budget === undefined) {
    return {
      grantId,
      budgetUj: undefined,
      budgetSource,
      lines,
      totalUj,
      overdraftUj: undefined,
      proof: undefined,
      proofVerifies: undefined,
      refused,
      ...membership,
    };
  }
  const proof = ledger.overdraftProof(budget);
  const v = verifyOverdraftProof(proof, { id: grantId, budget_uj: budget });
  return {
    grantId,
    budgetUj: budget,
    budgetSource,
    lines,
    totalUj,
    overdraftUj: proof.overdraft,
    proof,
    proofVerifies: v.ok,
    refused,
    ...membership,
  };
}

/**
 * The audit as `jcp channel audit --json` prints it (and the audit console serves it): amounts µJ
 * as decimal strings, `null` for what is unknown without a budget, each proving statement with
 * its signature in hex.
 */
export function channelAuditJson(a: ChannelAudit): {
  grant_id: ContentId;
  budget_uj: string | null;
  budget_source: ChannelAudit['budgetSource'];
  total_uj: string;
  overdraft_uj: string | null;
  proof_verifies: boolean | null;
  points: Array<{ point: Did; spent_uj: string; seq: number }>;
  statements: Array<{ point: Did; seq: number; spent_uj: string; signature: string }>;
  refused: readonly ReadRefusal[];
  members: readonly Did[] | null;
  members_source: ChannelAudit['membersSource'];
} {
  return {
    grant_id: a.grantId,
    budget_uj: a.budgetUj?.toString() ?? null,
    budget_source: a.budgetSource,
    total_uj: a.totalUj.toString(),
    overdraft_uj: a.overdraftUj?.toString() ?? null,
    proof_verifies: a.proofVerifies ?? null,
    points: a.lines.map((l) => ({ point: l.point, spent_uj: l.spentUj.toString(), seq: l.seq })),
    statements: (a.proof?.statements ?? []).map((s) => ({
      point: s.body.point,
      seq: s.body.seq,
      spent_uj: s.body.spent_uj.toString(),
      signature: toHex(s.signature),
    })),
    refused: a.refused,
    members: a.members ?? null,
    members_source: a.membersSource,
  };
}
