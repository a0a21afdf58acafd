import { blake3 as nobleBlake3 } from '@noble/hashes/blake3.js';
import { describe, expect, it } from 'vitest';
import {
  amend,
  amendmentId,
  attenuate,
  checkHop,
  checkpointId,
  contentId,
  continuationNonce,
  decode,
  encode,
  grantId,
  issueContinuation,
  makeCheckpoint,
  newActor,
  readSignedAmendment,
  readSignedCheckpoint,
  seededRng,
  signBody,
  type SignedAmendment,
  signedAmendmentToCbor,
  type SignedCheckpoint,
  signedCheckpointToCbor,
  type SignedGrant,
  signGrant,
  SteeringRefusals,
  verifyAmendment,
  verifyContinuation,
  verifyGrantSignature,
} from '../../core/index.ts';

const rng = seededRng('test/core/checkpoint');
const root = newActor(rng);
const steward = newActor(rng); // the steered grant's issuer: amends
const agent = newActor(rng); // the steered grant's subject: checkpoints
const mallory = newActor(rng);
const STATE = contentId({ step: 41, memo: 'halfway' });
const INSTRUCTIONS = contentId({ instructions: 'stop after the report' });

/** root → steward (depth 2) → agent: the steered grant is delegated, so its continuation is a sibling. */
function setup() {
  const top = signGrant(
    {
      issuer: root.did,
      subject: steward.did,
      capability: { resource: contentId({ tool: 'lab' }), actions: ['run', 'read'] },
      budget_uj: 10_000n,
      expiry: 2_000_000_000,
      delegate_depth: 2,
      nonce: rng(16),
    },
    root,
  );
  const r = attenuate(top, { subject: agent.did, budget_uj: 5_000n, nonce: rng(16) }, steward);
  if (!r.ok) throw new Error(r.error.why);
  const steered = r.value;
  const cp = makeCheckpoint(steered, STATE, agent, rng(16));
  if (!cp.ok) throw new Error(cp.error.why);
  return { top, steered, checkpoint: cp.value };
}

function amended(steered: SignedGrant, checkpoint: SignedCheckpoint, budget = 2_000n): SignedAmendment {
  const r = amend(checkpoint, steered, { budget_uj: budget, instructions: INSTRUCTIONS, nonce: rng(16) }, steward);
  if (!r.ok) throw new Error(r.error.why);
  return r.value;
}

describe('checkpoint - the agent commits to its state (§4.7, C21)', () => {
  it('allow / the agent checkpoints under its grant, and the checkpoint round-trips', () => {
    const { steered, checkpoint } = setup();
    expect(checkpoint.body.grant_id).toBe(grantId(steered.grant));
    const back = readSignedCheckpoint(decode(encode(signedCheckpointToCbor(checkpoint))));
    expect(checkpointId(back)).toBe(checkpointId(checkpoint));
  });

  it('refuse / not-agent / the issuer cannot checkpoint on the agent behalf', () => {
    const { steered } = setup();
    expect(makeCheckpoint(steered, STATE, steward)).toMatchObject({ ok: false, error: { code: SteeringRefusals.NOT_AGENT } });
  });
});

