/**
 * `shards.json`: sharded budgets (spec §4.5 baseline; C11). Shard mints — every shard byte for
 * byte, or the refusal code when the slices sum past the parent (or break another attenuation
 * rule) — and integer split plans from percentages.
 */
import { grantId, mintShards, planSplit, type Remainder, type ShardSlice, type SignedGrant, verifyChain } from '../core/index.ts';
import type { Checker } from '../conformance/index.ts';
import { type ActorName, actor, did, fileHeader, nonce, rootGrant, sgFromHex, sgHex, VectorCheck } from './fixtures.ts';
import { compact, dec, hex, type J, type JsonObj } from './json.ts';

interface SliceSpec {
  readonly subject: ActorName;
  readonly budget_uj: bigint;
  readonly actions?: string[];
  /** Reuse the nonce of another slice (for duplicate shards). */
  readonly nonceOf?: number;
}

function mintVector(
  name: string,
  description: string,
  parent: SignedGrant,
  holder: ActorName,
  specs: readonly SliceSpec[],
  allocatedUj = 0n,
): JsonObj {
  const slices: ShardSlice[] = specs.map((s, i) => ({
    subject: did(s.subject),
    budget_uj: s.budget_uj,
    nonce: nonce(`shards/${name}/${s.nonceOf ?? i}`),
    ...(s.actions !== undefined ? { actions: s.actions } : {}),
  }));
  const r = mintShards(parent, actor(holder), slices, { allocatedUj });
  return {
    name,
    description,
    parent: sgHex(parent),
    holder,
    allocated_uj: dec(allocatedUj),
    slices: slices.map((s) =>
      compact({ subject: s.subject, budget_uj: dec(s.budget_uj), actions: s.actions ? [...s.actions] : undefined, nonce: hex(s.nonce) }),
    ),
    expected: r.ok
      ? { ok: true, shards: r.value.map((sg) => ({ signed_grant_cbor: sgHex(sg), id: grantId(sg.grant) })) }
      : { ok: false, code: r.error.code },
  };
}

function splitVector(name: string, budgetUj: bigint, percents: number[], remainder: Remainder): JsonObj {
  const r = planSplit(budgetUj, percents, remainder);
  return {
    name,
    budget_uj: dec(budgetUj),
    percents,
    remainder,
    expected: r.ok ? { ok: true, slices_uj: r.value.map(dec) } : { ok: false, code: r.error.code },
  };
}

/** Builds `shards.json`. */
export function generate(): JsonObj {
  const parent = rootGrant('shards/parent', { budget_uj: 9_000n });
  const leafOnly = rootGrant('shards/leaf-only', { budget_uj: 9_000n, delegate_depth: 0 });
  const three: SliceSpec[] = [
    { subject: 'point-a', budget_uj: 3_000n },
    { subject: 'point-b', budget_uj: 3_000n },
    { subject: 'point-c', budget_uj: 3_000n },
  ];
  return {
    ...fileHeader('shards.json', 'Shard mints and split plans', '§4.5; C11'),
    mints: [
      mintVector('exact-sum', 'three slices of 3,000 µJ sum to the parent’s 9,000', parent, 'bob', three),
      mintVector('under-sum', 'slices summing to 8,999 µJ', parent, 'bob', [
        { subject: 'point-a', budget_uj: 4_000n },
        { subject: 'point-b', budget_uj: 4_999n, actions: ['read'] },
      ]),
      mintVector('over-sum-by-1', 'slices summing to 9,001 µJ: nothing is minted', parent, 'bob', [
        ...three,
        { subject: 'point-a', budget_uj: 1n },
      ]),
      mintVector(
        'over-sum-with-allocated',
        '1,000 µJ still allocated to live shards; 8,001 more is too much',
        parent,
        'bob',
        [{ subject: 'point-a', budget_uj: 8_001n }],
        1_000n,
      ),
      mintVector(
        'fits-with-allocated',
        '1,000 µJ allocated; 8,000 more fits exactly',
        parent,
        'bob',
        [{ subject: 'point-a', budget_uj: 8_000n }],
        1_000n,
      ),
      mintVector('not-holder', 'mallory shards bob’s grant', parent, 'mallory', three),
      mintVector('leaf-only-parent', 'a delegate_depth 0 parent cannot be sharded', leafOnly, 'bob', three),
      mintVector('extra-action', 'one slice asks for delete', parent, 'bob', [{ subject: 'point-a', budget_uj: 10n, actions: ['delete'] }]),
      mintVector('duplicate-shard', 'two slices that mint the same grant', parent, 'bob', [
        { subject: 'point-a', budget_uj: 100n },
        { subject: 'point-a', budget_uj: 100n, nonceOf: 0 },
      ]),
    ],
    splits: [
      splitVector('thirds-remainder-last', 1_000n, [33.33, 33.33, 33.34], 'last'),
      splitVector('halves-of-odd-dust-to-last', 101n, [50, 50], 'last'),
      splitVector('halves-of-odd-dust-unallocated', 101n, [50, 50], 'unallocated'),
      splitVector('partial-split', 1_000n, [25, 25.5], 'last'),
      splitVector('over-100', 1_000n, [60, 40.01], 'last'),
      splitVector('bad-percentage', 1_000n, [12.345], 'last'),
      splitVector('u64-budget', (1n << 64n) - 1n, [50, 50], 'last'),
    ],
  };
}

