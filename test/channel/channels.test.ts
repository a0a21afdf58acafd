/**
 * The node's budget policy (channel/channels.ts) on real decisions (core `decide`), and the
 * revocation stream feed (channel/feed.ts), over the in-memory bus.
 */
import { describe, expect, it } from 'vitest';
import {
  type Actor,
  actorFromSeed,
  attenuate,
  contentId,
  decide,
  type Decision,
  type DecisionRequest,
  encode,
  err,
  grantId,
  Ledger,
  ok,
  RevocationSet,
  seededRng,
  type SignedGrant,
  signedRevocationToCbor,
  signGrant,
  signRevocation,
  TrustRoots,
} from '../../core/index.ts';
import { Channels, MemoryBus, MemoryStore, RevocationStreamFeed } from '../../channel/index.ts';

const rng = seededRng('channels/policy');
const actor = (): Actor => actorFromSeed(rng(32));
const issuer = actor();
const agent = actor();
const worker = actor();
const [pointA, pointB] = [actor(), actor()];
const resource = contentId({ jcp_resource: 'channels' });
const root: SignedGrant = signGrant(
  { issuer: issuer.did, subject: agent.did, capability: { resource, actions: ['call'] }, budget_uj: 1_000n, expiry: 0, nonce: rng(16) },
  issuer,
);
const rootId = grantId(root.grant);
const childR = attenuate(root, { subject: worker.did, budget_uj: 600n, nonce: rng(16) }, agent);
if (!childR.ok) throw new Error(childR.error.why);
const child = childR.value;

const ledger = new Ledger();
const state = { ledger, revoked: new RevocationSet(), trust: new TrustRoots() };

function request(chain: SignedGrant[], caller: Actor, costUj: bigint): DecisionRequest {
  const leaf = chain[chain.length - 1]!;
  return {
    frame: {
      kind: 'tool-call',
      trust: 'control',
      grant_id: grantId(leaf.grant),
      action: 'call',
      resource,
      payload_hash: contentId(new Uint8Array(0)),
    },
    chain,
    caller: caller.did,
    cost: { uj: costUj, provenance: 'Estimator' },
    nowS: 1_000,
  };
}

function allowOf(req: DecisionRequest): Extract<Decision, { verdict: 'allow' }> {
  const d = decide(req, state);
  if (d.verdict !== 'allow') throw new Error(`expected allow, got ${d.deny.reason}`);
  return d;
}

describe('channels - the budget policy', () => {
  it('refuse / budget-exceeded / a channel grant before its point settled (restart rule)', () => {
    const ch = new Channels({ self: pointA, bus: new MemoryBus(), specs: [{ grantId: rootId, windowUj: 500n }] });
    const req = request([root], agent, 10n);
    const deny = ch.admit(req, allowOf(req));
    expect([deny?.reason, deny?.link]).toEqual(['budget-exceeded', 0]);
    expect(deny?.why).toContain('not-settled');
  });

  it('refuse / budget-exceeded / every chain through a channel grant before attach', () => {
    const ch = new Channels({ bus: new MemoryBus(), specs: [{ grantId: rootId, windowUj: 500n }] });
    const req = request([root, child], worker, 10n);
    expect(ch.admit(req, allowOf(req))?.reason).toBe('budget-exceeded');
  });

  it('lets a grant that is no channel through untouched', () => {
    const other = signGrant({ ...root.grant, nonce: rng(16) }, issuer);
    const ch = new Channels({ self: pointA, bus: new MemoryBus(), specs: [{ grantId: rootId, windowUj: 500n }] });
    const req = request([other], agent, 10n);
    expect(ch.admit(req, allowOf(req))).toBeUndefined();
  });

  it('reserves on the channel link of a delegated chain, and commits once durable', async () => {
    const store = new MemoryStore();
    const ch = new Channels({ self: pointA, bus: new MemoryBus(store), specs: [{ grantId: rootId, windowUj: 500n }] });
    await ch.settleAll();
    const req = request([root, child], worker, 120n);
    const d = allowOf(req);
    expect(ch.admit(req, d)).toBeUndefined();
    const p = ch.point(rootId)!;
    expect([p.spentUj, p.durableUj]).toEqual([120n, 0n]);
    ch.committed(req, d);
    expect(p.durableUj).toBe(120n);
    await new Promise((r) => setImmediate(r));
    expect(store.grants.has(rootId)).toBe(true);
  });

  it("refuse / budget-exceeded / a peer's settled spend leaves no room, naming the channel link", async () => {
    const store = new MemoryStore();
    const a = new Channels({ self: pointA, bus: new MemoryBus(store), specs: [{ grantId: rootId, windowUj: 1_000n }] });
    const b = new Channels({ self: pointB, bus: new MemoryBus(store), specs: [{ grantId: rootId, windowUj: 1_000n }] });
    await a.settleAll();
    const big = request([root], agent, 900n);
    const d = allowOf(big);
    expect(a.admit(big, d)).toBeUndefined();
    a.committed(big, d);
    await a.point(rootId)!.settleNow();
    await b.settleAll();
    const req = request([root, child], worker, 101n);
    const deny = b.admit(req, allowOf(req));
    expect([deny?.reason, deny?.link, deny?.remainingUj]).toEqual(['budget-exceeded', 0, 100n]);
  });

  it('stats show each point in decimal µJ', async () => {
    const ch = new Channels({ self: pointA, bus: new MemoryBus(), specs: [{ grantId: rootId, windowUj: 500n }] });
    await ch.settleAll();
    const s = ch.stats()[0]!;
    expect([s.grant_id, s.window_uj, s.settled, s.settlements]).toEqual([rootId, '500', true, 1]);
  });
});

describe('revocation feed - the stream into a node', () => {
  it('submits every stored revocation in order, counts malformed ones, and reports what the sink took', async () => {
    const store = new MemoryStore();
    const bus = new MemoryBus(store);
    const revs = [0, 1, 2].map((i) => signRevocation(contentId({ revoked: i }), issuer, rng(16)));
    await bus.publishRevocation(revs[0]!.body.grant_id, encode(signedRevocationToCbor(revs[0]!)), 'r0');
    store.appendRevocation(new Uint8Array([0xa0]));
    await bus.publishRevocation(revs[1]!.body.grant_id, encode(signedRevocationToCbor(revs[1]!)), 'r1');
    const submitted: string[] = [];
    const taken: string[] = [];
    const feed = new RevocationStreamFeed({ bus, onTaken: (sr) => taken.push(sr.body.grant_id) });
    await feed.start({
      submit: async (sr) => {
        submitted.push(sr.body.grant_id);
        return sr.body.grant_id === revs[1]!.body.grant_id
          ? err({ code: 'revocation-refused', why: 'not the issuer' })
          : ok({ grantId: sr.body.grant_id, admitted: true });
      },
    });
    await bus.publishRevocation(revs[2]!.body.grant_id, encode(signedRevocationToCbor(revs[2]!)), 'r2');
    await feed.stop();
    expect(submitted).toEqual(revs.map((r) => r.body.grant_id));
    expect(taken).toEqual([revs[0]!.body.grant_id, revs[2]!.body.grant_id]);
    expect(feed.counts).toEqual({ delivered: 4, taken: 2, malformed: 1, refused: 1 });
  });
});
