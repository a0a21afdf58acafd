/**
 * The demo's report: one value (`DemoReport`, written as JSON by `jcp demo --json`), rendered as
 * plain lines for people. Every count and µJ figure about decisions comes from verified receipts
 * (demo/evidence.ts); µJ are decimal strings in the JSON, as in the other `jcp` commands.
 */
import type { ContentId, Did } from '../core/index.ts';
import type { TeamRefusal } from './actions.ts';
import type { TeamDecision, TeamPolicy } from './team.ts';

/** A grant as the report names it (µJ as decimal strings). */
export interface GrantLine {
  readonly id: ContentId;
  readonly budget_uj: string;
}

/** One worker's line, from verified receipts. */
export interface WorkerLine {
  readonly name: string;
  readonly did: Did;
  readonly node: string;
  /** How the worker's run ended, from its last refusals. */
  readonly ended: string;
  readonly allowed: number;
  readonly refused: number;
  readonly spent_uj: string;
  readonly denies: Readonly<Record<string, number>>;
  readonly grants: readonly {
    readonly lane: 'files' | 'memory';
    readonly role: 'grant' | 'steered' | 'continuation';
    readonly id: ContentId;
    readonly budget_uj: string;
    readonly allowed: number;
    readonly refused: number;
    readonly spent_uj: string;
  }[];
}

/** One link of the delegation tree (µJ as decimal strings): its spend from the verified receipts whose chain names it (§8.1, C14). */
export interface DelegationLink {
  /** 0 for a root. */
  readonly depth: number;
  readonly role: 'root' | 'shard' | 'planner' | 'researcher';
  /** Who holds it: `issuer`, a worker's name, `researcher`. */
  readonly holder: string;
  /** The resource's name in the node's config. */
  readonly resource: string;
  readonly grant_id: ContentId;
  readonly budget_uj: string;
  /** µJ debited under this link: its own calls and every descendant's (§4.2). */
  readonly spent_uj: string;
  /** µJ debited by calls made with this link as the leaf. */
  readonly own_spent_uj: string;
  readonly allowed: number;
  readonly refused: number;
}

/**
 * The A2A delegation (docs/a2a.md): the planner's task to the researcher through its bridge's A2A
 * face and the node, the grant its bridge delegated (a quarter of its files budget), the tree with
 * spend per link, and how the researcher was stopped.
 */
export type DelegationSection =
  | {
      readonly available: true;
      readonly planner: { readonly name: string; readonly did: Did; readonly node: string };
      readonly researcher: { readonly did: Did; readonly url: string; readonly skill: string };
      /** The `agent-task` decision on the planner's message (from the answer's metadata and the verified receipt). */
      readonly task: {
        readonly verdict: string;
        readonly deny_reason: string | null;
        readonly grant_id: ContentId | null;
        readonly cost_uj: string | null;
        /** The verified receipt of the task on the planner's node: its frame kind and verdict. */
        readonly receipt: { readonly frame_kind: string; readonly verdict: string; readonly cost_uj: string } | null;
        readonly state: string | null;
        readonly summary: string;
        readonly ms: number;
      };
      /** The grant the planner's bridge minted for the researcher, as the researcher received it. */
      readonly delegated: {
        readonly grant_id: ContentId;
        readonly parent_grant_id: ContentId;
        readonly budget_uj: string;
        readonly parent_budget_uj: string;
        readonly chain_verifies: boolean;
        /** The chain extends the planner's own files chain by one link, to the researcher's did:key. */
        readonly extends_planner_chain: boolean;
      } | null;
      /** Root first, depth-first. */
      readonly tree: readonly DelegationLink[];
      /** The researcher's calls on the delegated grant: the refusal that stopped it and what its grant had left then. */
      readonly researcher_calls: {
        readonly allowed: number;
        readonly refused: number;
        readonly spent_uj: string;
        readonly refused_reason: string | null;
        readonly remaining_at_refusal_uj: string | null;
      };
      /** What the planner's own grant had left when the researcher was refused (µJ), from the receipts in log order. */
      readonly planner_remaining_at_refusal_uj: string | null;
      /** The planner's allowed calls after the researcher's refusal. */
      readonly planner_allowed_after_refusal: number;
      /** The planner's budget less what its last receipt says is left: what the node debited from its grant, its own calls and the researcher's (µJ). */
      readonly planner_drawn_uj: string;
      /** Every link within its budget, every child within its parent's spend, and the planner's drawn µJ = its own spend + the researcher's. */
      readonly links_add_up: boolean;
    }
  | { readonly available: false; readonly why: string };

