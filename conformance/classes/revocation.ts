/**
 * Conformance classes about withdrawing and anchoring authority: C6 (revocation, §4.3) and C15
 * (trust roots, §7).
 */
import {
  type Actor,
  decide,
  decode,
  encode,
  grantId,
  readSignedRevocation,
  RevocationSet,
  revocationToCbor,
  sign,
  type SignedGrant,
  type SignedRevocation,
  signedRevocationToCbor,
  signRevocation,
  TrustRoots,
} from '../../core/index.ts';
import type { Checker } from '../checker.ts';
import type { ConformanceClass } from '../runner.ts';
import { type Kit, kit, verdict } from './authority-kit.ts';
import { withLiveNode } from './node-kit.ts';

/**
 * C6: only the issuer revokes; a revoked ancestor kills the whole subtree; a forged revocation is
 * never admitted. The authority checks run on core's `RevocationSet`, then every refusal and the
 * genuine revocation go through a live node over jcp/1 (its revocation store, its enforcer), with
 * decisions on the direct and chained paths, the waiting path for a grant the node has not seen,
 * a restart (revocations come back from the log), and the node's ledger read back.
 */
export const C6: ConformanceClass = {
  id: 'C6',
  title: 'revocation',
  async run(t) {
    const k = kit('C6');
    // alice → bob (root) ─┬─ carol (left) → dave (leftLeaf)
    //                     └─ erin (right)
    checkCoreRevocations(t, k);

    await withLiveNode('c6', {}, async (n) => {
      const over = { capability: { resource: n.resources['c6']!, actions: ['read', 'write'] } };
      const lroot = k.root(over);
      const lleft = k.delegate(lroot, k.bob, { subject: k.carol.did, budget_uj: 500n });
      const lleaf = k.delegate(lleft, k.carol, { subject: k.dave.did, budget_uj: 100n });
      const lright = k.delegate(lroot, k.bob, { subject: k.erin.did, budget_uj: 500n });
      const tree = [lroot, lleft, lleaf, lright] as const;
      const paths = [
        ['direct', [lroot], k.bob],
        ['left', [lroot, lleft], k.carol],
        ['left leaf', [lroot, lleft, lleaf], k.dave],
        ['right', [lroot, lright], k.erin],
      ] as const;
      for (const [what, chain, caller] of paths)
        t.eq(await n.call(chain, caller), 'allow', `before any revocation the ${what} path is allowed`);
      t.eq(n.spent(...tree), [40n, 20n, 10n, 10n], 'the node debits every link of each allowed chain');

      // Refused revocations, with and without the grant, change nothing at the node.
      for (const who of [k.carol, k.dave, k.mallory, k.alice, k.erin]) {
        const sr = signRevocation(grantId(lleft.grant), who, k.rng(16));
        t.eq(await n.revoke(sr, lleft.grant), 'error:revocation-refused', 'the node refuses a non-issuer revocation sent with the grant');
        t.eq(await n.revoke(sr), 'error:revocation-refused', 'the node refuses a non-issuer revocation of a grant it has seen');
      }
      for (const forger of [k.mallory, k.carol, k.alice]) {
        t.eq(
          await n.revoke(forgedBy(k, lleft, k.bob, forger), lleft.grant),
          'error:revocation-refused',
          'the node refuses a forged revocation in the issuer’s name',
        );
      }
      t.eq(await n.call([lroot, lleft], k.carol), 'allow', 'after the refused revocations the grant is still allowed');
      t.eq(n.spent(...tree), [50n, 30n, 10n, 10n], 'and debited as before');

      // The issuer revokes the left subtree over jcp/1.
      t.eq(await n.revoke(signRevocation(grantId(lleft.grant), k.bob, k.rng(16))), 'revoked', 'the node takes the issuer’s revocation');
      t.eq(await n.call([lroot, lleft], k.carol), 'revoked', 'chained path: the revoked grant is denied');
      t.eq(await n.call([lroot, lleft, lleaf], k.dave), 'revoked', 'chained path: its descendant dies with it');
      t.eq(await n.call([lroot, lright], k.erin), 'allow', 'its sibling subtree is untouched');
      t.eq(await n.call([lroot], k.bob), 'allow', 'its parent is untouched (direct path)');
      t.eq(n.spent(...tree), [70n, 30n, 10n, 20n], 'the node debited only the allowed calls: nothing on the revoked subtree');

      // A grant the node has not seen yet: revocations wait, and only the issuer's takes effect.
      const late = k.delegate(lroot, k.bob, { subject: k.carol.did, budget_uj: 200n });
      const late2 = k.delegate(lroot, k.bob, { subject: k.erin.did, budget_uj: 200n });
      for (const g of [late, late2]) {
        for (const who of [k.mallory, k.carol, k.alice]) {
          t.eq(
            await n.revoke(signRevocation(grantId(g.grant), who, k.rng(16))),
            'revoked',
            'a stranger’s revocation of an unseen grant waits',
          );
        }
        t.eq(
          await n.revoke(forgedBy(k, g, k.bob, k.mallory)),
          'error:revocation-refused',
          'a forged revocation of an unseen grant is refused at once',
        );
      }
      t.eq(
        await n.revoke(signRevocation(grantId(late.grant), k.bob, k.rng(16))),
        'revoked',
        'the issuer’s revocation of an unseen grant waits beside the strangers’',
      );
      t.eq(await n.call([lroot, late], k.carol), 'revoked', 'when the grant arrives, the issuer’s waiting revocation is enforced');
      t.eq(await n.call([lroot, late2], k.erin), 'allow', 'strangers’ waiting revocations are discarded when the grant arrives');
      t.eq(n.spent(late, late2), [0n, 10n], 'the late revoked grant was never debited');

      // The root issuer revokes the root: both paths die; then the node restarts.
      t.eq(
        await n.revoke(signRevocation(grantId(lroot.grant), k.alice, k.rng(16)), lroot.grant),
        'revoked',
        'the root issuer revokes the root',
      );
      const before = n.spent(...tree, late2);
      t.eq(await n.call([lroot], k.bob), 'revoked', 'direct path: the revoked root is denied');
      t.eq(await n.call([lroot, lright], k.erin), 'revoked', 'chained path: every descendant of the root dies');
      t.eq(await n.call([lroot, late2], k.erin), 'revoked', 'chained path: a grant seen after its ancestor’s revocation dies too');
      await n.restart();
      t.eq(await n.call([lroot], k.bob), 'revoked', 'after a restart the root revocation is still enforced (direct)');
      t.eq(await n.call([lroot, lleft, lleaf], k.dave), 'revoked', 'after a restart the left revocation is still enforced (chained)');
      t.eq(await n.call([lroot, late], k.carol), 'revoked', 'after a restart a revocation admitted from waiting is still enforced');
      t.eq(n.spent(...tree, late2), before, 'no revoked call was debited, before or after the restart');
    });
  },
};

