/**
 * The decision (§7, §4.2; C3, C4, C-neg): every deny reason on the direct and chained paths, the
 * exact order of checks (every pair of faults: the earlier check names the reason), the expiry
 * boundary, budgets, and debit-only-on-allow.
 */
import { describe, expect, it } from 'vitest';
import {
  type ContentId,
  decide,
  type Decision,
  type DecisionRequest,
  denied,
  type Deny,
  type Did,
  ErrorCodes,
  grantId,
  isExpired,
  Ledger,
  type SignedGrant,
  TrustRoots,
} from '../../core/internal.ts';
import {
  NOW_S,
  OTHER_RESOURCE,
  RESOURCE,
  bob,
  carol,
  dave,
  delegate,
  erin,
  forged,
  freshState,
  handChild,
  idsOf,
  mallory,
  requestFor,
  rootGrant,
} from './authority-fixtures.ts';
import { codeOf } from '../support.ts';

const verdictOf = (d: Decision): string => (d.verdict === 'allow' ? 'allow' : d.deny.reason);

/** A decision scenario: the chain and every input a fault may change. */
interface Scenario {
  chain: SignedGrant[];
  trust: 'control' | 'data';
  grantId?: ContentId;
  resource: ContentId;
  action: string;
  caller?: Did;
  nowS: number;
  costUj: bigint;
  revoked: ContentId[];
  roots: Record<ContentId, Did[]>;
  spent: [ContentId, bigint][];
}

function run(s: Scenario): Decision {
  const leaf = s.chain[s.chain.length - 1]!;
  const base = requestFor(s.chain, { costUj: s.costUj, nowS: s.nowS });
  const req: DecisionRequest = {
    ...base,
    caller: s.caller ?? leaf.grant.subject,
    frame: { ...base.frame, trust: s.trust, grant_id: s.grantId ?? grantId(leaf.grant), resource: s.resource, action: s.action },
  };
  const ledger = new Ledger();
  for (const [id, uj] of s.spent) ledger.debit([id], uj);
  return decide(req, { ledger, revoked: new Set(s.revoked), trust: new TrustRoots(s.roots) });
}

function scenario(chain: SignedGrant[]): Scenario {
  return { chain, trust: 'control', resource: RESOURCE, action: 'read', nowS: NOW_S, costUj: 10n, revoked: [], roots: {}, spent: [] };
}

type Fault = readonly [reason: string, apply: (s: Scenario) => void];

/** Apply every pair (i < j) of faults: the earlier one in the check order must name the reason. */
function pairwise(base: () => Scenario, faults: readonly Fault[]): [string, string, string][] {
  const out: [string, string, string][] = [];
  for (let i = 0; i < faults.length; i++) {
    for (let j = i + 1; j < faults.length; j++) {
      const s = base();
      faults[i]![1](s);
      faults[j]![1](s);
      out.push([`${faults[i]![0]} + ${faults[j]![0]}`, verdictOf(run(s)), faults[i]![0].split('/')[0]!]);
    }
  }
  return out;
}

// ---- the direct path -----------------------------------------------------------------------

const direct = rootGrant({ budget_uj: 100n, expiry: 2_000 });
const directId = grantId(direct.grant);
/** The one-link faults, in the spec's §7 order. `reason/what` names a fault; the reason is before the slash. */
const DIRECT_FAULTS: readonly Fault[] = [
  [
    'untrusted-control/data frame',
    (s) => {
      s.trust = 'data';
    },
  ],
  ['revoked/grant revoked', (s) => void s.revoked.push(directId)],
  [
    'untrusted-root/issuer unlisted',
    (s) => {
      s.roots = { [RESOURCE]: [mallory.did], [OTHER_RESOURCE]: [mallory.did] };
    },
  ],
  [
    'wrong-resource/frame names another grant',
    (s) => {
      s.grantId = grantId(rootGrant().grant);
    },
  ],
  [
    'wrong-subject/caller is not the subject',
    (s) => {
      s.caller = mallory.did;
    },
  ],
  [
    'bad-signature/forged issuer signature',
    (s) => {
      s.chain = [forged(direct)];
    },
  ],
  [
    'expired/now = expiry',
    (s) => {
      s.nowS = 2_000;
    },
  ],
  [
    'wrong-resource/frame names another resource',
    (s) => {
      s.resource = OTHER_RESOURCE;
    },
  ],
  [
    'action-not-granted/action delete',
    (s) => {
      s.action = 'delete';
    },
  ],
  ['budget-exceeded/prior 95 µJ + 10 µJ > 100 µJ', (s) => void s.spent.push([directId, 95n])],
];

