/**
 * Compiles the demo's report from what the run did and, for every decision, from the verified
 * receipts (demo/evidence.ts): per-worker attribution, denies by reason, what happened
 * after the revocation, the steered run, the team's two attempts, the channel audit against its
 * bound, the energy provenance, and the commands to inspect the logs.
 */
import { JCP_BIN } from '../testkit/index.ts';
import { type ContentId, type Did, grantId, type ReceiptCore, type SignedGrant } from '../core/index.ts';
import type { ChannelAudit } from '../channel/index.ts';
import type { Probe } from '../meter/index.ts';
import type { Approval, BridgeCall, Steering, TeamRefusal } from './actions.ts';
import type { TeamDecision, TeamPolicy } from './team.ts';
import { type Broker, NATS_INSTALL_HINT } from './broker.ts';
import { addToTally, decisionsByRequest, emptyTally, type NodeEvidence, type Tally } from './evidence.ts';
import type { DemoNode } from './nodes.ts';
import { leafId, type Roots, type WorkerChains } from './plan.ts';
import type { DemoReport, WorkerLine } from './report.ts';
import type { WorkerProc } from './workers.ts';
import { delegationSection } from './delegation.ts';
import type { ResearcherTask } from './researchers.ts';
import { PLANNER_INDEX } from './setup.ts';

/** What the run knows besides the receipts. */
export interface RunFacts {
  readonly startedAt: string;
  readonly runS: number;
  readonly dir: string;
  readonly broker: Broker;
  readonly tools: { readonly files: readonly string[]; readonly memory: readonly string[] } | null;
  readonly roots: Roots;
  readonly nodes: readonly DemoNode[];
  readonly evidence: readonly NodeEvidence[];
  readonly workers: readonly WorkerProc[];
  readonly chains: readonly WorkerChains[];
  readonly revocation:
    | { readonly worker: string; readonly grantIds: readonly ContentId[]; readonly acked: readonly string[]; readonly atMs: number }
    | undefined;
  readonly steering: Steering | undefined;
  readonly approval: Approval | undefined;
  /** The call the team was asked to sign outside its holders' policies. */
  readonly teamRefusal: TeamRefusal | undefined;
  /** The team's call through the bridge (an MCP client → bridge → signing session → node). */
  readonly bridgeCall?: BridgeCall | undefined;
  /** Every approval decision the team's holders took, and their policies. */
  readonly teamDecisions: readonly TeamDecision[];
  readonly teamPolicies: readonly TeamPolicy[];
  readonly team:
    | { readonly group: Did; readonly members: readonly Did[]; readonly min: number; readonly max: number; readonly dkgMs: number }
    | undefined;
  readonly teamGrant: SignedGrant | undefined;
  readonly teamAction: string;
  readonly target: string;
  readonly channel: { readonly audit: ChannelAudit; readonly boundUj: bigint; readonly windowUj: bigint } | undefined;
  readonly probe: Probe | undefined;
  /** Each node's `/metrics` text, taken before it stopped. */
  readonly metrics: readonly string[];
  /** The researcher agent (A2A), when it started: its did:key, base url and the tasks it finished. */
  readonly researcher?: { readonly did: Did; readonly url: string; readonly tasks: readonly ResearcherTask[] } | undefined;
  readonly problems: readonly string[];
}

type Role = 'grant' | 'steered' | 'continuation';

/** Sum of `jcp_metered_uj_total{provenance=…}` over the nodes' metrics texts (µJ, by provenance). */
export function meteredByProvenance(texts: readonly string[]): Record<string, bigint> {
  const out: Record<string, bigint> = {};
  const re = /^jcp_metered_uj_total\{[^}]*provenance="([A-Za-z]+)"[^}]*\}\s+([0-9.e+]+)$/gm;
  for (const t of texts) {
    for (const m of t.matchAll(re)) out[m[1]!] = (out[m[1]!] ?? 0n) + BigInt(Math.round(Number(m[2])));
  }
  return out;
}