/** A revocation of `g` in `issuer`'s name, signed by `forger`'s key (a fresh 16-byte nonce from `k`). */
function forgedBy(k: Kit, g: SignedGrant, issuer: Actor, forger: Actor): SignedRevocation {
  const body = { grant_id: grantId(g.grant), revoked_by: issuer.did, nonce: k.rng(16) };
  return { body, signature: sign(forger.key, encode(revocationToCbor(body))) };
}

/**
 * C6 on core's `RevocationSet`: non-issuer, forged, altered and wrong-grant revocations are
 * refused (`not-issuer`, `bad-signature`, `wrong-grant`) and nothing refused is admitted; the
 * issuer's, read back from canonical CBOR, is.
 */
function checkCoreRevocations(t: Checker, k: Kit): void {
  const root = k.root();
  const left = k.delegate(root, k.bob, { subject: k.carol.did, budget_uj: 500n });
  const right = k.delegate(root, k.bob, { subject: k.erin.did, budget_uj: 500n });
  const leftId = grantId(left.grant);
  const set = new RevocationSet();
  const admit = (sr: SignedRevocation, g = left.grant) => {
    const r = set.admit(sr, g);
    return r.ok ? 'admitted' : r.error.code;
  };

  for (const who of [k.carol, k.dave, k.mallory, k.alice, k.erin]) {
    t.eq(admit(signRevocation(leftId, who, k.rng(16))), 'not-issuer', 'a revocation by anyone but the issuer is refused');
  }
  for (const forger of [k.mallory, k.carol, k.alice]) {
    t.eq(admit(forgedBy(k, left, k.bob, forger)), 'bad-signature', 'a forged revocation (issuer named, wrong key) is refused');
  }
  const genuine = signRevocation(leftId, k.bob, k.rng(16));
  t.eq(
    admit({ body: { ...genuine.body, nonce: k.rng(16) }, signature: genuine.signature }),
    'bad-signature',
    'an altered revocation is refused',
  );
  t.eq(admit(genuine, right.grant), 'wrong-grant', 'a revocation offered against another grant is refused');
  const rootByBob = signRevocation(grantId(root.grant), k.bob, k.rng(16));
  t.eq(admit(rootByBob), 'wrong-grant', 'a revocation of the parent, offered against its child by the child’s issuer, is refused');
  t.eq(admit(rootByBob, root.grant), 'not-issuer', '… and against the parent itself it is not the issuer’s');
  t.eq([set.size, set.has(leftId), set.has(grantId(root.grant))], [0, false, false], 'nothing refused was admitted');
  const wire = readSignedRevocation(decode(encode(signedRevocationToCbor(genuine))));
  t.eq(admit(wire), 'admitted', 'the issuer’s revocation, read back from canonical CBOR, is admitted');
  t.ok(set.has(leftId), 'the grant is now revoked');
}

