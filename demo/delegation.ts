/**
 * The report's delegation section (docs/a2a.md: budgets that follow delegation), compiled from
 * the verified receipts: the planner's A2A task to the researcher (an `agent-task` decision), the
 * grant its bridge delegated to the researcher (a quarter of its files budget, §4.1), the tree
 * root → shard → planner → researcher with the µJ spent under each link (every receipt names its
 * whole chain, `chain_ids`, so a link's spend is the sum over the receipts that name it: §4.2,
 * C14), and how the researcher was stopped: refused `budget-exceeded` once its quarter was spent,
 * while the planner's own grant still had budget.
 *
 * The cross-check that the spend per link adds up does not rest on the sums alone: the planner's
 * last receipt says what the node's ledger left on its grant, and the budget less that must be the
 * planner's own spend plus the researcher's (the node debited both from the planner's link).
 */
import { type ContentId, type Did, grantId, type ReceiptCore, type SignedGrant, verifyChain } from '../core/index.ts';
import type { NodeEvidence } from './evidence.ts';
import { chainFromHex, type DelegatedEvent } from './messages.ts';
import type { WorkerChains } from './plan.ts';
import type { DelegationLink, DelegationSection } from './report.ts';
import type { ResearcherTask } from './researchers.ts';
import { AGENT_RESOURCE, DELEGATED_FRACTION, FS_RESOURCE, RESEARCH_SKILL } from './setup.ts';

/** What the run knows about the delegation besides the receipts. */
export interface DelegationFacts {
  readonly planner: { readonly name: string; readonly did: Did; readonly node: string };
  readonly chains: WorkerChains;
  /** The planner's node's evidence (its log, in order). */
  readonly home: NodeEvidence;
  /** Every node's evidence (the files root is spent on all of them). */
  readonly evidence: readonly NodeEvidence[];
  readonly researcher: { readonly did: Did; readonly url: string; readonly tasks: readonly ResearcherTask[] } | undefined;
  readonly delegated: DelegatedEvent | undefined;
}

/** The link ids of a receipt's chain (root first); the leaf alone when it has one link. */
const linksOf = (c: ReceiptCore): readonly ContentId[] => c.chain_ids ?? [c.grant_id];

/** µJ spent, allowed and refused under `id` (as any link) and with `id` as the leaf, over `receipts`. */
function linkTally(receipts: readonly ReceiptCore[], id: ContentId): { spent: bigint; own: bigint; allowed: number; refused: number } {
  const t = { spent: 0n, own: 0n, allowed: 0, refused: 0 };
  for (const c of receipts) {
    if (!linksOf(c).includes(id)) continue;
    if (c.verdict === 'allow') t.spent += c.cost_uj;
    if (c.grant_id !== id) continue;
    if (c.verdict === 'allow') {
      t.own += c.cost_uj;
      t.allowed++;
    } else t.refused++;
  }
  return t;
}

/** One tree row for `g`. */
function link(
  all: readonly ReceiptCore[],
  g: SignedGrant,
  depth: number,
  role: DelegationLink['role'],
  holder: string,
  resource: string,
): DelegationLink {
  const id = grantId(g.grant);
  const t = linkTally(all, id);
  return {
    depth,
    role,
    holder,
    resource,
    grant_id: id,
    budget_uj: g.grant.budget_uj.toString(),
    spent_uj: t.spent.toString(),
    own_spent_uj: t.own.toString(),
    allowed: t.allowed,
    refused: t.refused,
  };
}