/** The whole report. */
export interface DemoReport {
  readonly format: 'jcp-demo-report/1';
  /** True when every receipt verifies and nothing failed. */
  ok: boolean;
  exit_code: number;
  readonly started_at: string;
  run_s: number;
  readonly dir: string;
  readonly nats: {
    readonly mode: 'external' | 'started' | 'none';
    readonly url?: string;
    readonly why?: string;
    readonly install?: string;
  };
  tools: { readonly files: readonly string[]; readonly memory: readonly string[] } | null;
  readonly issuer: Did;
  readonly grants: {
    readonly files_root: GrantLine;
    readonly file_shards: readonly (GrantLine & { readonly node: string })[];
    readonly memory_root: GrantLine & { readonly mode: 'channel' | 'shards' };
    readonly memory_shards: readonly (GrantLine & { readonly node: string })[];
  };
  nodes: {
    readonly name: string;
    readonly did: Did;
    readonly address: string;
    readonly data_dir: string;
    readonly log_file: string;
    readonly receipts: number;
    readonly verified: number;
    readonly rejected: number;
    readonly breaks: number;
  }[];
  workers: WorkerLine[];
  denies_by_reason: Record<string, number>;
  revocation: {
    readonly worker: string;
    readonly grant_ids: readonly ContentId[];
    readonly nodes_acked: readonly string[];
    /** Calls the worker sent after every node had acknowledged the revocation, and how they were decided. */
    readonly calls_after: number;
    readonly after_by_reason: Readonly<Record<string, number>>;
    readonly all_after_revoked: boolean;
  } | null;
  steering: {
    readonly worker: string;
    readonly steered_grant_id: ContentId;
    readonly checkpoint_id: ContentId;
    readonly amendment_id: ContentId;
    readonly continuation_id: ContentId;
    readonly budget_before_uj: string;
    readonly remaining_at_checkpoint_uj: string;
    readonly amended_budget_uj: string;
    readonly continuation_verifies: boolean;
    /** Calls decided under the continuation (from receipts). */
    readonly continued_allowed: number;
    readonly continued_refused: number;
  } | null;
  threshold:
    | {
        readonly available: true;
        readonly group: Did;
        readonly members: readonly Did[];
        readonly threshold: string;
        readonly dkg_ms: number;
        readonly grant: GrantLine;
        readonly action: string;
        readonly target: string;
        readonly node: string;
        readonly solo: { readonly signature_verifies: boolean; readonly verdict: string; readonly deny_reason: string | null };
        readonly group_call: {
          readonly signature_verifies: boolean;
          readonly verdict: string;
          readonly deny_reason: string | null;
          readonly result: string | null;
        };
        /** Each holder's approval policy (docs/frost.md "Approvals"). */
        readonly policies: readonly TeamPolicy[];
        /** Every decision the holders took, approve or refuse, with holder, policy and reason (each a signed record). */
        readonly approvals: readonly TeamDecision[];
        /** A call outside the policies the team was asked to sign: refused, by whom and why. */
        readonly refused_call: TeamRefusal | null;
        /** The team's call made by an MCP client through the bridge: the verdict of its verified receipt, or the bridge's code when not signed. */
        readonly bridge_call?: {
          readonly tool: string;
          readonly arguments: Record<string, unknown>;
          readonly verdict: string;
          readonly error: string | null;
          readonly ms: number;
        } | null;
      }
    | { readonly available: false; readonly why: string };
  channel:
    | {
        readonly available: true;
        readonly grant_id: ContentId;
        readonly budget_uj: string;
        readonly window_uj: string;
        readonly spent_uj: string;
        readonly overdraft_uj: string;
        readonly bound_uj: string;
        readonly within_bound: boolean;
        readonly proof_verifies: boolean;
        readonly points: readonly { readonly node: string; readonly did: Did; readonly spent_uj: string; readonly seq: number }[];
        readonly refused_statements: number;
        readonly receipts_spent_uj: string;
        /** Σ of the budgets of the workers' grants under the channel root (they may ask for more than it holds). */
        readonly children_budget_uj: string;
      }
    | { readonly available: false; readonly why: string };
  /** The A2A delegation (planner → researcher); absent from reports of earlier versions. */
  delegation?: DelegationSection;
  energy: {
    readonly debits_by_provenance: Readonly<Record<string, { readonly receipts: number; readonly uj: string }>>;
    readonly probe: {
      readonly rung: string;
      readonly provenance: string;
      readonly detail: string;
      readonly skipped: readonly { readonly rung: string; readonly reason: string; readonly detail: string }[];
    } | null;
    readonly metered_uj_by_provenance: Readonly<Record<string, string>>;
    readonly why: string;
  };
  receipts: {
    readonly total: number;
    readonly verified: number;
    readonly rejected: number;
    readonly breaks: number;
    readonly all_verify: boolean;
    readonly commands: readonly string[];
  };
  problems: string[];
}