/** Re-checks `shards.json` against our implementation. */
export function verify(doc: J, t: Checker): void {
  const c = new VectorCheck(t, 'shards.json', doc);
  c.each(doc, 'mints', (v) => {
    const parent = sgFromHex(v.get('parent'));
    const slices: ShardSlice[] = v
      .get('slices')
      .items()
      .map((s) => ({
        subject: s.get('subject').str(),
        budget_uj: s.get('budget_uj').uint(),
        nonce: s.get('nonce').bytes(16),
        ...(s.has('actions') ? { actions: s.get('actions').strs() } : {}),
      }));
    const r = mintShards(parent, c.actor(v.get('holder')), slices, { allocatedUj: v.get('allocated_uj').uint() });
    const e = v.get('expected');
    c.eq(r.ok ? 'ok' : r.error.code, e.get('ok').bool() ? 'ok' : e.get('code').str(), 'minted or refused');
    if (r.ok && e.get('ok').bool()) {
      const want = e.get('shards').items();
      c.eq(
        r.value.map(sgHex),
        want.map((w) => w.get('signed_grant_cbor').str()),
        'every shard, byte for byte',
      );
      c.eq(
        r.value.map((sg) => grantId(sg.grant)),
        want.map((w) => w.get('id').str()),
        'shard ids',
      );
      let sum = 0n;
      for (const w of want) {
        const shard = sgFromHex(w.get('signed_grant_cbor'));
        sum += shard.grant.budget_uj;
        c.ok(verifyChain([parent, shard]).ok, `shard ${w.get('id').str().slice(0, 12)}… chain-verifies under the parent`);
      }
      c.ok(sum + v.get('allocated_uj').uint() <= parent.grant.budget_uj, 'the slices never sum past the parent');
    }
  });
  c.each(doc, 'splits', (v) => {
    const remainder = v.get('remainder').str();
    if (remainder !== 'last' && remainder !== 'unallocated') throw new Error(`${v.path}.remainder: last or unallocated`);
    const r = planSplit(
      v.get('budget_uj').uint(),
      v
        .get('percents')
        .items()
        .map((p) => p.float()),
      remainder,
    );
    const e = v.get('expected');
    c.eq(
      r.ok ? r.value : r.error.code,
      e.get('ok').bool()
        ? e
            .get('slices_uj')
            .items()
            .map((x) => x.uint())
        : e.get('code').str(),
      'slices or refusal',
    );
  });
}
