/**
 * Conformance classes for long-horizon agents: C20 (standing grants, spec §4.6) and C21
 * (checkpoints and amendments, spec §4.7). Both drive the product's own stateful paths, not a
 * ledger of the harness: C20 fires a standing grant over HTTP through `startStandingServer`
 * (node/standing.ts) and reads its durable mint ledger back across restarts; C21 sends the
 * amendment to a live node (conformance/classes/live-node.ts) and checks that the node refuses the
 * steered grant and caps the continuation at what the steered grant had left, across a restart.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chainFileText, readChainFile, writeChainFile } from '../../client/index.ts';
import {
  amend,
  attenuate,
  authorPolicy,
  checkHop,
  checkpointId,
  contentId,
  type Actor,
  EMPTY_MINT_LEDGER,
  encodeWireMessage,
  fire,
  grantId,
  issueContinuation,
  makeCheckpoint,
  newActor,
  type Rng,
  seededRng,
  signBody,
  type SignedAmendment,
  type SignedCheckpoint,
  type SignedGrant,
  type SignedMintPolicy,
  signGrant,
  StandingRefusals,
  SteeringRefusals,
  verifyAmendment,
  verifyCheckpoint,
  verifyContinuation,
  verifyGrantSignature,
} from '../../core/index.ts';
import { AmendmentRefusals, eventClassOf, resourceIdOf, type StandingServer, startStandingServer } from '../../node/index.ts';
import type { Checker } from '../checker.ts';
import type { ConformanceClass } from '../runner.ts';
import { LiveNode } from './live-node.ts';

/** An HTTP answer of the standing server. */
interface Answer {
  readonly status: number;
  readonly code?: string;
  readonly firings?: number;
  readonly spent?: string;
  readonly file?: string;
  readonly replayed?: boolean;
}

async function postEvent(port: number, source: string, body: string): Promise<Answer> {
  const r = await fetch(`http://127.0.0.1:${port}/events/${source}`, {
    method: 'POST',
    body,
    headers: { 'content-type': 'application/json' },
  });
  const j = (await r.json()) as {
    fired?: { firings: number; spent_uj: string; file?: string; replayed: boolean };
    error?: { code: string };
  };
  return {
    status: r.status,
    ...(j.error ? { code: j.error.code } : {}),
    ...(j.fired
      ? { firings: j.fired.firings, spent: j.fired.spent_uj, replayed: j.fired.replayed, ...(j.fired.file ? { file: j.fired.file } : {}) }
      : {}),
  };
}

