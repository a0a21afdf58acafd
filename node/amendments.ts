/**
 * The node's amendment store (spec §4.7, conformance C21): steering applied at an enforcement
 * point, so that steering can never escalate a running agent's authority there.
 *
 * An amendment takes effect at a node when the node admits an `amend` message (core/wire.ts)
 * carrying the steered grant, the agent's signed checkpoint and the issuer's signed amendment,
 * and the pair verifies (`verifyAmendment`: checkpoint signed by the grant's subject, amendment
 * signed by the distinct issuer, bound to this checkpoint, tighten-only). From then on, at this
 * node:
 *
 * - the steered grant allows nothing: it is soft-revoked (§4.7 "an amendment is a soft revoke"),
 *   and every decision against it, or against any chain containing it, is denied `revoked`
 *   (§7 check 2, the same reason and the same place as a §4.3 revocation: see docs/steering.md);
 * - the continuation (`continuationOf(steered, amendment)`, whose id the node computes before the
 *   issuer ever signs it) can spend at most `cap = min(amendment.budget_uj, steered.budget_uj −
 *   steered spend)`, µJ. The steered spend is what the node's ledger holds for the steered grant
 *   when the amendment is admitted (its replayed receipts plus any carry of its own, when the
 *   steered grant is itself a continuation). The store holds `carry = amendment.budget_uj − cap`
 *   for the continuation, and the decision reads the ledger through {@link AmendmentStore.view},
 *   which adds the carry: `spent + cost > budget` then refuses exactly past the cap
 *   (`budget-exceeded`) and the receipt's `budget_remaining_uj` is the honest remainder.
 *
 * Durable and verifiable: each admitted amendment is persisted in the receipt log's database
 * (the `a` records) before the node answers, as det-CBOR `{body, signature}` signed by the node's
 * steward, body `{grant, checkpoint, amendment, steered_spent_uj, cap_uj, continuation_id}`. On
 * boot every record is re-verified (the steward's signature, the pair against the grant, the
 * continuation id, the cap arithmetic) and re-applied after the receipt log is replayed; a record
 * that fails is counted, never applied. The steered grant's spend cannot change after the
 * amendment (it is refused from then on), so a replay reproduces the figure the record names.
 *
 * One amendment per steered grant per node: a second, different amendment of a grant already
 * steered here is refused `already-amended` (two continuations would each get the remainder).
 * The same amendment again is answered as before (idempotent).
 */
import {
  type Actor,
  amendmentId,
  asCid,
  asObj,
  asUint,
  type ContentId,
  continuationOf,
  decode,
  type Did,
  encode,
  err,
  grantId,
  type LedgerView,
  type Obj,
  ok,
  readSigned,
  readSignedAmendment,
  readSignedCheckpoint,
  readSignedGrant,
  type Result,
  signBody,
  type SignedAmendment,
  signedAmendmentToCbor,
  type SignedCheckpoint,
  signedCheckpointToCbor,
  type SignedGrant,
  signedGrantToCbor,
  uintOut,
  type Uj,
  verifyAmendment,
  verifyBody,
  verifyGrantSignature,
  type WireAmended,
} from '../core/index.ts';

/** Where the store persists (the receipt log's `putAmendment`), keyed by the steered grant id. */
export type PersistAmendment = (steeredId: ContentId, bytes: Uint8Array) => Promise<void>;

/** Refusal codes of an amendment at a node, besides the §4.7 codes of `SteeringRefusals`. */
export const AmendmentRefusals = {
  /** The steered grant's own signature does not verify under its issuer. */
  BAD_SIGNATURE: 'bad-signature',
  /** Another amendment of this steered grant already took effect at this node. */
  ALREADY_AMENDED: 'already-amended',
} as const;

/** Why an amendment was not admitted: `code` is a §4.7 refusal or one of {@link AmendmentRefusals}. */
export interface AmendmentRejection {
  readonly code: string;
  readonly why: string;
}

/** One admitted amendment, as the store keeps it. */
interface Applied {
  readonly amendmentId: ContentId;
  readonly continuationId: ContentId;
  readonly capUj: Uj;
  readonly steeredSpentUj: Uj;
  readonly carryUj: Uj;
}

/** What {@link AmendmentStore.load} found on boot. */
export interface AmendmentLoad {
  readonly applied: number;
  /** Records that failed to decode or verify: counted, never applied. */
  readonly bad: number;
}

