import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  channelAllows,
  ChannelLedger,
  ChannelRefusals,
  contentId,
  decode,
  type Did,
  encode,
  newActor,
  overdraftBound,
  type OverdraftProof,
  overdraftProofToCbor,
  ProofRefusals,
  readOverdraftProof,
  readSignedStatement,
  seededRng,
  signBody,
  type SignedStatement,
  signedStatementToCbor,
  signStatement,
  spendBound,
  StatementRefusals,
  verifyOverdraftProof,
  verifyStatement,
} from '../../core/internal.ts';

const rng = seededRng('test/core/statement');
const pts = [newActor(rng), newActor(rng), newActor(rng)];
const [a, b, c] = pts as [(typeof pts)[0], (typeof pts)[0], (typeof pts)[0]];
const outsider = newActor(rng);
const GRANT = contentId({ grant: 'channel' });
const OTHER = contentId({ grant: 'other' });

const st = (p: typeof a, spent: bigint, seq: number, grant = GRANT) =>
  signStatement({ grant_id: grant, point: p.did, spent_uj: spent, seq }, p);

function snapshot(l: ChannelLedger) {
  return { settled: l.settledSpent(), latest: l.statements().map((s) => [s.body.point, s.body.seq, s.body.spent_uj]) };
}

describe('statement - signing and reading (§4.5 profile)', () => {
  it('a signed statement verifies under its point and survives a CBOR round trip', () => {
    const s = st(a, 2n ** 60n, 7);
    expect(verifyStatement(s)).toBe(true);
    const back = readSignedStatement(decode(encode(signedStatementToCbor(s))));
    expect(back.body).toEqual(s.body);
    expect(Buffer.from(back.signature).equals(Buffer.from(s.signature))).toBe(true);
    expect(verifyStatement(back)).toBe(true);
  });

  it('refuse / signing as another point throws schema', () => {
    expect(() => signStatement({ grant_id: GRANT, point: a.did, spent_uj: 1n, seq: 1 }, b)).toThrow(/not the statement point/);
  });
});

describe('statement - the merged ledger (§4.5 profile, C17)', () => {
  it('allow / settled spend is the sum of every point latest statement', () => {
    const l = new ChannelLedger(GRANT);
    for (const s of [st(a, 10n, 1), st(b, 5n, 1), st(a, 30n, 2), st(c, 7n, 4)]) expect(l.admit(s).ok).toBe(true);
    expect(l.settledSpent()).toBe(42n);
    expect(l.latest(a.did)?.body.spent_uj).toBe(30n);
    expect(l.peersSettled(a.did)).toBe(12n);
  });

  it('allow / equal spend under a higher seq (a heartbeat)', () => {
    const l = new ChannelLedger(GRANT);
    expect(l.admit(st(a, 10n, 1)).ok).toBe(true);
    expect(l.admit(st(a, 10n, 2)).ok).toBe(true);
  });

  const refusals: [string, () => SignedStatement, string][] = [
    ['wrong-grant / a statement for another grant', () => st(a, 50n, 9, OTHER), StatementRefusals.WRONG_GRANT],
    ['unknown-point / a validly signed outsider', () => st(outsider, 1n, 1), StatementRefusals.UNKNOWN_POINT],
    [
      'forged / spend tampered after signing',
      () => {
        const s = st(a, 50n, 9);
        return { body: { ...s.body, spent_uj: 5n }, signature: s.signature };
      },
      StatementRefusals.FORGED,
    ],
    [
      'forged / signed by another key in the point name',
      () => signBody({ grant_id: GRANT, point: a.did, spent_uj: 50n, seq: 9 }, b),
      StatementRefusals.FORGED,
    ],
    ['duplicate / the latest statement redelivered', () => st(a, 20n, 2), StatementRefusals.DUPLICATE],
    ['stale / an older seq', () => st(a, 25n, 1), StatementRefusals.STALE],
    ['stale / same seq, other spend (equivocation)', () => st(a, 25n, 2), StatementRefusals.STALE],
    ['regressing / spend down by 1 µJ under a newer seq', () => st(a, 19n, 3), StatementRefusals.REGRESSING],
  ];

  it.each(refusals)('refuse / %s, state unchanged', (_name, make, code) => {
    const l = new ChannelLedger(GRANT, { points: [a.did, b.did, c.did] });
    l.admit(st(a, 10n, 1));
    l.admit(st(a, 20n, 2));
    l.admit(st(b, 3n, 1));
    const before = snapshot(l);
    const r = l.admit(make());
    expect(r).toMatchObject({ ok: false, error: { code } });
    expect(snapshot(l)).toEqual(before);
  });

  it('property / the admitted stream is monotone per point and refusals change nothing', () => {
    const op = fc.record({
      p: fc.integer({ min: 0, max: 2 }),
      seq: fc.integer({ min: 0, max: 12 }),
      spent: fc.bigInt({ min: 0n, max: 60n }),
      forge: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(op, { maxLength: 25 }), (ops) => {
        const l = new ChannelLedger(GRANT);
        const admitted = new Map<Did, [number, bigint][]>();
        for (const o of ops) {
          const p = pts[o.p]!;
          let s = st(p, o.spent, o.seq);
          if (o.forge) s = { body: { ...s.body, seq: s.body.seq + 1 }, signature: s.signature };
          const before = snapshot(l);
          const prev = l.latest(p.did)?.body;
          const r = l.admit(s);
          if (r.ok) {
            expect(o.forge).toBe(false);
            if (prev) {
              expect(s.body.seq > prev.seq).toBe(true);
              expect(s.body.spent_uj >= prev.spent_uj).toBe(true);
            }
            admitted.set(p.did, [...(admitted.get(p.did) ?? []), [s.body.seq, s.body.spent_uj]]);
          } else {
            expect(snapshot(l)).toEqual(before);
          }
        }
        let total = 0n;
        for (const seqs of admitted.values()) {
          for (let i = 1; i < seqs.length; i++) {
            expect(seqs[i]![0] > seqs[i - 1]![0]).toBe(true);
            expect(seqs[i]![1] >= seqs[i - 1]![1]).toBe(true);
          }
          total += seqs.at(-1)![1];
        }
        expect(l.settledSpent()).toBe(total);
      }),
      { numRuns: 60 },
    );
  });
});

