/**
 * Conformance classes for long-horizon agents: C20 (standing grants, spec §4.6) and C21
 * (checkpoints and amendments, spec §4.7).
 */
import { newActor, seededRng } from '../../core/actor.ts';
import {
  amend,
  checkpointId,
  issueContinuation,
  makeCheckpoint,
  SteeringRefusals,
  verifyAmendment,
  verifyContinuation,
} from '../../core/checkpoint.ts';
import { attenuate, checkHop, grantId, signGrant, verifyGrantSignature } from '../../core/grant.ts';
import { contentId } from '../../core/hash.ts';
import { signBody } from '../../core/signed.ts';
import { authorPolicy, EMPTY_MINT_LEDGER, fire, type MintLedger, StandingRefusals } from '../../core/standing.ts';
import type { ConformanceClass } from '../conformance.ts';

/** C20: firings mint strictly weaker children; bad firings are refused without advancing the ledger. */
export const C20: ConformanceClass = {
  id: 'C20',
  title: 'standing grants',
  run(t) {
    const rng = seededRng('conformance/C20');
    const owner = newActor(rng);
    const trigger = newActor(rng);
    const worker = newActor(rng);
    const hook = contentId({ source: 'tickets', kind: 'opened' });
    const otherHook = contentId({ source: 'billing', kind: 'opened' });
    const standing = signGrant(
      {
        issuer: owner.did,
        subject: trigger.did,
        capability: { resource: contentId({ tool: 'triage' }), actions: ['label', 'comment'] },
        budget_uj: 100n,
        expiry: 0,
        nonce: rng(16),
      },
      owner,
    );
    const sid = grantId(standing.grant);

    const amp = authorPolicy(standing, { event_class: hook, per_firing_uj: 101n, max_firings: 1, nonce: rng(16) }, owner);
    t.eq(amp.ok ? undefined : amp.error.code, StandingRefusals.AMPLIFICATION, 'a policy whose per-firing slice passes the grant is refused at author time');
    const byHolder = authorPolicy(standing, { event_class: hook, per_firing_uj: 10n, max_firings: 1, nonce: rng(16) }, trigger);
    t.eq(byHolder.ok ? undefined : byHolder.error.code, StandingRefusals.WRONG_SIGNER, 'only the grant issuer authors its policy');

    const authored = authorPolicy(standing, { event_class: hook, per_firing_uj: 30n, max_firings: 4, nonce: rng(16) }, owner);
    t.ok(authored.ok, 'the issuer authors a policy: 30 µJ per firing, at most 4 firings');
    if (!authored.ok) return;
    const policy = authored.value;
    const firing = (ledger: MintLedger, eventClass = hook) =>
      fire(policy, standing, ledger, { event_class: eventClass }, { subject: worker.did, nonce: rng(16) }, trigger);

    let ledger = EMPTY_MINT_LEDGER;
    for (let i = 1; i <= 3; i++) {
      const r = firing(ledger);
      t.ok(r.ok, `firing ${i} mints a child`);
      if (!r.ok) return;
      const child = r.value.child.grant;
      t.eq(child.parent, sid, `firing ${i}: the child traces to the standing grant`);
      t.ok(checkHop(standing.grant, sid, child).ok && verifyGrantSignature(r.value.child), `firing ${i}: the child chain-verifies`);
      t.eq(child.budget_uj, 30n, `firing ${i}: the child carries exactly the per-firing slice`);
      t.ok(child.budget_uj <= standing.grant.budget_uj, `firing ${i}: the child is strictly weaker`);
      ledger = r.value.ledger;
    }
    t.eq(ledger, { firings: 3, spent_uj: 90n }, 'the ledger holds 3 firings, 90 µJ');

    const wrong = firing(ledger, otherHook);
    t.eq(wrong.ok ? undefined : wrong.error.code, StandingRefusals.WRONG_EVENT_CLASS, 'an event of the wrong class is refused');
    const past = firing(ledger);
    t.eq(past.ok ? undefined : past.error.code, StandingRefusals.BUDGET_EXHAUSTED, 'a firing past the cumulative budget (120 of 100 µJ) is refused');
    const exhausted = firing({ firings: 4, spent_uj: 0n });
    t.eq(exhausted.ok ? undefined : exhausted.error.code, StandingRefusals.FIRINGS_EXHAUSTED, 'a fifth firing of a four-firing policy is refused');
    t.eq(ledger, { firings: 3, spent_uj: 90n }, 'refused firings leave the ledger unchanged');

    const byOwner = fire(policy, standing, EMPTY_MINT_LEDGER, { event_class: hook }, { subject: worker.did, nonce: rng(16) }, owner);
    t.eq(byOwner.ok ? undefined : byOwner.error.code, StandingRefusals.NOT_HOLDER, 'a non-holder cannot fire the standing grant');
    const tampered = fire({ body: { ...policy.body, per_firing_uj: 100n }, signature: policy.signature }, standing, EMPTY_MINT_LEDGER, { event_class: hook }, { subject: worker.did, nonce: rng(16) }, trigger);
    t.eq(tampered.ok ? undefined : tampered.error.code, StandingRefusals.WRONG_SIGNER, 'a policy altered after signing is refused');
  },
};

