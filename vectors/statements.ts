/**
 * `statements.json`: budget-channel statements (spec §4.5 profile; C17, the pure part).
 * Sequences of signed statements fed to one point's merged ledger, each admitted or refused with
 * its code, and the settled spend after; overdraft proofs a third party verifies from the signed
 * statements alone; and the channel spending rule with its worst-case bound.
 */
import {
  channelAllows,
  ChannelLedger,
  type ContentId,
  decode,
  encode,
  overdraftBound,
  type OverdraftProof,
  overdraftProofToCbor,
  readOverdraftProof,
  readSignedStatement,
  readStatement,
  sign,
  type SignedStatement,
  signedStatementToCbor,
  type Statement,
  statementToCbor,
  verifyOverdraftProof,
} from '../core/index.ts';
import type { Checker } from '../conformance/index.ts';
import { type ActorName, actor, did, fileHeader, idOf, rootGrant, VectorCheck } from './fixtures.ts';
import { compact, dec, hex, type J, type JsonObj } from './json.ts';

function statementJson(s: Statement): JsonObj {
  return { grant_id: s.grant_id, point: s.point, spent_uj: dec(s.spent_uj), seq: s.seq };
}

function statementFromJson(j: J): Statement {
  return readStatement(
    { grant_id: j.get('grant_id').str(), point: j.get('point').str(), spent_uj: j.get('spent_uj').uint(), seq: j.get('seq').num() },
    j.path,
  );
}

/** A statement signed by `signer` (the point itself, or a forger). */
function st(
  grantId: ContentId,
  point: ActorName,
  spentUj: bigint,
  seq: number,
  signer: ActorName = point,
): { ss: SignedStatement; signer: ActorName } {
  const body: Statement = { grant_id: grantId, point: did(point), spent_uj: spentUj, seq };
  return { ss: { body, signature: sign(actor(signer).key, encode(statementToCbor(body))) }, signer };
}

function sequenceVector(
  name: string,
  description: string,
  grantId: ContentId,
  steps: readonly { ss: SignedStatement; signer: ActorName }[],
  points?: readonly ActorName[],
): JsonObj {
  const ledger = new ChannelLedger(grantId, points !== undefined ? { points: points.map(did) } : {});
  const out = steps.map(({ ss, signer }) => {
    const r = ledger.admit(ss);
    return {
      statement: statementJson(ss.body),
      signer,
      signed_cbor: hex(encode(signedStatementToCbor(ss))),
      expected: r.ok ? 'admitted' : r.error.code,
    };
  });
  const perPoint: JsonObj = {};
  for (const s of ledger.statements()) perPoint[s.body.point] = dec(s.body.spent_uj);
  return compact({
    name,
    description,
    grant_id: grantId,
    points: points?.map(did),
    steps: out,
    settled_uj: dec(ledger.settledSpent()),
    per_point: perPoint,
  });
}

function proofVector(name: string, description: string, proof: OverdraftProof, grant: { id: ContentId; budget_uj: bigint }): JsonObj {
  const r = verifyOverdraftProof(proof, grant);
  return {
    name,
    description,
    grant: { id: grant.id, budget_uj: dec(grant.budget_uj) },
    proof_cbor: hex(encode(overdraftProofToCbor(proof))),
    expected: r.ok ? { ok: true, overdraft_uj: dec(r.value) } : { ok: false, code: r.error.code },
  };
}

/** Builds `statements.json` (§4.5): sequences, overdraft proofs, the channel rule and overdraft bounds. */
export function generate(): JsonObj {
  const channel = rootGrant('statements/channel', { budget_uj: 10_000n });
  const gid = idOf(channel);
  const other = idOf(rootGrant('statements/other'));
  const honest = new ChannelLedger(gid);
  for (const { ss } of [st(gid, 'point-a', 4000n, 1), st(gid, 'point-b', 3500n, 1), st(gid, 'point-c', 3000n, 1)]) honest.admit(ss);
  const over = honest.overdraftProof(10_000n);
  const within = new ChannelLedger(gid);
  for (const { ss } of [st(gid, 'point-a', 4000n, 1), st(gid, 'point-b', 3500n, 1)]) within.admit(ss);
  const inBudget = within.overdraftProof(10_000n);
  const grant = { id: gid, budget_uj: 10_000n };
  const a1 = st(gid, 'point-a', 4000n, 1).ss;
  return {
    ...fileHeader('statements.json', 'Budget-channel statements, the merged ledger and overdraft proofs', '§4.5 (budget channels); C17'),
    channel_grant: { id: gid, budget_uj: dec(channel.grant.budget_uj) },
    sequences: sequenceVectors(gid, other),
    overdraft_proofs: proofVectors(gid, other, over, inBudget, a1, grant),
    channel_rule: channelRuleVectors(),
    overdraft_bounds: overdraftBoundVectors(),
  };
}