describe('statement - overdraft proof (§4.5 profile, C17)', () => {
  function overdrawn() {
    const l = new ChannelLedger(GRANT);
    l.admit(st(a, 60n, 3));
    l.admit(st(b, 50n, 2));
    l.admit(st(c, 5n, 1));
    return l;
  }

  it('allow / an overdraft of 15 µJ is proven from the signed statements', () => {
    const proof = overdrawn().overdraftProof(100n);
    expect(proof).toMatchObject({ grant_id: GRANT, total: 115n, budget: 100n, overdraft: 15n });
    expect(verifyOverdraftProof(proof, { id: GRANT, budget_uj: 100n })).toEqual({ ok: true, value: 15n });
  });

  it('allow / within budget the proof shows no overdraft', () => {
    expect(verifyOverdraftProof(overdrawn().overdraftProof(115n))).toEqual({ ok: true, value: 0n });
  });

  it('allow / the proof survives a CBOR round trip', () => {
    const proof = overdrawn().overdraftProof(100n);
    const back = readOverdraftProof(decode(encode(overdraftProofToCbor(proof))));
    expect(encode(overdraftProofToCbor(back))).toEqual(encode(overdraftProofToCbor(proof)));
    expect(verifyOverdraftProof(back)).toEqual({ ok: true, value: 15n });
  });

  const tampered: [string, (p: OverdraftProof) => OverdraftProof, string][] = [
    ['wrong-total / an inflated overdraft', (p) => ({ ...p, total: p.total + 1n, overdraft: p.overdraft + 1n }), ProofRefusals.WRONG_TOTAL],
    ['wrong-total / a dropped statement', (p) => ({ ...p, statements: p.statements.slice(1) }), ProofRefusals.WRONG_TOTAL],
    [
      'forged / a statement whose spend was raised',
      (p) => {
        const [first, ...rest] = p.statements;
        const bumped = { body: { ...first!.body, spent_uj: first!.body.spent_uj + 10n }, signature: first!.signature };
        return { ...p, total: p.total + 10n, overdraft: p.overdraft + 10n, statements: [bumped, ...rest] };
      },
      ProofRefusals.FORGED,
    ],
    [
      'duplicate-point / one point counted twice',
      (p) => ({ ...p, total: p.total + 60n, overdraft: p.overdraft + 60n, statements: [...p.statements, p.statements[0]!] }),
      ProofRefusals.DUPLICATE_POINT,
    ],
    [
      'wrong-grant / a statement from another channel',
      (p) => ({ ...p, statements: [...p.statements.slice(0, 2), st(c, 5n, 1, OTHER)] }),
      ProofRefusals.WRONG_GRANT,
    ],
  ];

  it.each(tampered)('refuse / %s', (_name, tamper, code) => {
    expect(verifyOverdraftProof(tamper(overdrawn().overdraftProof(100n)))).toMatchObject({ ok: false, error: { code } });
  });

  it('refuse / wrong-budget / a proof against a budget that is not the grant', () => {
    const r = verifyOverdraftProof(overdrawn().overdraftProof(90n), { id: GRANT, budget_uj: 100n });
    expect(r).toMatchObject({ ok: false, error: { code: ProofRefusals.WRONG_BUDGET } });
  });
});

