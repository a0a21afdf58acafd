/**
 * The demo's grants (spec §4): what the issuer mints before the nodes start, what it delegates to
 * each worker, and the threshold team's grant.
 *
 * A grant names one resource, so the issuer mints one root per resource, each held by itself:
 * - files: the root is split into one shard per node (§4.5 baseline, core `mintShards`); each
 *   node enforces its slice locally, and worker i's files grant is a depth-0 child of shard i;
 * - memory: the root is one shared grant every node serves as a budget channel (§4.5 profile,
 *   with NATS); worker i's memory grant is a depth-0 child of it. Without NATS there is no
 *   channel, so the memory root is sharded too.
 * The threshold team's grant is its own root: issuer → the group's did:key, one action.
 *
 * The planner (worker {@link PLANNER_INDEX}) also gets a files grant it may delegate once more
 * (depth 1: its bridge mints the researcher's quarter from it, docs/a2a.md `jcp/delegate`), and an
 * agents grant from the agents root naming the researcher's skill, for the A2A task itself.
 */
import { randomBytes } from 'node:crypto';
import {
  type Actor,
  attenuate,
  type ContentId,
  type Did,
  type Grant,
  grantId,
  mintShards,
  type SignedGrant,
  signGrant,
} from '../core/index.ts';
import { resourceIdOf } from '../node/index.ts';
import {
  AGENT_RESOURCE,
  BUDGETS,
  FS_ACTIONS,
  FS_RESOURCE,
  MEMORY_ACTIONS,
  MEMORY_RESOURCE,
  PLANNER_INDEX,
  RESEARCH_SKILL,
  TEAM_ACTION,
} from './setup.ts';

const nonce = (): Uint8Array => new Uint8Array(randomBytes(16));

/** The issuer's roots and their slices. */
export interface Roots {
  readonly issuer: Actor;
  /** Unix seconds; every grant of the run expires then. */
  readonly expiryS: number;
  readonly files: SignedGrant;
  /** One files shard per node. */
  readonly fileShards: readonly SignedGrant[];
  readonly memory: SignedGrant;
  /** True when the memory root is a budget channel; false when it is sharded instead (no NATS). */
  readonly channel: boolean;
  /** One memory shard per node when there is no channel. */
  readonly memoryShards: readonly SignedGrant[];
  /** The agents root: tasks sent to the researcher over A2A (held by the issuer). */
  readonly agents: SignedGrant;
}

/** A worker's two chains, root first; the planner also holds an agents chain. */
export interface WorkerChains {
  readonly files: SignedGrant[];
  readonly memory: SignedGrant[];
  /** The planner's agents chain (agents root → planner, the researcher's skill); absent for the other workers. */
  readonly agents?: SignedGrant[];
}

function ok<T>(r: { ok: true; value: T } | { ok: false; error: { why: string } }, what: string): T {
  if (!r.ok) throw new Error(`${what}: ${r.error.why}`);
  return r.value;
}

/** Mints the roots (held by the issuer) and the shards, for `nodes` nodes. */
export function mintRoots(issuer: Actor, nowS: number, nodes: number, channel: boolean): Roots {
  const expiryS = nowS + 3_600;
  const root = (resource: string, actions: readonly string[], budget: bigint, depth = 2): SignedGrant => {
    const g: Grant = {
      issuer: issuer.did,
      subject: issuer.did,
      capability: { resource: resourceIdOf(resource), actions: [...actions] },
      budget_uj: budget,
      expiry: expiryS,
      delegate_depth: depth,
      nonce: nonce(),
    };
    return signGrant(g, issuer);
  };
  // Files: root → shard → worker, and the planner's grant may be delegated once more (→ researcher).
  const files = root(FS_RESOURCE, FS_ACTIONS, BUDGETS.filesRootUj, 3);
  const memory = root(MEMORY_RESOURCE, MEMORY_ACTIONS, BUDGETS.memoryRootUj);
  const shardsOf = (parent: SignedGrant, each: bigint, depth: number) =>
    ok(
      mintShards(
        parent,
        issuer,
        Array.from({ length: nodes }, () => ({ subject: issuer.did, budget_uj: each, nonce: nonce(), delegate_depth: depth })),
      ),
      'shards',
    );
  const fileShards = shardsOf(files, BUDGETS.shardUj, 2);
  const memoryShards = channel ? [] : shardsOf(memory, BUDGETS.memoryRootUj / BigInt(nodes), 1);
  const agents = root(AGENT_RESOURCE, [RESEARCH_SKILL], BUDGETS.agentsRootUj, 1);
  return { issuer, expiryS, files, fileShards, memory, channel, memoryShards, agents };
}

/**
 * Delegates worker `i`'s grants: files from node i's shard, memory from the channel root (or node
 * i's memory shard), depth 0; the planner's files grant has depth 1 (it delegates to the
 * researcher) and the planner also gets its agents grant (depth 0).
 */
export function delegateWorker(r: Roots, i: number, worker: Did): WorkerChains {
  const shard = r.fileShards[i]!;
  const planner = i === PLANNER_INDEX;
  const files = ok(
    attenuate(shard, { subject: worker, budget_uj: BUDGETS.workerFilesUj, delegate_depth: planner ? 1 : 0, nonce: nonce() }, r.issuer),
    'files grant',
  );
  const memParent = r.channel ? r.memory : r.memoryShards[i]!;
  const budget = r.channel ? BUDGETS.workerMemoryUj : memParent.grant.budget_uj;
  const memory = ok(
    attenuate(memParent, { subject: worker, budget_uj: budget, delegate_depth: 0, nonce: nonce() }, r.issuer),
    'memory grant',
  );
  const agents = planner
    ? ok(
        attenuate(r.agents, { subject: worker, budget_uj: BUDGETS.plannerAgentsUj, delegate_depth: 0, nonce: nonce() }, r.issuer),
        'agents grant',
      )
    : undefined;
  return {
    files: [r.files, shard, files],
    memory: r.channel ? [r.memory, memory] : [r.memory, memParent, memory],
    ...(agents !== undefined ? { agents: [r.agents, agents] } : {}),
  };
}

/** The team's grant: the issuer → the group's did:key, memory `delete_entities` only, leaf-only. */
export function teamGrant(r: Roots, group: Did): SignedGrant {
  return signGrant(
    {
      issuer: r.issuer.did,
      subject: group,
      capability: { resource: resourceIdOf(MEMORY_RESOURCE), actions: [TEAM_ACTION] },
      budget_uj: BUDGETS.teamUj,
      expiry: r.expiryS,
      delegate_depth: 0,
      nonce: nonce(),
    },
    r.issuer,
  );
}

/** The id of a chain's leaf. */
export function leafId(chain: readonly SignedGrant[]): ContentId {
  return grantId(chain[chain.length - 1]!.grant);
}