function energyWhy(p: Probe | undefined): string {
  const base =
    'every call is debited before its tool runs (§5: enforced before the side effect), at the node’s per-action estimate (the workers claim nothing), so the receipts say Estimator: an estimate is never passed off as a measurement';
  if (p === undefined) return base;
  if (p.provenance === 'HwShunt')
    return `${base}; this machine can measure (${p.rung}), and the nodes meter each tool call with it after the decision`;
  return `${base}; this machine has no usable energy counter either (best rung: ${p.rung})`;
}

/** Who owns a worker's grant: the worker's index, its lane, the grant's role and its budget (µJ). */
interface GrantOwner {
  readonly worker: number;
  readonly lane: 'files' | 'memory';
  readonly role: Role;
  readonly budget: bigint;
}

/** Builds the report (see {@link DemoReport}); `ok` needs every receipt to verify and no problem. */
export function buildReport(f: RunFacts): DemoReport {
  const problems = [...f.problems];
  const all: ReceiptCore[] = f.evidence.flatMap((e) => e.verified);
  const byRequest = decisionsByRequest(f.evidence);
  const owner = grantOwners(f);
  const { tallies, denies, workers } = workerLines(f, owner, problems);
  const revocation = revocationSection(f, byRequest, problems);
  const steering = steeringSection(f, owner, tallies, problems);
  const threshold = thresholdSection(f, byRequest, problems);
  const memoryRootId = grantId(f.roots.memory.grant);
  const channel = channelSection(f, all, memoryRootId, problems);
  const delegation = delegationOf(f, problems);
  const receipts = receiptsSection(f, memoryRootId);
  const ok = receipts.all_verify && problems.length === 0;
  return {
    format: 'jcp-demo-report/1',
    ok,
    exit_code: ok ? 0 : 1,
    started_at: f.startedAt,
    run_s: Math.round(f.runS * 10) / 10,
    dir: f.dir,
    nats:
      f.broker.mode === 'none'
        ? { mode: 'none', why: f.broker.why, install: NATS_INSTALL_HINT }
        : { mode: f.broker.mode, url: f.broker.url },
    tools: f.tools,
    issuer: f.roots.issuer.did,
    grants: grantsSection(f, memoryRootId),
    nodes: f.evidence.map((e, i) => ({
      name: e.name,
      did: e.did,
      address: `${f.nodes[i]!.host}:${f.nodes[i]!.port}`,
      data_dir: e.dataDir,
      log_file: f.nodes[i]!.logFile,
      receipts: e.total,
      verified: e.verified.length,
      rejected: e.rejected.length,
      breaks: e.breaks.length,
    })),
    workers,
    denies_by_reason: denies,
    revocation,
    steering,
    threshold,
    channel,
    delegation,
    energy: energySection(f, all),
    receipts,
    problems,
  };
}

/** The delegation section (demo/delegation.ts) for the planner, or why there is none. */
function delegationOf(f: RunFacts, problems: string[]): DemoReport['delegation'] {
  const planner = f.workers[PLANNER_INDEX];
  const chains = f.chains[PLANNER_INDEX];
  const home = f.evidence[PLANNER_INDEX];
  if (planner?.did === undefined || chains === undefined || home === undefined) return { available: false, why: 'the planner did not run' };
  return delegationSection(
    {
      planner: { name: planner.name, did: planner.did, node: home.name },
      chains,
      home,
      evidence: f.evidence,
      researcher: f.researcher,
      delegated: planner.delegated,
    },
    problems,
  );
}

/** Who owns which grant: each worker's files and memory leaves, and the continuation of a steered files grant (§4.7). */
function grantOwners(f: RunFacts): Map<ContentId, GrantOwner> {
  const owner = new Map<ContentId, GrantOwner>();
  for (const [i, c] of f.chains.entries()) {
    const filesLeaf = c.files.at(-1)!;
    const steered = f.steering !== undefined && f.steering.steeredId === leafId(c.files);
    owner.set(leafId(c.files), { worker: i, lane: 'files', role: steered ? 'steered' : 'grant', budget: filesLeaf.grant.budget_uj });
    owner.set(leafId(c.memory), { worker: i, lane: 'memory', role: 'grant', budget: c.memory.at(-1)!.grant.budget_uj });
    if (steered && f.steering)
      owner.set(grantId(f.steering.continuation.grant), { worker: i, lane: 'files', role: 'continuation', budget: f.steering.amendedUj });
  }
  return owner;
}

