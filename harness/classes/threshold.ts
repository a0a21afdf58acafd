/**
 * Conformance class C13 (spec §11 caller authentication, §2.2 threshold actors): over a live
 * socket an impersonated caller is denied `bad-signature` (and the refusal is sealed); a 2-of-3
 * FROST actor made by a trusted dealer (RFC 9591 App. C, `@noble/curves` `ed25519_FROST`) signs
 * requests the node accepts like any caller's; one share alone cannot produce an accepted signature.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ed25519_FROST } from '@noble/curves/ed25519.js';
import { pino } from 'pino';
import { newActor, seededRng } from '../../core/actor.ts';
import { didFromPublicKey, parseDid } from '../../core/didkey.ts';
import { sign, verify } from '../../core/ed25519.ts';
import { grantId, signGrant } from '../../core/grant.ts';
import { openReceipt } from '../../core/receipt.ts';
import { payloadHash, signWireRequest, signWireRequestSync } from '../../core/wire.ts';
import { JcpClient, configFromJson, resourceIdOf, startNode } from '../../node/index.ts';
import type { ConformanceClass } from '../conformance.ts';

type Share = ReturnType<typeof ed25519_FROST.trustedDealer>['secretShares'][string];

/** C13: impersonation is denied bad-signature; 2-of-3 signs, one share cannot. */
export const C13: ConformanceClass = {
  id: 'C13',
  title: 'caller-signed wire + threshold',
  async run(t) {
    const rng = seededRng('conformance/C13');
    const nobleRng = (n = 32) => rng(n);
    const issuer = newActor(rng);
    const agent = newActor(rng);
    const mallory = newActor(rng);
    const resource = resourceIdOf('c13-vault');

    // A 2-of-3 team key from a trusted dealer; the group key is an ordinary did:key.
    const dealt = ed25519_FROST.trustedDealer({ min: 2, max: 3 }, undefined, undefined, nobleRng);
    const pub = dealt.public;
    const team = didFromPublicKey(pub.commitments[0]!);
    const shares = Object.values(dealt.secretShares) as Share[];
    const thresholdSign = (signers: readonly Share[]) => (msg: Uint8Array): Uint8Array => {
      const rounds = signers.map((s) => ({ s, ...ed25519_FROST.commit(s, nobleRng) }));
      const commitments = rounds.map((r) => r.commitments);
      const sigShares: Record<string, Uint8Array> = {};
      for (const r of rounds) sigShares[r.s.identifier] = ed25519_FROST.signShare(r.s, pub, r.nonces, commitments, msg);
      return ed25519_FROST.aggregate(pub, commitments, msg, sigShares);
    };

    const g = (subject: string) =>
      signGrant(
        { issuer: issuer.did, subject, capability: { resource, actions: ['release'] }, budget_uj: 10_000n, expiry: 0, nonce: rng(16) },
        issuer,
      );
    const forAgent = g(agent.did);
    const forTeam = g(team);

    const dir = mkdtempSync(path.join(tmpdir(), 'jcp-c13-'));
    const node = await startNode(
      configFromJson({
        listen: '127.0.0.1:0',
        data_dir: dir,
        resources: [{ name: 'c13-vault', trust_roots: [issuer.did] }],
        meter: { default_estimate_uj: 0, rungs: ['estimator'] },
      }),
      { logger: pino({ level: 'silent' }) },
    );
    const client = await JcpClient.connect({ host: '127.0.0.1', port: node.port });
    const unsigned = (chainGrant: typeof forAgent, caller: string, n: number) => {
      const payload = new TextEncoder().encode(`{"n":${n}}`);
      return {
        frame: {
          kind: 'tool-call' as const,
          trust: 'control' as const,
          grant_id: grantId(chainGrant.grant),
          action: 'release',
          resource,
          payload_hash: payloadHash(payload),
        },
        chain: [chainGrant],
        caller,
        cost: { uj: 100n, provenance: 'Estimator' as const },
        now: Math.floor(Date.now() / 1000),
        payload,
      };
    };
    try {
      // Impersonation: mallory signs a request that names the agent as caller.
      const forged = await signWireRequest(unsigned(forAgent, agent.did, 1), (m) => sign(mallory.key, m));
      const denied = await client.callRequest(forged);
      t.eq(denied.decision, { verdict: 'deny', deny_reason: 'bad-signature' }, 'an impersonated caller is denied bad-signature');
      const dc = openReceipt(denied.receipt, node.did);
      t.ok(dc.ok && dc.value.verdict === 'deny' && dc.value.deny_reason === 'bad-signature', 'the refused impersonation is sealed as evidence');
      t.eq(node.ledger.spent(grantId(forAgent.grant)), 0n, 'the impersonation debits nothing');
      const genuine = await client.callRequest(signWireRequestSync(unsigned(forAgent, agent.did, 2), agent));
      t.eq(genuine.decision, { verdict: 'allow' }, 'the genuine caller is allowed');

      // Two of three shares sign; the aggregate is a plain Ed25519 signature under the team did.
      const two = thresholdSign([shares[0]!, shares[1]!]);
      const probe = new TextEncoder().encode('c13 probe');
      t.ok(verify(parseDid(team), probe, two(probe)), 'the 2-of-3 aggregate verifies as an ordinary Ed25519 signature');
      const byTeam = await client.callRequest(await signWireRequest(unsigned(forTeam, team, 3), two));
      t.eq(byTeam.decision, { verdict: 'allow' }, 'the node accepts a 2-of-3 threshold caller (shares 1, 2)');
      const other = await client.callRequest(await signWireRequest(unsigned(forTeam, team, 4), thresholdSign([shares[0]!, shares[2]!])));
      t.eq(other.decision, { verdict: 'allow' }, 'any two shares will do (shares 1, 3)');
      t.eq(node.ledger.spent(grantId(forTeam.grant)), 200n, 'threshold calls are debited like any other');

      // One share alone cannot sign.
      t.throws(() => thresholdSign([shares[1]!])(probe), 'aggregating a single share is refused');
      const solo = (msg: Uint8Array) => ed25519_FROST.sign(msg, shares[1]!.signingShare);
      const lone = await client.callRequest(await signWireRequest(unsigned(forTeam, team, 5), solo));
      t.eq(lone.decision, { verdict: 'deny', deny_reason: 'bad-signature' }, 'a signature from one share is denied bad-signature');
      t.eq(node.ledger.spent(grantId(forTeam.grant)), 200n, 'the one-share attempt debits nothing');
    } finally {
      await client.close();
      await node.close();
      rmSync(dir, { recursive: true, force: true });
    }
  },
};
