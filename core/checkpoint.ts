/**
 * Checkpoints and amendments: steering a long run (spec §4.7 OPTIONAL, conformance C21).
 *
 * Separation of duties. A {@link Checkpoint} `{grant_id, state, nonce?}` is the running agent's
 * commitment to its own state, signed by the agent — the checkpoint grant's subject. An
 * {@link Amendment} `{checkpoint, budget_uj, instructions?, nonce}` is signed by the grant's
 * issuer, who must be a different principal from the agent; it names exactly one checkpoint (by
 * the content id of the signed checkpoint's body) and only tightens: `budget_uj` ≤ the checkpoint
 * grant's budget_uj. Both are `{body, signature}` over `canonical_cbor(body)` (docs/design.md "Encodings").
 * An amendment has no signer field: the only key it can verify under is the grant issuer's.
 *
 * The continuation grant and how it is linked back. The run resumes under a grant the issuer
 * re-issues to the same agent ({@link issueContinuation}). It adds no new grant fields; the link is:
 * - issuer, subject, capability, parent, expiry and delegate_depth equal the steered grant's;
 * - budget_uj is the amendment's budget_uj;
 * - nonce = the first 16 bytes of blake3(utf8("jcp/continuation") ‖ the 32 bytes of the amendment id).
 * The nonce binds the continuation to one amendment, which names one checkpoint, which names the
 * steered grant: an auditor holding the steered grant and the signed checkpoint + amendment pair
 * recomputes the continuation's nonce and fields and checks them ({@link verifyContinuation}).
 * Because the parent and issuer are the steered grant's, a continuation of a delegated grant is
 * a sibling of it under the same parent and chain-verifies (§4.2) like any child of that parent.
 * This is an issuer re-binding, not a holder delegation. See `docs/steering.md`.
 */
import type { Actor } from './actor.ts';
import { bytesEqual, concat, fromHex, utf8 } from './bytes.ts';
import type { Uj } from './energy.ts';
import { type Grant, grantId, type SignedGrant, signGrant, verifyGrantSignature } from './grant.ts';
import { blake3, type ContentId, contentId } from './hash.ts';
import { type Result, err, ok } from './result.ts';
import { asBytes, asCid, asObj, asUint, type Obj, uintOut } from './schema.ts';
import { readSigned, type Signed, signBody, verifyBody } from './signed.ts';

/** An agent's commitment to its own state at a boundary of a run (§4.7). Signed by the agent. */
export interface Checkpoint {
  /** The active grant (the checkpoint grant). */
  readonly grant_id: ContentId;
  /** Content id of the agent's state commitment. */
  readonly state: ContentId;
  /** Optional 16 bytes, to tell apart two checkpoints of the same state. */
  readonly nonce?: Uint8Array;
}

/** A checkpoint with the agent's Ed25519 signature over `canonical_cbor(checkpoint)`. */
export type SignedCheckpoint = Signed<Checkpoint>;

/** An issuer's tighten-only re-bounding of a run at one checkpoint (§4.7). Signed by the grant issuer. */
export interface Amendment {
  /** The checkpoint id: content id of the signed checkpoint's body. */
  readonly checkpoint: ContentId;
  /** The continuation's budget, in microjoules; at most the checkpoint grant's budget_uj. */
  readonly budget_uj: Uj;
  /** Optional content id of a new instruction-set commitment handed to the agent. */
  readonly instructions?: ContentId;
  /** 16 bytes. */
  readonly nonce: Uint8Array;
}

/** An amendment with the grant issuer's Ed25519 signature over `canonical_cbor(amendment)`. */
export type SignedAmendment = Signed<Amendment>;

/** The plain CBOR map of a checkpoint (nonce omitted when absent). */
export function checkpointToCbor(c: Checkpoint): Obj {
  const o: Obj = { grant_id: c.grant_id, state: c.state };
  if (c.nonce !== undefined) o['nonce'] = c.nonce;
  return o;
}

/** The plain CBOR map of an amendment (instructions omitted when absent). */
export function amendmentToCbor(a: Amendment): Obj {
  const o: Obj = { checkpoint: a.checkpoint, budget_uj: uintOut(a.budget_uj), nonce: a.nonce };
  if (a.instructions !== undefined) o['instructions'] = a.instructions;
  return o;
}

/** The plain CBOR map of a signed checkpoint. */
export function signedCheckpointToCbor(sc: SignedCheckpoint): Obj {
  return { body: checkpointToCbor(sc.body), signature: sc.signature };
}

