/**
 * Revocation at the node (spec §4.3, C6): signed revocations over jcp/1, verified for authority
 * before they take effect, enforced on the direct and the chained decision paths.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { actorFromSeed, attenuate, grantId, signRevocation } from '../../core/index.ts';
import { NodeErrorCodes, type RunningNode } from '../../node/index.ts';
import { JcpClient, type WireErrorReply } from '../../client/index.ts';
import { MAX_WAITING_PER_GRANT } from '../../node/internal.ts';
import { cast, liveNode, mint } from './fixtures.ts';

const { rng, alice, bob, carol, mallory } = cast('revocation');

describe('revocation over jcp/1', () => {
  let node: RunningNode & { cleanup: () => Promise<void> };
  let asBob: JcpClient;
  let asCarol: JcpClient;
  beforeAll(async () => {
    node = await liveNode();
    asBob = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    asCarol = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: carol });
  });
  afterAll(async () => {
    await asBob.close();
    await asCarol.close();
    await node.cleanup();
  });

  test('direct path / the issuer revokes a grant the node knows: denied revoked from then on', async () => {
    const g = mint(alice, bob, 'tools', ['read'], 1000n, rng);
    expect((await asBob.call({ chain: [g], action: 'read' })).decision.verdict).toBe('allow');
    expect(await asBob.revoke(signRevocation(grantId(g.grant), alice, rng(16)))).toBe(grantId(g.grant));
    const r = await asBob.call({ chain: [g], action: 'read', payload: { after: 1 } });
    expect(r.decision).toEqual({ verdict: 'deny', deny_reason: 'revoked' });
  });

  test('chained path / a revoked root kills the whole delegation subtree', async () => {
    const root = mint(alice, bob, 'tools', ['read'], 1000n, rng);
    const child = attenuate(root, { subject: carol.did, budget_uj: 100n, nonce: rng(16) }, bob);
    if (!child.ok) throw new Error('attenuate');
    expect((await asCarol.call({ chain: [root, child.value], action: 'read' })).decision.verdict).toBe('allow');
    await asBob.revoke(signRevocation(grantId(root.grant), alice, rng(16)));
    const r = await asCarol.call({ chain: [root, child.value], action: 'read', payload: { n: 2 } });
    expect(r.decision).toEqual({ verdict: 'deny', deny_reason: 'revoked' });
  });

  test('chained path / a holder revokes the child it delegated', async () => {
    const root = mint(alice, bob, 'tools', ['read'], 1000n, rng);
    const child = attenuate(root, { subject: carol.did, budget_uj: 100n, nonce: rng(16) }, bob);
    if (!child.ok) throw new Error('attenuate');
    await asCarol.call({ chain: [root, child.value], action: 'read' });
    await asBob.revoke(signRevocation(grantId(child.value.grant), bob, rng(16)));
    expect((await asCarol.call({ chain: [root, child.value], action: 'read', payload: { n: 2 } })).decision.deny_reason).toBe('revoked');
    expect((await asBob.call({ chain: [root], action: 'read' })).decision.verdict).toBe('allow');
  });

  test('a revocation of a grant not seen yet takes effect the first time the grant is presented', async () => {
    const g = mint(alice, bob, 'tools', ['read'], 1000n, rng);
    await asBob.revoke(signRevocation(grantId(g.grant), alice, rng(16)));
    expect((await asBob.call({ chain: [g], action: 'read' })).decision).toEqual({ verdict: 'deny', deny_reason: 'revoked' });
  });

  test('a waiting revocation by someone other than the issuer never takes effect', async () => {
    const g = mint(alice, bob, 'tools', ['read'], 1000n, rng);
    await asBob.revoke(signRevocation(grantId(g.grant), mallory, rng(16)));
    expect((await asBob.call({ chain: [g], action: 'read' })).decision).toEqual({ verdict: 'allow' });
  });

  test("a stranger's later revocation of the same unseen grant cannot cancel the issuer's waiting one", async () => {
    const g = mint(alice, bob, 'tools', ['read'], 1000n, rng);
    await asBob.revoke(signRevocation(grantId(g.grant), alice, rng(16)));
    await asBob.revoke(signRevocation(grantId(g.grant), mallory, rng(16)));
    expect((await asBob.call({ chain: [g], action: 'read' })).decision).toEqual({ verdict: 'deny', deny_reason: 'revoked' });
  });

  test('busy / waiting revocations of one unseen grant are bounded per grant', async () => {
    const g = mint(alice, bob, 'tools', ['read'], 1000n, rng);
    const codes: string[] = [];
    for (let i = 0; i < MAX_WAITING_PER_GRANT + 2; i++) {
      const stranger = actorFromSeed(rng(32));
      try {
        await asBob.revoke(signRevocation(grantId(g.grant), stranger, rng(16)));
        codes.push('ok');
      } catch (e) {
        codes.push((e as WireErrorReply).code);
      }
    }
    expect(codes.filter((c) => c === 'ok')).toHaveLength(MAX_WAITING_PER_GRANT);
    expect(codes.slice(MAX_WAITING_PER_GRANT)).toEqual(['busy', 'busy']);
    // The strangers cannot lock the issuer out: a revocation that carries the revoked grant
    // (revoke_grant) has its authority checked at once and never waits.
    expect(await asBob.revoke(signRevocation(grantId(g.grant), alice, rng(16)), g.grant)).toBe(grantId(g.grant));
    expect((await asBob.call({ chain: [g], action: 'read' })).decision).toEqual({ verdict: 'deny', deny_reason: 'revoked' });
  });

  test('revoke_grant / a stranger sending the grant with its revocation is refused at once', async () => {
    const g = mint(alice, bob, 'tools', ['read'], 1000n, rng);
    const other = mint(alice, bob, 'tools', ['read'], 1000n, rng);
    const codes: string[] = [];
    for (const [sr, grant] of [
      [signRevocation(grantId(g.grant), mallory, rng(16)), g.grant],
      [signRevocation(grantId(g.grant), alice, rng(16)), other.grant],
    ] as const) {
      try {
        await asBob.revoke(sr, grant);
        codes.push('ok');
      } catch (e) {
        codes.push((e as WireErrorReply).code);
      }
    }
    expect(codes).toEqual(['revocation-refused', 'revocation-refused']);
    expect((await asBob.call({ chain: [g], action: 'read' })).decision).toEqual({ verdict: 'allow' });
  });

  test('revocation-refused / a revocation whose signature does not verify', async () => {
    const g = mint(alice, bob, 'tools', ['read'], 1000n, rng);
    const sr = signRevocation(grantId(g.grant), alice, rng(16));
    const forged = { body: sr.body, signature: signRevocation(grantId(g.grant), mallory, rng(16)).signature };
    const e = await asBob.revoke(forged).catch((x: unknown) => x);
    expect((e as WireErrorReply).code).toBe(NodeErrorCodes.REVOCATION_REFUSED);
    expect((await asBob.call({ chain: [g], action: 'read' })).decision.verdict).toBe('allow');
  });
});

describe('revocation hand-over to the cluster (a feed with an outlet)', () => {
  test('an accepted revocation is handed on; a failed hand-over is retried; refused and feed-borne ones are never handed on', async () => {
    const published: string[] = [];
    let failures = 1;
    let handedOn!: () => void;
    const done = new Promise<void>((r) => {
      handedOn = r;
    });
    let sink: { submit: RunningNode['revocations']['submit'] } | undefined;
    const feed = {
      name: 'test-outlet',
      start: async (s: typeof sink) => {
        sink = s;
      },
      stop: async () => undefined,
      publish: async (sr: { body: { grant_id: string } }) => {
        if (failures-- > 0) throw new Error('NATS is away');
        published.push(sr.body.grant_id);
        handedOn();
      },
    };
    const node = await liveNode({}, { revocationFeeds: [feed as never] });
    const c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    try {
      const g = mint(alice, bob, 'tools', ['read'], 1000n, rng);
      const fromFeed = mint(alice, bob, 'tools', ['read'], 1000n, rng);
      await c.call({ chain: [g], action: 'read' });
      // Refused (not the issuer): nothing handed on.
      await c.revoke(signRevocation(grantId(g.grant), mallory, rng(16))).catch(() => undefined);
      // Accepted: the reply comes even though the first hand-over fails; the retry delivers it.
      expect(await c.revoke(signRevocation(grantId(g.grant), alice, rng(16)))).toBe(grantId(g.grant));
      await done;
      // A revocation that came in through the feed is taken, but not handed on again.
      expect((await sink!.submit(signRevocation(grantId(fromFeed.grant), alice, rng(16)), fromFeed.grant)).ok).toBe(true);
      expect(published).toEqual([grantId(g.grant)]);
    } finally {
      await c.close();
      await node.cleanup();
    }
  });
});