/** The steward-signed body of a persisted amendment record. */
function recordBody(grant: SignedGrant, cp: SignedCheckpoint, sa: SignedAmendment, a: Applied): Obj {
  return {
    grant: signedGrantToCbor(grant),
    checkpoint: signedCheckpointToCbor(cp),
    amendment: signedAmendmentToCbor(sa),
    steered_spent_uj: uintOut(a.steeredSpentUj),
    cap_uj: uintOut(a.capUj),
    continuation_id: a.continuationId,
  };
}

/** Where a continuation's line of steering starts: that steered grant and its budget_uj. */
export interface ContinuationOrigin {
  readonly steeredId: ContentId;
  readonly budgetUj: Uj;
}

/** The amendments in force at one node (see the module docs). */
export class AmendmentStore {
  /** steered grant id → the amendment applied to it here. */
  readonly #bySteered = new Map<ContentId, Applied>();
  /** continuation id → µJ carried over from the steered grant (counted as already spent). */
  readonly #carry = new Map<ContentId, Uj>();
  /**
   * continuation id → the first steered grant of its line (a continuation of a continuation
   * leads back to the same one) and that grant's budget: a budget channel of the steered grant
   * also bounds its continuations (channel/channels.ts).
   */
  readonly #origin = new Map<ContentId, ContinuationOrigin>();
  readonly #persist: PersistAmendment;
  readonly #steward: Actor;

  constructor(steward: Actor, persist: PersistAmendment) {
    this.#steward = steward;
    this.#persist = persist;
  }

  /** True when `id` is a steered grant here: the decision denies it `revoked` (§4.7 soft revoke). */
  steered(id: ContentId): boolean {
    return this.#bySteered.has(id);
  }

  /** The first steered grant of the continuation `id`'s line and its budget (undefined for any other grant). */
  origin(id: ContentId): ContinuationOrigin | undefined {
    return this.#origin.get(id);
  }

