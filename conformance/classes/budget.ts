/**
 * Conformance classes about the decision (§7): C3 (budget enforcement), C4 (data/control
 * separation) and C-neg (expired, forged and wrong-caller frames; canonical CBOR refuses floats
 * and bools, and writes every integer in its shortest form). Each class checks the pure decision,
 * then sends the same kinds of calls through a real node (`live-node.ts`) and reads the node's own
 * ledger and receipt log: "never debited" is the node's ledger, not a loop of the harness.
 */
import { decide, decode, encode, ErrorCodes, FRAME_KINDS, grantId } from '../../core/index.ts';
import type { Checker } from '../checker.ts';
import type { ConformanceClass } from '../runner.ts';
import { type Kit, kit, verdict } from './authority-kit.ts';
import { LiveNode } from './live-node.ts';

/** C3: spend beyond the ceiling is denied deterministically and the denied call is never debited. */
export const C3: ConformanceClass = {
  id: 'C3',
  title: 'budget enforcement',
  async run(t) {
    const k = kit('C3');
    checkPureBudget(t, k);
    await checkLiveBudget(t, k);
  },
};

/**
 * C3 on the pure decision: 101 µJ against 100 µJ is denied, 100 µJ fits; a loop of 8 µJ calls is
 * allowed 12 times and then denied deterministically; a chained cost must fit the root too. No
 * denial mutates the ledger.
 */
function checkPureBudget(t: Checker, k: Kit): void {
  const g = k.root({ budget_uj: 100n });
  const id = grantId(g.grant);
  const state = k.state();

  t.eq(verdict(decide(k.request([g], { costUj: 101n }), state)), 'budget-exceeded', 'a cost over the ceiling by 1 µJ is denied');
  t.eq(state.ledger.spent(id), 0n, 'deciding the denial mutated no ledger (the decision is pure, §7)');
  const exact = decide(k.request([g], { costUj: 100n }), state);
  t.eq([exact.verdict, exact.remainingUj], ['allow', 0n], 'a cost that exactly fits is allowed, leaving 0 µJ');

  // The decision over a ledger this loop debits on allow (the node's own debit is checked below): 13 calls of 8 µJ against 100 µJ.
  const loop = k.root({ budget_uj: 100n });
  const loopId = grantId(loop.grant);
  const verdicts: string[] = [];
  for (let i = 0; i < 13; i++) {
    const d = decide(k.request([loop], { costUj: 8n }), state);
    verdicts.push(verdict(d));
    if (d.verdict === 'allow') state.ledger.debit(d.chainIds, 8n);
  }
  t.eq(verdicts.filter((v) => v === 'allow').length, 12, 'allowed until the next call would pass the ceiling');
  t.eq(verdicts[12], 'budget-exceeded', 'the 13th call is denied budget-exceeded');
  const again = [0, 1, 2].map(() => decide(k.request([loop], { costUj: 8n }), state));
  t.ok(
    again.every((d) => verdict(d) === 'budget-exceeded'),
    'the denial is deterministic',
  );
  t.eq(state.ledger.spent(loopId), 96n, 'deciding repeated denials mutated no ledger');
  const d = again[0]!;
  t.eq(d.verdict === 'deny' && [d.deny.requestedUj, d.deny.remainingUj], [8n, 4n], 'the deny says how much was asked and remained');
  t.eq(verdict(decide(k.request([loop], { costUj: 4n }), state)), 'allow', 'the remaining 4 µJ can still be spent');

  // Chained: the cost must fit every link.
  const root = k.root({ budget_uj: 50n });
  const child = k.delegate(root, k.bob, { subject: k.carol.did, budget_uj: 50n });
  state.ledger.debit([grantId(root.grant)], 45n);
  t.eq(verdict(decide(k.request([root, child], { costUj: 6n }), state), true), 'budget-exceeded@0', 'a chained cost must fit the root too');
  t.eq(state.ledger.spent(grantId(child.grant)), 0n, 'deciding the chained denial mutated no link');
}