describe('decision - direct path (one un-delegated grant)', () => {
  it('allow / a control frame by the subject within budget; remaining is after the debit', () => {
    const d = run(scenario([direct]));
    expect(d).toEqual({ verdict: 'allow', chainIds: [directId], leaf: direct.grant, remainingUj: 90n });
  });

  it.each(DIRECT_FAULTS.map(([name, apply]) => [name, apply] as const))('deny / %s', (name, apply) => {
    const s = scenario([direct]);
    apply(s);
    expect(verdictOf(run(s))).toBe(name.split('/')[0]);
  });

  it('the first failing check names the reason, for every pair of faults (§7 order)', () => {
    for (const [pair, got, want] of pairwise(() => scenario([direct]), DIRECT_FAULTS)) expect(`${pair}: ${got}`).toBe(`${pair}: ${want}`);
  });

  it('deny / untrusted control / every fault at once still names the data frame', () => {
    const s = scenario([direct]);
    for (const [, apply] of DIRECT_FAULTS) apply(s);
    expect(verdictOf(run(s))).toBe('untrusted-control');
  });
});

// ---- the chained path ----------------------------------------------------------------------

// alice → bob (root: read+write, 1,000 µJ, expiry 5,000) → carol (mid: read, 600 µJ, 4,000) → dave (leaf: 300 µJ, 3,000)
const root = rootGrant();
const mid = delegate(root, bob, { subject: carol.did, actions: ['read'], budget_uj: 600n, expiry: 4_000 });
const leaf = delegate(mid, carol, { subject: dave.did, budget_uj: 300n, expiry: 3_000 });
const [rootId, midId, leafId] = idsOf([root, mid, leaf]) as [ContentId, ContentId, ContentId];

/** The chained faults, in the documented chained order. */
const CHAIN_FAULTS: readonly Fault[] = [
  [
    'untrusted-control/data frame',
    (s) => {
      s.trust = 'data';
    },
  ],
  [
    'chain-broken/middle link from another chain',
    (s) => {
      s.chain[1] = delegate(root, bob, { subject: carol.did, actions: ['read'] });
    },
  ],
  [
    'attenuation-violation/leaf budget above its parent',
    (s) => {
      s.chain[2] = handChild(mid, { budget_uj: 601n, expiry: 3_000 }, carol);
    },
  ],
  [
    'bad-signature/forged middle link',
    (s) => {
      s.chain[1] = forged(s.chain[1]!);
    },
  ],
  ['revoked/middle link revoked', (s) => void s.revoked.push(midId)],
  [
    'expired/now past every expiry',
    (s) => {
      s.nowS = 5_000;
    },
  ],
  [
    'untrusted-root/root issuer unlisted, leaf issuer listed',
    (s) => {
      s.roots = { [RESOURCE]: [carol.did], [OTHER_RESOURCE]: [carol.did] };
    },
  ],
  [
    'wrong-resource/frame names the root, not the leaf',
    (s) => {
      s.grantId = rootId;
    },
  ],
  [
    'wrong-subject/caller is the middle holder',
    (s) => {
      s.caller = carol.did;
    },
  ],
  [
    'wrong-resource/frame names another resource',
    (s) => {
      s.resource = OTHER_RESOURCE;
    },
  ],
  [
    'action-not-granted/write: in the root, not in the leaf',
    (s) => {
      s.action = 'write';
    },
  ],
  ['budget-exceeded/root spent by a sibling', (s) => void s.spent.push([rootId, 995n])],
];