/** The plain CBOR map of a signed amendment. */
export function signedAmendmentToCbor(sa: SignedAmendment): Obj {
  return { body: amendmentToCbor(sa.body), signature: sa.signature };
}

/** The checkpoint id: content id of the checkpoint body (what an amendment names). */
export function checkpointId(sc: SignedCheckpoint): ContentId {
  return contentId(checkpointToCbor(sc.body));
}

/** The amendment id: content id of the amendment body (what a continuation's nonce binds to). */
export function amendmentId(sa: SignedAmendment): ContentId {
  return contentId(amendmentToCbor(sa.body));
}

/**
 * Reads a decoded CBOR map as a Checkpoint.
 * @throws JcpError `schema` / `bad-length`, naming the field.
 */
export function readCheckpoint(v: unknown, field = 'checkpoint'): Checkpoint {
  const o = asObj(v, field, ['grant_id', 'state'], ['nonce']);
  return {
    grant_id: asCid(o['grant_id'], `${field}.grant_id`),
    state: asCid(o['state'], `${field}.state`),
    ...(o['nonce'] !== undefined ? { nonce: asBytes(o['nonce'], `${field}.nonce`, 16) } : {}),
  };
}

/**
 * Reads a decoded CBOR map as an Amendment.
 * @throws JcpError `schema` / `bad-length`, naming the field.
 */
export function readAmendment(v: unknown, field = 'amendment'): Amendment {
  const o = asObj(v, field, ['checkpoint', 'budget_uj', 'nonce'], ['instructions']);
  return {
    checkpoint: asCid(o['checkpoint'], `${field}.checkpoint`),
    budget_uj: asUint(o['budget_uj'], `${field}.budget_uj`),
    nonce: asBytes(o['nonce'], `${field}.nonce`, 16),
    ...(o['instructions'] !== undefined ? { instructions: asCid(o['instructions'], `${field}.instructions`) } : {}),
  };
}

/** Reads a decoded `{body, signature}` map as a signed checkpoint (signature not checked). */
export function readSignedCheckpoint(v: unknown, field = 'signed_checkpoint'): SignedCheckpoint {
  const s = readSigned(v, field);
  return { body: readCheckpoint(s.body, `${field}.body`), signature: s.signature };
}

/** Reads a decoded `{body, signature}` map as a signed amendment (signature not checked). */
export function readSignedAmendment(v: unknown, field = 'signed_amendment'): SignedAmendment {
  const s = readSigned(v, field);
  return { body: readAmendment(s.body, `${field}.body`), signature: s.signature };
}

/** Refusal codes of checkpoints, amendments and continuations, one per distinct outcome (§4.7, C21). */
export const SteeringRefusals = {
  /** The checkpoint is not authored/signed by the grant's subject (the agent), or names another grant. */
  NOT_AGENT: 'not-agent',
  /** The amendment would be (or is) signed by the agent: an agent cannot steer itself. */
  SELF_STEERING: 'self-steering',
  /** The amendment is not authored/signed by the grant's issuer. */
  NOT_ISSUER: 'not-issuer',
  /** The amendment's budget_uj passes the checkpoint grant's: steering only tightens. */
  WIDENING: 'widening',
  /** The amendment names another checkpoint than the one presented. */
  WRONG_CHECKPOINT: 'wrong-checkpoint',
  /** The checkpoint names another grant than the one presented. */
  WRONG_GRANT: 'wrong-grant',
  /** The continuation is not the grant the issuer would re-issue for this amendment. */
  CONTINUATION_MISMATCH: 'continuation-mismatch',
  /** The continuation's signature does not verify under its issuer. */
  BAD_SIGNATURE: 'bad-signature',
} as const;

/** One of {@link SteeringRefusals}. */
export type SteeringRefusalCode = (typeof SteeringRefusals)[keyof typeof SteeringRefusals];

/** Why a checkpoint, amendment or continuation was refused. `why` is for people, never parsed. */
export interface SteeringRefusal {
  readonly code: SteeringRefusalCode;
  readonly why: string;
}

/**
 * The agent checkpoints its own state under `grant` (§4.7). `stateId` is the content id of its
 * state commitment. Refusal: `not-agent` (the author is not the grant's subject).
 */