/**
 * C3 through a real node (clock at 1,000 s): what its own ledger and receipt log hold afterwards.
 * Over-ceiling calls are denied `budget-exceeded` and debit 0 µJ, the exact fit is debited, a chained
 * cost must fit the root, every denial is logged, and a restart replays the same spend.
 */
async function checkLiveBudget(t: Checker, k: Kit): Promise<void> {
  const live = await LiveNode.start('c3', [k.alice.did], 1_000);
  try {
    const cap = { resource: live.resource, actions: ['read', 'write'] };
    const lg = k.root({ budget_uj: 100n, capability: cap });
    const lid = grantId(lg.grant);
    for (const over of [101n, 102n, 150n, 1_000n, 1n << 40n]) {
      t.eq((await live.call(k.bob, { chain: [lg], costUj: over })).verdict, 'budget-exceeded', `node: ${over} µJ against 100 µJ is denied`);
    }
    t.eq(live.spent(lid), 0n, 'node: no denied call was debited');
    const fit = await live.call(k.bob, { chain: [lg], costUj: 100n });
    t.eq([fit.verdict, fit.receipt?.budget_remaining_uj], ['allow', 0n], 'node: the exact fit is allowed, 0 µJ left');
    t.eq(live.spent(lid), 100n, 'node: the allow debited its cost');
    for (const more of [1n, 2n]) {
      t.eq(
        (await live.call(k.bob, { chain: [lg], costUj: more })).verdict,
        'budget-exceeded',
        `node: ${more} µJ past an exhausted budget is denied`,
      );
    }
    t.eq(live.spent(lid), 100n, 'node: denials after exhaustion debit nothing');

    const lr = k.root({ budget_uj: 50n, capability: cap });
    const lc = k.delegate(lr, k.bob, { subject: k.carol.did, budget_uj: 50n });
    const [rid, cid] = [grantId(lr.grant), grantId(lc.grant)];
    t.eq((await live.call(k.bob, { chain: [lr], costUj: 45n })).verdict, 'allow', 'node: the root holder spends 45 µJ');
    t.eq(
      (await live.call(k.carol, { chain: [lr, lc], costUj: 6n })).verdict,
      'budget-exceeded',
      'node: a chained cost must fit the root too',
    );
    t.eq([live.spent(rid), live.spent(cid)], [45n, 0n], 'node: the denied chained call debited no link');
    t.eq((await live.call(k.carol, { chain: [lr, lc], costUj: 5n })).verdict, 'allow', 'node: the exact chained remainder is allowed');
    t.eq([live.spent(rid), live.spent(cid)], [50n, 5n], 'node: the chained allow debited the root and the leaf');

    const log = await live.receipts();
    const denies = log.filter((r) => r.verdict === 'deny');
    t.eq(denies.length, 8, 'node: every denial is in the receipt log');
    t.ok(
      denies.every((r) => r.deny_reason === 'budget-exceeded'),
      'node: logged as budget-exceeded',
    );
    const before = [lid, rid, cid].map((id) => live.spent(id));
    await live.restart();
    t.eq(
      [lid, rid, cid].map((id) => live.spent(id)),
      before,
      'node: boot replay rebuilds the same spend, denials still not debited',
    );
    t.eq(
      (await live.call(k.bob, { chain: [lg], costUj: 1n })).verdict,
      'budget-exceeded',
      'node: after restart the exhausted grant stays exhausted',
    );
  } finally {
    await live.close();
  }
}