/** C20: firings mint strictly weaker children; bad firings are refused and the durable mint ledger is unchanged, across restarts. */
export const C20: ConformanceClass = {
  id: 'C20',
  title: 'standing grants',
  async run(t) {
    const fx = standingFixture();
    const policy = checkPolicyAuthoring(t, fx);
    if (!policy) return;
    // The product path: webhooks over HTTP, the mint ledger on disk, restarts.
    const dir = mkdtempSync(path.join(tmpdir(), 'jcp-conf-C20-'));
    try {
      const opts = serverOptions(fx, policy, dir);
      if (!(await checkFiringsAcrossRestart(t, fx, opts))) return;
      if (!(await checkBudgetBoundary(t, fx, opts, dir))) return;
      await checkCountBound(t, fx, opts, dir);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
};

/** A standing grant's refusal or result as its code, or `accepted`. */
function code(r: { ok: boolean; error?: { code: string } }): string | undefined {
  return r.ok ? 'accepted' : r.error?.code;
}

/** C20's actors and the 100 µJ standing grant for `triage` (owner → trigger), from the seeded rng `conformance/C20`. */
interface StandingFixture {
  readonly rng: Rng;
  readonly owner: Actor;
  readonly trigger: Actor;
  readonly worker: Actor;
  readonly hook: string;
  readonly standing: SignedGrant;
  readonly sid: string;
}

/** Builds {@link StandingFixture} (throws nothing). */
function standingFixture(): StandingFixture {
  const rng = seededRng('conformance/C20');
  const owner = newActor(rng);
  const trigger = newActor(rng);
  const worker = newActor(rng);
  const hook = eventClassOf('tickets', 'opened');
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
  return { rng, owner, trigger, worker, hook, standing, sid };
}

/**
 * Policy authoring and firing refusals on the pure path (spec §4.6): amplification, wrong
 * signer, tampering, non-holder. Returns the issuer's 30 µJ × 4 policy, or undefined when
 * authoring it failed (the check has then failed).
 */
function checkPolicyAuthoring(t: Checker, { rng, owner, trigger, worker, hook, standing }: StandingFixture): SignedMintPolicy | undefined {
  t.eq(
    code(authorPolicy(standing, { event_class: hook, per_firing_uj: 101n, max_firings: 1, nonce: rng(16) }, owner)),
    StandingRefusals.AMPLIFICATION,
    'a policy whose per-firing slice passes the grant (101 of 100 µJ) is refused at author time',
  );
  t.eq(
    code(authorPolicy(standing, { event_class: hook, per_firing_uj: 1n << 70n, max_firings: 1, nonce: rng(16) }, owner)),
    StandingRefusals.AMPLIFICATION,
    'a policy with a huge per-firing slice is refused',
  );
  t.ok(
    authorPolicy(standing, { event_class: hook, per_firing_uj: 100n, max_firings: 1, nonce: rng(16) }, owner).ok,
    'a policy whose slice is the whole grant is accepted (no amplification)',
  );
  for (const [who, actor] of [
    ['the holder', trigger],
    ['the worker', worker],
    ['a stranger', newActor(rng)],
  ] as const) {
    t.eq(
      code(authorPolicy(standing, { event_class: hook, per_firing_uj: 10n, max_firings: 1, nonce: rng(16) }, actor)),
      StandingRefusals.WRONG_SIGNER,
      `only the grant issuer authors its policy (not ${who})`,
    );
  }
  const authored = authorPolicy(standing, { event_class: hook, per_firing_uj: 30n, max_firings: 4, nonce: rng(16) }, owner);
  t.ok(authored.ok, 'the issuer authors a policy: 30 µJ per firing, at most 4 firings');
  if (!authored.ok) return undefined;
  const policy = authored.value;
  const tampered = { body: { ...policy.body, per_firing_uj: 100n }, signature: policy.signature };
  for (const [who, actor] of [
    ['the holder', trigger],
    ['a stranger', newActor(rng)],
  ] as const) {
    const bySomeoneElse = signBody(policy.body, actor);
    t.eq(
      code(fire(bySomeoneElse, standing, EMPTY_MINT_LEDGER, { event_class: hook }, { subject: worker.did, nonce: rng(16) }, trigger)),
      StandingRefusals.WRONG_SIGNER,
      `a policy signed by ${who} does not fire`,
    );
  }
  t.eq(
    code(fire(tampered, standing, EMPTY_MINT_LEDGER, { event_class: hook }, { subject: worker.did, nonce: rng(16) }, trigger)),
    StandingRefusals.WRONG_SIGNER,
    'a policy altered after signing is refused',
  );
  // The wrong event class is refused whatever optional fields the event carries or lacks (§4.6:
  // the class alone decides; the event id is for logs and replays, never a reason to skip it).
  const otherClass = eventClassOf('billing', 'opened');
  for (const [label, event] of [
    ['with no event id', { event_class: otherClass }],
    ['with an event id', { event_class: otherClass, event_id: contentId({ event: 'billing-1' }) }],
  ] as const) {
    t.eq(
      code(fire(policy, standing, EMPTY_MINT_LEDGER, event, { subject: worker.did, nonce: rng(16) }, trigger)),
      StandingRefusals.WRONG_EVENT_CLASS,
      `an event of the wrong class ${label} does not fire the policy`,
    );
  }
  t.eq(
    code(fire(policy, standing, EMPTY_MINT_LEDGER, { event_class: hook }, { subject: worker.did, nonce: rng(16) }, owner)),
    StandingRefusals.NOT_HOLDER,
    'a non-holder (the issuer) cannot fire the standing grant',
  );
  return policy;
}

/** Options of `startStandingServer`. */
type ServerOptions = Parameters<typeof startStandingServer>[0];

/** The standing server's options: the chain, `policy`, the ledger at `<dir>/mint.jsonl`, hand-off files in `dir`, an ephemeral loopback port. */
function serverOptions({ standing, trigger, worker }: StandingFixture, policy: SignedMintPolicy, dir: string): ServerOptions {
  return {
    chain: [standing],
    policy,
    holder: trigger,
    agent: worker.did,
    ledgerFile: path.join(dir, 'mint.jsonl'),
    handoff: { dir },
    writeChain: (file: string, c: readonly SignedGrant[]) => writeChainFile(file, c),
    chainJson: chainFileText,
    host: '127.0.0.1',
    port: 0,
  };
}

/**
 * Three webhooks fire (30 µJ children traced to the standing grant), wrong events and a fourth
 * firing are refused and leave the ledger file byte for byte, a retried webhook replays its
 * child, and a restart reads the ledger back. Returns false when a child was not handed out.
 */
async function checkFiringsAcrossRestart(t: Checker, { standing, sid, worker }: StandingFixture, opts: ServerOptions): Promise<boolean> {
  const { ledgerFile } = opts;
  let server: StandingServer | undefined;
  try {
    server = await startStandingServer(opts);
    const port = () => server!.port;
    for (let i = 1; i <= 3; i++) {
      const a = await postEvent(port(), 'tickets', JSON.stringify({ kind: 'opened', ticket: i }));
      t.eq([a.status, a.firings, a.spent], [200, i, String(30 * i)], `webhook ${i} fires: ledger ${i} firings, ${30 * i} µJ`);
      if (a.file === undefined) {
        t.ok(false, `webhook ${i}: the child is handed out as a chain file`);
        return false;
      }
      const handed = readChainFile(a.file);
      const child = handed[handed.length - 1]!;
      t.eq(child.grant.parent, sid, `firing ${i}: the child traces to the standing grant`);
      t.ok(checkHop(standing.grant, sid, child.grant).ok && verifyGrantSignature(child), `firing ${i}: the child chain-verifies`);
      t.eq(
        [child.grant.budget_uj, child.grant.subject],
        [30n, worker.did],
        `firing ${i}: the child carries exactly the per-firing slice, for the agent`,
      );
    }
    const ledgerBytes = () => readFileSync(ledgerFile);
    const before = ledgerBytes();
    const refusals: Array<[string, string, string]> = [
      ['billing', '{"kind":"opened"}', StandingRefusals.WRONG_EVENT_CLASS],
      ['tickets', '{"kind":"closed"}', StandingRefusals.WRONG_EVENT_CLASS],
      ['tickets-2', '{"kind":"opened"}', StandingRefusals.WRONG_EVENT_CLASS],
      ['tickets', '{"kind":"opened","ticket":4}', StandingRefusals.BUDGET_EXHAUSTED],
    ];
    const refuseAll = async (when: string) => {
      for (const [source, body, want] of refusals) {
        const a = await postEvent(port(), source, body);
        t.eq([a.status >= 400, a.code], [true, want], `${when}: /events/${source} ${body} is refused ${want}`);
      }
      t.eq(server!.ledger.ledger, { firings: 3, spent_uj: 90n }, `${when}: refused firings leave the mint ledger at 3 firings, 90 µJ`);
      t.ok(Buffer.compare(ledgerBytes(), before) === 0, `${when}: refused firings leave the ledger file byte for byte as it was`);
    };
    await refuseAll('before a restart');
    const retried = await postEvent(port(), 'tickets', JSON.stringify({ kind: 'opened', ticket: 1 }));
    t.eq(
      [retried.status, retried.replayed, retried.firings],
      [200, true, 3],
      'the same webhook again is answered with its child, not a new firing',
    );
    await server.close();
    server = await startStandingServer(opts);
    t.eq(server.ledger.ledger, { firings: 3, spent_uj: 90n }, 'a restarted server reads the mint ledger back: 3 firings, 90 µJ');
    await refuseAll('after a restart');
    await server.close();
    server = undefined;
    return true;
  } finally {
    await server?.close();
  }
}

/** A budget-bound policy at the boundary: two 50 µJ firings fill the 100 µJ grant exactly, a third is refused. Returns false when authoring failed. */
async function checkBudgetBoundary(
  t: Checker,
  { rng, owner, hook, standing }: StandingFixture,
  opts: ServerOptions,
  dir: string,
): Promise<boolean> {
  let server: StandingServer | undefined;
  try {
    // A budget-bound policy at the boundary: two 50 µJ firings fill the 100 µJ grant exactly.
    const halves = authorPolicy(standing, { event_class: hook, per_firing_uj: 50n, max_firings: 9, nonce: rng(16) }, owner);
    if (!halves.ok) {
      t.ok(false, 'the issuer authors a 50 µJ policy');
      return false;
    }
    server = await startStandingServer({ ...opts, policy: halves.value, ledgerFile: path.join(dir, 'halves.jsonl') });
    const h1 = await postEvent(server.port, 'tickets', '{"kind":"opened","h":1}');
    const h2 = await postEvent(server.port, 'tickets', '{"kind":"opened","h":2}');
    t.eq([h1.status, h2.status, h2.spent], [200, 200, '100'], 'two 50 µJ firings bring cumulative spend to exactly the grant (allowed)');
    t.eq(
      (await postEvent(server.port, 'tickets', '{"kind":"opened","h":3}')).code,
      StandingRefusals.BUDGET_EXHAUSTED,
      'a third 50 µJ firing (150 of 100 µJ) is refused',
    );
    await server.close();
    server = undefined;
    return true;
  } finally {
    await server?.close();
  }
}

/** A count-bound policy (10 µJ × 2): the third firing is refused `firings-exhausted`, also after a restart. */
async function checkCountBound(
  t: Checker,
  { rng, owner, hook, standing }: StandingFixture,
  opts: ServerOptions,
  dir: string,
): Promise<void> {
  let server: StandingServer | undefined;
  try {
    // A count-bound policy: the third firing is refused, also after a restart.
    const twice = authorPolicy(standing, { event_class: hook, per_firing_uj: 10n, max_firings: 2, nonce: rng(16) }, owner);
    if (!twice.ok) {
      t.ok(false, 'the issuer authors a two-firing policy');
      return;
    }
    const countOpts = { ...opts, policy: twice.value, ledgerFile: path.join(dir, 'count.jsonl') };
    server = await startStandingServer(countOpts);
    for (let i = 1; i <= 2; i++) await postEvent(server.port, 'tickets', JSON.stringify({ kind: 'opened', n: i }));
    t.eq(
      (await postEvent(server.port, 'tickets', '{"kind":"opened","n":3}')).code,
      StandingRefusals.FIRINGS_EXHAUSTED,
      'a third firing of a two-firing policy is refused',
    );
    await server.close();
    server = await startStandingServer(countOpts);
    t.eq(
      (await postEvent(server.port, 'tickets', '{"kind":"opened","n":4}')).code,
      StandingRefusals.FIRINGS_EXHAUSTED,
      'after a restart the firing count is still exhausted',
    );
    t.eq(server.ledger.ledger, { firings: 2, spent_uj: 20n }, 'and its ledger is unchanged: 2 firings, 20 µJ');
  } finally {
    await server?.close();
  }
}

/** C21: the agent checkpoints; only the distinct issuer amends, only to tighten; a node refuses the steered grant and caps the continuation. */
export const C21: ConformanceClass = {
  id: 'C21',
  title: 'checkpoints + amendments',
  async run(t) {
    const fx = steeringFixture(t);
    if (!fx) return;
    const signed = checkCheckpointRefusals(t, fx);
    if (!signed) return;
    const steered = checkSteering(t, fx, signed);
    if (!steered) return;
    // The product path: a live node enforces the amendment.
    const live = await LiveNode.start('research', [fx.root.did], fx.nowS);
    try {
      await checkLiveAmendment(t, fx, signed, steered, live);
    } finally {
      await live.close();
    }
  },
};

/** C21's actors, the 1,000,000 µJ top grant (root → steward) and the agent's 500,000 µJ run, from the seeded rng `conformance/C21`. */
interface SteeringFixture {
  readonly rng: Rng;
  readonly root: Actor;
  readonly steward: Actor;
  readonly agent: Actor;
  readonly mallory: Actor;
  readonly nowS: number;
  readonly top: SignedGrant;
  readonly run: SignedGrant;
}

/** Builds {@link SteeringFixture}; undefined when the steward's delegation is refused (the check has then failed). */
function steeringFixture(t: Checker): SteeringFixture | undefined {
  const rng = seededRng('conformance/C21');
  const root = newActor(rng);
  const steward = newActor(rng);
  const agent = newActor(rng);
  const mallory = newActor(rng);
  const nowS = 1_900_000_000;
  const top = signGrant(
    {
      issuer: root.did,
      subject: steward.did,
      capability: { resource: resourceIdOf('research'), actions: ['read', 'write'] },
      budget_uj: 1_000_000n,
      expiry: 2_000_000_000,
      nonce: rng(16),
    },
    root,
  );
  const delegated = attenuate(top, { subject: agent.did, budget_uj: 500_000n, nonce: rng(16) }, steward);
  t.ok(delegated.ok, 'the steward delegates the run to the agent');
  if (!delegated.ok) return undefined;
  return { rng, root, steward, agent, mallory, nowS, top, run: delegated.value };
}

/** The agent's checkpoint and three amendments the node must refuse (agent-signed, stranger-signed, widening). */
interface SignedSteering {
  readonly checkpoint: SignedCheckpoint;
  readonly selfSigned: SignedAmendment;
  readonly malSigned: SignedAmendment;
  readonly wideSigned: SignedAmendment;
}

/**
 * Checkpoints and amendments on the pure path (spec §4.7): only the agent checkpoints, only the
 * distinct issuer amends, only to tighten (`not-agent`, `wrong-grant`, `self-steering`,
 * `not-issuer`, `widening`). Returns the checkpoint and the refused amendments, or undefined
 * when the agent's checkpoint failed (the check has then failed).
 */
function checkCheckpointRefusals(
  t: Checker,
  { rng, root, steward, agent, mallory, top, run }: SteeringFixture,
): SignedSteering | undefined {
  for (const [who, actor] of [
    ['the steward', steward],
    ['the root', root],
    ['a stranger', mallory],
  ] as const) {
    t.eq(
      code(makeCheckpoint(run, contentId({ step: 1 }), actor)),
      SteeringRefusals.NOT_AGENT,
      `only the agent checkpoints its own state (not ${who})`,
    );
  }
  const cp = makeCheckpoint(run, contentId({ step: 1, notes: 'found 12 sources' }), agent, rng(16));
  t.ok(cp.ok, 'the agent checkpoints its own state');
  if (!cp.ok) return undefined;
  const checkpoint = cp.value;
  for (const [who, actor] of [
    ['the issuer', steward],
    ['a stranger', mallory],
  ] as const) {
    t.eq(
      code(verifyCheckpoint(signBody(checkpoint.body, actor), run)),
      SteeringRefusals.NOT_AGENT,
      `a checkpoint signed by ${who}, not the agent, is refused`,
    );
  }
  t.eq(code(verifyCheckpoint(checkpoint, top)), SteeringRefusals.WRONG_GRANT, 'a checkpoint presented with another grant is refused');

  t.eq(
    code(amend(checkpoint, run, { budget_uj: 100n, nonce: rng(16) }, agent)),
    SteeringRefusals.SELF_STEERING,
    'the agent cannot steer itself',
  );
  const selfSigned = signBody({ checkpoint: checkpointId(checkpoint), budget_uj: 100n, nonce: rng(16) }, agent);
  t.eq(code(verifyAmendment(selfSigned, checkpoint, run)), SteeringRefusals.SELF_STEERING, 'an agent-signed amendment is refused');
  t.eq(
    code(amend(checkpoint, run, { budget_uj: 100n, nonce: rng(16) }, mallory)),
    SteeringRefusals.NOT_ISSUER,
    'a non-issuer cannot amend',
  );
  t.eq(
    code(amend(checkpoint, run, { budget_uj: 100n, nonce: rng(16) }, root)),
    SteeringRefusals.NOT_ISSUER,
    'an upstream issuer is not this grant issuer',
  );
  const malSigned = signBody({ checkpoint: checkpointId(checkpoint), budget_uj: 100n, nonce: rng(16) }, mallory);
  t.eq(code(verifyAmendment(malSigned, checkpoint, run)), SteeringRefusals.NOT_ISSUER, 'a non-issuer-signed amendment is refused');
  t.eq(
    code(amend(checkpoint, run, { budget_uj: 500_001n, nonce: rng(16) }, steward)),
    SteeringRefusals.WIDENING,
    'a widening amendment (1 µJ over) is refused',
  );
  t.ok(
    amend(checkpoint, run, { budget_uj: 500_000n, nonce: rng(16) }, steward).ok,
    'an amendment to exactly the steered budget is tighten-only (accepted)',
  );
  const wideSigned = signBody({ checkpoint: checkpointId(checkpoint), budget_uj: 600_000n, nonce: rng(16) }, steward);
  t.eq(code(verifyAmendment(wideSigned, checkpoint, run)), SteeringRefusals.WIDENING, 'an issuer-signed widening amendment is refused');
  const selfRun = signGrant({ ...run.grant, issuer: agent.did, nonce: rng(16) }, agent);
  const selfCp = makeCheckpoint(selfRun, contentId({ step: 1 }), agent, rng(16));
  t.ok(selfCp.ok, 'the agent checkpoints a grant it issued to itself');
  if (selfCp.ok) {
    const own = signBody({ checkpoint: checkpointId(selfCp.value), budget_uj: 1n, nonce: rng(16) }, agent);
    t.eq(
      code(verifyAmendment(own, selfCp.value, selfRun)),
      SteeringRefusals.SELF_STEERING,
      'a grant whose issuer is its subject cannot be steered',
    );
    const byOther = signBody({ checkpoint: checkpointId(selfCp.value), budget_uj: 1n, nonce: rng(16) }, mallory);
    t.eq(
      code(verifyAmendment(byOther, selfCp.value, selfRun)),
      SteeringRefusals.SELF_STEERING,
      'nor by anyone else: any amendment of a self-issued run is self-steering',
    );
  }
  return { checkpoint, selfSigned, malSigned, wideSigned };
}

/** The admitted amendment ("to 500,000 µJ"), a later checkpoint, and the continuation the issuer re-issues. */
interface Steered {
  readonly amendment: SignedAmendment;
  readonly later: SignedCheckpoint;
  readonly cont: SignedGrant;
}

/**
 * The issuer steers the run and re-issues it as a continuation (spec §4.7): amendment bound to
 * its checkpoint, continuation linked and carrying the amendment budget; a wider continuation or
 * one re-issued by the agent is refused. Undefined when a step the rest needs failed.
 */
function checkSteering(
  t: Checker,
  { rng, steward, agent, top, run }: SteeringFixture,
  { checkpoint }: SignedSteering,
): Steered | undefined {
  const a = amend(checkpoint, run, { budget_uj: 500_000n, instructions: contentId({ focus: 'summarise' }), nonce: rng(16) }, steward);
  t.ok(a.ok, 'the issuer steers the run at the checkpoint, "to 500,000 µJ"');
  if (!a.ok) return undefined;
  const amendment = a.value;
  t.ok(verifyAmendment(amendment, checkpoint, run).ok, 'an auditor verifies the checkpoint + amendment pair');
  const later = makeCheckpoint(run, contentId({ step: 2 }), agent, rng(16));
  t.ok(later.ok, 'the agent checkpoints again');
  if (!later.ok) return undefined;
  t.eq(
    code(verifyAmendment(amendment, later.value, run)),
    SteeringRefusals.WRONG_CHECKPOINT,
    'an amendment bound to a different checkpoint is refused',
  );

  const c = issueContinuation(run, checkpoint, amendment, steward);
  t.ok(c.ok, 'the issuer re-issues the run as a continuation');
  if (!c.ok) return undefined;
  const cont = c.value;
  t.eq(
    [cont.grant.subject, cont.grant.budget_uj],
    [agent.did, 500_000n],
    'the continuation goes to the same agent with the amended budget',
  );
  t.ok(
    verifyContinuation(run, checkpoint, amendment, cont).ok,
    'the continuation is linked back to the steered grant through the amendment',
  );
  t.ok(checkHop(top.grant, grantId(top.grant), cont.grant).ok, 'the continuation chain-verifies under the steered grant parent');
  const tighter = amend(checkpoint, run, { budget_uj: 200_000n, nonce: rng(16) }, steward);
  const tightCont = tighter.ok ? issueContinuation(run, checkpoint, tighter.value, steward) : tighter;
  t.eq(
    tightCont.ok ? tightCont.value.grant.budget_uj : tightCont.error.code,
    200_000n,
    'a continuation carries the amendment budget (200,000 µJ), not the steered one',
  );
  const wider = signGrant({ ...cont.grant, budget_uj: 500_001n }, steward);
  t.eq(
    code(verifyContinuation(run, checkpoint, amendment, wider)),
    SteeringRefusals.CONTINUATION_MISMATCH,
    'a continuation wider than its amendment is refused',
  );
  t.eq(code(issueContinuation(run, checkpoint, amendment, agent)), SteeringRefusals.NOT_ISSUER, 'the agent cannot re-issue its own run');
  return { amendment, later: later.value, cont };
}

/**
 * A live node enforces the amendment: refuses the bad ones (nothing recorded), admits the
 * issuer's, caps the continuation at what the steered grant had left (500,000 − 300,001 µJ),
 * refuses a second amendment, soft-revokes the steered grant, and keeps all of it across a restart.
 */
async function checkLiveAmendment(
  t: Checker,
  { rng, steward, agent, top, run }: SteeringFixture,
  { checkpoint, selfSigned, malSigned, wideSigned }: SignedSteering,
  { amendment, later, cont }: Steered,
  live: LiveNode,
): Promise<void> {
  const sendAmend = async (cpx: SignedCheckpoint, sa: SignedAmendment, grant = run) => {
    const reply = await live.raw(steward, encodeWireMessage({ kind: 'amend', grant, checkpoint: cpx, amendment: sa }));
    if (reply.kind === 'amended') return reply.amended;
    return reply.kind === 'error' ? `${reply.error.code}:${reply.error.message.split(':')[0]}` : reply.kind;
  };
  const spend = (chain: SignedGrant[], uj: bigint) => live.call(agent, { chain, costUj: uj });
  t.eq((await spend([top, run], 300_000n)).verdict, 'allow', 'the agent spends 300,000 of its 500,000 µJ at the node');
  const runId = grantId(run.grant);
  for (const [label, sa, cpx, want] of [
    ['signed by a stranger', malSigned, checkpoint, SteeringRefusals.NOT_ISSUER],
    ['signed by the agent', selfSigned, checkpoint, SteeringRefusals.SELF_STEERING],
    ['widening', wideSigned, checkpoint, SteeringRefusals.WIDENING],
    ['bound to another checkpoint', amendment, later, SteeringRefusals.WRONG_CHECKPOINT],
  ] as const) {
    t.eq(await sendAmend(cpx, sa), `amendment-refused:${want}`, `the node refuses an amendment ${label} (${want})`);
  }
  t.eq((await live.node.log.amendments()).length, 0, 'no refused amendment was recorded');
  t.eq((await spend([top, run], 1n)).verdict, 'allow', 'after the refused amendments the run still allows its agent');

  const applied = await sendAmend(checkpoint, amendment);
  t.ok(typeof applied === 'object', "the node admits the issuer's amendment");
  if (typeof applied !== 'object') return;
  t.eq(
    [applied.steered_spent_uj, applied.budget_uj],
    [300_001n, 199_999n],
    'the node caps the continuation at what the steered grant had left (500,000 − 300,001 µJ), not at the amended 500,000',
  );
  t.eq(applied.continuation_id, grantId(cont.grant), 'the node names the continuation the issuer re-issues');
  const second = amend(later, run, { budget_uj: 10n, nonce: rng(16) }, steward);
  t.ok(second.ok, 'the issuer signs a second amendment, at a later checkpoint');
  if (second.ok) {
    t.eq(
      await sendAmend(later, second.value),
      `amendment-refused:${AmendmentRefusals.ALREADY_AMENDED}`,
      'a second amendment of the steered grant is refused (two continuations would each get the remainder)',
    );
  }
  t.eq(await sendAmend(checkpoint, amendment), applied, 'the same amendment again is answered as before (idempotent)');

  const steeredSpent = live.spent(runId);
  // Each probe differs (cost), so none is answered as an idempotent replay of an earlier request.
  const checkEnforced = async (when: string, contLeft: bigint, probe: bigint) => {
    t.eq(
      (await spend([top, run], probe)).verdict,
      'revoked',
      `${when}: the steered grant allows nothing at the node (soft revoke: revoked)`,
    );
    const past = await spend([top, cont], contLeft + 1n);
    t.eq(past.verdict, 'budget-exceeded', `${when}: the continuation cannot spend ${contLeft + 1n} µJ, 1 µJ past its cap`);
    t.eq(live.spent(runId), steeredSpent, `${when}: nothing more is debited from the steered grant`);
  };
  await checkEnforced('after the amendment', 199_999n, 2n);
  const used = await spend([top, cont], 150_000n);
  t.eq(
    [used.verdict, used.receipt?.budget_remaining_uj],
    ['allow', 49_999n],
    'the continuation spends within its cap; the receipt says what is honestly left (49,999 µJ)',
  );
  await live.restart();
  t.eq(live.node.boot.amendments, { applied: 1, bad: 0 }, 'boot re-applies the durable amendment record');
  await checkEnforced('after a restart', 49_999n, 3n);
  t.eq((await spend([top, cont], 49_999n)).verdict, 'allow', 'after a restart the continuation still spends up to its cap, exactly');
  t.eq((await spend([top, cont], 1n)).verdict, 'budget-exceeded', 'and not 1 µJ more');
}