describe('checkpoint - amendments (§4.7, C21)', () => {
  it('allow / the issuer tightens the run at the checkpoint, and the pair verifies', () => {
    const { steered, checkpoint } = setup();
    const a = amended(steered, checkpoint);
    expect(a.body.checkpoint).toBe(checkpointId(checkpoint));
    expect(verifyAmendment(a, checkpoint, steered).ok).toBe(true);
    const back = readSignedAmendment(decode(encode(signedAmendmentToCbor(a))));
    expect(amendmentId(back)).toBe(amendmentId(a));
    expect(verifyAmendment(back, checkpoint, steered).ok).toBe(true);
  });

  it('allow / an amendment that keeps the budget as it was (tighten-only includes equal)', () => {
    const { steered, checkpoint } = setup();
    expect(amend(checkpoint, steered, { budget_uj: 5_000n, nonce: rng(16) }, steward).ok).toBe(true);
  });

  it('refuse / self-steering / the agent amends its own run', () => {
    const { steered, checkpoint } = setup();
    const r = amend(checkpoint, steered, { budget_uj: 1n, nonce: rng(16) }, agent);
    expect(r).toMatchObject({ ok: false, error: { code: SteeringRefusals.SELF_STEERING } });
  });

  it('refuse / self-steering / an amendment signed by the agent is not admitted', () => {
    const { steered, checkpoint } = setup();
    const forged = signBody({ checkpoint: checkpointId(checkpoint), budget_uj: 4_000n, nonce: rng(16) }, agent);
    expect(verifyAmendment(forged, checkpoint, steered)).toMatchObject({ ok: false, error: { code: SteeringRefusals.SELF_STEERING } });
  });

  it('refuse / self-steering / an agent that issued its own grant cannot be its own steward', () => {
    const self = signGrant(
      {
        issuer: agent.did,
        subject: agent.did,
        capability: { resource: contentId({ tool: 'lab' }), actions: ['run'] },
        budget_uj: 10n,
        expiry: 0,
        nonce: rng(16),
      },
      agent,
    );
    const cp = makeCheckpoint(self, STATE, agent);
    expect(cp.ok).toBe(true);
    if (!cp.ok) return;
    const r = amend(cp.value, self, { budget_uj: 5n, nonce: rng(16) }, agent);
    expect(r).toMatchObject({ ok: false, error: { code: SteeringRefusals.SELF_STEERING } });
    const forged = signBody({ checkpoint: checkpointId(cp.value), budget_uj: 5n, nonce: rng(16) }, agent);
    expect(verifyAmendment(forged, cp.value, self)).toMatchObject({ ok: false, error: { code: SteeringRefusals.SELF_STEERING } });
  });

  it('refuse / not-issuer / the root issuer upstream is not the steward of this run', () => {
    const { steered, checkpoint } = setup();
    const r = amend(checkpoint, steered, { budget_uj: 1n, nonce: rng(16) }, root);
    expect(r).toMatchObject({ ok: false, error: { code: SteeringRefusals.NOT_ISSUER } });
    const forged = signBody({ checkpoint: checkpointId(checkpoint), budget_uj: 1n, nonce: rng(16) }, mallory);
    expect(verifyAmendment(forged, checkpoint, steered)).toMatchObject({ ok: false, error: { code: SteeringRefusals.NOT_ISSUER } });
  });

  it('refuse / widening / an amendment over the checkpoint grant by 1 µJ', () => {
    const { steered, checkpoint } = setup();
    const r = amend(checkpoint, steered, { budget_uj: 5_001n, nonce: rng(16) }, steward);
    expect(r).toMatchObject({ ok: false, error: { code: SteeringRefusals.WIDENING } });
    const signed = signBody({ checkpoint: checkpointId(checkpoint), budget_uj: 5_001n, nonce: rng(16) }, steward);
    expect(verifyAmendment(signed, checkpoint, steered)).toMatchObject({ ok: false, error: { code: SteeringRefusals.WIDENING } });
  });

  it('refuse / wrong-checkpoint / an amendment bound to a different checkpoint of the same run', () => {
    const { steered, checkpoint } = setup();
    const later = makeCheckpoint(steered, contentId({ step: 42 }), agent, rng(16));
    if (!later.ok) throw new Error(later.error.why);
    const a = amended(steered, checkpoint);
    expect(verifyAmendment(a, later.value, steered)).toMatchObject({ ok: false, error: { code: SteeringRefusals.WRONG_CHECKPOINT } });
  });

  it('refuse / wrong-grant / a checkpoint presented with another grant', () => {
    const { checkpoint } = setup();
    const { steered: other } = setup();
    const r = amend(checkpoint, other, { budget_uj: 1n, nonce: rng(16) }, steward);
    expect(r).toMatchObject({ ok: false, error: { code: SteeringRefusals.WRONG_GRANT } });
  });

  it('refuse / not-agent / a checkpoint signed by someone else in the agent run', () => {
    const { steered, checkpoint } = setup();
    const forged = signBody(checkpoint.body, mallory);
    expect(amend(forged, steered, { budget_uj: 1n, nonce: rng(16) }, steward)).toMatchObject({
      ok: false,
      error: { code: SteeringRefusals.NOT_AGENT },
    });
  });
});

