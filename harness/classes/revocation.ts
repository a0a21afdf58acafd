/**
 * Conformance classes about withdrawing and anchoring authority: C6 (revocation, §4.3) and C15
 * (trust roots, §7).
 */
import { decode, encode } from '../../core/cbor.ts';
import { decide } from '../../core/decision.ts';
import { sign } from '../../core/ed25519.ts';
import { grantId } from '../../core/grant.ts';
import { Ledger } from '../../core/ledger.ts';
import {
  RevocationSet,
  type SignedRevocation,
  readSignedRevocation,
  revocationToCbor,
  signRevocation,
  signedRevocationToCbor,
} from '../../core/revocation.ts';
import { TrustRoots } from '../../core/trust.ts';
import type { ConformanceClass } from '../conformance.ts';
import { kit, verdict } from './authority-kit.ts';

/** C6: only the issuer revokes; a revoked ancestor kills the whole subtree; a forged revocation is never admitted. */
export const C6: ConformanceClass = {
  id: 'C6',
  title: 'revocation',
  run(t) {
    const k = kit('C6');
    // alice → bob (root) ─┬─ carol (left) → dave (leftLeaf)
    //                     └─ erin (right)
    const root = k.root();
    const left = k.delegate(root, k.bob, { subject: k.carol.did, budget_uj: 500n });
    const leftLeaf = k.delegate(left, k.carol, { subject: k.dave.did, budget_uj: 100n });
    const right = k.delegate(root, k.bob, { subject: k.erin.did, budget_uj: 500n });
    const leftId = grantId(left.grant);
    const set = new RevocationSet();
    const admit = (sr: SignedRevocation, g = left.grant) => {
      const r = set.admit(sr, g);
      return r.ok ? 'admitted' : r.error.code;
    };

    for (const who of [k.carol, k.dave, k.mallory, k.alice]) {
      t.eq(admit(signRevocation(leftId, who, k.rng(16))), 'not-issuer', 'a revocation by anyone but the issuer is refused');
    }
    const body = { grant_id: leftId, revoked_by: k.bob.did, nonce: k.rng(16) };
    const forged: SignedRevocation = { body, signature: sign(k.mallory.key, encode(revocationToCbor(body))) };
    t.eq(admit(forged), 'bad-signature', 'a forged revocation (issuer named, wrong key) is refused');
    const genuine = signRevocation(leftId, k.bob, k.rng(16));
    t.eq(admit({ body: { ...genuine.body, nonce: k.rng(16) }, signature: genuine.signature }), 'bad-signature', 'an altered revocation is refused');
    t.eq(admit(genuine, right.grant), 'wrong-grant', 'a revocation offered against another grant is refused');
    t.eq([set.size, set.has(leftId)], [0, false], 'nothing refused was admitted');

    const wire = readSignedRevocation(decode(encode(signedRevocationToCbor(genuine))));
    t.eq(admit(wire), 'admitted', 'the issuer’s revocation, read back from canonical CBOR, is admitted');
    t.ok(set.has(leftId), 'the grant is now revoked');

    const state = { ledger: new Ledger(), revoked: set, trust: new TrustRoots() };
    t.eq(verdict(decide(k.request([root, left]), state), true), 'revoked@1', 'the revoked grant is denied');
    t.eq(verdict(decide(k.request([root, left, leftLeaf]), state), true), 'revoked@1', 'its descendant dies with it');
    t.eq(verdict(decide(k.request([root, right]), state)), 'allow', 'its sibling subtree is untouched');
    t.eq(verdict(decide(k.request([root]), state)), 'allow', 'its parent is untouched');

    t.eq(admit(signRevocation(grantId(root.grant), k.alice, k.rng(16)), root.grant), 'admitted', 'the root issuer revokes the root');
    t.eq(verdict(decide(k.request([root]), state), true), 'revoked@0', 'direct path: the revoked root is denied');
    t.eq(verdict(decide(k.request([root, right]), state), true), 'revoked@0', 'chained path: every descendant of the root dies');
    t.eq(state.ledger.size, 0, 'no revoked call was debited');
  },
};

/** C15: an unconfigured resource is open; once configured, a grant from an unlisted root is denied untrusted-root on both paths. */
export const C15: ConformanceClass = {
  id: 'C15',
  title: 'trust roots',
  run(t) {
    const k = kit('C15');
    const root = k.root();
    const child = k.delegate(root, k.bob, { subject: k.carol.did, budget_uj: 500n });
    const leaf = k.delegate(child, k.carol, { subject: k.dave.did, budget_uj: 100n });
    const rogue = k.root({}, k.mallory);
    const rogueChild = k.delegate(rogue, k.bob, { subject: k.carol.did, budget_uj: 500n });

    const open = k.state();
    t.ok(!new TrustRoots().configured(k.resource), 'no roots configured');
    for (const [what, chain] of [
      ['direct', [rogue]],
      ['chained', [rogue, rogueChild]],
    ] as const) {
      t.eq(verdict(decide(k.request(chain), open)), 'allow', `unconfigured resource is open (${what})`);
    }

    const guarded = k.state({ roots: { [k.resource]: [k.alice.did] } });
    t.eq(verdict(decide(k.request([root]), guarded)), 'allow', 'listed root, direct path: allowed');
    t.eq(verdict(decide(k.request([root, child, leaf]), guarded)), 'allow', 'listed root, chained path: allowed');
    t.eq(verdict(decide(k.request([rogue]), guarded)), 'untrusted-root', 'unlisted root, direct path: untrusted-root');
    t.eq(verdict(decide(k.request([rogue, rogueChild]), guarded), true), 'untrusted-root@0', 'unlisted root, chained path: untrusted-root');

    const leafListed = k.state({ roots: { [k.resource]: [k.bob.did, k.carol.did] } });
    t.eq(
      verdict(decide(k.request([root, child, leaf]), leafListed), true),
      'untrusted-root@0',
      'the chained path checks the root issuer, not the issuers below it',
    );
    const elsewhere = k.state({ roots: { [k.otherResource]: [k.alice.did] } });
    t.eq(verdict(decide(k.request([rogue]), elsewhere)), 'allow', 'roots for another resource leave this one open');
    const locked = k.state({ roots: { [k.resource]: [] } });
    t.eq(verdict(decide(k.request([root]), locked)), 'untrusted-root', 'a resource configured with no roots is closed');
    t.eq(guarded.ledger.size + open.ledger.size, 0, 'decisions never debit by themselves');
  },
};