  /** Every continuation whose line starts at the steered grant `steeredId`. */
  continuationsOf(steeredId: ContentId): ContentId[] {
    const out: ContentId[] = [];
    for (const [c, o] of this.#origin) if (o.steeredId === steeredId) out.push(c);
    return out;
  }

  /** µJ the continuation `id` starts with as spent (0n for any other grant). */
  carried(id: ContentId): Uj {
    return this.#carry.get(id) ?? 0n;
  }

  readonly #waiters = new Map<ContentId, Array<() => void>>();

  /**
   * Resolves once an amendment of `steeredId` is in force here (and durable), whichever way it
   * came (jcp/1 or a feed); at once when it already is. Event-driven, for tooling and tests.
   */
  applied(steeredId: ContentId): Promise<void> {
    if (this.#bySteered.has(steeredId)) return Promise.resolve();
    return new Promise((resolve) => {
      const list = this.#waiters.get(steeredId);
      if (list === undefined) this.#waiters.set(steeredId, [resolve]);
      else list.push(resolve);
    });
  }

  /** Amendments in force. */
  get size(): number {
    return this.#bySteered.size;
  }

  /** The ledger as the decision reads it: the receipts' debits plus each continuation's carry (µJ). */
  view(ledger: LedgerView): LedgerView {
    return { spent: (id) => ledger.spent(id) + this.carried(id) };
  }

  /**
   * Admits an amendment (§4.7) against `ledger` (the decision's view, {@link view}), taking
   * effect at once — before the record is durable, so no decision in between can spend the
   * steered grant — and resolves once it is persisted.
   * Rejections: the §4.7 codes of `verifyAmendment` (`wrong-grant`, `not-agent`,
   * `wrong-checkpoint`, `self-steering`, `not-issuer`, `widening`), `bad-signature` (the steered
   * grant), `already-amended`; and whatever `admit` returns: called once the pair verified and
   * before anything is applied (the record policy's rate charge, node/issuerpolicy.ts).
   * @throws whatever the persist callback throws (the log failed).
   */
  async submit(
    grant: SignedGrant,
    cp: SignedCheckpoint,
    sa: SignedAmendment,
    ledger: LedgerView,
    admit?: () => AmendmentRejection | undefined,
  ): Promise<Result<WireAmended, AmendmentRejection>> {
    if (!verifyGrantSignature(grant)) {
      return err({ code: AmendmentRefusals.BAD_SIGNATURE, why: 'the steered grant does not verify under its issuer' });
    }
    const pair = verifyAmendment(sa, cp, grant);
    if (!pair.ok) return err(pair.error);
    const steeredId = grantId(grant.grant);
    const aid = amendmentId(sa);
    const before = this.#bySteered.get(steeredId);
    if (before !== undefined) {
      if (before.amendmentId === aid) return ok(answer(steeredId, before));
      return err({
        code: AmendmentRefusals.ALREADY_AMENDED,
        why: `grant ${steeredId} was already steered here by amendment ${before.amendmentId}`,
      });
    }
    const refused = admit?.();
    if (refused !== undefined) return err(refused);
    const steeredSpentUj = ledger.spent(steeredId);
    const applied = this.#apply(steeredId, grant, sa, steeredSpentUj);
    const body = recordBody(grant, cp, sa, applied);
    const signed = signBody(body, this.#steward);
    await this.#persist(steeredId, encode({ body: signed.body, signature: signed.signature }));
    const waiting = this.#waiters.get(steeredId);
    this.#waiters.delete(steeredId);
    for (const f of waiting ?? []) f();
    return ok(answer(steeredId, applied));
  }

  /** Puts an amendment in force (no checks): soft revoke of the steered grant, carry on the continuation. */
  #apply(steeredId: ContentId, grant: SignedGrant, sa: SignedAmendment, steeredSpentUj: Uj): Applied {
    const left = grant.grant.budget_uj > steeredSpentUj ? grant.grant.budget_uj - steeredSpentUj : 0n;
    const capUj = sa.body.budget_uj < left ? sa.body.budget_uj : left;
    const continuationId = grantId(continuationOf(grant.grant, sa));
    const applied: Applied = { amendmentId: amendmentId(sa), continuationId, capUj, steeredSpentUj, carryUj: sa.body.budget_uj - capUj };
    this.#bySteered.set(steeredId, applied);
    if (applied.carryUj > 0n) this.#carry.set(continuationId, applied.carryUj);
    this.#origin.set(continuationId, this.#origin.get(steeredId) ?? { steeredId, budgetUj: grant.grant.budget_uj });
    return applied;
  }

  /**
   * Restores persisted records on boot (after the receipt log is replayed), re-verifying each:
   * the steward's signature, the pair against the grant, the continuation id and the cap.
   * Bad records are counted, never applied.
   */
  load(records: readonly Uint8Array[], steward: Did = this.#steward.did): AmendmentLoad {
    let applied = 0;
    let bad = 0;
    for (const bytes of records) {
      try {
        const s = readSigned(decode(bytes), 'amendment_record');
        if (!verifyBody(s, steward)) {
          bad++;
          continue;
        }
        const o = asObj(s.body, 'amendment_record.body', [
          'grant',
          'checkpoint',
          'amendment',
          'steered_spent_uj',
          'cap_uj',
          'continuation_id',
        ]);
        const grant = readSignedGrant(o['grant'], 'amendment_record.grant');
        const cp = readSignedCheckpoint(o['checkpoint'], 'amendment_record.checkpoint');
        const sa = readSignedAmendment(o['amendment'], 'amendment_record.amendment');
        const spent = asUint(o['steered_spent_uj'], 'amendment_record.steered_spent_uj');
        const steeredId = grantId(grant.grant);
        if (!verifyGrantSignature(grant) || !verifyAmendment(sa, cp, grant).ok || this.#bySteered.has(steeredId)) {
          bad++;
          continue;
        }
        const a = this.#apply(steeredId, grant, sa, spent);
        if (
          a.capUj !== asUint(o['cap_uj'], 'amendment_record.cap_uj') ||
          a.continuationId !== asCid(o['continuation_id'], 'amendment_record.continuation_id')
        ) {
          this.#unapply(steeredId, a);
          bad++;
          continue;
        }
        applied++;
      } catch {
        bad++;
      }
    }
    return { applied, bad };
  }

  #unapply(steeredId: ContentId, a: Applied): void {
    this.#bySteered.delete(steeredId);
    this.#carry.delete(a.continuationId);
  }
}

function answer(steeredId: ContentId, a: Applied): WireAmended {
  return { grant_id: steeredId, continuation_id: a.continuationId, budget_uj: a.capUj, steered_spent_uj: a.steeredSpentUj };
}