/** µJ with thousands separators. */
export function fmtUj(v: bigint | string): string {
  return `${BigInt(v).toLocaleString('en-US')} µJ`;
}

const short = (s: string, n = 16): string => (s.length > n + 1 ? `${s.slice(0, n)}…` : s);

function table(rows: readonly (readonly string[])[], right: ReadonlySet<number> = new Set()): string[] {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows.map((r) => `  ${r.map((c, i) => (right.has(i) ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ')}`.trimEnd());
}

/** The report as lines for people (no colours, no cursor tricks: fine for pipes and CI logs). */
export function renderReport(r: DemoReport): string[] {
  return [
    '',
    '== Report ==',
    ...grantLines(r),
    ...workerLines(r),
    ...denyLines(r),
    ...revocationLines(r),
    ...steeringLines(r),
    ...delegationLines(r),
    ...thresholdLines(r),
    ...channelLines(r),
    ...energyLines(r),
    ...receiptLines(r),
  ];
}

/** The grants section: each root with its id and budget (µJ), and how it is split or shared. */
function grantLines(r: DemoReport): string[] {
  const out: string[] = [];
  const g = r.grants;
  out.push('', `Grants (issuer ${r.issuer})`);
  out.push(
    `  files root   ${short(g.files_root.id)}  ${fmtUj(g.files_root.budget_uj)}, split into shards: ${g.file_shards.map((s) => `${s.node} ${fmtUj(s.budget_uj)}`).join(', ')}`,
  );
  out.push(
    g.memory_root.mode === 'channel'
      ? `  memory root  ${short(g.memory_root.id)}  ${fmtUj(g.memory_root.budget_uj)}, one budget channel served by every node`
      : `  memory root  ${short(g.memory_root.id)}  ${fmtUj(g.memory_root.budget_uj)}, split into shards: ${g.memory_shards.map((s) => `${s.node} ${fmtUj(s.budget_uj)}`).join(', ')}`,
  );
  return out;
}

/** The per-worker attribution table (from verified receipts) and each worker's grants: spent of budget (µJ), allowed and refused. */
function workerLines(r: DemoReport): string[] {
  const out: string[] = [];
  out.push('', 'Per-worker attribution (from verified receipts)');
  const rows: string[][] = [['worker', 'node', 'allowed', 'refused', 'µJ spent', 'ended with', 'did']];
  for (const w of r.workers)
    rows.push([
      w.name,
      w.node,
      String(w.allowed),
      String(w.refused),
      BigInt(w.spent_uj).toLocaleString('en-US'),
      w.ended,
      short(w.did, 24),
    ]);
  out.push(...table(rows, new Set([2, 3, 4])));
  for (const w of r.workers) {
    for (const g of w.grants) {
      out.push(
        `    ${w.name} ${g.lane.padEnd(6)} ${g.role.padEnd(12)} ${short(g.id)}  ${fmtUj(g.spent_uj)} of ${fmtUj(g.budget_uj)}  (${g.allowed} allowed, ${g.refused} refused)`,
      );
    }
  }
  return out;
}