/**
 * The workers' section from the verified receipts: each worker's tally per grant and how it ended
 * (its last receipt on each lane at its own node), and the denies by reason over every receipt.
 * Pushes a problem for a worker that did not end refused `budget-exceeded` or `revoked`, or made no allowed call.
 */
function workerLines(
  f: RunFacts,
  owner: ReadonlyMap<ContentId, GrantOwner>,
  problems: string[],
): { tallies: Tally[]; denies: Record<string, number>; workers: WorkerLine[] } {
  const tallies: Tally[] = f.workers.map(() => emptyTally());
  const denies: Record<string, number> = {};
  const lastOnLane = f.workers.map(() => ({ files: undefined as ReceiptCore | undefined, memory: undefined as ReceiptCore | undefined }));
  for (const [ni, e] of f.evidence.entries()) {
    for (const c of e.verified) {
      if (c.verdict === 'deny') denies[c.deny_reason ?? 'deny'] = (denies[c.deny_reason ?? 'deny'] ?? 0) + 1;
      const o = owner.get(c.grant_id);
      if (!o) continue;
      addToTally(tallies[o.worker]!, c);
      // A worker works through its own node; its last receipt there on a lane is how the lane ended.
      if (ni === o.worker) lastOnLane[o.worker]![o.lane] = c;
    }
  }
  const workers: WorkerLine[] = f.workers.map((w, i) => {
    const t = tallies[i]!;
    const last = lastOnLane[i]!;
    const ends = [last.files?.deny_reason, last.memory?.deny_reason];
    const ended = ends.includes('revoked')
      ? 'revoked'
      : ends.every((r) => r === 'budget-exceeded')
        ? 'budget-exceeded'
        : (w.end ?? w.failure ?? 'unfinished');
    if (ended !== 'revoked' && ended !== 'budget-exceeded')
      problems.push(`${w.name} did not end refused budget-exceeded or revoked (${ended})`);
    if (t.allowed === 0) problems.push(`${w.name} made no allowed call`);
    const grants = [...owner.entries()]
      .filter(([, o]) => o.worker === i)
      .map(([id, o]) => {
        const g = t.grants[id] ?? { allowed: 0, refused: 0, spentUj: 0n };
        return {
          lane: o.lane,
          role: o.role,
          id,
          budget_uj: o.budget.toString(),
          allowed: g.allowed,
          refused: g.refused,
          spent_uj: g.spentUj.toString(),
        };
      });
    return {
      name: w.name,
      did: w.did ?? ('' as Did),
      node: f.nodes[i]?.name ?? '',
      ended,
      allowed: t.allowed,
      refused: t.refused,
      spent_uj: t.spentUj.toString(),
      denies: t.denies,
      grants,
    };
  });
  return { tallies, denies, workers };
}

/**
 * The revocation section (§4.3): every call sent after every node acknowledged it, by the verdict
 * its verified receipt gave. Pushes a problem when they were not all refused `revoked`, or when no
 * revocation happened (then null).
 */