/** C4: a data frame can never exercise a capability, on either decision path. */
export const C4: ConformanceClass = {
  id: 'C4',
  title: 'data/control separation',
  async run(t) {
    const k = kit('C4');
    const root = k.root();
    const child = k.delegate(root, k.bob, { subject: k.carol.did, budget_uj: 500n });
    const state = k.state();
    for (const chain of [[root], [root, child]]) {
      const path = chain.length === 1 ? 'direct' : 'chained';
      const control = k.request(chain);
      t.eq(verdict(decide(control, state)), 'allow', `${path}: the control frame is allowed`);
      for (const kind of FRAME_KINDS) {
        const data = { ...control, frame: { ...control.frame, kind, trust: 'data' as const } };
        t.eq(verdict(decide(data, state)), 'untrusted-control', `${path}: a data ${kind} frame is denied untrusted-control`);
      }
    }
    const broken = k.request([child, root]);
    t.eq(
      verdict(decide({ ...broken, frame: { ...broken.frame, trust: 'data' } }, state)),
      'untrusted-control',
      'data is refused before anything else, even a broken chain',
    );
    t.eq(state.ledger.size, 0, 'deciding mutated no ledger (the decision is pure, §7)');

    const live = await LiveNode.start('c4', [k.alice.did], 1_000);
    try {
      const lr = k.root({ capability: { resource: live.resource, actions: ['read', 'write'] } });
      const lc = k.delegate(lr, k.bob, { subject: k.carol.did, budget_uj: 500n });
      for (const [chain, who] of [
        [[lr], k.bob],
        [[lr, lc], k.carol],
      ] as const) {
        const path = chain.length === 1 ? 'direct' : 'chained';
        for (const kind of FRAME_KINDS) {
          t.eq(
            (await live.call(who, { chain, kind, trust: 'data' })).verdict,
            'untrusted-control',
            `node, ${path}: a data ${kind} frame is denied`,
          );
        }
      }
      t.eq([live.spent(grantId(lr.grant)), live.spent(grantId(lc.grant))], [0n, 0n], 'node: no data frame was debited');
      t.eq((await live.call(k.carol, { chain: [lr, lc] })).verdict, 'allow', 'node: the same chain as control is allowed');
      t.eq([live.spent(grantId(lr.grant)), live.spent(grantId(lc.grant))], [10n, 10n], 'node: only the control frame was debited');
    } finally {
      await live.close();
    }
  },
};

/** C-neg: expired, forged and wrong-caller frames are denied with the precise reason; canonical CBOR refuses floats and bools. */
export const C_neg: ConformanceClass = {
  id: 'C-neg',
  title: 'negative cases',
  async run(t) {
    const k = kit('C-neg');
    checkDecidedRefusals(t, k);
    await checkLiveRefusals(t, k);
    checkCanonicalCbor(t);
  },
};

/**
 * C-neg on the pure decision (spec §7): expiry at its second, forged roots and leaves
 * (`bad-signature`, with the chain index), wrong callers (`wrong-subject`); no ledger mutated.
 */
function checkDecidedRefusals(t: Checker, k: Kit): void {
  const g = k.root({ expiry: 2_000 });
  const child = k.delegate(g, k.bob, { subject: k.carol.did, budget_uj: 500n });
  const state = k.state();

  t.eq(verdict(decide(k.request([g], { nowS: 1_999 }), state)), 'allow', 'valid one second before expiry');
  t.eq(verdict(decide(k.request([g], { nowS: 2_000 }), state)), 'expired', 'expired at its expiry second');
  t.eq(verdict(decide(k.request([g, child], { nowS: 2_000 }), state)), 'expired', 'an expired chain is denied expired');

  t.eq(verdict(decide(k.request([k.forged(g)]), state)), 'bad-signature', 'a forged grant is denied bad-signature');
  t.eq(verdict(decide(k.request([k.forged(g), child]), state), true), 'bad-signature@0', 'a forged root is denied bad-signature');
  t.eq(verdict(decide(k.request([g, k.forged(child)]), state), true), 'bad-signature@1', 'a forged leaf is denied bad-signature');
  const selfMade = k.root({}, k.mallory);
  t.eq(
    verdict(decide(k.request([{ grant: { ...selfMade.grant, issuer: k.alice.did }, signature: selfMade.signature }]), state)),
    'bad-signature',
    'a grant claiming another issuer is denied bad-signature',
  );

  t.eq(verdict(decide(k.request([g], { caller: k.mallory.did }), state)), 'wrong-subject', 'a wrong caller is denied wrong-subject');
  t.eq(verdict(decide(k.request([g, child], { caller: k.bob.did }), state)), 'wrong-subject', 'the parent holder cannot call as the leaf');
  t.eq(state.ledger.size, 0, 'deciding the refusals mutated no ledger');
  for (const who of [k.mallory, k.alice, k.carol, k.dave]) {
    t.eq(
      verdict(decide(k.request([g], { caller: who.did }), state)),
      'wrong-subject',
      'every caller but the subject is denied wrong-subject',
    );
  }
  for (const stale of [1, 2, 1_000]) {
    t.eq(verdict(decide(k.request([g], { nowS: 2_000 + stale }), state)), 'expired', `expired ${stale} s after its expiry`);
  }
}