describe('checkpoint - the continuation grant (§4.7, C21)', () => {
  it('allow / the continuation is the steered grant re-bound to the amendment', () => {
    const { top, steered, checkpoint } = setup();
    const a = amended(steered, checkpoint);
    const r = issueContinuation(steered, checkpoint, a, steward);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    const c = r.value.grant;
    expect({ ...c, budget_uj: steered.grant.budget_uj, nonce: steered.grant.nonce }).toEqual(steered.grant);
    expect(c.budget_uj).toBe(2_000n);
    expect(verifyGrantSignature(r.value)).toBe(true);
    expect(verifyContinuation(steered, checkpoint, a, r.value).ok).toBe(true);
    // A sibling of the steered grant under the same parent: it chain-verifies like any child of it.
    expect(checkHop(top.grant, grantId(top.grant), c).ok).toBe(true);
  });

  it('the link nonce is the first 16 bytes of blake3("jcp/continuation" ‖ amendment id)', () => {
    const { steered, checkpoint } = setup();
    const a = amended(steered, checkpoint);
    const msg = Buffer.concat([Buffer.from('jcp/continuation'), Buffer.from(amendmentId(a), 'hex')]);
    expect(Buffer.from(continuationNonce(amendmentId(a))).toString('hex')).toBe(
      Buffer.from(nobleBlake3(msg)).subarray(0, 16).toString('hex'),
    );
    const r = issueContinuation(steered, checkpoint, a, steward);
    expect(r.ok && Buffer.from(r.value.grant.nonce).toString('hex')).toBe(Buffer.from(continuationNonce(amendmentId(a))).toString('hex'));
  });

  it('refuse / not-issuer / only the steered grant issuer re-issues it', () => {
    const { steered, checkpoint } = setup();
    const a = amended(steered, checkpoint);
    expect(issueContinuation(steered, checkpoint, a, agent)).toMatchObject({ ok: false, error: { code: SteeringRefusals.NOT_ISSUER } });
  });

  it('refuse / continuation-mismatch / a re-issue with more budget than the amendment', () => {
    const { steered, checkpoint } = setup();
    const a = amended(steered, checkpoint);
    const r = issueContinuation(steered, checkpoint, a, steward);
    if (!r.ok) throw new Error(r.error.why);
    const wider = signGrant({ ...r.value.grant, budget_uj: 5_000n }, steward);
    expect(verifyContinuation(steered, checkpoint, a, wider)).toMatchObject({
      ok: false,
      error: { code: SteeringRefusals.CONTINUATION_MISMATCH, why: expect.stringMatching(/budget_uj/) },
    });
  });

  it('refuse / continuation-mismatch / a grant not bound to this amendment (fresh nonce)', () => {
    const { steered, checkpoint } = setup();
    const a = amended(steered, checkpoint);
    const unbound = signGrant({ ...steered.grant, budget_uj: 2_000n, nonce: rng(16) }, steward);
    expect(verifyContinuation(steered, checkpoint, a, unbound)).toMatchObject({
      ok: false,
      error: { code: SteeringRefusals.CONTINUATION_MISMATCH, why: expect.stringMatching(/nonce/) },
    });
  });

  it('refuse / continuation-mismatch / a continuation handed to another agent', () => {
    const { steered, checkpoint } = setup();
    const a = amended(steered, checkpoint);
    const r = issueContinuation(steered, checkpoint, a, steward);
    if (!r.ok) throw new Error(r.error.why);
    const moved = signGrant({ ...r.value.grant, subject: mallory.did }, steward);
    expect(verifyContinuation(steered, checkpoint, a, moved)).toMatchObject({
      ok: false,
      error: { code: SteeringRefusals.CONTINUATION_MISMATCH },
    });
  });

  it('refuse / bad-signature / the right fields under a forged signature', () => {
    const { steered, checkpoint } = setup();
    const a = amended(steered, checkpoint);
    const r = issueContinuation(steered, checkpoint, a, steward);
    if (!r.ok) throw new Error(r.error.why);
    const forged = { grant: r.value.grant, signature: signGrant({ ...r.value.grant, issuer: mallory.did }, mallory).signature };
    expect(verifyContinuation(steered, checkpoint, a, forged)).toMatchObject({
      ok: false,
      error: { code: SteeringRefusals.BAD_SIGNATURE },
    });
  });

  it('refuse / wrong-checkpoint / a continuation audited against another checkpoint', () => {
    const { steered, checkpoint } = setup();
    const a = amended(steered, checkpoint);
    const r = issueContinuation(steered, checkpoint, a, steward);
    if (!r.ok) throw new Error(r.error.why);
    const other = makeCheckpoint(steered, contentId({ step: 99 }), agent);
    if (!other.ok) throw new Error(other.error.why);
    expect(verifyContinuation(steered, other.value, a, r.value)).toMatchObject({
      ok: false,
      error: { code: SteeringRefusals.WRONG_CHECKPOINT },
    });
  });
});
