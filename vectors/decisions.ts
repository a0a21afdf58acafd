/**
 * `decisions.json`: the decision (spec §7, chains §4.2; C3, C4, C7, C15, C-neg). Each vector is a
 * request (frame, chain, caller, cost, now) and a state (prior spend per grant id, revoked grant
 * ids, trust roots), with the verdict, the deny reason, and on allow the debit to every link.
 * Every deny reason appears on the direct path (a one-link chain without a parent) where it can,
 * and every one on the chained path; the file lists that coverage and verify re-derives it.
 */
import {
  ALL_DENY_REASONS,
  type ContentId,
  type Cost,
  decide,
  type Decision,
  type DecisionRequest,
  DenyReasons,
  type Frame,
  Ledger,
  type SignedGrant,
  TrustRoots,
} from '../core/index.ts';
import type { Checker } from '../conformance/index.ts';
import { threeLinks } from './chains.ts';
import {
  costFromJson,
  costJson,
  delegate,
  did,
  fileHeader,
  forged,
  frameFromJson,
  frameJson,
  handChild,
  HOUR_S,
  idOf,
  leafFrame,
  NOW_S,
  OTHER_RESOURCE,
  RESOURCE,
  rootGrant,
  sgFromHex,
  sgHex,
  VectorCheck,
} from './fixtures.ts';
import { compact, dec, type J, type Json, type JsonObj } from './json.ts';

/** One decision case before it is decided. */
interface Case {
  readonly name: string;
  readonly description: string;
  readonly chain: readonly SignedGrant[];
  readonly frame?: Partial<Frame>;
  readonly caller?: string;
  readonly cost?: Cost;
  readonly nowS?: number;
  readonly spent?: readonly (readonly [ContentId, bigint])[];
  readonly revoked?: readonly ContentId[];
  readonly roots?: Readonly<Record<ContentId, string[]>>;
}

function pathOf(chain: readonly SignedGrant[]): 'direct' | 'chained' {
  return chain.length === 1 && chain[0]!.grant.parent === undefined ? 'direct' : 'chained';
}

function requestOf(c: Case): DecisionRequest {
  const leaf = c.chain[c.chain.length - 1]!;
  return {
    frame: leafFrame(c.chain, c.frame),
    chain: c.chain,
    caller: c.caller ?? leaf.grant.subject,
    cost: c.cost ?? { uj: 100n, provenance: 'Estimator' },
    nowS: c.nowS ?? NOW_S,
  };
}

function ledgerOf(spent: readonly (readonly [ContentId, bigint])[]): Ledger {
  const l = new Ledger();
  for (const [id, uj] of spent) l.debit([id], uj);
  return l;
}

/** The JSON of a decision's outcome, the debit applied on allow. */
function expectedJson(d: Decision, req: DecisionRequest, ledger: Ledger): JsonObj {
  if (d.verdict === 'allow') ledger.debit(d.chainIds, req.cost.uj);
  const after: JsonObj = {};
  for (const id of d.chainIds) after[id] = dec(ledger.spent(id));
  return compact({
    verdict: d.verdict,
    deny_reason: d.verdict === 'deny' ? d.deny.reason : undefined,
    link: d.verdict === 'deny' ? d.deny.link : undefined,
    chain_ids: d.chainIds,
    remaining_uj: dec(d.remainingUj),
    ledger_after: after,
  });
}

function vector(c: Case): JsonObj {
  const req = requestOf(c);
  const spent = c.spent ?? [];
  const roots = c.roots ?? {};
  const ledger = ledgerOf(spent);
  const d = decide(req, { ledger, revoked: new Set(c.revoked ?? []), trust: new TrustRoots(roots) });
  const spentJson: JsonObj = {};
  for (const [id, uj] of spent) spentJson[id] = dec(uj);
  return {
    name: c.name,
    description: c.description,
    path: pathOf(c.chain),
    request: {
      frame: frameJson(req.frame),
      chain: c.chain.map(sgHex),
      caller: req.caller,
      cost: costJson(req.cost),
      now: req.nowS,
    },
    state: { spent: spentJson, revoked: [...(c.revoked ?? [])], trust_roots: roots as Record<string, Json> },
    expected: expectedJson(d, req, ledger),
  };
}

/** The direct (one-link) cases: funds first, then the gate checks in order, then the grant fields. */
function directCases(): Case[] {
  const root = rootGrant('decisions/direct/root');
  const id = idOf(root);
  const never = rootGrant('decisions/direct/never-expires', { expiry: 0 });
  const chain = [root];
  return [...directFundsCases(chain, id), ...directGateCases(chain, id), ...directGrantCases(root, never, chain)];
}