function revocationSection(f: RunFacts, byRequest: ReturnType<typeof decisionsByRequest>, problems: string[]): DemoReport['revocation'] {
  if (!f.revocation) {
    problems.push('the revocation did not happen');
    return null;
  }
  const r = f.revocation;
  const w = f.workers.find((x) => x.name === r.worker)!;
  const after = w.calls.filter((c) => c.sent_ms > r.atMs);
  const byReason: Record<string, number> = {};
  for (const c of after) {
    const d = byRequest.get(c.request_id);
    const k = d === undefined ? 'no verified receipt' : d.verdict === 'allow' ? 'allow' : (d.deny_reason ?? 'deny');
    byReason[k] = (byReason[k] ?? 0) + 1;
  }
  const allRevoked = after.length > 0 && byReason['revoked'] === after.length;
  if (!allRevoked) problems.push(`after the revocation ${r.worker}'s calls were not all refused revoked: ${JSON.stringify(byReason)}`);
  return {
    worker: r.worker,
    grant_ids: r.grantIds,
    nodes_acked: r.acked,
    calls_after: after.length,
    after_by_reason: byReason,
    all_after_revoked: allRevoked,
  };
}

/**
 * The steering section (§4.7): checkpoint, amendment and the continuation's tally (µJ as decimal
 * strings). Pushes a problem when the amendment did not tighten the budget, the continuation does
 * not verify, or no steering happened (then null).
 */
function steeringSection(
  f: RunFacts,
  owner: ReadonlyMap<ContentId, GrantOwner>,
  tallies: readonly Tally[],
  problems: string[],
): DemoReport['steering'] {
  if (!f.steering) {
    problems.push('the checkpoint and amendment did not happen');
    return null;
  }
  const s = f.steering;
  const cid = grantId(s.continuation.grant);
  const wi = owner.get(cid)?.worker ?? 1;
  const g = tallies[wi]!.grants[cid] ?? { allowed: 0, refused: 0, spentUj: 0n };
  if (!(s.amendedUj < s.budgetBeforeUj)) problems.push('the amendment did not tighten the budget');
  if (!s.continuationVerifies) problems.push('the continuation grant does not verify');
  return {
    worker: f.workers[wi]!.name,
    steered_grant_id: s.steeredId,
    checkpoint_id: s.checkpointId,
    amendment_id: s.amendmentId,
    continuation_id: cid,
    budget_before_uj: s.budgetBeforeUj.toString(),
    remaining_at_checkpoint_uj: s.remainingUj.toString(),
    amended_budget_uj: s.amendedUj.toString(),
    continuation_verifies: s.continuationVerifies,
    continued_allowed: g.allowed,
    continued_refused: g.refused,
  };
}

/**
 * The threshold section (§2.2): the team, its grant, the single-share and group attempts as their
 * verified receipts decided them, the refused call and the bridge call. Not available without NATS;
 * a problem when the team did not run, a single share was allowed or verifies, the group or bridge
 * call was not allowed, the team signed outside its policies, or no holder approved.
 */
function thresholdSection(f: RunFacts, byRequest: ReturnType<typeof decisionsByRequest>, problems: string[]): DemoReport['threshold'] {
  if (f.broker.mode === 'none') return { available: false, why: `the DKG and the signing sessions run over NATS; ${NATS_INSTALL_HINT}` };
  if (!f.approval || !f.team || !f.teamGrant) {
    problems.push('the threshold team did not run');
    return { available: false, why: 'the team did not run (see problems)' };
  }
  const a = f.approval;
  const solo = byRequest.get(a.solo.requestId);
  const group = byRequest.get(a.group.requestId);
  if (solo?.verdict !== 'deny') problems.push('the single-share attempt was not refused by a verified receipt');
  if (a.solo.signatureVerifies) problems.push('a single share produced a signature that verifies');
  if (group?.verdict !== 'allow') problems.push('the group-signed action was not allowed by a verified receipt');
  const viaBridge = f.bridgeCall?.requestId ? byRequest.get(f.bridgeCall.requestId) : undefined;
  if (f.bridgeCall && viaBridge?.verdict !== 'allow')
    problems.push('the team call through the bridge was not allowed by a verified receipt');
  if (!f.teamRefusal?.refused) problems.push("the team signed a call outside its holders' policies");
  if (!f.teamDecisions.some((d) => d.decision === 'approve')) problems.push('no holder recorded an approval of the team call');
  return {
    available: true,
    group: f.team.group,
    members: f.team.members,
    threshold: `${f.team.min}-of-${f.team.max}`,
    dkg_ms: f.team.dkgMs,
    grant: { id: grantId(f.teamGrant.grant), budget_uj: f.teamGrant.grant.budget_uj.toString() },
    action: f.teamAction,
    target: f.target,
    node: f.nodes[0]!.name,
    solo: {
      signature_verifies: a.solo.signatureVerifies,
      verdict: solo?.verdict ?? 'no verified receipt',
      deny_reason: solo?.deny_reason ?? null,
    },
    group_call: {
      signature_verifies: a.group.signatureVerifies,
      verdict: group?.verdict ?? 'no verified receipt',
      deny_reason: group?.deny_reason ?? null,
      result: a.group.result,
    },
    policies: f.teamPolicies,
    approvals: f.teamDecisions,
    refused_call: f.teamRefusal ?? null,
    bridge_call: f.bridgeCall
      ? {
          tool: f.bridgeCall.tool,
          arguments: f.bridgeCall.arguments,
          verdict: viaBridge?.verdict ?? f.bridgeCall.verdict ?? 'not signed',
          error: f.bridgeCall.error,
          ms: f.bridgeCall.ms,
        }
      : null,
  };
}