/** The denies by reason over every node's verified receipts, most frequent first. */
function denyLines(r: DemoReport): string[] {
  const out: string[] = [];
  out.push('', 'Denies by reason (verified receipts, all nodes)');
  const reasons = Object.entries(r.denies_by_reason).sort((a, b) => b[1] - a[1]);
  if (reasons.length === 0) out.push('  none');
  for (const [reason, n] of reasons) out.push(`  ${reason.padEnd(16)} ${String(n).padStart(5)}`);
  return out;
}

/** The revocation section (§4.3): who was revoked, who acknowledged, and how the later calls were decided. */
function revocationLines(r: DemoReport): string[] {
  const out: string[] = [];
  out.push('', 'Revocation (§4.3)');
  if (r.revocation === null) out.push('  not run');
  else {
    const v = r.revocation;
    out.push(
      `  the issuer revoked ${v.worker}'s ${v.grant_ids.length} grants; acknowledged by ${v.nodes_acked.join(', ')}`,
      `  calls ${v.worker} sent afterwards: ${v.calls_after}, decided ${
        Object.entries(v.after_by_reason)
          .map(([k, n]) => `${k} ×${n}`)
          .join(', ') || 'none'
      }${v.all_after_revoked ? ' — every one refused' : ' — NOT all refused revoked'}`,
    );
  }
  return out;
}

/** The checkpoint and amendment section (§4.7): the steered grant, the amended budget (µJ) and the continuation. */
function steeringLines(r: DemoReport): string[] {
  const out: string[] = [];
  out.push('', 'Checkpoint and amendment (§4.7)');
  if (r.steering === null) out.push('  not run');
  else {
    const s = r.steering;
    out.push(
      `  ${s.worker} checkpointed its files grant ${short(s.steered_grant_id)} (checkpoint ${short(s.checkpoint_id)}), signed by ${s.worker}`,
      `  the issuer amended it (amendment ${short(s.amendment_id)}): budget ${fmtUj(s.budget_before_uj)} → ${fmtUj(s.amended_budget_uj)} (${fmtUj(s.remaining_at_checkpoint_uj)} were left)`,
      `  continuation grant ${short(s.continuation_id)} ${s.continuation_verifies ? 'verifies against the checkpoint + amendment' : 'DOES NOT verify'}; ${s.worker} continued: ${s.continued_allowed} allowed, ${s.continued_refused} refused`,
    );
  }
  return out;
}

