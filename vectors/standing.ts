/**
 * `standing.json`: standing grants (spec §4.6; C20) and checkpoints with amendments (§4.7; C21).
 *
 * C20: mint policies authored (or refused as amplifying / wrong author), presented policies
 * checked against their grant, and firing sequences — each firing's child (byte for byte) and
 * the mint ledger after it, or the refusal with the ledger left as it was.
 * C21: a checkpoint + amendment pair with the continuation grant linked back to the steered
 * grant; and steering that must be refused (self-steering, a non-issuer, widening, an amendment
 * bound to another checkpoint, …), each with its code.
 */
import {
  amend,
  amendmentId,
  amendmentToCbor,
  authorPolicy,
  checkpointId,
  checkpointToCbor,
  contentId,
  type ContentId,
  continuationNonce,
  decode,
  EMPTY_MINT_LEDGER,
  encode,
  fire,
  grantId,
  issueContinuation,
  makeCheckpoint,
  type MintLedger,
  mintPolicyId,
  mintPolicyToCbor,
  readSignedAmendment,
  readSignedCheckpoint,
  readSignedMintPolicy,
  sign,
  type SignedAmendment,
  signedAmendmentToCbor,
  type SignedCheckpoint,
  signedCheckpointToCbor,
  type SignedGrant,
  type SignedMintPolicy,
  signedMintPolicyToCbor,
  verifyAmendment,
  verifyChain,
  verifyContinuation,
  verifyPolicy,
} from '../core/index.ts';
import type { Checker } from '../conformance/index.ts';
import {
  type ActorName,
  RESOURCE,
  actor,
  delegate,
  did,
  fileHeader,
  forged,
  idOf,
  nonce,
  rootGrant,
  sgFromHex,
  sgHex,
  VectorCheck,
} from './fixtures.ts';
import { compact, dec, hex, type J, type JsonObj } from './json.ts';

/** The event class a ticket webhook fires: content id of `{source: "tickets", kind: "opened"}`. */
const TICKETS = contentId({ source: 'tickets', kind: 'opened' });
/** Another event class: content id of `{source: "billing", kind: "opened"}`. */
const BILLING = contentId({ source: 'billing', kind: 'opened' });

function policyHex(p: SignedMintPolicy): string {
  return hex(encode(signedMintPolicyToCbor(p)));
}

function mustPolicy(standing: SignedGrant, label: string, perFiringUj: bigint, maxFirings: number): SignedMintPolicy {
  const r = authorPolicy(
    standing,
    { event_class: TICKETS, per_firing_uj: perFiringUj, max_firings: maxFirings, nonce: nonce(label) },
    actor('alice'),
  );
  if (!r.ok) throw new Error(`vectors: policy ${label} refused: ${r.error.code}`);
  return r.value;
}

interface FiringStep {
  readonly event_class: ContentId;
  readonly holder: ActorName;
  readonly subject: ActorName;
  readonly actions?: string[];
}

function firingVector(
  name: string,
  description: string,
  standing: SignedGrant,
  policy: SignedMintPolicy,
  steps: readonly FiringStep[],
): JsonObj {
  let ledger: MintLedger = EMPTY_MINT_LEDGER;
  const out = steps.map((s, i): JsonObj => {
    const n = nonce(`standing/firing/${name}/${i}`);
    const before = ledger;
    const r = fire(
      policy,
      standing,
      ledger,
      { event_class: s.event_class },
      { subject: did(s.subject), nonce: n, ...(s.actions !== undefined ? { actions: s.actions } : {}) },
      actor(s.holder),
    );
    if (r.ok) ledger = r.value.ledger;
    return {
      event_class: s.event_class,
      holder: s.holder,
      params: compact({ subject: did(s.subject), actions: s.actions, nonce: hex(n) }),
      ledger_before: { firings: before.firings, spent_uj: dec(before.spent_uj) },
      expected: r.ok
        ? {
            ok: true,
            child: sgHex(r.value.child),
            child_id: grantId(r.value.child.grant),
            ledger_after: { firings: ledger.firings, spent_uj: dec(ledger.spent_uj) },
          }
        : { ok: false, code: r.error.code },
    };
  });
  return { name, description, standing: sgHex(standing), policy: policyHex(policy), firings: out };
}

function signedCp(sc: SignedCheckpoint): string {
  return hex(encode(signedCheckpointToCbor(sc)));
}