describe('decision - chained path', () => {
  it('allow / a verified chain; every link is named for the debit; remaining is the leaf’s', () => {
    const d = run(scenario([root, mid, leaf]));
    expect(d).toEqual({ verdict: 'allow', chainIds: [rootId, midId, leafId], leaf: leaf.grant, remainingUj: 290n });
  });

  it.each(CHAIN_FAULTS.map(([name, apply]) => [name, apply] as const))('deny / %s', (name, apply) => {
    const s = scenario([root, mid, leaf]);
    apply(s);
    expect(verdictOf(run(s))).toBe(name.split('/')[0]);
  });

  it('the first failing check names the reason, for every pair of faults (documented chained order)', () => {
    for (const [pair, got, want] of pairwise(() => scenario([root, mid, leaf]), CHAIN_FAULTS)) {
      expect(`${pair}: ${got}`).toBe(`${pair}: ${want}`);
    }
  });

  it('deny payloads name the failing link', () => {
    const linkOf = (apply: (s: Scenario) => void): [string, number | undefined] => {
      const s = scenario([root, mid, leaf]);
      apply(s);
      const d = run(s);
      return d.verdict === 'deny' ? [d.deny.reason, d.deny.link] : ['allow', undefined];
    };
    expect(linkOf((s) => void s.revoked.push(leafId))).toEqual(['revoked', 2]);
    expect(linkOf((s) => void s.revoked.push(rootId, leafId))).toEqual(['revoked', 0]);
    expect(
      linkOf((s) => {
        s.nowS = 3_000;
      }),
    ).toEqual(['expired', 2]);
    expect(
      linkOf((s) => {
        s.nowS = 4_000;
      }),
    ).toEqual(['expired', 1]);
    expect(linkOf((s) => void s.spent.push([midId, 595n]))).toEqual(['budget-exceeded', 1]);
    expect(linkOf((s) => void s.spent.push([leafId, 291n]))).toEqual(['budget-exceeded', 2]);
    expect(
      linkOf((s) => {
        s.caller = mallory.did;
      }),
    ).toEqual(['wrong-subject', 2]);
  });

  it('deny / chain broken / a delegated grant presented without its chain (no ancestor budget bypass)', () => {
    expect(verdictOf(run(scenario([leaf])))).toBe('chain-broken');
    expect(verdictOf(run(scenario([mid, leaf])))).toBe('chain-broken');
  });

  it('deny / untrusted control / a data frame is refused before the chain is even verified', () => {
    const s = scenario([leaf, mid, root]);
    s.trust = 'data';
    expect(verdictOf(run(s))).toBe('untrusted-control');
  });

  it('deny / expired / an expiring ancestor kills the chain at its expiry', () => {
    const r = rootGrant({ expiry: 1_500 });
    const c = delegate(r, bob, { subject: carol.did, expiry: 1_500 });
    const s = scenario([r, c]);
    s.nowS = 1_500;
    const d = run(s);
    expect(d.verdict === 'deny' && [d.deny.reason, d.deny.link, d.deny.expiredAtS]).toEqual(['expired', 0, 1_500]);
  });
});

// ---- expiry, budgets, debits ---------------------------------------------------------------

describe('decision - expiry boundary (expiry is the first invalid second)', () => {
  it('allow at expiry − 1 s, deny at expiry and after; expiry 0 never expires', () => {
    const g = rootGrant({ expiry: 2_000 });
    const at = (nowS: number, sg = g) => verdictOf(decide(requestFor([sg], { nowS }), freshState()));
    expect([at(1_999), at(2_000), at(2_001)]).toEqual(['allow', 'expired', 'expired']);
    const forever = rootGrant({ expiry: 0 });
    expect(at(Number.MAX_SAFE_INTEGER, forever)).toBe('allow');
    expect([isExpired(g.grant, 1_999), isExpired(g.grant, 2_000), isExpired(forever.grant, 2 ** 40)]).toEqual([false, true, false]);
  });

  it('deny / expired / carries the expiry in seconds', () => {
    const g = rootGrant({ expiry: 2_000 });
    const d = decide(requestFor([g], { nowS: 2_000 }), freshState());
    expect(d.verdict === 'deny' && d.deny.expiredAtS).toBe(2_000);
  });
});