/** The delegation section (docs/a2a.md): the planner's A2A task, the delegated grant, the tree with spend per link (µJ), the researcher's refusal. */
function delegationLines(r: DemoReport): string[] {
  const out: string[] = [];
  const d = r.delegation;
  if (d === undefined) return out;
  out.push('', 'Delegation over A2A (§4.1, §4.2): a planner hands the researcher a quarter of its files budget');
  if (!d.available) {
    out.push(`  not run: ${d.why}`);
    return out;
  }
  const p = d.planner.name;
  const t = d.task;
  out.push(
    `  ${p} → its bridge's A2A face → ${d.planner.node} (${t.receipt ? `${t.receipt.frame_kind}, sealed ${t.receipt.verdict}` : 'no receipt'}) → the researcher ${d.researcher.url} (skill ${d.researcher.skill}): ${t.verdict}${t.deny_reason ? ` (${t.deny_reason})` : ''}${t.cost_uj ? `, ${fmtUj(t.cost_uj)}` : ''}${t.state ? `; task ${t.state}` : ''} in ${t.ms} ms`,
    `  the researcher answered: ${t.summary || '(nothing)'}`,
  );
  const g = d.delegated;
  if (g)
    out.push(
      `  delegated grant ${short(g.grant_id)}: ${fmtUj(g.budget_uj)} of ${p}'s ${fmtUj(g.parent_budget_uj)}; the chain ${g.chain_verifies ? 'verifies' : 'does NOT verify'} and ${g.extends_planner_chain ? `extends ${p}'s by one link to the researcher's did:key` : `does NOT extend ${p}'s`}`,
    );
  out.push("  the tree, µJ spent under each link (its own calls and its descendants'; from the verified receipts):");
  const rows: string[][] = [['link (holder)', 'resource', 'grant', 'budget', 'spent', 'own', 'allowed', 'refused']];
  for (const l of d.tree)
    rows.push([
      `${'  '.repeat(l.depth)}${l.role === 'root' || l.role === 'shard' ? `${l.role} (${l.holder})` : l.role === 'planner' ? `${l.holder} (planner)` : l.holder}`,
      l.resource,
      short(l.grant_id),
      BigInt(l.budget_uj).toLocaleString('en-US'),
      BigInt(l.spent_uj).toLocaleString('en-US'),
      BigInt(l.own_spent_uj).toLocaleString('en-US'),
      String(l.allowed),
      String(l.refused),
    ]);
  out.push(...table(rows, new Set([3, 4, 5, 6, 7])).map((x) => `  ${x}`));
  const c = d.researcher_calls;
  out.push(
    c.refused_reason
      ? `  the researcher made ${c.allowed} allowed calls (${fmtUj(c.spent_uj)}), then was refused ${c.refused_reason} (its grant had ${fmtUj(c.remaining_at_refusal_uj ?? '0')} left) while ${p}'s own grant had ${fmtUj(d.planner_remaining_at_refusal_uj ?? '0')} left; ${p} made ${d.planner_allowed_after_refusal} allowed calls after`
      : `  the researcher made ${c.allowed} allowed calls (${fmtUj(c.spent_uj)}) and was NOT refused`,
    `  ${d.links_add_up ? 'the links add up' : 'the links do NOT add up'}: ${d.planner.node} debited ${fmtUj(d.planner_drawn_uj)} from ${p}'s grant (its budget less what its last receipt left), its own calls and the researcher's`,
  );
  return out;
}

/** The threshold team section (§2.2): the group, the single-share and group attempts, the bridge call, the holders' policies and decisions. */
function thresholdLines(r: DemoReport): string[] {
  const out: string[] = [];
  out.push('', 'Threshold team (§2.2): one irreversible action needs 2 of 3');
  if (!r.threshold.available) out.push(`  not run: ${r.threshold.why}`);
  else {
    const t = r.threshold;
    out.push(
      `  group ${short(t.group, 24)} (${t.threshold}, made by DKG over NATS in ${t.dkg_ms} ms; members ${t.members.map((m) => short(m, 14)).join(', ')})`,
      `  grant ${short(t.grant.id)}: ${t.action} on memory, subject = the group`,
      `  one member alone: its signature ${t.solo.signature_verifies ? 'VERIFIES (unexpected)' : 'does not verify under the group key'}; node ${t.node}: ${t.solo.verdict}${t.solo.deny_reason ? ` (${t.solo.deny_reason})` : ''}`,
      `  two members together: signature ${t.group_call.signature_verifies ? 'verifies' : 'does NOT verify'}; node ${t.node}: ${t.group_call.verdict}${t.group_call.deny_reason ? ` (${t.group_call.deny_reason})` : ''} — ${t.action} ${JSON.stringify([t.target])}${t.group_call.result ? `: ${t.group_call.result}` : ''}`,
    );
    if (t.bridge_call) {
      const b = t.bridge_call;
      out.push(
        `  through the bridge (an MCP client's tools/call → a signing session → node ${t.node}): ${b.tool} ${JSON.stringify(b.arguments)}: ${b.verdict}${b.error ? ` (${b.error})` : ''}, ${b.ms} ms`,
      );
    }
    for (const p of t.policies) out.push(`  member ${p.member} decides by ${p.kind}: ${p.what}`);
    for (const d of t.approvals)
      out.push(
        `  member ${d.member} ${d.decision === 'approve' ? 'approved' : 'REFUSED'} request ${short(d.request)} in session ${short(d.session)} (${d.policy_kind} ${short(d.policy)}): ${d.reason}`,
      );
    if (t.refused_call) {
      const rc = t.refused_call;
      out.push(
        rc.refused
          ? `  a call outside the policies got no signature (${rc.code}): ${rc.refusals.map((r) => `member ${r.member} [${r.code}] ${r.why}`).join('; ')}`
          : '  a call outside the policies was SIGNED (unexpected)',
      );
    }
  }
  return out;
}