function signedAm(sa: SignedAmendment): string {
  return hex(encode(signedAmendmentToCbor(sa)));
}

function must<T>(r: { ok: true; value: T } | { ok: false; error: { code: string } }, what: string): T {
  if (!r.ok) throw new Error(`vectors: ${what} refused: ${r.error.code}`);
  return r.value;
}

/** Builds `standing.json`. */
export function generate(): JsonObj {
  return {
    ...fileHeader('standing.json', 'Standing grants (C20) and checkpoints with amendments (C21)', '§4.6, §4.7; C20, C21'),
    event_classes: { tickets: TICKETS, billing: BILLING },
    ...standingVectors(),
    ...steeringVectors(),
  };
}

/**
 * The C20 part of `standing.json` (spec §4.6): `policies` (authoring, with refusal codes),
 * `policy_checks` (valid, wrong-grant, forged) and `firings` (mint-ledger walks to their refusals).
 * Alice puts 1,000 µJ on standing for bob (the automation service), who fires children for erin.
 * Throws when a fixed policy cannot be authored.
 */
function standingVectors(): JsonObj {
  const standing = rootGrant('standing/grant', { capability: { resource: RESOURCE, actions: ['label', 'comment'] } });
  const policy = mustPolicy(standing, 'standing/policy', 300n, 2);
  const roomy = mustPolicy(standing, 'standing/policy-roomy', 400n, 5);
  const other = rootGrant('standing/other-grant');
  const policyForOther = mustPolicy(other, 'standing/policy-other', 100n, 1);
  const forgedPolicy: SignedMintPolicy = {
    body: policy.body,
    signature: sign(actor('mallory').key, encode(mintPolicyToCbor(policy.body))),
  };
  const authored = (name: string, description: string, perFiringUj: bigint, author: ActorName): JsonObj => {
    const terms = { event_class: TICKETS, per_firing_uj: perFiringUj, max_firings: 3, nonce: nonce(`standing/author/${name}`) };
    const r = authorPolicy(standing, terms, actor(author));
    return {
      name,
      description,
      grant: sgHex(standing),
      author,
      terms: {
        event_class: terms.event_class,
        per_firing_uj: dec(terms.per_firing_uj),
        max_firings: terms.max_firings,
        nonce: hex(terms.nonce),
      },
      expected: r.ok ? { ok: true, policy: policyHex(r.value), policy_id: mintPolicyId(r.value) } : { ok: false, code: r.error.code },
    };
  };
  const presented = (name: string, description: string, p: SignedMintPolicy) => {
    const r = verifyPolicy(p, standing);
    return { name, description, grant: sgHex(standing), policy: policyHex(p), expected: r.ok ? 'valid' : r.error.code };
  };

  return {
    policies: [
      authored('authored', 'alice (the issuer) bounds her grant: 250 µJ per firing, 3 firings', 250n, 'alice'),
      authored('per-firing-equals-budget', 'a slice equal to the whole grant is not an amplification', 1000n, 'alice'),
      authored('amplification', '1,001 µJ per firing on a 1,000 µJ grant', 1001n, 'alice'),
      authored('wrong-signer', 'bob (the subject) authors a policy on alice’s grant', 100n, 'bob'),
    ],
    policy_checks: [
      presented('valid', 'the policy alice signed for this grant', policy),
      presented('wrong-grant', 'a policy bound to another grant', policyForOther),
      presented('forged', 'the policy body signed by mallory', forgedPolicy),
    ],
    firings: [
      firingVector(
        'firings-exhausted',
        '300 µJ × at most 2: two firings, then refused; a wrong event class leaves the ledger as it was',
        standing,
        policy,
        [
          { event_class: TICKETS, holder: 'bob', subject: 'erin' },
          { event_class: BILLING, holder: 'bob', subject: 'erin' },
          { event_class: TICKETS, holder: 'bob', subject: 'dave', actions: ['label'] },
          { event_class: TICKETS, holder: 'bob', subject: 'erin' },
        ],
      ),
      firingVector('budget-exhausted', '400 µJ × at most 5 on 1,000 µJ: the third firing would reach 1,200', standing, roomy, [
        { event_class: TICKETS, holder: 'bob', subject: 'erin' },
        { event_class: TICKETS, holder: 'bob', subject: 'erin' },
        { event_class: TICKETS, holder: 'bob', subject: 'erin' },
      ]),
      firingVector('not-holder', 'mallory fires bob’s standing grant', standing, roomy, [
        { event_class: TICKETS, holder: 'mallory', subject: 'mallory' },
      ]),
      firingVector('attenuation-violation', 'the firing asks for an action the grant lacks', standing, roomy, [
        { event_class: TICKETS, holder: 'bob', subject: 'erin', actions: ['label', 'delete'] },
      ]),
    ],
  };
}