/**
 * C15: an unconfigured resource is open; once configured, a grant from an unlisted root is denied
 * untrusted-root on both paths — by core's decision, then by a live node whose config lists the
 * roots per resource (listed, leaf-listed, locked and open resources), its ledger read back.
 */
export const C15: ConformanceClass = {
  id: 'C15',
  title: 'trust roots',
  async run(t) {
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

    // The same through a live node whose config lists the roots per resource (§7).
    const names = { guarded: 'c15-guarded', leaf: 'c15-leaf-listed', locked: 'c15-locked', open: 'c15-open' };
    await withLiveNode(
      'c15',
      {
        resources: [
          { name: names.guarded, trustRoots: [k.alice.did] },
          { name: names.leaf, trustRoots: [k.bob.did, k.carol.did] },
          { name: names.locked, trustRoots: [] },
          { name: names.open },
        ],
      },
      async (n) => {
        const tree = (resource: string) => {
          const over = { capability: { resource: n.resources[resource]!, actions: ['read'] } };
          const r = k.root(over);
          const c = k.delegate(r, k.bob, { subject: k.carol.did, budget_uj: 500n });
          const l = k.delegate(c, k.carol, { subject: k.dave.did, budget_uj: 100n });
          const rr = k.root(over, k.mallory);
          const rc = k.delegate(rr, k.bob, { subject: k.carol.did, budget_uj: 500n });
          return { r, c, l, rr, rc };
        };
        const g = tree(names.guarded);
        t.eq(await n.call([g.r], k.bob), 'allow', 'node: listed root, direct path: allowed');
        t.eq(await n.call([g.r, g.c, g.l], k.dave), 'allow', 'node: listed root, chained path: allowed');
        t.eq(await n.call([g.rr], k.bob), 'untrusted-root', 'node: unlisted root, direct path: untrusted-root');
        t.eq(await n.call([g.rr, g.rc], k.carol), 'untrusted-root', 'node: unlisted root, chained path: untrusted-root');
        t.eq(n.spent(g.r, g.c, g.l, g.rr, g.rc), [20n, 10n, 10n, 0n, 0n], 'node: only the trusted calls were debited');
        const ll = tree(names.leaf);
        t.eq(
          await n.call([ll.r, ll.c, ll.l], k.dave),
          'untrusted-root',
          'node: the chained path checks the root issuer, not the issuers below it',
        );
        t.eq(await n.call([ll.r, ll.c], k.carol), 'untrusted-root', 'node: a listed intermediate issuer does not anchor the chain');
        const lk = tree(names.locked);
        t.eq(await n.call([lk.r], k.bob), 'untrusted-root', 'node: a resource configured with no roots is closed (direct)');
        t.eq(await n.call([lk.r, lk.c], k.carol), 'untrusted-root', 'node: a resource configured with no roots is closed (chained)');
        t.eq(n.spent(ll.r, ll.c, ll.l, lk.r, lk.c), [0n, 0n, 0n, 0n, 0n], 'node: no untrusted call was debited');
        const op = tree(names.open);
        t.eq(await n.call([op.rr], k.bob), 'allow', 'node: roots listed for other resources leave an unconfigured one open (direct)');
        t.eq(await n.call([op.rr, op.rc], k.carol), 'allow', 'node: ... and chained');
        t.eq(n.spent(op.rr, op.rc), [20n, 10n], 'node: the open resource’s calls were debited');
      },
    );
  },
};
