/** Trust roots (§7 "Trust roots", check 3, C15): per-resource root issuers, on both decision paths. */
import { describe, expect, it } from 'vitest';
import { decide, ErrorCodes, TrustRoots } from '../../core/index.ts';
import {
  OTHER_RESOURCE,
  RESOURCE,
  alice,
  bob,
  carol,
  dave,
  delegate,
  freshState,
  mallory,
  requestFor,
  rootGrant,
} from './authority-fixtures.ts';
import { codeOf } from '../support.ts';

describe('trust roots - the table', () => {
  const roots = new TrustRoots({ [RESOURCE]: [alice.did] });

  it('an unconfigured resource is open to any root issuer', () => {
    expect([roots.configured(OTHER_RESOURCE), roots.allows(OTHER_RESOURCE, mallory.did)]).toEqual([false, true]);
    expect(new TrustRoots().allows(RESOURCE, mallory.did)).toBe(true);
  });

  it('a configured resource honours only its listed roots', () => {
    expect([roots.configured(RESOURCE), roots.allows(RESOURCE, alice.did), roots.allows(RESOURCE, mallory.did)]).toEqual([
      true,
      true,
      false,
    ]);
  });

  it('a resource configured with an empty list is closed (fail-closed)', () => {
    const locked = new TrustRoots({ [RESOURCE]: [] });
    expect([locked.configured(RESOURCE), locked.allows(RESOURCE, alice.did)]).toEqual([true, false]);
  });

  it('lists its configuration', () => {
    const t = new TrustRoots({ [RESOURCE]: [alice.did, bob.did] });
    expect(t.rootsOf(RESOURCE)).toEqual([alice.did, bob.did]);
    expect(t.rootsOf(OTHER_RESOURCE)).toEqual([]);
    expect(new TrustRoots(t.toJSON()).toJSON()).toEqual(t.toJSON());
  });

  it.each([
    ['a resource that is not a content id', { 'fs:/etc': [alice.did] }, ErrorCodes.SCHEMA],
    ['a root that is not a did:key', { [RESOURCE]: ['did:web:example.com'] }, ErrorCodes.DID_INVALID],
    ['roots that are not a list', { [RESOURCE]: alice.did as unknown as string[] }, ErrorCodes.SCHEMA],
  ])('refuses %s with a code', (_what, cfg, code) => {
    expect(codeOf(() => new TrustRoots(cfg))).toBe(code);
  });
});

describe('trust roots - in the decision', () => {
  const root = rootGrant();
  const child = delegate(root, bob, { subject: carol.did, budget_uj: 500n });
  const leaf = delegate(child, carol, { subject: dave.did, budget_uj: 100n });

  it('allow / an unconfigured resource, direct and chained', () => {
    const state = freshState();
    expect(decide(requestFor([root]), state).verdict).toBe('allow');
    expect(decide(requestFor([root, child, leaf]), state).verdict).toBe('allow');
  });

  it('allow / a listed root issuer, direct and chained', () => {
    const state = freshState({ roots: { [RESOURCE]: [mallory.did, alice.did] } });
    expect(decide(requestFor([root]), state).verdict).toBe('allow');
    expect(decide(requestFor([root, child, leaf]), state).verdict).toBe('allow');
  });

  it('deny / untrusted root / a validly signed grant from an unlisted issuer, direct path', () => {
    const rogue = rootGrant({}, mallory);
    const d = decide(requestFor([rogue]), freshState({ roots: { [RESOURCE]: [alice.did] } }));
    expect(d.verdict === 'deny' && d.deny.reason).toBe('untrusted-root');
  });

  it('deny / untrusted root / the chained path checks the ROOT issuer, not the leaf issuer', () => {
    // carol issued the leaf and is listed; alice (the root issuer) is not.
    const d = decide(requestFor([root, child, leaf]), freshState({ roots: { [RESOURCE]: [carol.did, bob.did] } }));
    expect(d.verdict === 'deny' && [d.deny.reason, d.deny.link]).toEqual(['untrusted-root', 0]);
  });

  it('deny / untrusted root / the check uses the frame resource', () => {
    const state = freshState({ roots: { [OTHER_RESOURCE]: [mallory.did] } });
    const req = requestFor([root]);
    const d = decide({ ...req, frame: { ...req.frame, resource: OTHER_RESOURCE } }, state);
    expect(d.verdict === 'deny' && d.deny.reason).toBe('untrusted-root');
    // Configuring another resource leaves this one open.
    expect(decide(req, state).verdict).toBe('allow');
  });
});