/**
 * The C21 part of `standing.json` (spec §4.7): the `steering` example (checkpoint, amendment,
 * continuation and their link), `amend_attempts`, `steering_checks` and `continuation_chains`.
 * Alice delegated a run to bob; bob checkpoints; alice amends to 600 µJ; the continuation follows.
 * Throws when a fixed checkpoint, amendment or continuation cannot be made.
 */
function steeringVectors(): JsonObj {
  const s = steeringFixture();
  const { cont } = s;
  return {
    steering: steeringExample(s),
    amend_attempts: [
      amendAttempt(s, 'issuer-tightens', 'alice amends to 600 µJ', 'alice', 600n),
      amendAttempt(s, 'issuer-keeps-budget', 'equal is allowed: tighten-only', 'alice', 1000n),
      amendAttempt(s, 'self-steering', 'bob (the agent) amends his own run', 'bob', 600n),
      amendAttempt(s, 'not-issuer', 'carol amends alice’s grant', 'carol', 600n),
      amendAttempt(s, 'widening', 'alice raises the run to 1,001 µJ', 'alice', 1001n),
    ],
    steering_checks: steeringChecks(s),
    continuation_chains: [
      {
        name: 'continuation-is-a-root',
        description: 'a continuation of a root grant is itself a root and verifies as a one-link chain',
        chain: [sgHex(cont)],
        ids: [idOf(cont)],
      },
    ],
  };
}

/** The signed objects the steering sections are built from (§4.7); see {@link steeringFixture}. */
interface SteeringFixture {
  readonly run: SignedGrant;
  readonly selfRun: SignedGrant;
  readonly cp: SignedCheckpoint;
  readonly cp2: SignedCheckpoint;
  readonly am: SignedAmendment;
  readonly cont: SignedGrant;
  readonly wrongBudgetCont: SignedGrant;
  readonly selfCp: SignedCheckpoint;
  readonly selfAm: SignedAmendment;
  readonly childOfRun: SignedGrant;
}

/**
 * Makes the steering objects, in a fixed order (checkpoints without a fixed nonce draw one):
 * alice's run for bob, bob's checkpoints, alice's 600 µJ amendment and its continuation, a 500 µJ
 * continuation, a run alice issued to herself with its checkpoint and amendment, and a child of the run.
 * Throws when one of them cannot be made.
 */
function steeringFixture(): SteeringFixture {
  const run = rootGrant('standing/run');
  const selfRun = rootGrant('standing/self-run', { subject: did('alice') });
  const state = contentId({ run: 'standing/run', step: 42 });
  const cp = must(makeCheckpoint(run, state, actor('bob'), nonce('standing/checkpoint')), 'checkpoint');
  const cp2 = must(makeCheckpoint(run, contentId({ run: 'standing/run', step: 43 }), actor('bob')), 'checkpoint 2');
  const am = must(
    amend(
      cp,
      run,
      { budget_uj: 600n, instructions: contentId({ instructions: 'be brief' }), nonce: nonce('standing/amendment') },
      actor('alice'),
    ),
    'amendment',
  );
  const cont = must(issueContinuation(run, cp, am, actor('alice')), 'continuation');
  const wrongBudgetCont = must(issueContinuation(run, cp, amendmentBy(am, 'alice', 500n), actor('alice')), 'continuation 500');
  const selfCp = must(makeCheckpoint(selfRun, state, actor('alice')), 'self checkpoint');
  const selfAmBody = { checkpoint: checkpointId(selfCp), budget_uj: 10n, nonce: nonce('standing/self-am') };
  const selfAm: SignedAmendment = { body: selfAmBody, signature: sign(actor('alice').key, encode(amendmentToCbor(selfAmBody))) };
  const childOfRun = delegate('standing/child-of-run', run, 'bob', { subject: 'carol', budget_uj: 100n });
  return { run, selfRun, cp, cp2, am, cont, wrongBudgetCont, selfCp, selfAm, childOfRun };
}