/** Direct cases about the budget: spent amounts, exact fits, zero-cost and measured (HwShunt) costs, in µJ. */
function directFundsCases(chain: SignedGrant[], id: ContentId): Case[] {
  return [
    { name: 'direct/allow', description: 'first spend: 100 µJ of 1,000', chain },
    { name: 'direct/allow-exact-fit', description: 'spent 900, cost 100: exactly the budget', chain, spent: [[id, 900n]] },
    {
      name: 'direct/budget-exceeded-by-1',
      description: 'spent 900, cost 101: over by 1 µJ',
      chain,
      spent: [[id, 900n]],
      cost: { uj: 101n, provenance: 'Estimator' },
    },
    {
      name: 'direct/allow-zero-cost-when-spent',
      description: 'a 0 µJ call on a fully spent grant fits',
      chain,
      spent: [[id, 1000n]],
      cost: { uj: 0n, provenance: 'Estimator' },
    },
    {
      name: 'direct/allow-hwshunt',
      description: 'a measured cost (HwShunt carries measured)',
      chain,
      cost: { uj: 250n, provenance: 'HwShunt', measured: 243n },
    },
  ];
}

/** Direct cases about frame trust, revocation and trust roots, including which check precedes which (§4.2). */
function directGateCases(chain: SignedGrant[], id: ContentId): Case[] {
  return [
    {
      name: 'direct/untrusted-control',
      description: 'a data frame never exercises a capability',
      chain,
      frame: { trust: 'data', kind: 'tool-result' },
    },
    {
      name: 'direct/untrusted-control-before-revoked',
      description: 'check 1 precedes check 2',
      chain,
      frame: { trust: 'data' },
      revoked: [id],
    },
    { name: 'direct/revoked', description: 'the grant id is revoked', chain, revoked: [id] },
    {
      name: 'direct/revoked-before-untrusted-root',
      description: 'check 2 precedes check 3',
      chain,
      revoked: [id],
      roots: { [RESOURCE]: [did('carol')] },
    },
    {
      name: 'direct/untrusted-root',
      description: 'the resource is configured with carol only',
      chain,
      roots: { [RESOURCE]: [did('carol')] },
    },
    {
      name: 'direct/untrusted-root-empty-list',
      description: 'a resource configured with no roots honours nobody',
      chain,
      roots: { [RESOURCE]: [] },
    },
    {
      name: 'direct/allow-listed-root',
      description: 'the resource lists alice',
      chain,
      roots: { [RESOURCE]: [did('carol'), did('alice')] },
    },
    {
      name: 'direct/allow-unconfigured-resource',
      description: 'roots configured only for another resource: this one is open',
      chain,
      roots: { [OTHER_RESOURCE]: [did('carol')] },
    },
  ];
}

/** Direct cases about the grant itself: grant id, subject, signature, expiry (seconds), resource, action, budget. */
function directGrantCases(root: SignedGrant, never: SignedGrant, chain: SignedGrant[]): Case[] {
  return [
    { name: 'direct/wrong-resource-grant-id', description: 'the frame names another grant id', chain, frame: { grant_id: idOf(never) } },
    { name: 'direct/wrong-subject', description: 'mallory calls with bob’s grant', chain, caller: did('mallory') },
    {
      name: 'direct/wrong-subject-before-bad-signature',
      description: 'check 5 precedes check 6',
      chain: [forged(root)],
      caller: did('mallory'),
    },
    { name: 'direct/bad-signature', description: 'the grant is signed by mallory', chain: [forged(root)] },
    {
      name: 'direct/expired-at-expiry',
      description: 'now = expiry: expired (expiry is the first invalid second)',
      chain,
      nowS: NOW_S + HOUR_S,
    },
    { name: 'direct/allow-one-second-before-expiry', description: 'now = expiry − 1', chain, nowS: NOW_S + HOUR_S - 1 },
    { name: 'direct/allow-expiry-zero', description: 'expiry 0 never expires', chain: [never], nowS: 4_000_000_000 },
    { name: 'direct/wrong-resource', description: 'the frame names another resource', chain, frame: { resource: OTHER_RESOURCE } },
    { name: 'direct/action-not-granted', description: 'delete is not granted', chain, frame: { action: 'delete' } },
    {
      name: 'direct/action-not-granted-before-budget',
      description: 'check 8 precedes check 9',
      chain,
      frame: { action: 'delete' },
      cost: { uj: 5000n, provenance: 'Estimator' },
    },
    {
      name: 'direct/budget-exceeded',
      description: 'a 1,001 µJ call on a fresh 1,000 µJ grant',
      chain,
      cost: { uj: 1001n, provenance: 'ModelBased' },
    },
  ];
}

