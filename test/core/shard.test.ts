import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  checkHop,
  contentId,
  type Grant,
  grantId,
  mintShards,
  newActor,
  planSplit,
  seededRng,
  ShardRefusals,
  signGrant,
  verifyGrantSignature,
} from '../../core/index.ts';

const rng = seededRng('test/core/shard');
const issuer = newActor(rng);
const holder = newActor(rng);
const points = [newActor(rng), newActor(rng), newActor(rng)];

function parentGrant(budget: bigint, extra: Partial<Grant> = {}) {
  const g: Grant = {
    issuer: issuer.did,
    subject: holder.did,
    capability: { resource: contentId({ tool: 'search' }), actions: ['query', 'index'] },
    budget_uj: budget,
    expiry: 2_000_000_000,
    nonce: rng(16),
    ...extra,
  };
  return signGrant(g, issuer);
}

const slices = (budgets: bigint[]) => budgets.map((b, i) => ({ subject: points[i % points.length]!.did, budget_uj: b, nonce: rng(16) }));

describe('shard - minting (§4.5, C11)', () => {
  it('allow / slices summing exactly to the parent mint one verified child each', () => {
    const parent = parentGrant(1000n);
    const r = mintShards(parent, holder, slices([500n, 300n, 200n]));
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.value.map((s) => s.grant.budget_uj)).toEqual([500n, 300n, 200n]);
    for (const [i, s] of r.value.entries()) {
      expect(s.grant.subject).toBe(points[i]!.did);
      expect(s.grant.issuer).toBe(holder.did);
      expect(verifyGrantSignature(s)).toBe(true);
      expect(checkHop(parent.grant, grantId(parent.grant), s.grant).ok).toBe(true);
    }
  });

  it('refuse / over-sum / over by 1 µJ, naming requested and available', () => {
    const r = mintShards(parentGrant(1000n), holder, slices([500n, 300n, 201n]));
    expect(r).toMatchObject({ ok: false, error: { code: ShardRefusals.OVER_SUM, requestedUj: 1001n, availableUj: 1000n } });
  });

  it('refuse / over-sum / a second round past what the live shards leave', () => {
    const parent = parentGrant(1000n);
    expect(mintShards(parent, holder, slices([400n]), { allocatedUj: 600n }).ok).toBe(true);
    const r = mintShards(parent, holder, slices([401n]), { allocatedUj: 600n });
    expect(r).toMatchObject({ ok: false, error: { code: ShardRefusals.OVER_SUM, availableUj: 400n } });
  });

  it('refuse / not-holder / the issuer cannot shard a grant it gave away', () => {
    const r = mintShards(parentGrant(1000n), issuer, slices([100n]));
    expect(r).toMatchObject({ ok: false, error: { code: ShardRefusals.NOT_HOLDER } });
  });

  it('refuse / delegation-forbidden / a leaf-only parent', () => {
    const r = mintShards(parentGrant(1000n, { delegate_depth: 0 }), holder, slices([100n]));
    expect(r).toMatchObject({ ok: false, error: { code: ShardRefusals.DELEGATION_FORBIDDEN } });
  });

  it('refuse / attenuation-violation / a slice with an action the parent lacks', () => {
    const s = { ...slices([100n])[0]!, actions: ['delete'] };
    const r = mintShards(parentGrant(1000n), holder, [s]);
    expect(r).toMatchObject({ ok: false, error: { code: ShardRefusals.ATTENUATION_VIOLATION } });
  });

  it('refuse / attenuation-violation / a slice that outlives the parent', () => {
    const s = { ...slices([100n])[0]!, expiry: 2_000_000_001 };
    const r = mintShards(parentGrant(1000n), holder, [s]);
    expect(r).toMatchObject({ ok: false, error: { code: ShardRefusals.ATTENUATION_VIOLATION } });
  });

  it('refuse / bad-slice / a negative slice cannot make room for an over-sized one', () => {
    const r = mintShards(parentGrant(1000n), holder, slices([1500n, -500n]));
    expect(r).toMatchObject({ ok: false, error: { code: ShardRefusals.BAD_SLICE } });
  });

  it('refuse / duplicate-shard / two slices that mint the same grant', () => {
    const s = slices([100n])[0]!;
    const r = mintShards(parentGrant(1000n), holder, [s, s]);
    expect(r).toMatchObject({ ok: false, error: { code: ShardRefusals.DUPLICATE_SHARD } });
  });
});

