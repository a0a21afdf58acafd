/**
 * Conformance classes about evidence (spec §8, §8.1): C5 (every decision seals as a JCR-1
 * receipt that verifies; a wrong steward fails), C14 (replay of the verified receipt stream
 * restores spend and per-worker attribution; a tampered receipt contributes nothing) and C16
 * (chained receipts name every debited link; replay restores leaf and ancestor debits exactly
 * and keeps conserving).
 */
import {
  type Actor,
  attenuate,
  attributionKey,
  contentId,
  type ContentId,
  decide,
  type Decision,
  type DecisionRequest,
  decodeSign1,
  encodeProtectedHeader,
  encodeReceiptCore,
  encodeSign1,
  ErrorCodes,
  type Grant,
  grantId,
  jcrProtectedHeader,
  Ledger,
  newActor,
  openReceipt,
  payloadHash,
  receiptCoreFor,
  receiptId,
  type ReceiptCore,
  ReceiptRefusals,
  replayReceipts,
  RevocationSet,
  type Rng,
  sealReceipt,
  seededRng,
  sign,
  type SignedGrant,
  signGrant,
  signRevocation,
  sigStructure,
  TrustRoots,
} from '../../core/index.ts';
import { NodeFault, ReceiptLog, replayLog } from '../../node/index.ts';
import type { Checker } from '../checker.ts';
import type { ConformanceClass } from '../runner.ts';
import { kit } from './authority-kit.ts';
import { LiveNode } from './live-node.ts';

const NOW_S = 1_700_000_000;

/** A test bench: actors, a resource, and an enforcement point that seals every decision in sequence. */
class Bench {
  readonly rng: Rng;
  readonly root: Actor;
  readonly steward: Actor;
  readonly resource: ContentId;
  readonly ledger = new Ledger();
  readonly revoked = new RevocationSet();
  readonly trust = new TrustRoots();
  readonly receipts: Uint8Array[] = [];
  readonly decisions: Decision[] = [];
  #prev: ContentId | undefined;

  constructor(seed: string) {
    this.rng = seededRng(seed);
    this.root = newActor(this.rng);
    this.steward = newActor(this.rng);
    this.resource = contentId({ conformance: seed });
  }

  actor(): Actor {
    return newActor(this.rng);
  }

  grant(subject: Actor, budgetUj: bigint): SignedGrant {
    const g: Grant = {
      issuer: this.root.did,
      subject: subject.did,
      capability: { resource: this.resource, actions: ['invoke'] },
      budget_uj: budgetUj,
      expiry: 0,
      nonce: this.rng(16),
    };
    return signGrant(g, this.root);
  }

  child(parent: SignedGrant, holder: Actor, subject: Actor, budgetUj: bigint): SignedGrant {
    const r = attenuate(parent, { subject: subject.did, budget_uj: budgetUj, nonce: this.rng(16) }, holder);
    if (!r.ok) throw new Error(`bench: attenuation refused: ${r.error.why}`);
    return r.value;
  }

  request(chain: SignedGrant[], caller: Actor, uj: bigint, opts: { action?: string; data?: boolean } = {}): DecisionRequest {
    return {
      frame: {
        kind: 'tool-call',
        trust: opts.data ? 'data' : 'control',
        grant_id: grantId(chain[chain.length - 1]!.grant),
        action: opts.action ?? 'invoke',
        resource: this.resource,
        payload_hash: payloadHash(),
      },
      chain,
      caller: caller.did,
      cost: { uj, provenance: 'Estimator' },
      nowS: NOW_S,
    };
  }