describe('statement - the channel spending rule and its bound', () => {
  const base = { mySpent: 40n, mySpentAtLastSettle: 30n, peersSettled: 50n, budget: 100n, windowUj: 20n };

  it('allow / exactly at the budget and exactly at the window', () => {
    expect(channelAllows({ ...base, cost: 10n }).ok).toBe(true);
    expect(channelAllows({ ...base, peersSettled: 0n, cost: 10n }).ok).toBe(true);
    expect(channelAllows({ ...base, windowUj: 100n, cost: 10n }).ok).toBe(true);
  });

  it('deny / budget-exceeded / over by 1 µJ', () => {
    expect(channelAllows({ ...base, cost: 11n })).toMatchObject({
      ok: false,
      error: { code: ChannelRefusals.BUDGET_EXCEEDED, requestedUj: 11n, remainingUj: 10n },
    });
  });

  it('deny / window-exhausted / unsettled spend over the window by 1 µJ', () => {
    expect(channelAllows({ ...base, peersSettled: 0n, cost: 11n })).toMatchObject({
      ok: false,
      error: { code: ChannelRefusals.WINDOW_EXHAUSTED, remainingUj: 10n },
    });
  });

  it('the bound leaves out the smallest window', () => {
    expect(overdraftBound([])).toBe(0n);
    expect(overdraftBound([7n])).toBe(0n);
    expect(overdraftBound([3n, 5n])).toBe(5n);
    expect(overdraftBound([5n, 1n, 5n])).toBe(10n);
    expect(spendBound(100n, [10n, 20n, 30n])).toBe(150n);
  });

  type Op = { p: number; settle: boolean; cost: bigint };

  /** Runs a schedule under the rule with leader reads; returns the total allowed (µJ). */
  function simulate(budget: bigint, windows: bigint[], ops: Op[]): bigint {
    const n = windows.length;
    const spent = new Array<bigint>(n).fill(0n);
    const atSettle = new Array<bigint>(n).fill(0n);
    const published = new Array<bigint>(n).fill(0n);
    const view = new Array<bigint>(n).fill(0n);
    for (const o of ops) {
      const i = o.p % n;
      if (o.settle) {
        published[i] = spent[i]!;
        atSettle[i] = spent[i]!;
        view[i] = published.reduce((x, y, j) => (j === i ? x : x + y), 0n);
        continue;
      }
      const r = channelAllows({
        mySpent: spent[i]!,
        mySpentAtLastSettle: atSettle[i]!,
        peersSettled: view[i]!,
        budget,
        windowUj: windows[i]!,
        cost: o.cost,
      });
      if (r.ok) spent[i]! += o.cost;
    }
    return spent.reduce((x, y) => x + y, 0n);
  }

  it('property / no schedule of spends and settlements passes budget + Σ W − min W', () => {
    const arb = fc.record({
      budget: fc.bigInt({ min: 0n, max: 60n }),
      windows: fc.array(fc.bigInt({ min: 0n, max: 30n }), { minLength: 1, maxLength: 6 }),
      ops: fc.array(fc.record({ p: fc.nat(5), settle: fc.nat(4).map((x) => x === 0), cost: fc.bigInt({ min: 0n, max: 8n }) }), {
        maxLength: 200,
      }),
    });
    fc.assert(
      fc.property(arb, ({ budget, windows, ops }) => {
        expect(simulate(budget, windows, ops) <= spendBound(budget, windows)).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  it('the bound is reached: the smallest-window point settles last while the others spend unseen', () => {
    const windows = [1n, 5n, 5n];
    const ops: Op[] = [
      { p: 1, settle: false, cost: 5n },
      { p: 2, settle: false, cost: 5n },
      ...Array.from({ length: 10 }, (): Op[] => [
        { p: 0, settle: false, cost: 1n },
        { p: 0, settle: true, cost: 0n },
      ]).flat(),
    ];
    expect(simulate(10n, windows, ops)).toBe(spendBound(10n, windows));
  });
});
