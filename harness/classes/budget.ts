/**
 * Conformance classes about the decision (§7): C3 (budget enforcement), C4 (data/control
 * separation) and C-neg (expired, forged and wrong-caller frames; canonical CBOR refuses floats
 * and bools).
 */
import { decode, encode } from '../../core/cbor.ts';
import { decide } from '../../core/decision.ts';
import { ErrorCodes } from '../../core/errors.ts';
import { FRAME_KINDS } from '../../core/frame.ts';
import { grantId } from '../../core/grant.ts';
import type { ConformanceClass } from '../conformance.ts';
import { kit, verdict } from './authority-kit.ts';

/** C3: spend beyond the ceiling is denied deterministically and the denied call is never debited. */
export const C3: ConformanceClass = {
  id: 'C3',
  title: 'budget enforcement',
  run(t) {
    const k = kit('C3');
    const g = k.root({ budget_uj: 100n });
    const id = grantId(g.grant);
    const state = k.state();

    t.eq(verdict(decide(k.request([g], { costUj: 101n }), state)), 'budget-exceeded', 'a cost over the ceiling by 1 µJ is denied');
    t.eq(state.ledger.spent(id), 0n, 'the denied call is not debited');
    const exact = decide(k.request([g], { costUj: 100n }), state);
    t.eq([exact.verdict, exact.remainingUj], ['allow', 0n], 'a cost that exactly fits is allowed, leaving 0 µJ');

    // A caller that debits only on allow: 13 calls of 8 µJ against 100 µJ.
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
    t.eq(state.ledger.spent(loopId), 96n, 'only allowed calls were debited');
    const again = [0, 1, 2].map(() => decide(k.request([loop], { costUj: 8n }), state));
    t.ok(again.every((d) => verdict(d) === 'budget-exceeded'), 'the denial is deterministic');
    t.eq(state.ledger.spent(loopId), 96n, 'repeated denials debit nothing');
    const d = again[0]!;
    t.eq(d.verdict === 'deny' && [d.deny.requestedUj, d.deny.remainingUj], [8n, 4n], 'the deny says how much was asked and remained');
    t.eq(verdict(decide(k.request([loop], { costUj: 4n }), state)), 'allow', 'the remaining 4 µJ can still be spent');

    // Chained: the cost must fit every link.
    const root = k.root({ budget_uj: 50n });
    const child = k.delegate(root, k.bob, { subject: k.carol.did, budget_uj: 50n });
    state.ledger.debit([grantId(root.grant)], 45n);
    t.eq(verdict(decide(k.request([root, child], { costUj: 6n }), state), true), 'budget-exceeded@0', 'a chained cost must fit the root too');
    t.eq(state.ledger.spent(grantId(child.grant)), 0n, 'the denied chained call debits no link');
  },
};

/** C4: a data frame can never exercise a capability, on either decision path. */
export const C4: ConformanceClass = {
  id: 'C4',
  title: 'data/control separation',
  run(t) {
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
    t.eq(state.ledger.size, 0, 'no data frame was debited');
  },
};

/** C-neg: expired, forged and wrong-caller frames are denied with the precise reason; canonical CBOR refuses floats and bools. */
export const C_neg: ConformanceClass = {
  id: 'C-neg',
  title: 'negative cases',
  run(t) {
    const k = kit('C-neg');
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
    t.eq(state.ledger.size, 0, 'no refused frame was debited');

    const codeOf = (f: () => unknown) => {
      try {
        f();
        return 'accepted';
      } catch (e) {
        return (e as { code?: string }).code ?? 'untyped';
      }
    };
    const hex = (h: string) => new Uint8Array(Buffer.from(h, 'hex'));
    t.eq(codeOf(() => encode({ budget_uj: 1.5 })), ErrorCodes.CBOR_FORBIDDEN_TYPE, 'encoding a float is refused');
    t.eq(codeOf(() => encode({ ok: true })), ErrorCodes.CBOR_FORBIDDEN_TYPE, 'encoding a bool is refused');
    t.eq(codeOf(() => encode({ parent: null })), ErrorCodes.CBOR_FORBIDDEN_TYPE, 'encoding a null is refused');
    t.eq(codeOf(() => decode(hex('a16161f93c00'))), ErrorCodes.CBOR_FORBIDDEN_TYPE, 'decoding a half float is refused');
    t.eq(codeOf(() => decode(hex('a16161fb3ff0000000000000'))), ErrorCodes.CBOR_FORBIDDEN_TYPE, 'decoding a double is refused');
    t.eq(codeOf(() => decode(hex('a16161f5'))), ErrorCodes.CBOR_FORBIDDEN_TYPE, 'decoding true is refused');
    t.eq(codeOf(() => decode(hex('a16161f4'))), ErrorCodes.CBOR_FORBIDDEN_TYPE, 'decoding false is refused');
    t.eq(codeOf(() => decode(hex('a1616101'))), 'accepted', 'the same map with an integer decodes');
  },
};