export function makeCheckpoint(
  grant: SignedGrant,
  stateId: ContentId,
  agent: Actor,
  nonce?: Uint8Array,
): Result<SignedCheckpoint, SteeringRefusal> {
  if (agent.did !== grant.grant.subject) {
    return err({ code: SteeringRefusals.NOT_AGENT, why: 'only the grant subject (the running agent) checkpoints' });
  }
  const body: Checkpoint = { grant_id: grantId(grant.grant), state: stateId, ...(nonce !== undefined ? { nonce } : {}) };
  return ok(signBody(body, agent));
}

/**
 * Verifies a signed checkpoint against its grant (§4.7): names the grant, signed by its subject.
 * Refusals: `wrong-grant`, `not-agent`.
 */
export function verifyCheckpoint(sc: SignedCheckpoint, grant: SignedGrant): Result<void, SteeringRefusal> {
  if (sc.body.grant_id !== grantId(grant.grant)) {
    return err({ code: SteeringRefusals.WRONG_GRANT, why: 'checkpoint names another grant' });
  }
  if (!verifyBody(sc, grant.grant.subject)) {
    return err({ code: SteeringRefusals.NOT_AGENT, why: 'checkpoint signature does not verify under the grant subject' });
  }
  return ok(undefined);
}

/** What the issuer chooses when amending. */
export interface AmendmentTerms {
  /** The continuation's budget, µJ; at most the checkpoint grant's budget_uj. */
  readonly budget_uj: Uj;
  /** Optional content id of a new instruction-set commitment. */
  readonly instructions?: ContentId;
  readonly nonce: Uint8Array;
}

/**
 * The issuer amends a run at `checkpoint` (§4.7, C21). The checkpoint must verify for `grant`.
 * Refusals, in order: `wrong-grant` / `not-agent` (the checkpoint), `self-steering` (the amender
 * is the agent — including a grant its agent issued to itself), `not-issuer` (the amender is not
 * the grant's issuer), `widening` (budget_uj > the grant's budget_uj, or negative).
 */
export function amend(
  checkpoint: SignedCheckpoint,
  grant: SignedGrant,
  terms: AmendmentTerms,
  amender: Actor,
): Result<SignedAmendment, SteeringRefusal> {
  const cp = verifyCheckpoint(checkpoint, grant);
  if (!cp.ok) return cp;
  const g = grant.grant;
  if (amender.did === g.subject) {
    return err({ code: SteeringRefusals.SELF_STEERING, why: 'the agent cannot amend its own run' });
  }
  if (amender.did !== g.issuer) return err({ code: SteeringRefusals.NOT_ISSUER, why: 'only the grant issuer may amend' });
  const wide = widening(terms.budget_uj, g);
  if (wide) return err(wide);
  const body: Amendment = {
    checkpoint: checkpointId(checkpoint),
    budget_uj: terms.budget_uj,
    nonce: terms.nonce,
    ...(terms.instructions !== undefined ? { instructions: terms.instructions } : {}),
  };
  return ok(signBody(body, amender));
}

function widening(budgetUj: Uj, g: Grant): SteeringRefusal | undefined {
  if (budgetUj < 0n) return { code: SteeringRefusals.WIDENING, why: 'budget_uj is negative' };
  if (budgetUj > g.budget_uj) {
    return { code: SteeringRefusals.WIDENING, why: `budget ${budgetUj} µJ passes the checkpoint grant's ${g.budget_uj} µJ` };
  }
  return undefined;
}

/**
 * Verifies a checkpoint + amendment pair against the steered grant (§4.7, C21).
 * Refusals, in order: the checkpoint's (`wrong-grant`, `not-agent`), `wrong-checkpoint` (the
 * amendment names another checkpoint), `self-steering` (the grant's issuer is its subject, or the
 * amendment verifies under the agent's key), `not-issuer` (it does not verify under the issuer's
 * key), `widening`.
 */
export function verifyAmendment(
  amendment: SignedAmendment,
  checkpoint: SignedCheckpoint,
  grant: SignedGrant,
): Result<void, SteeringRefusal> {
  const cp = verifyCheckpoint(checkpoint, grant);
  if (!cp.ok) return cp;
  if (amendment.body.checkpoint !== checkpointId(checkpoint)) {
    return err({ code: SteeringRefusals.WRONG_CHECKPOINT, why: 'amendment is bound to another checkpoint' });
  }
  const g = grant.grant;
  if (g.issuer === g.subject || verifyBody(amendment, g.subject)) {
    return err({ code: SteeringRefusals.SELF_STEERING, why: 'amendment is signed by the agent itself' });
  }
  if (!verifyBody(amendment, g.issuer)) {
    return err({ code: SteeringRefusals.NOT_ISSUER, why: 'amendment signature does not verify under the grant issuer' });
  }
  const wide = widening(amendment.body.budget_uj, g);
  return wide ? err(wide) : ok(undefined);
}