/**
 * C-neg through a real node (clock at 1,000 s): expired, forged and wrong-caller calls are each
 * sealed as a deny receipt and debit no grant (0 µJ); the honest chain is still allowed and debited 10 µJ.
 */
async function checkLiveRefusals(t: Checker, k: Kit): Promise<void> {
  const live = await LiveNode.start('cneg', [k.alice.did], 1_000);
  try {
    const cap = { resource: live.resource, actions: ['read', 'write'] };
    const lg = k.root({ capability: cap });
    const lc = k.delegate(lg, k.bob, { subject: k.carol.did, budget_uj: 500n });
    const ids = [grantId(lg.grant), grantId(lc.grant)];
    let refused = 0;
    const deny = async (label: string, want: string, got: Promise<{ verdict: string }>) => {
      t.eq((await got).verdict, want, `node: ${label}`);
      refused++;
    };
    for (const expiry of [1_000, 999, 998, 1]) {
      const old = k.root({ capability: cap, expiry });
      await deny(`a grant with expiry ${expiry} is expired at 1,000 s`, 'expired', live.call(k.bob, { chain: [old] }));
      ids.push(grantId(old.grant));
      const kid = k.handChild(lg, { subject: k.carol.did, expiry }, k.bob);
      await deny(`a chain whose leaf expired at ${expiry} is expired`, 'expired', live.call(k.carol, { chain: [lg, kid] }));
    }
    for (const [forger, leafForger] of [
      [k.mallory, k.mallory],
      [k.bob, k.carol],
      [k.carol, k.alice],
    ] as const) {
      await deny('a root forged by another key is bad-signature', 'bad-signature', live.call(k.bob, { chain: [k.forged(lg, forger)] }));
      await deny('a forged leaf is bad-signature', 'bad-signature', live.call(k.carol, { chain: [lg, k.forged(lc, leafForger)] }));
      const self = k.root({ capability: cap }, forger);
      const claimed = { grant: { ...self.grant, issuer: k.alice.did }, signature: self.signature };
      await deny(
        'a grant naming the trusted issuer, signed by another, is bad-signature',
        'bad-signature',
        live.call(k.bob, { chain: [claimed] }),
      );
      ids.push(grantId(claimed.grant));
    }
    for (const who of [k.mallory, k.alice, k.carol, k.dave]) {
      await deny('a wrong caller on a direct grant is wrong-subject', 'wrong-subject', live.call(who, { chain: [lg] }));
    }
    for (const who of [k.bob, k.mallory, k.alice]) {
      await deny('a wrong caller on a chain is wrong-subject', 'wrong-subject', live.call(who, { chain: [lg, lc] }));
    }
    for (const forger of [k.mallory, k.carol, k.alice]) {
      await deny(
        'a request from bob signed by another key is bad-signature',
        'bad-signature',
        live.call(k.bob, { chain: [lg], signWith: forger }),
      );
    }
    t.eq(
      ids.map((id) => live.spent(id)),
      ids.map(() => 0n),
      'node: no refused call debited any grant',
    );
    const log = await live.receipts();
    t.eq([log.length, log.filter((r) => r.verdict === 'deny').length], [refused, refused], 'node: every refusal is a sealed deny receipt');
    t.eq((await live.call(k.carol, { chain: [lg, lc] })).verdict, 'allow', 'node: the honest chain is still allowed');
    t.eq(
      ids.slice(0, 2).map((id) => live.spent(id)),
      [10n, 10n],
      'node: and debited',
    );
  } finally {
    await live.close();
  }
}