/** The budget channel section (§4.5 profile): each point's latest statement, the overdraft (µJ) against its bound, and the proof. */
function channelLines(r: DemoReport): string[] {
  const out: string[] = [];
  out.push('', 'Budget channel (§4.5 profile): the memory root shared by all nodes');
  if (!r.channel.available) out.push(`  channel mode not available: ${r.channel.why}`);
  else {
    const c = r.channel;
    out.push(
      `  the workers' memory grants ask for ${fmtUj(c.children_budget_uj)} in all, the root holds ${fmtUj(c.budget_uj)}: siblings share their root's budget (§4.2), so the channel refuses them (budget-exceeded) once the root is spent, whatever is left on their own grants`,
    );
    for (const p of c.points) out.push(`  ${p.node}  ${short(p.did, 24)}  ${fmtUj(p.spent_uj)} in its latest signed statement`);
    out.push(
      `  spent ${fmtUj(c.spent_uj)} of ${fmtUj(c.budget_uj)}; overdraft ${fmtUj(c.overdraft_uj)} against the bound ΣW − min W = ${fmtUj(c.bound_uj)} (W = ${fmtUj(c.window_uj)} per node): ${c.within_bound ? 'within' : 'OVER'} the bound`,
      `  the signed statements ${c.proof_verifies ? 'prove it (the overdraft proof verifies)' : 'do NOT verify'}; receipts show ${fmtUj(c.receipts_spent_uj)} on the channel grant${c.refused_statements ? `; ${c.refused_statements} statement(s) refused` : ''}`,
    );
  }
  return out;
}

/** The energy section (§5): debits by provenance, why, the meter probe and what the nodes metered (µJ). */
function energyLines(r: DemoReport): string[] {
  const out: string[] = [];
  out.push('', 'Energy (§5)');
  for (const [prov, v] of Object.entries(r.energy.debits_by_provenance))
    out.push(`  debited: ${v.receipts} allow receipts, ${fmtUj(v.uj)}, provenance ${prov}`);
  out.push(`  ${r.energy.why}`);
  if (r.energy.probe) {
    const p = r.energy.probe;
    out.push(`  meter probe on this machine: ${p.rung} (${p.provenance}): ${p.detail}`);
    for (const s of p.skipped) out.push(`    skipped ${s.rung.padEnd(9)} ${s.reason.padEnd(17)} ${s.detail}`);
  }
  const metered = Object.entries(r.energy.metered_uj_by_provenance);
  if (metered.length)
    out.push(
      `  metered by the nodes around the tool calls (after the decision, /metrics): ${metered.map(([k, v]) => `${fmtUj(v)} ${k}`).join(', ')}`,
    );
  return out;
}

/** The receipts section (§8): each node's counts, the commands to inspect the logs, the problems, and the closing OK or FAILED line. */
function receiptLines(r: DemoReport): string[] {
  const out: string[] = [];
  out.push('', 'Receipts');
  for (const n of r.nodes) {
    out.push(`  ${n.name}  ${n.receipts} receipts, ${n.verified} verify, ${n.rejected} rejected, ${n.breaks} breaks  ${n.data_dir}`);
  }
  out.push(`  inspect them (the nodes have stopped, so the logs are free):`);
  for (const c of r.receipts.commands) out.push(`    ${c}`);
  if (r.problems.length) {
    out.push('', 'Problems');
    for (const p of r.problems) out.push(`  - ${p}`);
  }
  out.push(
    '',
    r.ok
      ? `OK: all ${r.receipts.total} receipts on ${r.nodes.length} nodes verify; run took ${r.run_s.toFixed(1)} s. Everything the demo started has stopped; its files are in ${r.dir}`
      : `FAILED: ${r.receipts.all_verify ? '' : `${r.receipts.rejected} receipt(s) do not verify, ${r.receipts.breaks} break(s); `}${r.problems.length} problem(s). Files in ${r.dir}`,
  );
  return out;
}