describe('decision - budget (C3)', () => {
  it('allow / a cost that exactly fits; deny / budget exceeded / over by 1 µJ', () => {
    const g = rootGrant({ budget_uj: 100n });
    const state = freshState();
    expect(verdictOf(decide(requestFor([g], { costUj: 101n }), state))).toBe('budget-exceeded');
    const d = decide(requestFor([g], { costUj: 100n }), state);
    expect([d.verdict, d.remainingUj]).toEqual(['allow', 0n]);
  });

  it('deny / budget exceeded / prior spend counts, and the payload says by how much', () => {
    const g = rootGrant({ budget_uj: 100n });
    const state = freshState();
    state.ledger.debit([grantId(g.grant)], 60n);
    const d = decide(requestFor([g], { costUj: 41n }), state);
    expect(d.verdict === 'deny' && d.deny).toMatchObject({ reason: 'budget-exceeded', requestedUj: 41n, remainingUj: 40n });
    expect(d.remainingUj).toBe(40n);
  });

  it('allow / a zero-cost call on an exhausted grant', () => {
    const g = rootGrant({ budget_uj: 5n });
    const state = freshState();
    state.ledger.debit([grantId(g.grant)], 5n);
    expect(verdictOf(decide(requestFor([g], { costUj: 0n }), state))).toBe('allow');
  });

  it('debit only on allow: spending in a loop stops exactly at the ceiling, and a denied call is never debited', () => {
    const g = rootGrant({ budget_uj: 95n });
    const id = grantId(g.grant);
    const state = freshState();
    const verdicts: string[] = [];
    for (let i = 0; i < 12; i++) {
      const d = decide(requestFor([g], { costUj: 10n }), state);
      verdicts.push(d.verdict);
      if (d.verdict === 'allow') state.ledger.debit(d.chainIds, 10n);
    }
    expect(verdicts.filter((v) => v === 'allow')).toHaveLength(9);
    expect(verdicts.slice(9)).toEqual(['deny', 'deny', 'deny']);
    expect(state.ledger.spent(id)).toBe(90n);
    expect(verdictOf(decide(requestFor([g], { costUj: 5n }), state))).toBe('allow');
  });

  it('decide never mutates its state, allow or deny', () => {
    const chain = [root, mid, leaf];
    const state = freshState();
    state.ledger.debit([rootId], 7n);
    const snapshot = () => [...state.ledger.entries()];
    const before = snapshot();
    decide(requestFor(chain), state);
    decide(requestFor(chain, { costUj: 10_000n }), state);
    decide(requestFor([direct]), state);
    expect(snapshot()).toEqual(before);
  });

  it('a chained allow is debited from every link, and the siblings then see less', () => {
    const sibling = delegate(root, bob, { subject: erin.did, budget_uj: 1_000n });
    const state = freshState();
    const d = decide(requestFor([root, mid, leaf], { costUj: 250n }), state);
    expect(d.verdict).toBe('allow');
    state.ledger.debit(d.chainIds, 250n);
    expect([rootId, midId, leafId].map((id) => state.ledger.spent(id))).toEqual([250n, 250n, 250n]);
    const s = decide(requestFor([root, sibling], { costUj: 751n }), state);
    expect(s.verdict === 'deny' && [s.deny.reason, s.deny.link, s.deny.remainingUj]).toEqual(['budget-exceeded', 0, 750n]);
  });
});

describe('decision - inputs and helpers', () => {
  it('is deterministic: the same inputs give the same decision', () => {
    const req = requestFor([root, mid, leaf]);
    expect(decide(req, freshState())).toEqual(decide(req, freshState()));
  });

  it('denied() builds a deny with the given reason and the chain ids, and debits nothing', () => {
    const state = freshState();
    const deny: Deny = { reason: 'bad-signature', why: 'caller signature does not verify' };
    const d = denied(requestFor([root, mid, leaf]), state, deny);
    expect(d).toEqual({ verdict: 'deny', deny, chainIds: [rootId, midId, leafId], leaf: leaf.grant, remainingUj: 300n });
    expect(state.ledger.size).toBe(0);
  });

  it('refuses an empty chain or a negative cost as bad input (schema), not as a decision', () => {
    const req = requestFor([direct]);
    expect(codeOf(() => decide({ ...req, chain: [] }, freshState()))).toBe(ErrorCodes.SCHEMA);
    expect(codeOf(() => denied({ ...req, chain: [] }, freshState(), { reason: 'bad-signature' }))).toBe(ErrorCodes.SCHEMA);
    expect(codeOf(() => decide({ ...req, cost: { uj: -1n, provenance: 'Estimator' } }, freshState()))).toBe(ErrorCodes.SCHEMA);
  });

  it('a deny on an overspent grant reports 0 µJ remaining, never a negative figure', () => {
    const g = rootGrant({ budget_uj: 10n });
    const state = freshState();
    state.ledger.debit([grantId(g.grant)], 25n);
    const d = decide(requestFor([g], { costUj: 1n }), state);
    expect([verdictOf(d), d.remainingUj]).toEqual(['budget-exceeded', 0n]);
  });

  it('the frame grant_id is compared against the leaf id on a chain', () => {
    const s = scenario([root, mid, leaf]);
    s.grantId = midId;
    expect(verdictOf(run(s))).toBe('wrong-resource');
    s.grantId = leafId;
    expect(verdictOf(run(s))).toBe('allow');
  });
});