/** The `steering` example: the checkpoint, amendment and continuation bodies, signed bytes and ids. */
function steeringExample({ run, cp, am, cont }: SteeringFixture): JsonObj {
  return {
    grant: sgHex(run),
    checkpoint: {
      body: compact({ grant_id: cp.body.grant_id, state: cp.body.state, nonce: cp.body.nonce ? hex(cp.body.nonce) : undefined }),
      signer: 'bob',
      signed_cbor: signedCp(cp),
      id: checkpointId(cp),
    },
    amendment: {
      body: compact({
        checkpoint: am.body.checkpoint,
        budget_uj: dec(am.body.budget_uj),
        instructions: am.body.instructions,
        nonce: hex(am.body.nonce),
      }),
      signer: 'alice',
      signed_cbor: signedAm(am),
      id: amendmentId(am),
    },
    continuation: { signed_cbor: sgHex(cont), id: grantId(cont.grant), nonce: hex(continuationNonce(amendmentId(am))) },
    link: 'continuation = the steered grant with budget_uj = amendment.budget_uj and nonce = first 16 bytes of blake3(utf8("jcp/continuation") ‖ 32 bytes of the amendment id)',
  };
}

/** An amendment body `am` re-signed by anyone (no refusal), with budget `budget` µJ, for pairs that must fail verification. */
function amendmentBy(am: SignedAmendment, by: ActorName, budget = 600n): SignedAmendment {
  const body = { ...am.body, budget_uj: budget };
  return { body, signature: sign(actor(by).key, encode(amendmentToCbor(body))) };
}

/** The checkpoint body of `cp` re-signed by anyone. */
function checkpointBy(cp: SignedCheckpoint, by: ActorName): SignedCheckpoint {
  return { body: cp.body, signature: sign(actor(by).key, encode(checkpointToCbor(cp.body))) };
}

/**
 * One `amend_attempts` vector: `amender` tries to amend bob's checkpoint of the run to `budget` µJ;
 * the expected amendment, or the refusal's error code.
 */
function amendAttempt(s: SteeringFixture, name: string, description: string, amender: ActorName, budget: bigint): JsonObj {
  const { cp, run } = s;
  const r = amend(cp, run, { budget_uj: budget, nonce: nonce(`standing/amend/${name}`) }, actor(amender));
  return {
    name,
    description,
    grant: sgHex(run),
    checkpoint: signedCp(cp),
    amender,
    terms: { budget_uj: dec(budget), nonce: hex(nonce(`standing/amend/${name}`)) },
    expected: r.ok ? { ok: true, amendment: signedAm(r.value) } : { ok: false, code: r.error.code },
  };
}

/**
 * One `steering_checks` vector: verifies the amendment (or, given `continuation`, the continuation)
 * against the checkpoint and grant; expected is `valid` or the error code.
 */
function steeringCase(
  name: string,
  description: string,
  grant: SignedGrant,
  checkpoint: SignedCheckpoint,
  amendment: SignedAmendment,
  continuation?: SignedGrant,
): JsonObj {
  const r =
    continuation === undefined
      ? verifyAmendment(amendment, checkpoint, grant)
      : verifyContinuation(grant, checkpoint, amendment, continuation);
  return compact({
    name,
    description,
    check: continuation === undefined ? 'amendment' : 'continuation',
    grant: sgHex(grant),
    checkpoint: signedCp(checkpoint),
    amendment: signedAm(amendment),
    continuation: continuation === undefined ? undefined : sgHex(continuation),
    expected: r.ok ? 'valid' : r.error.code,
  });
}

/** The `steering_checks` vectors: the valid pair and continuation, then each way a pair fails (§4.7). */
function steeringChecks({ run, selfRun, cp, cp2, am, cont, wrongBudgetCont, selfCp, selfAm, childOfRun }: SteeringFixture): JsonObj[] {
  const amBy = (by: ActorName, budget?: bigint) => amendmentBy(am, by, budget);
  const cpBy = (by: ActorName) => checkpointBy(cp, by);
  return [
    steeringCase('valid-pair', 'the checkpoint and amendment above', run, cp, am),
    steeringCase('valid-continuation', 'the continuation above', run, cp, am, cont),
    steeringCase('self-steering', 'the amendment signed by bob, the agent', run, cp, amBy('bob')),
    steeringCase('self-steering-own-grant', 'a run alice issued to herself cannot be steered', selfRun, selfCp, selfAm),
    steeringCase('not-issuer', 'the amendment signed by carol', run, cp, amBy('carol')),
    steeringCase('widening', 'alice signs 1,001 µJ on a 1,000 µJ run', run, cp, amBy('alice', 1001n)),
    steeringCase('wrong-checkpoint', 'the amendment names another checkpoint of the same run', run, cp2, am),
    steeringCase('not-agent', 'the checkpoint signed by mallory', run, cpBy('mallory'), am),
    steeringCase('wrong-grant', 'the checkpoint presented against another grant', childOfRun, cp, am),
    steeringCase(
      'continuation-mismatch',
      'a continuation issued for a 500 µJ amendment, checked against the 600 µJ one',
      run,
      cp,
      am,
      wrongBudgetCont,
    ),
    steeringCase('continuation-bad-signature', 'the continuation signed by mallory', run, cp, am, forged(cont)),
  ];
}