/**
 * The channel section (§4.5): the audit's spend, overdraft (µJ) against its bound, the proof, each
 * point's statement, and the spend the verified receipts under the memory root add up to. Pushes a
 * problem when the overdraft is over the bound, the proof does not verify, or statements and
 * receipts disagree.
 */
function channelSection(f: RunFacts, all: readonly ReceiptCore[], memoryRootId: ContentId, problems: string[]): DemoReport['channel'] {
  if (!f.roots.channel || !f.channel) {
    return {
      available: false,
      why:
        f.broker.mode === 'none'
          ? 'budget channels settle over NATS, and there is none here; the memory root was sharded instead'
          : 'the audit did not run',
    };
  }
  const a = f.channel.audit;
  const nameOf = new Map(f.nodes.map((n) => [n.did as string, n.name]));
  let receiptsSpent = 0n;
  for (const c of all) if (c.verdict === 'allow' && (c.chain_ids ?? [c.grant_id]).includes(memoryRootId)) receiptsSpent += c.cost_uj;
  const overdraft = a.overdraftUj ?? 0n;
  const within = overdraft <= f.channel.boundUj;
  if (!within) problems.push(`the channel's overdraft ${overdraft} µJ is over its bound ${f.channel.boundUj} µJ`);
  if (a.proofVerifies !== true) problems.push('the channel overdraft proof does not verify');
  if (a.totalUj !== receiptsSpent)
    problems.push(`the channel statements (${a.totalUj} µJ) disagree with the receipts (${receiptsSpent} µJ)`);
  return {
    available: true,
    grant_id: memoryRootId,
    budget_uj: f.roots.memory.grant.budget_uj.toString(),
    window_uj: f.channel.windowUj.toString(),
    spent_uj: a.totalUj.toString(),
    overdraft_uj: overdraft.toString(),
    bound_uj: f.channel.boundUj.toString(),
    within_bound: within,
    proof_verifies: a.proofVerifies === true,
    points: a.lines
      .map((l) => ({ node: nameOf.get(l.point) ?? l.point, did: l.point, spent_uj: l.spentUj.toString(), seq: l.seq }))
      .sort((x, y) => (x.node < y.node ? -1 : 1)),
    children_budget_uj: f.chains.reduce((sum, c) => sum + c.memory.at(-1)!.grant.budget_uj, 0n).toString(),
    refused_statements: a.refused.length,
    receipts_spent_uj: receiptsSpent.toString(),
  };
}