  /** Decides (pure), debits only on allow, seals the receipt with the next seq/prev. */
  handle(req: DecisionRequest): { decision: Decision; bytes: Uint8Array } {
    const decision = decide(req, this);
    if (decision.verdict === 'allow') this.ledger.debit(decision.chainIds, req.cost.uj);
    const core = receiptCoreFor(req, decision, {
      steward: this.steward.did,
      seq: this.receipts.length,
      ...(this.#prev !== undefined ? { prev: this.#prev } : {}),
    });
    const bytes = sealReceipt(core, this.steward);
    this.receipts.push(bytes);
    this.decisions.push(decision);
    this.#prev = receiptId(bytes);
    return { decision, bytes };
  }
}

function sameLedger(t: Checker, a: Ledger, b: Ledger, label: string): void {
  const ids = new Set([...a.entries()].map(([id]) => id).concat([...b.entries()].map(([id]) => id)));
  t.ok(ids.size > 0, `${label}: some spend to compare`);
  for (const id of ids) t.eq(a.spent(id), b.spent(id), `${label}: spend of ${id.slice(0, 12)}…`);
}

/** C5: every decision seals to JCR-1 and verifies; a wrong steward fails. */
export const C5: ConformanceClass = {
  id: 'C5',
  title: 'the receipt',
  async run(t) {
    const b = new Bench('conformance/C5');
    const worker = b.actor();
    const other = b.actor();
    checkEveryVerdictSeals(t, b, worker, other);
    checkEnvelope(t, b, worker, other);
    await checkLiveReceipts(t);
  },
};

/**
 * One decision per verdict (allow, five deny reasons, a chained allow): each receipt verifies under
 * its steward with the decision's verdict and deny_reason, and fails `wrong-steward` for another key.
 */
function checkEveryVerdictSeals(t: Checker, b: Bench, worker: Actor, other: Actor): void {
  const g = b.grant(worker, 1_000n);
  const revokedGrant = b.grant(worker, 1_000n);
  t.ok(b.revoked.admit(signRevocation(grantId(revokedGrant.grant), b.root, b.rng(16)), revokedGrant.grant).ok, 'revocation admitted');
  const sub = b.child(g, worker, other, 100n);
  const cases: [string, DecisionRequest, string | undefined][] = [
    ['allow', b.request([g], worker, 400n), undefined],
    ['budget-exceeded', b.request([g], worker, 700n), 'budget-exceeded'],
    ['wrong-subject', b.request([g], other, 1n), 'wrong-subject'],
    ['untrusted-control', b.request([g], worker, 1n, { data: true }), 'untrusted-control'],
    ['action-not-granted', b.request([g], worker, 1n, { action: 'delete' }), 'action-not-granted'],
    ['revoked', b.request([revokedGrant], worker, 1n), 'revoked'],
    ['chained allow', b.request([g, sub], other, 50n), undefined],
  ];
  for (const [label, req, reason] of cases) {
    const { decision, bytes } = b.handle(req);
    const opened = openReceipt(bytes, b.steward.did);
    t.ok(opened.ok, `${label}: the receipt verifies under its steward`);
    if (!opened.ok) continue;
    t.eq(opened.value.verdict, decision.verdict, `${label}: receipt verdict is the decision's`);
    t.eq(opened.value.deny_reason, reason, `${label}: deny_reason`);
    t.eq(opened.value.steward, b.steward.did, `${label}: steward is the kid`);
    const wrong = openReceipt(bytes, other.did);
    t.eq(wrong.ok ? 'ok' : wrong.error.code, ReceiptRefusals.WRONG_STEWARD, `${label}: a wrong steward fails`);
  }
}

/**
 * The first receipt's COSE_Sign1 envelope (tag 18, EdDSA, kid, empty unprotected header); a flipped
 * signature bit, non-canonical bytes, another alg and a re-seal by another key each fail.
 */
function checkEnvelope(t: Checker, b: Bench, worker: Actor, other: Actor): void {
  const bytes = b.receipts[0]!;
  const m = decodeSign1(bytes);
  t.eq(bytes[0], 0xd2, 'tagged COSE_Sign1 (tag 18)');
  t.eq(m.protectedHeader.get(1), -8, 'alg EdDSA (-8) in the protected header');
  t.eq(new TextDecoder().decode(m.protectedHeader.get(4) as Uint8Array), b.steward.did, 'kid = UTF-8 of the steward did:key');
  t.eq(m.unprotected.size, 0, 'empty unprotected header');
  const flipped = new Uint8Array(bytes);
  flipped[flipped.length - 1]! ^= 1;
  t.eq(codeOf(openReceipt(flipped)), ErrorCodes.SIGNATURE_INVALID, 'a flipped signature bit fails');
  t.eq(codeOf(openReceipt(new Uint8Array([0xd8, 0x12, ...bytes.subarray(1)]))), ErrorCodes.CBOR_NON_CANONICAL, 'non-canonical bytes fail');
  const es256 = encodeSign1({
    ...m,
    protectedBytes: encodeProtectedHeader(
      new Map<number, unknown>([
        [1, -7],
        [4, m.protectedHeader.get(4)],
      ]),
    ),
  });
  t.eq(codeOf(openReceipt(es256)), ErrorCodes.COSE_UNSUPPORTED, 'an alg other than EdDSA fails');
  const honest = openReceipt(bytes);
  if (honest.ok) {
    const forged = sealReceipt({ ...honest.value, steward: other.did }, other);
    t.eq(
      codeOf(openReceipt(forged, b.steward.did)),
      ReceiptRefusals.WRONG_STEWARD,
      'the same core re-sealed by another key fails for the real steward',
    );
    checkForgers(t, b, honest.value, [other, worker, b.root]);
  }
}

/**
 * Forgers that name the real steward (in the core, or in the kid), one seal of each kind by
 * each of `forgers` (the caller passes three keys): `steward-mismatch`,
 * `wrong-steward` or `signature-invalid`, never ok.
 */
function checkForgers(t: Checker, b: Bench, honest: ReceiptCore, forgers: readonly Actor[]): void {
  const enc = new TextEncoder();
  const sealAs = (kid: string, core: ReceiptCore, key: Actor) => {
    const protectedBytes = jcrProtectedHeader(enc.encode(kid));
    const payload = encodeReceiptCore(core);
    return encodeSign1({
      protectedBytes,
      unprotected: new Map(),
      payload,
      signature: sign(key.key, sigStructure(protectedBytes, payload)),
    });
  };
  for (const [i, forger] of forgers.entries()) {
    const namesReal = sealAs(forger.did, honest, forger);
    t.eq(
      codeOf(openReceipt(namesReal)),
      ReceiptRefusals.STEWARD_MISMATCH,
      `forger ${i} naming the real steward in the core: steward-mismatch`,
    );
    t.eq(
      codeOf(openReceipt(namesReal, b.steward.did)),
      ReceiptRefusals.WRONG_STEWARD,
      `forger ${i} naming the real steward in the core: wrong-steward`,
    );
    const kidReal = sealAs(b.steward.did, honest, forger);
    t.eq(
      codeOf(openReceipt(kidReal, b.steward.did)),
      ErrorCodes.SIGNATURE_INVALID,
      `forger ${i} putting the real steward in the kid: signature-invalid`,
    );
    t.eq(
      codeOf(openReceipt(kidReal)),
      ErrorCodes.SIGNATURE_INVALID,
      `forger ${i} putting the real steward in the kid, no steward expected: signature-invalid`,
    );
  }
}

/** A real node's receipts: sealed by its steward key, the kid naming it, and the fields its decision had. */
async function checkLiveReceipts(t: Checker): Promise<void> {
  const k = kit('C5/live');
  const live = await LiveNode.start('c5', [k.alice.did], 1_000);
  try {
    const root = k.root({ capability: { resource: live.resource, actions: ['read'] }, budget_uj: 100n });
    const leaf = k.delegate(root, k.bob, { subject: k.carol.did, budget_uj: 60n });
    const calls = [
      await live.call(k.bob, { chain: [root], costUj: 30n }),
      await live.call(k.carol, { chain: [root, leaf], costUj: 61n }),
      await live.call(k.carol, { chain: [root, leaf], costUj: 20n }),
    ];
    t.eq(
      calls.map((c) => c.verdict),
      ['allow', 'budget-exceeded', 'allow'],
      'node: decided as planned',
    );
    t.eq(
      calls.map((c) => c.receipt?.steward),
      calls.map(() => live.node.did),
      'node: every receipt names the node steward',
    );
    t.eq(
      calls.map((c) => c.receipt?.cost_uj),
      [30n, 61n, 20n],
      'node: cost_uj is the request cost',
    );
    t.eq(
      calls.map((c) => c.receipt?.budget_remaining_uj),
      [70n, 60n, 40n],
      'node: budget_remaining_uj is the leaf after the debit',
    );
    t.eq(
      calls.map((c) => c.receipt?.seq),
      [0, 1, 2],
      'node: seq counts from 0',
    );
    const rawLog: Uint8Array[] = [];
    for await (const chunk of live.node.log.receiptChunks()) for (const [, bytes] of chunk) rawLog.push(bytes);
    for (const [i, bytes] of rawLog.entries()) {
      const kid = decodeSign1(bytes).protectedHeader.get(4) as Uint8Array;
      t.eq(new TextDecoder().decode(kid), live.node.did, `node receipt ${i}: kid = the steward did:key`);
      t.eq(codeOf(openReceipt(bytes, k.alice.did)), ReceiptRefusals.WRONG_STEWARD, `node receipt ${i}: fails for another steward`);
      const o = openReceipt(bytes);
      t.ok(
        o.ok && (i === 0 ? o.value.prev === undefined : o.value.prev === receiptId(rawLog[i - 1]!)),
        `node receipt ${i}: prev links the one before`,
      );
    }
  } finally {
    await live.close();
  }
}

function codeOf(r: ReturnType<typeof openReceipt>): string {
  return r.ok ? 'ok' : r.error.code;
}

/** C14: a fresh runtime restores spend from the verified stream; attribution matches; a tampered receipt contributes nothing. */
export const C14: ConformanceClass = {
  id: 'C14',
  title: 'replay + group accounting',
  async run(t) {
    const b = new Bench('conformance/C14');
    const lead = b.actor();
    const workers = [b.actor(), b.actor(), b.actor()];
    const top = b.grant(lead, 30_000n);
    const subs = workers.map((w) => b.child(top, lead, w, 12_000n));
    const tally = new Map<string, { allowed: number; refused: number }>();
    const rng = seededRng('conformance/C14/schedule');
    for (let i = 0; i < 60; i++) {
      const k = rng(1)[0]! % 3;
      const uj = BigInt(100 + (rng(2)[0]! << 3));
      const { decision } = b.handle(b.request([top, subs[k]!], workers[k]!, uj));
      const key = attributionKey(grantId(subs[k]!.grant), workers[k]!.did);
      const row = tally.get(key) ?? { allowed: 0, refused: 0 };
      if (decision.verdict === 'allow') row.allowed++;
      else row.refused++;
      tally.set(key, row);
    }
    const r = replayReceipts(b.receipts, { steward: b.steward.did });
    t.eq(r.rejected.length, 0, 'every receipt verifies');
    t.eq(r.breaks.length, 0, 'the log is continuous');
    t.eq(r.allowed + r.denied, 60, 'every receipt is accounted for');
    t.ok(r.allowed > 0 && r.denied > 0, 'the schedule holds allows and denies');
    sameLedger(t, r.ledger, b.ledger, 'replayed ledger = original');
    for (const [i, w] of workers.entries()) {
      const id = grantId(subs[i]!.grant);
      const row = r.attribution.get(attributionKey(id, w.did));
      const want = tally.get(attributionKey(id, w.did));
      t.eq(row?.allowed, want?.allowed, `worker ${i}: actions allowed`);
      t.eq(row?.refused, want?.refused, `worker ${i}: actions refused`);
      t.eq(row?.uj, b.ledger.spent(id), `worker ${i}: µJ spent = the original ledger`);
    }
    const idx = b.decisions.findIndex((d) => d.verdict === 'allow');
    const tampered = b.receipts.map((x) => new Uint8Array(x));
    tampered[idx]![tampered[idx]!.length - 3]! ^= 0x10;
    const victim = b.decisions[idx]!;
    const victimCore = openReceipt(b.receipts[idx]!);
    const cost = victimCore.ok ? victimCore.value.cost_uj : -1n;
    const rt = replayReceipts(tampered, { steward: b.steward.did });
    t.eq(
      rt.rejected.map((x) => [x.index, x.code]),
      [[idx, ErrorCodes.SIGNATURE_INVALID]],
      'the tampered receipt is counted, with its index',
    );
    t.eq(rt.allowed, r.allowed - 1, 'the tampered allow is not applied');
    for (const id of victim.chainIds) {
      t.eq(rt.ledger.spent(id), b.ledger.spent(id) - cost, `the tampered receipt contributes nothing to ${id.slice(0, 12)}…`);
    }
    t.ok(rt.breaks.length > 0, 'the hole it leaves in the log is reported');

    await liveReplay(t);
  },
};

/**
 * C14 on a real node: its log is replayed by the node's own boot path (`replayLog`, a restart),
 * which restores spend and per-worker attribution; a receipt tampered in the LevelDB log
 * contributes nothing, is counted, and stops the node unless the damage is accepted.
 */
async function liveReplay(t: Checker): Promise<void> {
  const k = kit('C14/live');
  const live = await LiveNode.start('c14', [k.alice.did], 1_000);
  try {
    const top = k.root({ capability: { resource: live.resource, actions: ['read'] }, budget_uj: 3_000n });
    const workers = [k.carol, k.dave, k.erin];
    const subs = workers.map((w) => k.delegate(top, k.bob, { subject: w.did, budget_uj: 1_200n }));
    const tally = new Map<string, { allowed: number; refused: number }>();
    const rng = seededRng('conformance/C14/live');
    for (let i = 0; i < 24; i++) {
      const w = rng(1)[0]! % 3;
      const c = await live.call(workers[w]!, { chain: [top, subs[w]!], costUj: BigInt(50 + (rng(1)[0]! % 200)) });
      const key = attributionKey(grantId(subs[w]!.grant), workers[w]!.did);
      const row = tally.get(key) ?? { allowed: 0, refused: 0 };
      if (c.verdict === 'allow') row.allowed++;
      else row.refused++;
      tally.set(key, row);
    }
    const ids = [top, ...subs].map((g) => grantId(g.grant));
    const before = ids.map((id) => live.spent(id));
    const log = await live.receipts();
    t.ok(log.some((r) => r.verdict === 'deny') && log.some((r) => r.verdict === 'allow'), 'node: the schedule holds allows and denies');
    await live.restart();
    t.eq(
      ids.map((id) => live.spent(id)),
      before,
      'node: a restart (boot replay) restores every link’s spend',
    );
    t.eq(live.node.boot.receipts, 24, 'node: boot replay read every receipt');
    await live.stop();

    // Tamper one allow late in the node's LevelDB log (not the head: past the first slice of 5).
    let idx = -1;
    for (let i = log.length - 2; i >= 5 && idx < 0; i--) if (log[i]!.verdict === 'allow') idx = i;
    t.ok(idx >= 5, 'node: an allow past the first replay slice to tamper with');
    const victim = log[idx]!;
    const db = await ReceiptLog.open(live.dir, { steward: live.node.did, nowS: 1_000, mustExist: true });
    try {
      const bytes = new Uint8Array((await db.getReceipt(idx))!);
      bytes[bytes.length - 3]! ^= 0x10;
      await db.appendReceipt(idx, bytes);
      // Slices of 5 receipts, so the tampered one and the workers' rows span several slices.
      const r = await replayLog(db, { steward: live.node.did, sliceSize: 5, parallel: 2 });
      t.eq(
        r.rejected.map((x) => [x.seq, x.code]),
        [[idx, ErrorCodes.SIGNATURE_INVALID]],
        'node replay: the tampered receipt is counted, with its seq',
      );
      // seq-gap inside a slice; prev-mismatch when the tampered receipt ends one (the next slice starts after it).
      t.eq(
        r.breaks.map((x) => x.seq),
        [idx + 1],
        'node replay: the hole it leaves is the only break',
      );
      t.ok(
        r.breaks.every((x) => x.code === 'seq-gap' || x.code === 'prev-mismatch'),
        'node replay: reported as a gap or a prev mismatch',
      );
      t.eq([r.total, r.allowed + r.denied, r.nextSeq], [24, 23, 24], 'node replay: every other receipt is applied');
      const cut = (id: ContentId) => (victim.chain_ids ?? [victim.grant_id]).includes(id);
      t.eq(
        ids.map((id) => r.ledger.spent(id)),
        ids.map((id, i) => before[i]! - (cut(id) ? victim.cost_uj : 0n)),
        'node replay: it contributes nothing to any link',
      );
      for (const [i, w] of workers.entries()) {
        const id = grantId(subs[i]!.grant);
        const want = { ...(tally.get(attributionKey(id, w.did)) ?? { allowed: 0, refused: 0 }) };
        if (victim.grant_id === id) want.allowed--;
        const row = r.attribution.get(attributionKey(id, w.did));
        t.eq([row?.allowed ?? 0, row?.refused ?? 0], [want.allowed, want.refused], `node replay: worker ${i} attribution`);
        t.eq(row?.uj ?? 0n, r.ledger.spent(id), `node replay: worker ${i} µJ = its grant's replayed spend`);
      }
    } finally {
      await db.close();
    }
    let refused = '';
    try {
      await live.start();
    } catch (e) {
      refused = e instanceof NodeFault ? e.code : String(e);
    }
    t.eq(refused, 'log-damaged', 'node: a tampered log stops the start');
    if (refused === '') await live.stop();
    await live.start({ acceptDamagedLog: true });
    t.eq(live.node.boot.bad, 1, 'node: the accepted start reports the bad receipt');
    t.eq(
      ids.map((id) => live.spent(id)),
      ids.map((id, i) => before[i]! - ((victim.chain_ids ?? []).includes(id) ? victim.cost_uj : 0n)),
      'node: its ledger holds nothing of the tampered receipt',
    );
  } finally {
    await live.close();
  }
}

/** C16: a chained receipt names every debited link; replay restores leaf and ancestor debits exactly and keeps conserving. */
export const C16: ConformanceClass = {
  id: 'C16',
  title: 'chained replay',
  async run(t) {
    const b = new Bench('conformance/C16');
    const a0 = b.actor();
    const a1 = b.actor();
    const a2 = b.actor();
    const a3 = b.actor();
    const top = b.grant(a0, 5_000n);
    const mid = b.child(top, a0, a1, 4_000n);
    const leaf = b.child(mid, a1, a2, 3_000n);
    const sibling = b.child(mid, a1, a3, 3_000n);
    const chainLeaf = [top, mid, leaf];
    const chainSib = [top, mid, sibling];
    const plan: [SignedGrant[], Actor, bigint][] = [
      [chainLeaf, a2, 1_200n],
      [chainSib, a3, 1_500n],
      [chainLeaf, a2, 900n],
      [chainSib, a3, 900n], // mid has 400 left: deny
      [[top, mid], a1, 300n],
    ];
    for (const [chain, who, uj] of plan) {
      const { decision, bytes } = b.handle(b.request(chain, who, uj));
      const r = openReceipt(bytes, b.steward.did);
      t.ok(r.ok, 'chained receipt verifies');
      if (r.ok) {
        t.eq(
          r.value.chain_ids,
          chain.map((sg) => grantId(sg.grant)),
          'chain_ids names every link, root first',
        );
        t.eq(r.value.chain_ids, decision.chainIds, 'chain_ids = what the decision debits');
        t.eq(r.value.grant_id, grantId(chain[chain.length - 1]!.grant), 'grant_id is the leaf');
      }
    }
    t.eq(
      b.decisions.map((d) => d.verdict),
      ['allow', 'allow', 'allow', 'deny', 'allow'],
      'the schedule decides as planned',
    );
    const r = replayReceipts(b.receipts, { steward: b.steward.did });
    const ids = [top, mid, leaf, sibling].map((sg) => grantId(sg.grant));
    t.eq(
      ids.map((id) => r.ledger.spent(id)),
      [3_900n, 3_900n, 2_100n, 1_500n],
      'replay restores leaf AND ancestor debits exactly',
    );
    sameLedger(t, r.ledger, b.ledger, 'replayed ledger = original');
    const state = { ledger: r.ledger, revoked: new RevocationSet(), trust: new TrustRoots() };
    const probes: [SignedGrant[], Actor, bigint][] = [
      [chainSib, a3, 101n], // mid has 100 left
      [chainSib, a3, 100n],
      [chainLeaf, a2, 101n],
      [[top], a0, 1_101n], // top has 1_100 left
      [[top], a0, 1_100n],
    ];
    for (const [chain, who, uj] of probes) {
      const req = b.request(chain, who, uj);
      const replayed = decide(req, state);
      const original = decide(req, b);
      t.eq(replayed.verdict, original.verdict, `after replay, ${uj} µJ on a ${chain.length}-link chain decides as before`);
      if (replayed.verdict === 'deny') t.eq(replayed.deny.reason, 'budget-exceeded', 'the refusal is budget-exceeded');
    }
    t.eq(decide(b.request(chainSib, a3, 101n), state).verdict, 'deny', 'the replayed ledger keeps conserving: siblings still share mid');

    await liveChainedReplay(t);
  },
};

/** C16 on a real node: chained calls, its receipts' chain_ids, and boot replay restoring every link. */
async function liveChainedReplay(t: Checker): Promise<void> {
  const k = kit('C16/live');
  const live = await LiveNode.start('c16', [k.alice.did], 1_000);
  try {
    const top = k.root({ capability: { resource: live.resource, actions: ['read'] }, budget_uj: 5_000n });
    const mid = k.delegate(top, k.bob, { subject: k.carol.did, budget_uj: 4_000n });
    const leaf = k.delegate(mid, k.carol, { subject: k.dave.did, budget_uj: 3_000n });
    const sib = k.delegate(mid, k.carol, { subject: k.erin.did, budget_uj: 3_000n });
    const plan: [SignedGrant[], Actor, bigint, string][] = [
      [[top, mid, leaf], k.dave, 1_200n, 'allow'],
      [[top, mid, sib], k.erin, 1_500n, 'allow'],
      [[top, mid, leaf], k.dave, 900n, 'allow'],
      [[top, mid, sib], k.erin, 401n, 'budget-exceeded'],
      [[top, mid], k.carol, 300n, 'allow'],
    ];
    for (const [chain, who, uj, want] of plan) {
      const c = await live.call(who, { chain, costUj: uj });
      t.eq(c.verdict, want, `node: ${uj} µJ on a ${chain.length}-link chain`);
      t.eq(
        c.receipt?.chain_ids,
        chain.map((g) => grantId(g.grant)),
        'node: chain_ids names every link, root first',
      );
    }
    const ids = [top, mid, leaf, sib].map((g) => grantId(g.grant));
    const want = [3_900n, 3_900n, 2_100n, 1_500n];
    t.eq(
      ids.map((id) => live.spent(id)),
      want,
      'node: leaf and ancestor debits',
    );
    await live.restart();
    t.eq(
      ids.map((id) => live.spent(id)),
      want,
      'node: boot replay restores leaf and ancestor debits exactly',
    );
    t.eq(
      (await live.call(k.erin, { chain: [top, mid, sib], costUj: 101n })).verdict,
      'budget-exceeded',
      'node after replay: siblings still share mid',
    );
    t.eq(
      (await live.call(k.erin, { chain: [top, mid, sib], costUj: 100n })).verdict,
      'allow',
      'node after replay: the exact remainder of mid is allowed',
    );
    t.eq(
      (await live.call(k.bob, { chain: [top], costUj: 1_001n })).verdict,
      'budget-exceeded',
      'node after replay: the root remembers its subtree',
    );
  } finally {
    await live.close();
  }
}