function chainedCases(): Case[] {
  const chain = threeLinks('decisions/chained');
  const [root, mid, leaf] = chain as [SignedGrant, SignedGrant, SignedGrant];
  const [rootId, midId, leafId] = chain.map(idOf) as [ContentId, ContentId, ContentId];
  const sibling = delegate('decisions/chained/sibling', root, 'bob', { subject: 'erin', budget_uj: 600n });
  const otherRoot = rootGrant('decisions/chained/other-root');
  const otherMid = delegate('decisions/chained/other-mid', otherRoot, 'bob', { subject: 'carol', budget_uj: 600n });
  const leafOnly = rootGrant('decisions/chained/leaf-only', { delegate_depth: 0 });
  const underLeafOnly = handChild('decisions/chained/under-leaf-only', leafOnly, {}, 'bob');
  const amplifying = handChild('decisions/chained/amplifying', mid, { budget_uj: 601n }, 'carol');
  const shortMid = delegate('decisions/chained/short-mid', root, 'bob', { subject: 'carol', budget_uj: 600n, expiry: NOW_S });
  const shortLeaf = delegate('decisions/chained/short-leaf', shortMid, 'carol', { subject: 'dave', actions: ['read'], budget_uj: 300n });
  const two = [root, delegate('decisions/chained/two-leaf', root, 'bob', { subject: 'carol', budget_uj: 500n })];
  return [
    { name: 'chained/allow', description: 'debits root, middle and leaf', chain },
    { name: 'chained/allow-two-links', description: 'a two-link chain', chain: two },
    {
      name: 'chained/allow-exact-fit-everywhere',
      description: 'leaf spent 200 of 300, cost 100',
      chain,
      spent: [
        [leafId, 200n],
        [midId, 200n],
        [rootId, 200n],
      ],
    },
    { name: 'chained/untrusted-control', description: 'a data frame on a chain', chain, frame: { trust: 'data', kind: 'agent-reply' } },
    {
      name: 'chained/untrusted-control-before-chain-broken',
      description: 'check 1 precedes structure',
      chain: [root, otherMid],
      frame: { trust: 'data' },
    },
    { name: 'chained/chain-broken-spliced', description: 'a middle link from another root', chain: [root, otherMid, leaf] },
    { name: 'chained/chain-broken-lone-delegated-grant', description: 'a delegated grant presented without its chain', chain: [leaf] },
    { name: 'chained/chain-broken-under-leaf-only', description: 'a hop under delegate_depth 0', chain: [leafOnly, underLeafOnly] },
    { name: 'chained/attenuation-violation', description: 'the leaf asks 601 µJ under a 600 µJ parent', chain: [root, mid, amplifying] },
    { name: 'chained/bad-signature', description: 'the middle link is signed by mallory', chain: [root, forged(mid), leaf] },
    {
      name: 'chained/chain-broken-before-revoked',
      description: 'structure precedes revocation',
      chain: [root, otherMid, leaf],
      revoked: [rootId],
    },
    { name: 'chained/revoked-leaf', description: 'the leaf is revoked', chain, revoked: [leafId] },
    { name: 'chained/revoked-ancestor', description: 'the root is revoked: the subtree dies', chain, revoked: [rootId] },
    {
      name: 'chained/revoked-before-expired',
      description: 'revocation precedes expiry',
      chain: [root, shortMid, shortLeaf],
      revoked: [idOf(shortLeaf)],
    },
    { name: 'chained/expired-ancestor', description: 'the middle link expires at now', chain: [root, shortMid, shortLeaf] },
    {
      name: 'chained/expired-before-untrusted-root',
      description: 'on a chain, expiry precedes the trust-root check',
      chain: [root, shortMid, shortLeaf],
      roots: { [RESOURCE]: [did('carol')] },
    },
    { name: 'chained/untrusted-root', description: 'the root issuer alice is not listed', chain, roots: { [RESOURCE]: [did('carol')] } },
    {
      name: 'chained/allow-root-listed',
      description: 'the root issuer is listed; intermediate issuers need not be',
      chain,
      roots: { [RESOURCE]: [did('alice')] },
    },
    {
      name: 'chained/wrong-resource-grant-id',
      description: 'the frame names the middle grant, not the leaf',
      chain,
      frame: { grant_id: midId },
    },
    { name: 'chained/wrong-subject', description: 'carol calls with dave’s leaf', chain, caller: did('carol') },
    { name: 'chained/wrong-resource', description: 'the frame names another resource', chain, frame: { resource: OTHER_RESOURCE } },
    { name: 'chained/action-not-granted', description: 'write is granted by the root but not the leaf', chain, frame: { action: 'write' } },
    {
      name: 'chained/budget-exceeded-leaf',
      description: 'leaf spent 250 of 300, cost 100',
      chain,
      spent: [
        [leafId, 250n],
        [midId, 250n],
        [rootId, 250n],
      ],
    },
    {
      name: 'chained/budget-exceeded-ancestor-by-sibling',
      description: 'a sibling under the same root spent 950 µJ of the root: the fresh leaf cannot pay 100',
      chain,
      spent: [
        [rootId, 950n],
        [idOf(sibling), 950n],
      ],
    },
  ];
}

