/**
 * Shared fixtures for the evidence tests (receipt, replay, wire): fixed actors from a seeded RNG,
 * a root grant with two workers under sub-grants, and a steward that decides, debits only on
 * allow, and seals each decision with the next seq and prev — what a node does, minus I/O.
 */
import {
  type Actor,
  attenuate,
  contentId,
  type ContentId,
  type Cost,
  decide,
  type Decision,
  type DecisionRequest,
  type Frame,
  type Grant,
  grantId,
  Ledger,
  newActor,
  payloadHash,
  receiptCoreFor,
  receiptId,
  RevocationSet,
  sealReceipt,
  seededRng,
  type SignedGrant,
  signGrant,
  type Trust,
  TrustRoots,
} from '../../core/index.ts';

export const rng = seededRng('test/core/evidence');
export const root = newActor(rng);
export const alice = newActor(rng);
export const bob = newActor(rng);
export const carol = newActor(rng);
export const steward = newActor(rng);
export const mallory = newActor(rng);
export const resource = contentId({ tool: 'fs', server: 'evidence' });

/** A root grant from `root` to `holder`. */
export function rootGrant(holder: Actor, budgetUj: bigint, actions: string[] = ['read', 'write']): SignedGrant {
  const g: Grant = {
    issuer: root.did,
    subject: holder.did,
    capability: { resource, actions },
    budget_uj: budgetUj,
    expiry: 0,
    nonce: rng(16),
  };
  return signGrant(g, root);
}

/** A child of `parent` minted by its holder for `subject`. */
export function child(parent: SignedGrant, holder: Actor, subject: Actor, budgetUj: bigint): SignedGrant {
  const r = attenuate(parent, { subject: subject.did, budget_uj: budgetUj, nonce: rng(16) }, holder);
  if (!r.ok) throw new Error(`fixture: attenuate refused: ${r.error.why}`);
  return r.value;
}

/** A control frame exercising the leaf of `chain`. */
export function frameFor(chain: readonly SignedGrant[], action = 'read', trust: Trust = 'control'): Frame {
  return {
    kind: 'tool-call',
    trust,
    grant_id: grantId(chain[chain.length - 1]!.grant),
    action,
    resource,
    payload_hash: payloadHash(),
  };
}

/** A decision request by `caller` costing `uj` µJ at `nowS`. */
export function request(
  chain: readonly SignedGrant[],
  caller: Actor,
  uj: bigint,
  opts: { action?: string; trust?: Trust; nowS?: number } = {},
): DecisionRequest {
  const cost: Cost = { uj, provenance: 'Estimator' };
  return { frame: frameFor(chain, opts.action, opts.trust), chain, caller: caller.did, cost, nowS: opts.nowS ?? 1_700_000_000 };
}

/** A steward that decides, debits on allow and seals every decision in sequence (seq, prev). */
export class TestSteward {
  readonly ledger = new Ledger();
  readonly revoked = new RevocationSet();
  readonly trust = new TrustRoots();
  readonly receipts: Uint8Array[] = [];
  readonly actor: Actor;
  #prev: ContentId | undefined;

  constructor(actor: Actor = steward) {
    this.actor = actor;
  }

  /** Decides `req`, debits on allow, seals the receipt and appends it to the log. */
  handle(req: DecisionRequest, requestId?: ContentId): { decision: Decision; bytes: Uint8Array } {
    const decision = decide(req, this);
    if (decision.verdict === 'allow') this.ledger.debit(decision.chainIds, req.cost.uj);
    const core = receiptCoreFor(req, decision, {
      steward: this.actor.did,
      seq: this.receipts.length,
      ...(this.#prev !== undefined ? { prev: this.#prev } : {}),
      ...(requestId !== undefined ? { requestId } : {}),
    });
    const bytes = sealReceipt(core, this.actor);
    this.receipts.push(bytes);
    this.#prev = receiptId(bytes);
    return { decision, bytes };
  }
}