/** Re-checks `standing.json` against our implementation. */
export function verify(doc: J, t: Checker): void {
  const c = new VectorCheck(t, 'standing.json', doc);
  verifyStandingSections(c, doc);
  verifySteeringSections(c, doc);
}

/** Re-checks the C20 sections (spec §4.6): `policies`, `policy_checks` and `firings` (each firing's ledger before and after). */
function verifyStandingSections(c: VectorCheck, doc: J): void {
  c.each(doc, 'policies', (v) => {
    const standing = sgFromHex(v.get('grant'));
    const tm = v.get('terms');
    const r = authorPolicy(
      standing,
      {
        event_class: tm.get('event_class').str(),
        per_firing_uj: tm.get('per_firing_uj').uint(),
        max_firings: tm.get('max_firings').num(),
        nonce: tm.get('nonce').bytes(16),
      },
      c.actor(v.get('author')),
    );
    const e = v.get('expected');
    c.eq(r.ok ? 'ok' : r.error.code, e.get('ok').bool() ? 'ok' : e.get('code').str(), 'authored or refused');
    if (r.ok && e.get('ok').bool()) {
      c.eq(policyHex(r.value), e.get('policy').str(), 'the signed policy, byte for byte');
      c.eq(mintPolicyId(r.value), e.get('policy_id').str(), 'policy id = content id of its body');
      c.ok(verifyPolicy(readSignedMintPolicy(decode(e.get('policy').bytes())), standing).ok, 'the decoded policy verifies for its grant');
    }
  });
  c.each(doc, 'policy_checks', (v) => {
    const r = verifyPolicy(readSignedMintPolicy(decode(v.get('policy').bytes())), sgFromHex(v.get('grant')));
    c.eq(r.ok ? 'valid' : r.error.code, v.get('expected').str(), 'policy verdict');
  });
  c.each(doc, 'firings', (v) => {
    const standing = sgFromHex(v.get('standing'));
    const policy = readSignedMintPolicy(decode(v.get('policy').bytes()));
    let ledger: MintLedger = EMPTY_MINT_LEDGER;
    for (const [i, f] of v.get('firings').items().entries()) {
      const lb = f.get('ledger_before');
      c.eq(
        { firings: ledger.firings, spent_uj: ledger.spent_uj },
        { firings: lb.get('firings').num(), spent_uj: lb.get('spent_uj').uint() },
        `firing ${i}: ledger before`,
      );
      const p = f.get('params');
      const r = fire(
        policy,
        standing,
        ledger,
        { event_class: f.get('event_class').str() },
        {
          subject: p.get('subject').str(),
          nonce: p.get('nonce').bytes(16),
          ...(p.has('actions') ? { actions: p.get('actions').strs() } : {}),
        },
        c.actor(f.get('holder')),
      );
      const e = f.get('expected');
      c.eq(r.ok ? 'ok' : r.error.code, e.get('ok').bool() ? 'ok' : e.get('code').str(), `firing ${i}: fired or refused`);
      if (r.ok && e.get('ok').bool()) {
        c.eq(sgHex(r.value.child), e.get('child').str(), `firing ${i}: the child, byte for byte`);
        c.eq(grantId(r.value.child.grant), e.get('child_id').str(), `firing ${i}: child id`);
        c.eq(r.value.child.grant.parent, grantId(standing.grant), `firing ${i}: the child traces to the standing grant`);
        c.ok(verifyChain([standing, sgFromHex(e.get('child'))]).ok, `firing ${i}: [standing, child] chain-verifies`);
        const la = e.get('ledger_after');
        c.eq(
          { firings: r.value.ledger.firings, spent_uj: r.value.ledger.spent_uj },
          { firings: la.get('firings').num(), spent_uj: la.get('spent_uj').uint() },
          `firing ${i}: ledger after`,
        );
        ledger = r.value.ledger;
      }
    }
  });
}

