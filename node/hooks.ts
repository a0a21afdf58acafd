/**
 * Seams for the cluster (the cluster, node/cluster.ts, builds on these): a budget policy consulted before an allow
 * stands (budget channels, §4.5 profile), and feeds that bring revocations from elsewhere
 * (a NATS stream, §4.3 "from NATS once the cluster exists"). The node works without either.
 */
import type {
  ContentId,
  Decision,
  DecisionRequest,
  Deny,
  Grant,
  Result,
  SignedAmendment,
  SignedCheckpoint,
  SignedGrant,
  SignedRevocation,
  WireAmended,
} from '../core/index.ts';
import type { AmendmentRejection } from './amendments.ts';

/** An allow as the pure decision made it. */
export type AllowDecision = Extract<Decision, { verdict: 'allow' }>;

/**
 * A budget policy beyond the grant's own ledger (e.g. a budget channel's settled view of peers,
 * docs/design.md "Budget channels: the bound we prove"). Consulted synchronously, inside the node's serialized decision step,
 * after the pure decision allowed and before the debit: returning a Deny turns the allow into
 * that deny (sealed like any other; nothing debited).
 */
export interface BudgetPolicy {
  /** A Deny to refuse this allow (typically `budget-exceeded`), or undefined to let it stand. */
  admit(req: DecisionRequest, decision: AllowDecision): Deny | undefined;
  /** Told once the allow's receipt is durable (µJ debited = `req.cost.uj`, on every id of `decision.chainIds`). */
  committed?(req: DecisionRequest, decision: AllowDecision, receipt: Uint8Array): void;
}

/** Why a submitted revocation was not taken. */
export interface RevocationRejection {
  /**
   * `revocation-refused` (authority fails), `busy` (too many revocations waiting for their grant),
   * `issuer-refused` (the revoker is outside the record policy) or `record-limit` (size, the
   * revoker's rate, or the revocation set at its bound): node/issuerpolicy.ts.
   */
  readonly code: 'revocation-refused' | 'busy' | 'issuer-refused' | 'record-limit';
  readonly why: string;
}

/** Where revocations go in: the node's store, the same for jcp/1 and any feed. */
export interface RevocationSink {
  /**
   * Verifies and records a signed revocation (§4.3); resolves once it is durable.
   * `admitted` is true when the revoked grant is known and authority was checked against it;
   * false when it waits for the grant (its signature already verified; checked against the grant
   * before it takes effect). With `grant` (the revoked grant, sent by the revoker), authority is
   * checked against it at once and the revocation never waits.
   */
  submit(sr: SignedRevocation, grant?: Grant): Promise<Result<{ grantId: ContentId; admitted: boolean }, RevocationRejection>>;
  /**
   * Applies an amendment that came through a feed (§4.7; node/amendments.ts): the pair is
   * verified again and the cap computed from this node's own ledger; resolves once durable.
   * Absent on a sink that takes no amendments. Rejections: the §4.7 codes, `already-amended`.
   */
  amend?(grant: SignedGrant, checkpoint: SignedCheckpoint, amendment: SignedAmendment): Promise<Result<WireAmended, AmendmentRejection>>;
}

/** A source of revocations besides jcp/1 (e.g. a JetStream stream), started and stopped with the node. */
export interface RevocationFeed {
  readonly name: string;
  start(sink: RevocationSink): Promise<void>;
  stop(): Promise<void>;
  /**
   * Optional outlet: told of every revocation this node accepted over jcp/1
   * (`{revoke}`, `jcp grant revoke --node`), so it reaches the other nodes of a cluster (the
   * cluster's feed publishes it on the revocation stream, which every node follows). Resolves
   * once the revocation is handed on (e.g. the JetStream publish was acknowledged); rejects when
   * it could not be (the node then retries in the background). Never told of revocations that
   * came in through a feed, so nothing loops.
   */
  publish?(sr: SignedRevocation): Promise<void>;
  /**
   * Optional outlet for amendments (§4.7), like {@link publish}: told of every amendment this
   * node admitted over jcp/1, as the det-CBOR `{amend: …}` message bytes, so every node of the
   * cluster puts it in force. Resolves once handed on; rejects when it could not be (retried).
   */
  publishAmendment?(steeredId: ContentId, message: Uint8Array): Promise<void>;
}
