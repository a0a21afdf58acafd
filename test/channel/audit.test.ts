/**
 * The channel audit's membership check (spec §4.5 profile, C17; docs/cluster.md "Auditing a
 * channel"): a stranger's self-signed statement under its own subject verifies, so only the
 * member list keeps it out of the merged ledger.
 */
import { describe, expect, it } from 'vitest';
import { auditChannel, ChannelPoint, channelAuditJson, MemoryBus, MemoryStore, mergeStatements } from '../../channel/index.ts';
import { actorFromSeed, contentId, encode, seededRng, signedStatementToCbor, signStatement } from '../../core/index.ts';

const rng = seededRng('test/channel/audit');
const alice = actorFromSeed(rng(32));
const bob = actorFromSeed(rng(32));
const mallory = actorFromSeed(rng(32));
const grant = contentId({ jcp_test_grant: 'audit-members' });

/** Alice and Bob settle 30 + 20 µJ; Mallory publishes a self-signed 500 µJ statement under her own subject. */
async function forgedChannel(): Promise<MemoryBus> {
  const bus = new MemoryBus(new MemoryStore());
  const a = new ChannelPoint({ grantId: grant, windowUj: 100n, self: alice, bus });
  const b = new ChannelPoint({ grantId: grant, windowUj: 100n, self: bob, bus });
  for (const [p, uj] of [
    [a, 30n],
    [b, 20n],
  ] as const) {
    expect((await p.settle()).ok).toBe(true);
    p.addDurable(uj);
    expect((await p.settleNow()).ok).toBe(true);
  }
  const forged = signStatement({ grant_id: grant, point: mallory.did, spent_uj: 500n, seq: 1 }, mallory);
  await bus.publishStatement(grant, mallory.did, encode(signedStatementToCbor(forged)), 'mallory.1');
  return bus;
}

describe('channel audit: only the channel members count', () => {
  it("a stranger's self-signed statement is refused unknown-point and the audit shows why", async () => {
    const bus = await forgedChannel();
    const a = await auditChannel(bus, grant, { budgetUj: 100n, members: [alice.did, bob.did] });
    expect(a.lines.map((l) => l.point).sort()).toEqual([alice.did, bob.did].sort());
    expect([a.totalUj, a.overdraftUj, a.proofVerifies, a.membersSource]).toEqual([50n, 0n, true, 'given']);
    expect(a.refused).toHaveLength(1);
    expect(a.refused[0]!.code).toBe('unknown-point');
    expect(a.refused[0]!.why).toContain(mallory.did);
    const j = channelAuditJson(a);
    expect(j.refused[0]!.code).toBe('unknown-point');
    expect(j.members).toEqual([alice.did, bob.did].sort());
    expect(j.members_source).toBe('given');
  });

  it('mergeStatements with members merges only the members', async () => {
    const bus = await forgedChannel();
    const stored = await bus.readLatest(grant);
    const { ledger, refused } = mergeStatements(grant, stored, [alice.did, bob.did]);
    expect(ledger.settledSpent()).toBe(50n);
    expect(refused.map((r) => r.code)).toEqual(['unknown-point']);
  });

  it('without a member list the audit says the members are unknown (and counts every verifying point)', async () => {
    const bus = await forgedChannel();
    const a = await auditChannel(bus, grant, 100n);
    expect([a.membersSource, a.members, a.totalUj]).toEqual(['unknown', undefined, 550n]);
    expect(channelAuditJson(a).members).toBeNull();
  });
});