/** C21: the agent checkpoints; only the distinct issuer amends, only to tighten, at one checkpoint. */
export const C21: ConformanceClass = {
  id: 'C21',
  title: 'checkpoints + amendments',
  run(t) {
    const rng = seededRng('conformance/C21');
    const root = newActor(rng);
    const steward = newActor(rng);
    const agent = newActor(rng);
    const mallory = newActor(rng);
    const top = signGrant(
      {
        issuer: root.did,
        subject: steward.did,
        capability: { resource: contentId({ tool: 'research' }), actions: ['search', 'write'] },
        budget_uj: 1_000_000n,
        expiry: 2_000_000_000,
        nonce: rng(16),
      },
      root,
    );
    const delegated = attenuate(top, { subject: agent.did, budget_uj: 500_000n, nonce: rng(16) }, steward);
    t.ok(delegated.ok, 'the steward delegates the run to the agent');
    if (!delegated.ok) return;
    const run = delegated.value;

    const byOther = makeCheckpoint(run, contentId({ step: 1 }), steward);
    t.eq(byOther.ok ? undefined : byOther.error.code, SteeringRefusals.NOT_AGENT, 'only the agent checkpoints its own state');
    const cp = makeCheckpoint(run, contentId({ step: 1, notes: 'found 12 sources' }), agent, rng(16));
    t.ok(cp.ok, 'the agent checkpoints its own state');
    if (!cp.ok) return;
    const checkpoint = cp.value;

    const code = (r: { ok: boolean; error?: { code: string } }) => (r.ok ? 'accepted' : r.error?.code);
    t.eq(code(amend(checkpoint, run, { budget_uj: 100n, nonce: rng(16) }, agent)), SteeringRefusals.SELF_STEERING, 'the agent cannot steer itself');
    const selfSigned = signBody({ checkpoint: checkpointId(checkpoint), budget_uj: 100n, nonce: rng(16) }, agent);
    t.eq(code(verifyAmendment(selfSigned, checkpoint, run)), SteeringRefusals.SELF_STEERING, 'an agent-signed amendment is refused');
    t.eq(code(amend(checkpoint, run, { budget_uj: 100n, nonce: rng(16) }, mallory)), SteeringRefusals.NOT_ISSUER, 'a non-issuer cannot amend');
    t.eq(code(amend(checkpoint, run, { budget_uj: 100n, nonce: rng(16) }, root)), SteeringRefusals.NOT_ISSUER, 'an upstream issuer is not this grant issuer');
    const malSigned = signBody({ checkpoint: checkpointId(checkpoint), budget_uj: 100n, nonce: rng(16) }, mallory);
    t.eq(code(verifyAmendment(malSigned, checkpoint, run)), SteeringRefusals.NOT_ISSUER, 'a non-issuer-signed amendment is refused');
    t.eq(code(amend(checkpoint, run, { budget_uj: 500_001n, nonce: rng(16) }, steward)), SteeringRefusals.WIDENING, 'a widening amendment (1 µJ over) is refused');
    const wideSigned = signBody({ checkpoint: checkpointId(checkpoint), budget_uj: 600_000n, nonce: rng(16) }, steward);
    t.eq(code(verifyAmendment(wideSigned, checkpoint, run)), SteeringRefusals.WIDENING, 'an issuer-signed widening amendment is refused');

    const a = amend(checkpoint, run, { budget_uj: 200_000n, instructions: contentId({ focus: 'summarise' }), nonce: rng(16) }, steward);
    t.ok(a.ok, 'the issuer tightens the run at the checkpoint');
    if (!a.ok) return;
    const amendment = a.value;
    t.ok(verifyAmendment(amendment, checkpoint, run).ok, 'an auditor verifies the checkpoint + amendment pair');
    const later = makeCheckpoint(run, contentId({ step: 2 }), agent, rng(16));
    if (later.ok) {
      t.eq(code(verifyAmendment(amendment, later.value, run)), SteeringRefusals.WRONG_CHECKPOINT, 'an amendment bound to a different checkpoint is refused');
    }

    const c = issueContinuation(run, checkpoint, amendment, steward);
    t.ok(c.ok, 'the issuer re-issues the run as a continuation');
    if (!c.ok) return;
    const cont = c.value;
    t.eq(cont.grant.subject, agent.did, 'the continuation goes to the same agent');
    t.eq(cont.grant.budget_uj, 200_000n, 'the continuation carries the amended budget');
    t.ok(verifyContinuation(run, checkpoint, amendment, cont).ok, 'the continuation is linked back to the steered grant through the amendment');
    t.ok(checkHop(top.grant, grantId(top.grant), cont.grant).ok, 'the continuation chain-verifies under the steered grant parent');
    const wider = signGrant({ ...cont.grant, budget_uj: 500_000n }, steward);
    t.eq(code(verifyContinuation(run, checkpoint, amendment, wider)), SteeringRefusals.CONTINUATION_MISMATCH, 'a continuation wider than its amendment is refused');
    t.eq(code(issueContinuation(run, checkpoint, amendment, agent)), SteeringRefusals.NOT_ISSUER, 'the agent cannot re-issue its own run');
  },
};
