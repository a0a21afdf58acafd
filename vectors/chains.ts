/**
 * `chains.json`: delegation chains (spec §4.2, §4.4; C7, C10), root first, each with the result
 * of hop-by-hop verification: the grant ids, or the deny reason and the failing link.
 */
import { type SignedGrant, verifyChain } from '../core/index.ts';
import type { Checker } from '../conformance/index.ts';
import {
  HOUR_S,
  NOW_S,
  OTHER_RESOURCE,
  delegate,
  did,
  fileHeader,
  forged,
  handChild,
  idOf,
  rootGrant,
  sgFromHex,
  sgHex,
  VectorCheck,
} from './fixtures.ts';
import type { J, JsonObj } from './json.ts';

/** A three-link chain alice → bob → carol → dave with narrowing at every hop. */
export function threeLinks(label: string): [SignedGrant, SignedGrant, SignedGrant] {
  const root = rootGrant(`${label}/root`);
  const mid = delegate(`${label}/mid`, root, 'bob', { subject: 'carol', budget_uj: 600n });
  const leaf = delegate(`${label}/leaf`, mid, 'carol', { subject: 'dave', actions: ['read'], budget_uj: 300n });
  return [root, mid, leaf];
}

function vector(name: string, description: string, chain: readonly SignedGrant[]): JsonObj {
  const r = verifyChain(chain);
  return {
    name,
    description,
    chain: chain.map(sgHex),
    expected: r.ok
      ? { ok: true, ids: r.value }
      : { ok: false, reason: r.error.reason, ...(r.error.link !== undefined ? { link: r.error.link } : {}) },
  };
}

/** Builds `chains.json`. */
export function generate(): JsonObj {
  const [root, mid, leaf] = threeLinks('chains/valid');
  const otherRoot = rootGrant('chains/other-root');
  const otherChild = delegate('chains/other-child', otherRoot, 'bob', { subject: 'carol' });
  const d2 = rootGrant('chains/depth/root', { delegate_depth: 2 });
  const d1 = delegate('chains/depth/d1', d2, 'bob', { subject: 'carol' });
  const d0 = delegate('chains/depth/d0', d1, 'carol', { subject: 'dave' });
  const leafOnly = rootGrant('chains/leaf-only/root', { delegate_depth: 0 });
  const rootWithParent = rootGrant('chains/root-with-parent', { parent: idOf(otherRoot) });
  const later = NOW_S + HOUR_S;
  const ampMid = handChild('chains/amplify-middle-hop/mid', root, { subject: did('carol'), budget_uj: 2000n }, 'bob');
  const ampLeaf = handChild('chains/amplify-middle-hop/leaf', ampMid, { budget_uj: 300n }, 'carol');
  const vectors = [
    vector('one-link-root', 'an un-delegated grant is a one-link chain', [root]),
    vector('three-links', 'alice → bob → carol → dave, narrowing budget then actions', [root, mid, leaf]),
    vector('depth-2-1-0', 'delegate_depth narrows 2 → 1 → 0', [d2, d1, d0]),
    vector('spliced', 'a child of another root spliced under this root', [root, otherChild]),
    vector('parent-link-wrong', 'the child names a parent id that is not the previous link', [
      root,
      handChild('chains/parent-link-wrong', root, { parent: idOf(otherRoot) }, 'bob'),
    ]),
    vector('issuer-not-previous-subject', 'carol issues under a grant held by bob', [
      root,
      handChild('chains/issuer-not-previous-subject', root, { issuer: did('carol') }, 'carol'),
    ]),
    vector('under-leaf-only', 'a hop under a delegate_depth 0 parent (delegation-forbidden is chain-broken on the wire)', [
      leafOnly,
      handChild('chains/under-leaf-only', leafOnly, {}, 'bob'),
    ]),
    vector('root-names-parent', 'the first link has a parent', [rootWithParent]),
    vector('empty', 'no links at all', []),
    vector('amplify-budget', 'the child asks 1,001 µJ under 1,000', [
      root,
      handChild('chains/amplify-budget', root, { budget_uj: 1001n }, 'bob'),
    ]),
    vector('amplify-actions', 'the child adds delete', [
      root,
      handChild(
        'chains/amplify-actions',
        root,
        { capability: { resource: root.grant.capability.resource, actions: ['read', 'delete'] } },
        'bob',
      ),
    ]),
    vector('amplify-resource', 'the child names another resource', [
      root,
      handChild('chains/amplify-resource', root, { capability: { resource: OTHER_RESOURCE, actions: ['read'] } }, 'bob'),
    ]),
    vector('amplify-expiry', 'the child outlives its parent by one second', [
      root,
      handChild('chains/amplify-expiry', root, { expiry: later + 1 }, 'bob'),
    ]),
    vector('amplify-no-expiry', 'the child never expires under an expiring parent', [
      root,
      handChild('chains/amplify-no-expiry', root, { expiry: 0 }, 'bob'),
    ]),
    vector('amplify-depth', 'depth 2 under a depth-2 parent (at most 1)', [
      d2,
      handChild('chains/amplify-depth', d2, { delegate_depth: 2 }, 'bob'),
    ]),
    vector('amplify-depth-unbounded', 'depth absent (unlimited) under a depth-2 parent', [
      d2,
      handChild('chains/amplify-depth-unbounded', d2, { delegate_depth: undefined }, 'bob'),
    ]),
    vector('amplify-middle-hop', 'the middle hop amplifies; the leaf narrows it', [root, ampMid, ampLeaf]),
    vector('bad-signature-root', 'the root signed by mallory', [forged(root), mid, leaf]),
    vector('bad-signature-leaf', 'the leaf signed by mallory', [root, mid, forged(leaf)]),
    vector('structure-before-signatures', 'link 1 forged and link 2 amplifying: structure is checked first', [
      root,
      forged(mid),
      handChild('chains/structure-before-signatures', mid, { budget_uj: 601n }, 'carol'),
    ]),
  ];
  return {
    ...fileHeader('chains.json', 'Delegation chains verified hop by hop', '§4.1, §4.2, §4.4; C7, C10'),
    chains: vectors,
  };
}

/** Re-checks `chains.json` against our implementation. */
export function verify(doc: J, t: Checker): void {
  const c = new VectorCheck(t, 'chains.json', doc);
  c.each(doc, 'chains', (v) => {
    const chain = v.get('chain').items().map(sgFromHex);
    const r = verifyChain(chain);
    const e = v.get('expected');
    c.eq(r.ok, e.get('ok').bool(), 'valid or refused');
    if (r.ok) {
      if (e.get('ok').bool()) c.eq(r.value, e.get('ids').strs(), 'grant ids, root first');
    } else {
      c.eq(r.error.reason, e.get('reason').str(), 'deny reason');
      c.eq(r.error.link, e.has('link') ? e.get('link').num() : undefined, 'failing link');
    }
  });
}
