/**
 * Conformance classes about grants themselves: C1 (signature and audience binding), C2
 * (attenuation monotonicity, §4.1) and C10 (delegation control, §4.4).
 */
import {
  attenuate,
  checkHop,
  contentId,
  decide,
  type Grant,
  grantBytes,
  grantId,
  newActor,
  seededRng,
  sign,
  signGrant,
  verifyChain,
  verifyGrantSignature,
} from '../../core/index.ts';
import type { ConformanceClass } from '../runner.ts';
import { kit, verdict } from './authority-kit.ts';

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
    t.ok(
      !verifyGrantSignature({
        grant: { ...g, capability: { ...g.capability, resource: contentId({ tool: 'db' }) } },
        signature: sg.signature,
      }),
      'a grant re-pointed at another resource no longer verifies',
    );

    // Audience binding (§4): the grant authorizes exactly its content-addressed resource.
    const k = kit('C1');
    const root = k.root();
    const state = k.state();
    t.eq(verdict(decide(k.request([root]), state)), 'allow', 'a frame for the granted resource is allowed');
    t.eq(
      verdict(decide(k.request([root], { frame: { ...k.request([root]).frame, resource: k.otherResource } }), state)),
      'wrong-resource',
      'a frame naming another resource is denied wrong-resource',
    );
    const lookalike = contentId({ tool: 'fs', root: '/srv/data/' });
    t.ok(lookalike !== k.resource, 'a look-alike resource description has another content id');
    t.eq(
      verdict(decide(k.request([root], { frame: { ...k.request([root]).frame, resource: lookalike } }), state)),
      'wrong-resource',
      'a look-alike resource is denied wrong-resource',
    );
    t.eq(verdict(decide(k.request([k.forged(root)]), state)), 'bad-signature', 'a grant signed by a non-issuer is denied bad-signature');

    // The same grant under other keys: signed by anyone but its issuer, or re-attributed to
    // another issuer with the real signature, it fails (three keys each, not one convenient one).
    for (const [i, key] of [other, agent, newActor(rng)].entries()) {
      const underOther = { grant: g, signature: sign(key.key, grantBytes(g)) };
      t.ok(!verifyGrantSignature(underOther), `grant signed by another key (${i}) fails`);
      t.ok(
        !verifyGrantSignature({ grant: { ...g, issuer: key.did }, signature: sg.signature }),
        `grant re-attributed to another issuer (${i}) fails`,
      );
    }
    for (const forger of [k.mallory, k.bob, k.carol]) {
      t.eq(
        verdict(decide(k.request([k.forged(root, forger)]), state)),
        'bad-signature',
        'the decision denies a grant signed by another key',
      );
    }
  },
};

/** True when `child` is no stronger than `parent` on every axis (§4.1, §4.4). */
function narrower(parent: Grant, child: Grant): boolean {
  return (
    child.capability.resource === parent.capability.resource &&
    child.capability.actions.every((a) => parent.capability.actions.includes(a)) &&
    child.budget_uj <= parent.budget_uj &&
    (parent.expiry === 0 || (child.expiry !== 0 && child.expiry <= parent.expiry)) &&
    (parent.delegate_depth === undefined ||
      (parent.delegate_depth > 0 && child.delegate_depth !== undefined && child.delegate_depth < parent.delegate_depth))
  );
}

