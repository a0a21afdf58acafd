/** Conformance classes about grants themselves: C1 (signature and audience binding). */
import { seededRng, newActor } from '../../core/actor.ts';
import { type Grant, signGrant, verifyGrantSignature } from '../../core/grant.ts';
import { contentId } from '../../core/hash.ts';
import type { ConformanceClass } from '../conformance.ts';

/** C1: a grant verifies only for its issuer's key and names exactly one content-addressed resource. */
export const C1: ConformanceClass = {
  id: 'C1',
  title: 'signed grants + audience binding',
  run(t) {
    const rng = seededRng('conformance/C1');
    const issuer = newActor(rng);
    const other = newActor(rng);
    const agent = newActor(rng);
    const g: Grant = {
      issuer: issuer.did,
      subject: agent.did,
      capability: { resource: contentId({ tool: 'fs' }), actions: ['read'] },
      budget_uj: 1000n,
      expiry: 0,
      nonce: rng(16),
    };
    const sg = signGrant(g, issuer);
    t.ok(verifyGrantSignature(sg), 'grant signed by its issuer verifies');
    const forged = signGrant({ ...g, issuer: other.did }, other);
    t.ok(verifyGrantSignature(forged), 'a grant re-issued by another key verifies only as that key');
    t.ok(!verifyGrantSignature({ grant: g, signature: forged.signature }), 'signature by a non-issuer is refused');
    t.ok(!verifyGrantSignature({ grant: { ...g, budget_uj: 1001n }, signature: sg.signature }), 'tampered budget is refused');
  },
};