/** The delegated chain the researcher received, checked against the planner's: verifies, extends it by one link to the researcher, a quarter of its budget. */
function delegatedGrant(
  f: DelegationFacts,
  problems: string[],
): { chain: SignedGrant[]; section: NonNullable<Extract<DelegationSection, { available: true }>['delegated']> } | undefined {
  const task = f.researcher?.tasks.find((t) => t.chain !== '');
  if (task === undefined) {
    problems.push('the researcher finished no task with a delegated grant');
    return undefined;
  }
  const chain = chainFromHex(task.chain);
  const leaf = chain[chain.length - 1]!.grant;
  const parent = f.chains.files[f.chains.files.length - 1]!.grant;
  const verifies = verifyChain(chain).ok;
  const prefix = chain.slice(0, -1).map((g) => grantId(g.grant));
  const extendsPlanner =
    prefix.length === f.chains.files.length &&
    prefix.every((id, i) => id === grantId(f.chains.files[i]!.grant)) &&
    leaf.subject === f.researcher!.did;
  if (!verifies) problems.push('the delegated chain the researcher received does not verify');
  if (!extendsPlanner) problems.push("the delegated chain does not extend the planner's files chain to the researcher's did:key");
  if (leaf.budget_uj !== parent.budget_uj / DELEGATED_FRACTION)
    problems.push(`the delegated grant's budget ${leaf.budget_uj} µJ is not a quarter of the planner's ${parent.budget_uj} µJ`);
  return {
    chain,
    section: {
      grant_id: grantId(leaf),
      parent_grant_id: grantId(parent),
      budget_uj: leaf.budget_uj.toString(),
      parent_budget_uj: parent.budget_uj.toString(),
      chain_verifies: verifies,
      extends_planner_chain: extendsPlanner,
    },
  };
}

/** The planner's task: the decision its answer carried and the verified receipt of its `agent-task` on the planner's node. */
function taskSection(f: DelegationFacts, problems: string[]): Extract<DelegationSection, { available: true }>['task'] {
  const d = f.delegated;
  const agentsLeaf = f.chains.agents?.at(-1);
  const rc = agentsLeaf === undefined ? undefined : f.home.verified.find((c) => c.grant_id === grantId(agentsLeaf.grant));
  if (d === undefined) problems.push("the planner's A2A task got no answer");
  else if (d.verdict !== 'allow')
    problems.push(`the planner's A2A task was not allowed (${d.verdict}${d.reason ? `: ${d.reason}` : ''}): ${d.summary}`);
  if (rc === undefined) problems.push(`no receipt on ${f.planner.node} for the planner's A2A task`);
  else if (rc.frame_kind !== 'agent-task') problems.push(`the planner's A2A task was sealed as ${rc.frame_kind}, not agent-task`);
  return {
    verdict: d?.verdict ?? 'none',
    deny_reason: d?.reason ?? null,
    grant_id: d?.grant_id ?? null,
    cost_uj: d?.cost_uj ?? null,
    receipt: rc === undefined ? null : { frame_kind: rc.frame_kind, verdict: rc.verdict, cost_uj: rc.cost_uj.toString() },
    state: d?.state ?? null,
    summary: d?.summary ?? '',
    ms: d === undefined ? 0 : d.done_ms - d.sent_ms,
  };
}

/**
 * The researcher's calls on the delegated grant (on the planner's node, in log order), its refusal,
 * and the planner's own grant at that moment: budget − its own spend so far − the researcher's.
 */
function refusalFacts(f: DelegationFacts, delegatedId: ContentId, plannerLeaf: SignedGrant) {
  const plannerId = grantId(plannerLeaf.grant);
  const log = f.home.verified;
  const refusal = log.findIndex((c) => c.grant_id === delegatedId && c.verdict === 'deny');
  const mine = log.filter((c) => c.grant_id === delegatedId);
  const spent = mine.reduce((s, c) => s + (c.verdict === 'allow' ? c.cost_uj : 0n), 0n);
  const before = refusal < 0 ? [] : log.slice(0, refusal);
  const plannerOwnBefore = before.filter((c) => c.grant_id === plannerId && c.verdict === 'allow').reduce((s, c) => s + c.cost_uj, 0n);
  const plannerAfter = refusal < 0 ? [] : log.slice(refusal + 1).filter((c) => c.grant_id === plannerId && c.verdict === 'allow');
  const plannerReceipts = log.filter((c) => c.grant_id === plannerId);
  const last = plannerReceipts.at(-1);
  return {
    calls: {
      allowed: mine.filter((c) => c.verdict === 'allow').length,
      refused: mine.filter((c) => c.verdict === 'deny').length,
      spent_uj: spent.toString(),
      refused_reason: refusal < 0 ? null : (log[refusal]!.deny_reason ?? 'deny'),
      remaining_at_refusal_uj: refusal < 0 ? null : log[refusal]!.budget_remaining_uj.toString(),
    },
    plannerRemaining: refusal < 0 ? null : plannerLeaf.grant.budget_uj - plannerOwnBefore - spent,
    plannerAllowedAfter: plannerAfter.length,
    plannerDrawn: last === undefined ? 0n : plannerLeaf.grant.budget_uj - last.budget_remaining_uj,
    researcherSpent: spent,
  };
}