/**
 * Canonical CBOR (RFC 8949 §4.2.1): floats, bools and null are refused both ways
 * (`cbor-forbidden-type`), every integer is written in its shortest form, a longer form is refused
 * (`cbor-non-canonical`).
 */
function checkCanonicalCbor(t: Checker): void {
  const codeOf = (f: () => unknown) => {
    try {
      f();
      return 'accepted';
    } catch (e) {
      return (e as { code?: string }).code ?? 'untyped';
    }
  };
  const hex = (h: string) => new Uint8Array(Buffer.from(h, 'hex'));
  t.eq(
    codeOf(() => encode({ budget_uj: 1.5 })),
    ErrorCodes.CBOR_FORBIDDEN_TYPE,
    'encoding a float is refused',
  );
  t.eq(
    codeOf(() => encode({ ok: true })),
    ErrorCodes.CBOR_FORBIDDEN_TYPE,
    'encoding a bool is refused',
  );
  t.eq(
    codeOf(() => encode({ parent: null })),
    ErrorCodes.CBOR_FORBIDDEN_TYPE,
    'encoding a null is refused',
  );
  t.eq(
    codeOf(() => decode(hex('a16161f93c00'))),
    ErrorCodes.CBOR_FORBIDDEN_TYPE,
    'decoding a half float is refused',
  );
  t.eq(
    codeOf(() => decode(hex('a16161fb3ff0000000000000'))),
    ErrorCodes.CBOR_FORBIDDEN_TYPE,
    'decoding a double is refused',
  );
  t.eq(
    codeOf(() => decode(hex('a16161f5'))),
    ErrorCodes.CBOR_FORBIDDEN_TYPE,
    'decoding true is refused',
  );
  t.eq(
    codeOf(() => decode(hex('a16161f4'))),
    ErrorCodes.CBOR_FORBIDDEN_TYPE,
    'decoding false is refused',
  );
  t.eq(
    codeOf(() => decode(hex('a1616101'))),
    'accepted',
    'the same map with an integer decodes',
  );
  // Shortest form (RFC 8949 §4.2.1) at every head boundary, positive and negative, as vectors.
  const heads: [number | bigint, string][] = [
    [23, '17'],
    [24, '1818'],
    [255, '18ff'],
    [256, '190100'],
    [4_096, '191000'],
    [65_535, '19ffff'],
    [65_536, '1a00010000'],
    [4_294_967_295, '1affffffff'],
    [4_294_967_296n, '1b0000000100000000'],
    [-24, '37'],
    [-25, '3818'],
    [-257, '390100'],
    [-65_537, '3a00010000'],
  ];
  for (const [v, want] of heads) {
    t.eq(Buffer.from(encode(v)).toString('hex'), want, `${v} is written in its shortest form`);
    t.eq(
      codeOf(() => decode(hex(want))),
      'accepted',
      `${want} decodes`,
    );
  }
  for (const long of ['1817', '190017', '1900ff', '1a0000ffff', '1b00000000ffffffff', '3817']) {
    t.eq(
      codeOf(() => decode(hex(long))),
      ErrorCodes.CBOR_NON_CANONICAL,
      `${long} (not the shortest form) is refused`,
    );
  }
}