/** Builds `decisions.json`. */
export function generate(): JsonObj {
  const vectors = [...directCases(), ...chainedCases()].map(vector);
  return {
    ...fileHeader('decisions.json', 'The decision: verdicts, deny reasons and debits', '§4.2, §4.3, §7; C3, C4, C7, C15, C-neg'),
    coverage: coverageOf(vectors.map((v) => [v['path'] as string, (v['expected'] as JsonObj)['deny_reason'] as string | undefined])),
    decisions: vectors,
  };
}

/** Verdicts covered per path: `allow` and every deny reason seen, in the spec's order. */
function coverageOf(seen: readonly (readonly [string, string | undefined])[]): JsonObj {
  const out: JsonObj = {};
  for (const path of ['direct', 'chained']) {
    const got = new Set(seen.filter(([p]) => p === path).map(([, r]) => r ?? 'allow'));
    out[path] = ['allow', ...ALL_DENY_REASONS].filter((r) => got.has(r));
  }
  return out;
}

/** Reason that cannot arise on the direct path (a one-link chain without a parent has no hops). */
const CHAIN_ONLY: readonly string[] = [DenyReasons.CHAIN_BROKEN, DenyReasons.ATTENUATION_VIOLATION];

/** Re-checks `decisions.json` against our implementation. */
export function verify(doc: J, t: Checker): void {
  const c = new VectorCheck(t, 'decisions.json', doc);
  const seen: [string, string | undefined][] = [];
  c.each(doc, 'decisions', (v) => {
    const r = v.get('request');
    const chain = r.get('chain').items().map(sgFromHex);
    const req: DecisionRequest = {
      frame: frameFromJson(r.get('frame')),
      chain,
      caller: r.get('caller').str(),
      cost: costFromJson(r.get('cost')),
      nowS: r.get('now').num(),
    };
    const s = v.get('state');
    const ledger = ledgerOf(
      s
        .get('spent')
        .entries()
        .map(([id, uj]) => [id, uj.uint()] as const),
    );
    const roots: Record<string, string[]> = {};
    for (const [res, dids] of s.get('trust_roots').entries()) roots[res] = dids.strs();
    const state = { ledger, revoked: new Set(s.get('revoked').strs()), trust: new TrustRoots(roots) };
    const d = decide(req, state);
    const e = v.get('expected');
    c.eq(pathOf(chain), v.get('path').str(), 'path');
    c.eq(d.verdict, e.get('verdict').str(), 'verdict');
    c.eq(d.verdict === 'deny' ? d.deny.reason : undefined, e.opt('deny_reason')?.str(), 'deny reason');
    c.eq(d.verdict === 'deny' ? d.deny.link : undefined, e.opt('link')?.num(), 'failing link');
    c.eq(d.chainIds, e.get('chain_ids').strs(), 'chain ids');
    c.eq(d.remainingUj, e.get('remaining_uj').uint(), 'remaining µJ at the leaf');
    if (d.verdict === 'allow') ledger.debit(d.chainIds, req.cost.uj);
    for (const [id, uj] of e.get('ledger_after').entries())
      c.eq(ledger.spent(id), uj.uint(), `spend after the decision on ${id.slice(0, 12)}…`);
    seen.push([v.get('path').str(), e.opt('deny_reason')?.str()]);
  });
  c.run('coverage', () => {
    c.eq(doc.get('coverage').raw(), coverageOf(seen), 'coverage lists what the vectors decide');
    const direct = new Set(doc.get('coverage').get('direct').strs());
    const chained = new Set(doc.get('coverage').get('chained').strs());
    for (const r of ['allow', ...ALL_DENY_REASONS]) {
      c.ok(chained.has(r), `the chained path covers ${r}`);
      if (!CHAIN_ONLY.includes(r)) c.ok(direct.has(r), `the direct path covers ${r}`);
    }
  });
}