/** Re-checks the C21 sections (spec §4.7): the `steering` example byte for byte, `amend_attempts`, `steering_checks` and `continuation_chains`. */
function verifySteeringSections(c: VectorCheck, doc: J): void {
  c.run('steering', () => {
    const s = doc.get('steering');
    const grant = sgFromHex(s.get('grant'));
    const cp = readSignedCheckpoint(decode(s.get('checkpoint').get('signed_cbor').bytes()));
    const am = readSignedAmendment(decode(s.get('amendment').get('signed_cbor').bytes()));
    const cb = s.get('checkpoint').get('body');
    const remade = makeCheckpoint(grant, cb.get('state').str(), c.actor(s.get('checkpoint').get('signer')), cb.opt('nonce')?.bytes(16));
    c.ok(remade.ok && signedCp(remade.value) === s.get('checkpoint').get('signed_cbor').str(), 'the agent’s checkpoint, byte for byte');
    c.eq(checkpointId(cp), s.get('checkpoint').get('id').str(), 'checkpoint id = content id of its body');
    const ab = s.get('amendment').get('body');
    const reamended = amend(
      cp,
      grant,
      {
        budget_uj: ab.get('budget_uj').uint(),
        nonce: ab.get('nonce').bytes(16),
        ...(ab.has('instructions') ? { instructions: ab.get('instructions').str() } : {}),
      },
      c.actor(s.get('amendment').get('signer')),
    );
    c.ok(
      reamended.ok && signedAm(reamended.value) === s.get('amendment').get('signed_cbor').str(),
      'the issuer’s amendment, byte for byte',
    );
    c.eq(amendmentId(am), s.get('amendment').get('id').str(), 'amendment id');
    c.eq(am.body.checkpoint, checkpointId(cp), 'the amendment names the checkpoint');
    const cont = issueContinuation(grant, cp, am, c.actor(s.get('amendment').get('signer')));
    c.ok(cont.ok && sgHex(cont.value) === s.get('continuation').get('signed_cbor').str(), 'the continuation, byte for byte');
    c.eq(hex(continuationNonce(amendmentId(am))), s.get('continuation').get('nonce').str(), 'continuation nonce');
    const decoded = sgFromHex(s.get('continuation').get('signed_cbor'));
    c.eq(grantId(decoded.grant), s.get('continuation').get('id').str(), 'continuation id');
    c.ok(verifyContinuation(grant, cp, am, decoded).ok, 'an auditor verifies the continuation from the pair');
  });
  c.each(doc, 'amend_attempts', (v) => {
    const tm = v.get('terms');
    const r = amend(
      readSignedCheckpoint(decode(v.get('checkpoint').bytes())),
      sgFromHex(v.get('grant')),
      { budget_uj: tm.get('budget_uj').uint(), nonce: tm.get('nonce').bytes(16) },
      c.actor(v.get('amender')),
    );
    const e = v.get('expected');
    c.eq(r.ok ? 'ok' : r.error.code, e.get('ok').bool() ? 'ok' : e.get('code').str(), 'amended or refused');
    if (r.ok && e.get('ok').bool()) c.eq(signedAm(r.value), e.get('amendment').str(), 'the amendment, byte for byte');
  });
  c.each(doc, 'steering_checks', (v) => {
    const grant = sgFromHex(v.get('grant'));
    const cp = readSignedCheckpoint(decode(v.get('checkpoint').bytes()));
    const am = readSignedAmendment(decode(v.get('amendment').bytes()));
    const check = v.get('check').str();
    const r =
      check === 'continuation' ? verifyContinuation(grant, cp, am, sgFromHex(v.get('continuation'))) : verifyAmendment(am, cp, grant);
    c.eq(r.ok ? 'valid' : r.error.code, v.get('expected').str(), `${check} verdict`);
  });
  c.each(doc, 'continuation_chains', (v) => {
    const r = verifyChain(v.get('chain').items().map(sgFromHex));
    c.eq(r.ok ? r.value : r.error.reason, v.get('ids').strs(), 'chain ids');
  });
}