/** The `sequences` vectors: statements admitted one by one into a ledger for grant `gid` (`other` is another grant id). */
function sequenceVectors(gid: ContentId, other: ContentId): JsonObj[] {
  return [
    sequenceVector('admitted', 'three points settle, point-a twice', gid, [
      st(gid, 'point-a', 1000n, 1),
      st(gid, 'point-b', 2500n, 1),
      st(gid, 'point-a', 1800n, 2),
      st(gid, 'point-c', 0n, 1),
    ]),
    sequenceVector('forged', 'mallory signs a statement in point-b’s name', gid, [
      st(gid, 'point-a', 1000n, 1),
      st(gid, 'point-b', 9000n, 1, 'mallory'),
    ]),
    sequenceVector('stale', 'seq 2 then seq 2 again with more spend, then seq 1', gid, [
      st(gid, 'point-a', 1000n, 2),
      st(gid, 'point-a', 1500n, 2),
      st(gid, 'point-a', 1500n, 1),
    ]),
    sequenceVector('regressing', 'spent_uj falls from 1,000 to 900 at a higher seq', gid, [
      st(gid, 'point-a', 1000n, 1),
      st(gid, 'point-a', 900n, 2),
      st(gid, 'point-a', 1000n, 3),
    ]),
    sequenceVector('duplicate', 'the same statement delivered twice', gid, [st(gid, 'point-a', 1000n, 1), st(gid, 'point-a', 1000n, 1)]),
    sequenceVector('wrong-grant', 'a statement about another grant', gid, [st(other, 'point-a', 1000n, 1)]),
    sequenceVector(
      'unknown-point',
      'the channel admits point-a and point-b only',
      gid,
      [st(gid, 'point-a', 10n, 1), st(gid, 'point-c', 10n, 1)],
      ['point-a', 'point-b'],
    ),
  ];
}

/**
 * The `overdraft_proofs` vectors: `over` (10,500 µJ settled) and `inBudget` (7,500 µJ) on `grant`,
 * then proofs tampered from `over` (`a1` is point-a’s statement again; `other` another grant id).
 */
function proofVectors(
  gid: ContentId,
  other: ContentId,
  over: OverdraftProof,
  inBudget: OverdraftProof,
  a1: SignedStatement,
  grant: { id: ContentId; budget_uj: bigint },
): JsonObj[] {
  return [
    proofVector('overdraft-500', 'three points settled 10,500 µJ on a 10,000 µJ grant', over, grant),
    proofVector('within-budget', 'two points settled 7,500 µJ: overdraft 0', inBudget, grant),
    proofVector(
      'forged-statement',
      'one statement signed by mallory',
      { ...over, statements: [over.statements[0]!, st(gid, 'point-b', 3500n, 1, 'mallory').ss, over.statements[2]!] },
      grant,
    ),
    proofVector(
      'duplicate-point',
      'point-a counted twice',
      { ...over, statements: [...over.statements, a1], total: over.total + 4000n, overdraft: over.overdraft + 4000n },
      grant,
    ),
    proofVector('wrong-total', 'the proof claims 10,400 µJ', { ...over, total: 10_400n, overdraft: 400n }, grant),
    proofVector('wrong-budget', 'the proof states a budget of 11,000 µJ', { ...over, budget: 11_000n, overdraft: 0n }, grant),
    proofVector(
      'wrong-grant',
      'a statement about another grant inside the proof',
      { ...over, statements: [st(other, 'point-a', 4000n, 1).ss, ...over.statements.slice(1)] },
      grant,
    ),
  ];
}