/** C2: a child can only narrow; every amplification and every non-holder delegation is refused. */
export const C2: ConformanceClass = {
  id: 'C2',
  title: 'attenuation monotonicity',
  run(t) {
    const k = kit('C2');
    const root = k.root({ delegate_depth: 3 });
    const rootId = grantId(root.grant);
    const mint = (params: Parameters<typeof attenuate>[1], holder = k.bob) => {
      const r = attenuate(root, params, holder);
      return r.ok ? 'minted' : r.error.reason;
    };
    const base = { subject: k.carol.did, nonce: k.rng(16) };

    const narrowed = attenuate(root, { ...base, actions: ['read'], budget_uj: 10n, expiry: 4_000, delegate_depth: 1 }, k.bob);
    t.ok(narrowed.ok && narrower(root.grant, narrowed.value.grant), 'a child narrowed on every axis is minted');
    t.ok(narrowed.ok && narrowed.value.grant.parent === rootId, 'the child links to its parent id');
    t.ok(narrowed.ok && verifyChain([root, narrowed.value]).ok, 'the minted child chain-verifies');
    t.eq(mint({ ...base, actions: ['read', 'delete'] }), 'attenuation-violation', 'an extra action is refused');
    t.eq(mint({ ...base, budget_uj: 1_001n }), 'attenuation-violation', 'a budget 1 µJ over the parent is refused');
    t.eq(mint({ ...base, expiry: 5_001 }), 'attenuation-violation', 'an expiry 1 s past the parent is refused');
    t.eq(mint({ ...base, expiry: 0 }), 'attenuation-violation', 'a never-expiring child of an expiring parent is refused');
    t.eq(mint({ ...base, delegate_depth: 3 }), 'attenuation-violation', 'a depth not below the parent is refused');
    for (const who of [k.mallory, k.alice, k.carol]) {
      t.eq(mint({ ...base, subject: who.did }, who), 'not-holder', 'delegation by anyone but the parent subject is refused');
    }

    // Hand-built children (bypassing mint) are refused by the hop check and by chain verification.
    const amplifying: [string, Partial<Grant>, string][] = [
      ['another resource', { capability: { resource: k.otherResource, actions: ['read'] } }, 'attenuation-violation'],
      ['an extra action', { capability: { resource: k.resource, actions: ['read', 'admin'] } }, 'attenuation-violation'],
      ['a larger budget', { budget_uj: 1_001n }, 'attenuation-violation'],
      ['a later expiry', { expiry: 5_001 }, 'attenuation-violation'],
      ['an issuer other than the parent subject (mallory)', { issuer: k.mallory.did }, 'chain-broken'],
      ['an issuer other than the parent subject (the parent issuer)', { issuer: k.alice.did }, 'chain-broken'],
      ['an issuer other than the parent subject (the child subject)', { issuer: k.dave.did }, 'chain-broken'],
    ];
    const signers = new Map([k.mallory, k.alice, k.dave].map((a) => [a.did, a]));
    for (const [what, over, reason] of amplifying) {
      const signer = (over.issuer !== undefined ? signers.get(over.issuer) : undefined) ?? k.bob;
      const child = k.handChild(root, over, signer);
      const hop = checkHop(root.grant, rootId, child.grant);
      t.eq(hop.ok ? 'accepted' : hop.error.reason, reason, `hop check: ${what}`);
      const chain = verifyChain([root, child]);
      t.eq(chain.ok ? 'verified' : chain.error.reason, reason, `chain verification: ${what}`);
      t.eq(verdict(decide(k.request([root, child]), k.state())), reason, `decision: ${what}`);
    }

    // Sampled monotonicity: 200 seeded random mints; whatever is minted is ≤ the parent on every axis.
    const pick = (n: number) => k.rng(1)[0]! % n;
    const universe = ['read', 'write', 'list', 'admin'];
    let minted = 0;
    let sound = true;
    for (let i = 0; i < 200; i++) {
      const params = {
        subject: k.carol.did,
        nonce: k.rng(16),
        ...(pick(2) ? { actions: universe.filter(() => pick(2) === 1) } : {}),
        ...(pick(2) ? { budget_uj: BigInt(pick(250)) * 8n } : {}),
        ...(pick(2) ? { expiry: pick(4) === 0 ? 0 : 4_000 + pick(250) * 8 } : {}),
        ...(pick(2) ? { delegate_depth: pick(5) } : {}),
      };
      const r = attenuate(root, params, k.bob);
      if (r.ok) {
        minted++;
        sound &&= narrower(root.grant, r.value.grant);
      }
    }
    t.ok(sound, 'every sampled minted child is ≤ its parent on every axis');
    t.ok(minted > 0 && minted < 200, 'the sample both minted and refused');
  },
};

/** C10: depth narrows per hop; a leaf-only grant cannot be delegated, at mint or in chain verification. */
export const C10: ConformanceClass = {
  id: 'C10',
  title: 'delegation control',
  run(t) {
    const k = kit('C10');
    const root = k.root({ delegate_depth: 2 });
    const c1 = k.delegate(root, k.bob, { subject: k.carol.did });
    const c2 = k.delegate(c1, k.carol, { subject: k.dave.did });
    t.eq([c1.grant.delegate_depth, c2.grant.delegate_depth], [1, 0], 'depth drops by one per hop');
    t.ok(verifyChain([root, c1, c2]).ok, 'a depth-narrowing chain verifies');
    t.eq(verdict(decide(k.request([root, c1, c2]), k.state())), 'allow', 'a leaf-only worker may act');

    const atMint = attenuate(c2, { subject: k.erin.did, nonce: k.rng(16) }, k.dave);
    t.eq(atMint.ok ? 'minted' : atMint.error.reason, 'delegation-forbidden', 'a leaf-only grant cannot be delegated at mint');
    const explicitZero = attenuate(c2, { subject: k.erin.did, delegate_depth: 0, nonce: k.rng(16) }, k.dave);
    t.ok(!explicitZero.ok, 'not even as another leaf-only grant');
    const deeper = attenuate(c1, { subject: k.dave.did, delegate_depth: 1, nonce: k.rng(16) }, k.carol);
    t.eq(deeper.ok ? 'minted' : deeper.error.reason, 'attenuation-violation', 'a child may not keep its parent depth');

    const smuggled = k.handChild(c2, { issuer: k.dave.did, subject: k.erin.did }, k.dave);
    const inChain = verifyChain([root, c1, c2, smuggled]);
    t.eq(
      inChain.ok ? 'verified' : [inChain.error.reason, inChain.error.link],
      ['chain-broken', 3],
      'chain verification refuses a hop under a leaf-only grant',
    );
    t.eq(verdict(decide(k.request([root, c1, c2, smuggled]), k.state()), true), 'chain-broken@3', 'the decision denies it chain-broken');

    const widened = k.handChild(root, { delegate_depth: 2 }, k.bob);
    t.eq(
      verdict(decide(k.request([root, widened]), k.state()), true),
      'attenuation-violation@1',
      'a hop keeping its parent depth is an amplification',
    );
    const unbounded = k.handChild(root, { delegate_depth: undefined }, k.bob);
    t.eq(
      verdict(decide(k.request([root, unbounded]), k.state()), true),
      'attenuation-violation@1',
      'an unbounded hop under a bounded parent is an amplification',
    );
    const open = k.root();
    const free = k.delegate(open, k.bob, { subject: k.carol.did });
    t.eq(free.grant.delegate_depth, undefined, 'an unbounded parent delegates unbounded by default');
  },
};