/**
 * The continuation grant's nonce for an amendment: the first 16 bytes of
 * blake3(utf8("jcp/continuation") ‖ the 32 bytes of `amendmentId`).
 * @throws JcpError `bad-length` if `amendmentId` is not a content id.
 */
export function continuationNonce(amendmentIdHex: ContentId): Uint8Array {
  return blake3(concat(utf8('jcp/continuation'), fromHex(amendmentIdHex, 32, 'amendment_id'))).slice(0, 16);
}

/**
 * The unsigned continuation grant the issuer re-issues for `amendment` of `steered` (§4.7; the
 * link is in the module docstring). Its content id is what an enforcement point caps when the
 * amendment takes effect there, before the signed continuation is ever presented. The pair is
 * not verified here: call {@link verifyAmendment} first.
 */
export function continuationOf(steered: Grant, amendment: SignedAmendment): Grant {
  return {
    issuer: steered.issuer,
    subject: steered.subject,
    capability: { resource: steered.capability.resource, actions: [...steered.capability.actions] },
    budget_uj: amendment.body.budget_uj,
    expiry: steered.expiry,
    ...(steered.parent !== undefined ? { parent: steered.parent } : {}),
    ...(steered.delegate_depth !== undefined ? { delegate_depth: steered.delegate_depth } : {}),
    nonce: continuationNonce(amendmentId(amendment)),
  };
}

/**
 * The issuer re-issues the steered grant to the same agent with the amended budget, linked back
 * through the amendment (§4.7, C21; link in the module docstring). The pair must verify
 * ({@link verifyAmendment}), and `issuer` must be the steered grant's issuer.
 * Refusals: those of {@link verifyAmendment}, `not-issuer`.
 */
export function issueContinuation(
  steered: SignedGrant,
  checkpoint: SignedCheckpoint,
  amendment: SignedAmendment,
  issuer: Actor,
): Result<SignedGrant, SteeringRefusal> {
  const pair = verifyAmendment(amendment, checkpoint, steered);
  if (!pair.ok) return pair;
  if (issuer.did !== steered.grant.issuer) {
    return err({ code: SteeringRefusals.NOT_ISSUER, why: 'only the steered grant issuer re-issues it' });
  }
  return ok(signGrant(continuationOf(steered.grant, amendment), issuer));
}

/**
 * An auditor's check that `continuation` is exactly the grant the issuer re-issued for this
 * checkpoint + amendment pair of `steered` (§4.7, C21). Refusals: those of
 * {@link verifyAmendment}, `continuation-mismatch` (any field differs from the link, naming it),
 * `bad-signature` (the continuation does not verify under its issuer).
 */
export function verifyContinuation(
  steered: SignedGrant,
  checkpoint: SignedCheckpoint,
  amendment: SignedAmendment,
  continuation: SignedGrant,
): Result<void, SteeringRefusal> {
  const pair = verifyAmendment(amendment, checkpoint, steered);
  if (!pair.ok) return pair;
  const want = continuationOf(steered.grant, amendment);
  const got = continuation.grant;
  const field = mismatch(want, got);
  if (field !== undefined) {
    return err({ code: SteeringRefusals.CONTINUATION_MISMATCH, why: `continuation ${field} is not the linked value` });
  }
  if (!verifyGrantSignature(continuation)) {
    return err({ code: SteeringRefusals.BAD_SIGNATURE, why: 'continuation signature does not verify under its issuer' });
  }
  return ok(undefined);
}

function mismatch(want: Grant, got: Grant): string | undefined {
  if (got.issuer !== want.issuer) return 'issuer';
  if (got.subject !== want.subject) return 'subject';
  if (got.capability.resource !== want.capability.resource) return 'capability.resource';
  const a = got.capability.actions;
  const b = want.capability.actions;
  if (a.length !== b.length || a.some((x, i) => x !== b[i])) return 'capability.actions';
  if (got.budget_uj !== want.budget_uj) return 'budget_uj';
  if (got.expiry !== want.expiry) return 'expiry';
  if (got.parent !== want.parent) return 'parent';
  if (got.delegate_depth !== want.delegate_depth) return 'delegate_depth';
  if (!bytesEqual(got.nonce, want.nonce)) return 'nonce';
  // Belt and braces: the whole grant, byte for byte.
  if (grantId(got) !== grantId(want)) return 'encoding';
  return undefined;
}