/** The `channel_rule` vectors: the local admission rule on fixed states (all amounts µJ), allow or the deny code. */
function channelRuleVectors(): JsonObj[] {
  return [
    ['fits', 0n, 0n, 0n, 10_000n, 2_000n, 1_500n],
    ['budget-exceeded', 6_000n, 5_000n, 3_500n, 10_000n, 2_000n, 600n],
    ['window-exhausted', 2_500n, 1_000n, 0n, 10_000n, 2_000n, 600n],
    ['window-exact-fit', 2_500n, 1_000n, 0n, 10_000n, 2_000n, 500n],
  ].map(([name, mySpent, atSettle, peers, budget, windowUj, cost]) => {
    const s = {
      mySpent: mySpent as bigint,
      mySpentAtLastSettle: atSettle as bigint,
      peersSettled: peers as bigint,
      budget: budget as bigint,
      windowUj: windowUj as bigint,
      cost: cost as bigint,
    };
    const r = channelAllows(s);
    return {
      name: name as string,
      state: {
        my_spent_uj: dec(s.mySpent),
        my_spent_at_last_settle_uj: dec(s.mySpentAtLastSettle),
        peers_settled_uj: dec(s.peersSettled),
        budget_uj: dec(s.budget),
        window_uj: dec(s.windowUj),
        cost_uj: dec(s.cost),
      },
      expected: r.ok ? 'allow' : r.error.code,
    };
  });
}

/** The `overdraft_bounds` vectors: the bound on overdraft for given settle windows (µJ). */
function overdraftBoundVectors(): JsonObj[] {
  return [[], [5000n], [1000n, 2000n, 3000n], [500n, 500n]].map((w, i) => ({
    name: `windows-${i}`,
    windows_uj: w.map(dec),
    bound_uj: dec(overdraftBound(w)),
  }));
}

/** Re-checks `statements.json` against our implementation. */
export function verify(doc: J, t: Checker): void {
  const c = new VectorCheck(t, 'statements.json', doc);
  c.each(doc, 'sequences', (v) => {
    const points = v.opt('points')?.strs();
    const ledger = new ChannelLedger(v.get('grant_id').str(), points !== undefined ? { points } : {});
    for (const [i, s] of v.get('steps').items().entries()) {
      const body = statementFromJson(s.get('statement'));
      const sig = sign(c.actor(s.get('signer')).key, encode(statementToCbor(body)));
      c.eq(hex(encode(signedStatementToCbor({ body, signature: sig }))), s.get('signed_cbor').str(), `step ${i}: signed bytes`);
      const ss = readSignedStatement(decode(s.get('signed_cbor').bytes()));
      const r = ledger.admit(ss);
      c.eq(r.ok ? 'admitted' : r.error.code, s.get('expected').str(), `step ${i}: admitted or refused`);
    }
    c.eq(ledger.settledSpent(), v.get('settled_uj').uint(), 'settled spend');
    const perPoint: Record<string, bigint> = {};
    for (const s of ledger.statements()) perPoint[s.body.point] = s.body.spent_uj;
    const want: Record<string, bigint> = {};
    for (const [p, uj] of v.get('per_point').entries()) want[p] = uj.uint();
    c.eq(perPoint, want, 'latest spend per point');
  });
  c.each(doc, 'overdraft_proofs', (v) => {
    const proof = readOverdraftProof(decode(v.get('proof_cbor').bytes()));
    const g = v.get('grant');
    const r = verifyOverdraftProof(proof, { id: g.get('id').str(), budget_uj: g.get('budget_uj').uint() });
    const e = v.get('expected');
    c.eq(r.ok, e.get('ok').bool(), 'proven or refused');
    if (r.ok) {
      if (e.get('ok').bool()) c.eq(r.value, e.get('overdraft_uj').uint(), 'proven overdraft µJ');
    } else {
      c.eq(r.error.code, e.get('code').str(), 'refusal code');
    }
  });
  c.each(doc, 'channel_rule', (v) => {
    const s = v.get('state');
    const r = channelAllows({
      mySpent: s.get('my_spent_uj').uint(),
      mySpentAtLastSettle: s.get('my_spent_at_last_settle_uj').uint(),
      peersSettled: s.get('peers_settled_uj').uint(),
      budget: s.get('budget_uj').uint(),
      windowUj: s.get('window_uj').uint(),
      cost: s.get('cost_uj').uint(),
    });
    c.eq(r.ok ? 'allow' : r.error.code, v.get('expected').str(), 'channel rule verdict');
  });
  c.each(doc, 'overdraft_bounds', (v) => {
    c.eq(
      overdraftBound(
        v
          .get('windows_uj')
          .items()
          .map((w) => w.uint()),
      ),
      v.get('bound_uj').uint(),
      'Σ W − min W',
    );
  });
}
