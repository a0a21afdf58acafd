/**
 * Revocation staleness (docs/regions.md "Revocation staleness"; issue: a leaked grant must not
 * live on in a partitioned region): the revocation feed (channel/feed.ts) confirms it has taken
 * every message up to the stream leader's head, and says stale once the last confirmation is
 * older than the limit; a clustered node (node/cluster.ts) then refuses every call `revoked`
 * (why `revocation-stale`) before anything is debited.
 */
import { describe, expect, it } from 'vitest';
import { ok } from '../../core/index.ts';
import { type RevocationBus, RevocationStreamFeed, silentLogger } from '../../channel/index.ts';
import { ClusterHooks, readClusterConfig } from '../../node/index.ts';

/** A revocation stream whose leader can be cut off and whose deliveries the test releases. */
function stubStream() {
  const s = {
    stored: 0,
    reachable: true,
    deliver: undefined as ((b: Uint8Array, seq?: number) => void) | undefined,
    bus: undefined as unknown as RevocationBus,
  };
  s.bus = {
    publishRevocation: async () => {},
    followRevocations: async (cb) => {
      s.deliver = cb;
      return { caughtUp: Promise.resolve(), stop: async () => {} };
    },
    revocationHead: async () => {
      if (!s.reachable) throw new Error('cut off from the leader');
      return s.stored;
    },
  };
  return s;
}

const sink = { submit: async () => ok({ grantId: 'x'.repeat(64), admitted: true }) };
const settle = () => new Promise((r) => setTimeout(r, 0));

describe('revocation staleness', () => {
  it('goes stale when the leader cannot be reached past the limit, and comes back only once the head is taken', async () => {
    let t = 0;
    const s = stubStream();
    const feed = new RevocationStreamFeed({ bus: s.bus, stalenessMs: 1_000, probeMs: 3_600_000, now: () => t, catchUpMs: 10 });
    await feed.start(sink);
    await feed.probe();
    expect(feed.staleness()).toMatchObject({ stale: false, confirmed: true, limitS: 1, seenSeq: 0, headSeq: 0 });
    // cut off: probes fail
    s.reachable = false;
    t = 900;
    await feed.probe();
    expect(feed.staleness().stale).toBe(false);
    t = 1_001;
    await feed.probe();
    expect(feed.staleness()).toMatchObject({ stale: true, ageS: 1.001 });
    // the link is back, the leader has a revocation the node has not taken yet: still stale
    s.reachable = true;
    s.stored = 1;
    t = 2_000;
    await feed.probe();
    expect(feed.staleness()).toMatchObject({ stale: true, headSeq: 1, seenSeq: 0 });
    // taken (a malformed message counts as taken: nothing to apply): confirmed as of when it asked
    s.deliver!(new Uint8Array([0xa0]), 1);
    await settle();
    t = 2_500;
    expect(feed.staleness()).toMatchObject({ stale: false, seenSeq: 1, ageS: 0.5 });
    await feed.stop();
  });

  it('a node that never reaches the stream goes stale the limit after it started; 0 turns it off', async () => {
    let t = 0;
    const s = stubStream();
    s.reachable = false;
    const feed = new RevocationStreamFeed({ bus: s.bus, stalenessMs: 1_000, probeMs: 3_600_000, now: () => t, catchUpMs: 10 });
    await feed.start(sink);
    t = 1_000;
    expect(feed.staleness()).toMatchObject({ stale: false, confirmed: false });
    t = 1_001;
    expect(feed.staleness().stale).toBe(true);
    await feed.stop();
    const off = new RevocationStreamFeed({ bus: s.bus, now: () => t });
    t = 1e9;
    expect(off.staleness()).toMatchObject({ stale: false, limitS: 0 });
  });

  it('a clustered node cut off from its revocation stream refuses `revoked` (why revocation-stale) and its health says why', async () => {
    const config = readClusterConfig({ revocation_staleness_s: 1 });
    expect(readClusterConfig({}).revocationStalenessS).toBe(10);
    expect(() => readClusterConfig({ revocation_staleness_s: -1 })).toThrow(/revocation_staleness_s/);
    // nobody listens on port 1: the stream can never be reached
    const hooks = new ClusterHooks('nats://127.0.0.1:1', config, silentLogger);
    try {
      const policy = hooks.budgetPolicy;
      const feed = hooks.revocationFeed;
      expect(feed.freshness().stale).toBe(false);
      await new Promise((r) => setTimeout(r, 1_100));
      const deny = policy.admit({} as never, {} as never);
      expect(deny?.reason).toBe('revoked');
      expect(deny?.why).toMatch(/^revocation-stale: /);
      expect(feed.freshness()).toMatchObject({ stale: true, limitS: 1, refusals: 1 });
    } finally {
      await hooks.close();
    }
  });
});