/** The grants section: the roots and their shards, each with its id and budget (µJ as a decimal string). */
function grantsSection(f: RunFacts, memoryRootId: ContentId): DemoReport['grants'] {
  return {
    files_root: { id: grantId(f.roots.files.grant), budget_uj: f.roots.files.grant.budget_uj.toString() },
    file_shards: f.roots.fileShards.map((s, i) => ({
      node: f.nodes[i]?.name ?? `n${i + 1}`,
      id: grantId(s.grant),
      budget_uj: s.grant.budget_uj.toString(),
    })),
    memory_root: { id: memoryRootId, budget_uj: f.roots.memory.grant.budget_uj.toString(), mode: f.roots.channel ? 'channel' : 'shards' },
    memory_shards: f.roots.memoryShards.map((s, i) => ({
      node: f.nodes[i]?.name ?? `n${i + 1}`,
      id: grantId(s.grant),
      budget_uj: s.grant.budget_uj.toString(),
    })),
  };
}

/** The energy section (§5): allowed receipts' debits by provenance, the meter probe, the nodes' metered µJ by provenance, and why. */
function energySection(f: RunFacts, all: readonly ReceiptCore[]): DemoReport['energy'] {
  const debits: Record<string, { receipts: number; uj: bigint }> = {};
  for (const c of all) {
    if (c.verdict !== 'allow') continue;
    const d = debits[c.energy_provenance] ?? { receipts: 0, uj: 0n };
    debits[c.energy_provenance] = d;
    d.receipts++;
    d.uj += c.cost_uj;
  }
  const metered = meteredByProvenance(f.metrics);
  return {
    debits_by_provenance: Object.fromEntries(Object.entries(debits).map(([k, v]) => [k, { receipts: v.receipts, uj: v.uj.toString() }])),
    probe: f.probe
      ? { rung: f.probe.rung, provenance: f.probe.provenance, detail: f.probe.detail, skipped: f.probe.skipped.map((s) => ({ ...s })) }
      : null,
    metered_uj_by_provenance: Object.fromEntries(Object.entries(metered).map(([k, v]) => [k, v.toString()])),
    why: energyWhy(f.probe),
  };
}

/**
 * The receipts section (§8): counts over every node's log (`all_verify` needs at least one receipt,
 * none rejected, no chain break) and the `jcp` commands that check the logs again.
 */
function receiptsSection(f: RunFacts, memoryRootId: ContentId): DemoReport['receipts'] {
  const total = f.evidence.reduce((s, e) => s + e.total, 0);
  const verified = f.evidence.reduce((s, e) => s + e.verified.length, 0);
  const rejected = f.evidence.reduce((s, e) => s + e.rejected.length, 0);
  const breaks = f.evidence.reduce((s, e) => s + e.breaks.length, 0);
  const allVerify = total > 0 && rejected === 0 && breaks === 0 && verified === total;
  const jcp = jcpCommand();
  const n1 = f.nodes[0];
  const commands = [
    ...f.nodes.map((n) => `${jcp} receipts verify ${n.dataDir}`),
    ...(n1
      ? [
          `${jcp} receipts attribute ${n1.dataDir}`,
          `${jcp} receipts export ${n1.dataDir} --format cbor --out ${f.dir}/${n1.name}.receipts.cbor && ${jcp} inspect ${f.dir}/${n1.name}.receipts.cbor`,
        ]
      : []),
    // On a NATS of the user's the demo removed its streams at the end: the channel audit above is the record.
    // The demo's own NATS has stopped; its JetStream store (the signed statements) stays in the folder.
    ...(f.broker.mode === 'started' && f.roots.channel
      ? [
          `${f.broker.bin} -c ${f.broker.server.dir}/nats.conf -l ${f.broker.server.dir}/nats.log & ${jcp} channel audit --grant ${memoryRootId} --nats ${f.broker.url}`,
        ]
      : []),
  ];
  return { total, verified, rejected, breaks, all_verify: allVerify, commands };
}

/**
 * How to run `jcp` from where the demo was started: `node <absolute path>/bin/jcp.mjs`, wherever
 * that is. (`npx jcp` would look the name `jcp` up on the registry, even inside this package,
 * whose own bin npx does not find: a name anyone could publish.) `cwd` is kept for callers.
 */
export function jcpCommand(_cwd = process.cwd()): string {
  return `node ${JCP_BIN}`;
}
