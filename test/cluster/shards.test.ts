/**
 * Shards (spec §4.5 baseline, C11): minting a set, its manifest, and rebalancing by revocation +
 * re-issuance over the revocation stream, with points publishing close records (in-memory bus).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Actor, actorFromSeed, contentId, grantId, Ledger, ok, seededRng, type SignedGrant, signGrant } from '../../core/index.ts';
import { MemoryBus, MemoryStore, RevocationStreamFeed } from '../../channel/index.ts';
import {
  manifestFromJson,
  manifestToJson,
  mintShardSet,
  parseSplit,
  rebalance,
  ShardCloser,
  type ShardManifest,
} from '../../shards/index.ts';

const actor = (name: string): Actor => actorFromSeed(seededRng(`shards/${name}`)(32));
const issuer = actor('issuer');
const holder = actor('holder');
const nodes = [actor('node-a'), actor('node-b'), actor('node-c')];
const rng = seededRng('shards/nonces');

function parentChain(budget: bigint): SignedGrant[] {
  return [
    signGrant(
      {
        issuer: issuer.did,
        subject: holder.did,
        capability: { resource: contentId({ jcp_resource: 'tools' }), actions: ['call'] },
        budget_uj: budget,
        expiry: 0,
        nonce: rng(16),
      },
      issuer,
    ),
  ];
}

function firstSet(budget: bigint, split = 'a=40%,b=30%,c=30%'): ShardManifest {
  const chain = parentChain(budget);
  const r = mintShardSet(chain, holder, parseSplit(split), { subject: holder.did, rng });
  if (!r.ok) throw new Error(r.error.why);
  return { parentChain: chain, generation: 1, consumedUj: 0n, shards: r.value, closed: [] };
}

/** Three points following the revocation stream, each publishing close records from its ledger. */
async function pointsOn(store: MemoryStore) {
  return await Promise.all(
    nodes.map(async (node) => {
      const bus = new MemoryBus(store);
      const ledger = new Ledger();
      const closer = new ShardCloser(bus, node, ledger);
      const feed = new RevocationStreamFeed({ bus, onTaken: (sr) => void closer.closed(sr) });
      await feed.start({ submit: async (sr) => ok({ grantId: sr.body.grant_id, admitted: true }) });
      return { node, bus, ledger, closer, feed };
    }),
  );
}

describe('shards - split and mint', () => {
  it('parses a=40%,b=30%,c=30% into named shares', () => {
    expect(parseSplit('a=40%,b=30%,c=30%')).toEqual([
      { name: 'a', percent: 40 },
      { name: 'b', percent: 30 },
      { name: 'c', percent: 30 },
    ]);
  });

  it.each([['a=40%,a=60%'], ['a40%'], [''], ['a=x%']])('refuse / schema / bad split %j', (spec) => {
    expect(() => parseSplit(spec)).toThrow();
  });

  it('mints sibling shards whose budgets are the shares of the parent', () => {
    const m = firstSet(1_000n);
    expect(m.shards.map((s) => s.grant.grant.budget_uj)).toEqual([400n, 300n, 300n]);
    expect(m.shards.every((s) => s.grant.grant.parent === grantId(m.parentChain[0]!.grant))).toBe(true);
  });

  it('refuse / over-sum / shares past 100% are refused at mint (C11)', () => {
    const r = mintShardSet(parentChain(1_000n), holder, parseSplit('a=60%,b=50%'), { subject: holder.did, rng });
    expect(r.ok ? 'minted' : r.error.code).toBe('over-sum');
  });

  it('refuse / not-holder / only the parent subject mints shards', () => {
    const r = mintShardSet(parentChain(1_000n), issuer, parseSplit('a=50%'), { subject: holder.did, rng });
    expect(r.ok ? 'minted' : r.error.code).toBe('not-holder');
  });

  it('a manifest survives its JSON form', () => {
    const m = firstSet(999n);
    const back = manifestFromJson(JSON.parse(JSON.stringify(manifestToJson(m))));
    expect(back.shards.map((s) => grantId(s.grant.grant))).toEqual(m.shards.map((s) => grantId(s.grant.grant)));
    expect(back.consumedUj).toBe(0n);
  });
});

describe('shards - rebalance', () => {
  it('revokes every shard, sums the close records, and re-issues only what is left', async () => {
    const store = new MemoryStore();
    const pts = await pointsOn(store);
    const m = firstSet(1_000n);
    const ids = m.shards.map((s) => grantId(s.grant.grant));
    pts[0]!.ledger.debit([ids[0]!], 350n);
    pts[1]!.ledger.debit([ids[1]!], 100n);
    pts[2]!.ledger.debit([ids[2]!], 300n);
    const r = await rebalance({ manifest: m, holder, transport: pts[0]!.bus, points: nodes.map((n) => n.did), rng, timeoutMs: 2_000 });
    if (!r.ok) throw new Error(r.error.why);
    expect(r.value.manifest.consumedUj).toBe(750n);
    expect(r.value.leftUj).toBe(250n);
    const issued = r.value.manifest.shards.reduce((a, s) => a + s.grant.grant.budget_uj, 0n);
    expect(issued).toBeLessThanOrEqual(250n);
    expect(r.value.manifest.generation).toBe(2);
    expect(store.revocations.length).toBe(3);
  });

  it('refuse / close-timeout / a point that never closes holds the re-issue up', async () => {
    const store = new MemoryStore();
    const pts = await pointsOn(store);
    await pts[2]!.feed.stop();
    const m = firstSet(1_000n);
    const r = await rebalance({
      manifest: m,
      holder,
      transport: pts[0]!.bus,
      points: nodes.map((n) => n.did),
      rng,
      timeoutMs: 300,
      pollMs: 20,
    });
    expect(r.ok ? 'rebalanced' : r.error.code).toBe('close-timeout');
    expect(r.ok ? [] : 'missing' in r.error ? r.error.missing.map((x) => x.point) : []).toEqual([
      nodes[2]!.did,
      nodes[2]!.did,
      nodes[2]!.did,
    ]);
  });

  it('no µJ is created: consumed + live shard budgets never pass the parent across rebalances', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(fc.bigInt({ min: 0n, max: 200n }), { minLength: 3, maxLength: 3 }), { minLength: 1, maxLength: 4 }),
        async (rounds) => {
          const store = new MemoryStore();
          const pts = await pointsOn(store);
          let m = firstSet(1_000n);
          for (const spends of rounds) {
            m.shards.forEach((s, i) => {
              const cap = s.grant.grant.budget_uj;
              const want = spends[i] ?? 0n;
              pts[i]!.ledger.debit([grantId(s.grant.grant)], want < cap ? want : cap);
            });
            const r = await rebalance({
              manifest: m,
              holder,
              transport: pts[0]!.bus,
              points: nodes.map((n) => n.did),
              rng,
              timeoutMs: 2_000,
              pollMs: 5,
            });
            if (!r.ok) throw new Error(r.error.why);
            m = r.value.manifest;
            const live = m.shards.reduce((a, s) => a + s.grant.grant.budget_uj, 0n);
            expect(m.consumedUj + live).toBeLessThanOrEqual(1_000n);
          }
        },
      ),
      { numRuns: 25, seed: 11 },
    );
  });
});