/** The tree's rows: files root → the planner's shard → the planner → the researcher; agents root → the planner. */
function treeRows(f: DelegationFacts, all: readonly ReceiptCore[], delegated: SignedGrant[] | undefined): DelegationLink[] {
  const files = f.chains.files;
  const rows = [
    link(all, files[0]!, 0, 'root', 'issuer', FS_RESOURCE),
    ...files.slice(1, -1).map((g, i) => link(all, g, i + 1, 'shard', 'issuer', FS_RESOURCE)),
    link(all, files.at(-1)!, files.length - 1, 'planner', f.planner.name, FS_RESOURCE),
  ];
  if (delegated !== undefined) rows.push(link(all, delegated.at(-1)!, files.length, 'researcher', 'researcher', FS_RESOURCE));
  const agents = f.chains.agents;
  if (agents !== undefined) {
    rows.push(link(all, agents[0]!, 0, 'root', 'issuer', AGENT_RESOURCE));
    rows.push(link(all, agents.at(-1)!, 1, 'planner', f.planner.name, AGENT_RESOURCE));
  }
  return rows;
}

/** Each link within its budget, each child's spend within its parent's (a row's parent: the nearest row above one level up, same resource). */
function withinParents(rows: readonly DelegationLink[]): boolean {
  return rows.every((r, i) => {
    if (BigInt(r.spent_uj) > BigInt(r.budget_uj)) return false;
    if (r.depth === 0) return true;
    const parent = rows
      .slice(0, i)
      .reverse()
      .find((p) => p.depth === r.depth - 1 && p.resource === r.resource);
    return parent !== undefined && BigInt(r.spent_uj) <= BigInt(parent.spent_uj);
  });
}

/**
 * The delegation section (see the module comment). Pushes a problem for each thing the demo
 * promises that did not happen: the task not allowed or not sealed as `agent-task`, the delegated
 * chain wrong, the researcher not refused `budget-exceeded`, the planner out of budget at that
 * moment, the links not adding up.
 */
export function delegationSection(f: DelegationFacts, problems: string[]): DelegationSection {
  if (f.researcher === undefined) return { available: false, why: 'the researcher did not start' };
  const task = taskSection(f, problems);
  const delegated = delegatedGrant(f, problems);
  const plannerLeaf = f.chains.files.at(-1)!;
  const all = f.evidence.flatMap((e) => e.verified);
  const tree = treeRows(f, all, delegated?.chain);
  const r = refusalFacts(f, delegated?.section.grant_id ?? '', plannerLeaf);
  const plannerRow = tree.find((x) => x.role === 'planner' && x.resource === FS_RESOURCE)!;
  const addsUp = withinParents(tree) && r.plannerDrawn === BigInt(plannerRow.own_spent_uj) + r.researcherSpent;
  if (r.calls.refused_reason !== 'budget-exceeded')
    problems.push(`the researcher was not refused budget-exceeded on its delegated grant (${r.calls.refused_reason ?? 'never refused'})`);
  if (r.plannerRemaining !== null && r.plannerRemaining <= 0n)
    problems.push('the planner had no budget left when the researcher was refused');
  if (r.calls.allowed === 0) problems.push('the researcher made no allowed call on its delegated grant');
  if (!addsUp)
    problems.push(
      `the spend per link does not add up: the planner's grant was drawn ${r.plannerDrawn} µJ, its own calls ${plannerRow.own_spent_uj} µJ + the researcher's ${r.researcherSpent} µJ`,
    );
  return {
    available: true,
    planner: { name: f.planner.name, did: f.planner.did, node: f.planner.node },
    researcher: { did: f.researcher.did, url: f.researcher.url, skill: RESEARCH_SKILL },
    task,
    delegated: delegated?.section ?? null,
    tree,
    researcher_calls: r.calls,
    planner_remaining_at_refusal_uj: r.plannerRemaining?.toString() ?? null,
    planner_allowed_after_refusal: r.plannerAllowedAfter,
    planner_drawn_uj: r.plannerDrawn.toString(),
    links_add_up: addsUp,
  };
}