describe('shard - split planning (§4.5)', () => {
  it('allow / the rounding dust goes to the last slice', () => {
    expect(planSplit(1001n, [50, 50])).toEqual({ ok: true, value: [500n, 501n] });
    expect(planSplit(100n, [33.33, 33.33, 33.34])).toEqual({ ok: true, value: [33n, 33n, 34n] });
  });

  it('allow / the rounding dust can stay unallocated', () => {
    expect(planSplit(1001n, [50, 50], 'unallocated')).toEqual({ ok: true, value: [500n, 500n] });
  });

  it('allow / a split under 100% leaves the rest of the parent unallocated', () => {
    expect(planSplit(1000n, [10, 20])).toEqual({ ok: true, value: [100n, 200n] });
  });

  it('refuse / over-sum / percentages past 100 by 0.01', () => {
    expect(planSplit(1000n, [50, 50.01])).toMatchObject({ ok: false, error: { code: ShardRefusals.OVER_SUM } });
  });

  it.each([[Number.NaN], [-1], [0.001], [Number.POSITIVE_INFINITY]])('refuse / bad-slice / percentage %s', (p) => {
    expect(planSplit(1000n, [p])).toMatchObject({ ok: false, error: { code: ShardRefusals.BAD_SLICE } });
  });

  it('property / random splits never sum past the parent, and mint', () => {
    const arb = fc.record({
      budget: fc.bigInt({ min: 0n, max: 2n ** 62n }),
      bps: fc.array(fc.integer({ min: 0, max: 10_000 }), { minLength: 1, maxLength: 6 }),
      last: fc.boolean(),
    });
    fc.assert(
      fc.property(arb, ({ budget, bps, last }) => {
        let left = 10_000;
        const fitted = bps.map((b) => {
          const take = Math.min(b, left);
          left -= take;
          return take;
        });
        const r = planSplit(
          budget,
          fitted.map((b) => b / 100),
          last ? 'last' : 'unallocated',
        );
        expect(r.ok).toBe(true);
        if (!r.ok) return;
        const sum = r.value.reduce((a, b) => a + b, 0n);
        const target = (budget * BigInt(fitted.reduce((a, b) => a + b, 0))) / 10_000n;
        expect(sum <= budget).toBe(true);
        expect(r.value.every((v) => v >= 0n)).toBe(true);
        if (last) expect(sum).toBe(target);
        else expect(target - sum < BigInt(fitted.length)).toBe(true);
        expect(mintShards(parentGrant(budget), holder, slices(r.value)).ok).toBe(true);
      }),
      { numRuns: 150 },
    );
  });

  it('property / any slice set over the parent is refused at mint', () => {
    const arb = fc.record({
      budget: fc.bigInt({ min: 0n, max: 10_000n }),
      parts: fc.array(fc.bigInt({ min: 0n, max: 5_000n }), { minLength: 1, maxLength: 5 }),
    });
    fc.assert(
      fc.property(arb, ({ budget, parts }) => {
        const sum = parts.reduce((a, b) => a + b, 0n);
        const r = mintShards(parentGrant(budget), holder, slices(parts));
        expect(r.ok).toBe(sum <= budget);
        if (!r.ok) expect(r.error.code).toBe(ShardRefusals.OVER_SUM);
      }),
      { numRuns: 150 },
    );
  });
});
