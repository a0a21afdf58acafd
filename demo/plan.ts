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
import { BUDGETS, FS_ACTIONS, FS_RESOURCE, MEMORY_ACTIONS, MEMORY_RESOURCE, TEAM_ACTION } from './setup.ts';

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
}

/** A worker's two chains, root first. */
export interface WorkerChains {
  readonly files: SignedGrant[];
  readonly memory: SignedGrant[];
}

function ok<T>(r: { ok: true; value: T } | { ok: false; error: { why: string } }, what: string): T {
  if (!r.ok) throw new Error(`${what}: ${r.error.why}`);
  return r.value;
}

/** Mints the roots (held by the issuer) and the shards, for `nodes` nodes. */
export function mintRoots(issuer: Actor, nowS: number, nodes: number, channel: boolean): Roots {
  const expiryS = nowS + 3_600;
  const root = (resource: string, actions: readonly string[], budget: bigint): SignedGrant => {
    const g: Grant = {
      issuer: issuer.did,
      subject: issuer.did,
      capability: { resource: resourceIdOf(resource), actions: [...actions] },
      budget_uj: budget,
      expiry: expiryS,
      delegate_depth: 2,
      nonce: nonce(),
    };
    return signGrant(g, issuer);
  };
  const files = root(FS_RESOURCE, FS_ACTIONS, BUDGETS.filesRootUj);
  const memory = root(MEMORY_RESOURCE, MEMORY_ACTIONS, BUDGETS.memoryRootUj);
  const shardsOf = (parent: SignedGrant, each: bigint) =>
    ok(
      mintShards(
        parent,
        issuer,
        Array.from({ length: nodes }, () => ({ subject: issuer.did, budget_uj: each, nonce: nonce(), delegate_depth: 1 })),
      ),
      'shards',
    );
  const fileShards = shardsOf(files, BUDGETS.shardUj);
  const memoryShards = channel ? [] : shardsOf(memory, BUDGETS.memoryRootUj / BigInt(nodes));
  return { issuer, expiryS, files, fileShards, memory, channel, memoryShards };
}

/** Delegates worker `i`'s depth-0 grants: files from node i's shard, memory from the channel root (or node i's memory shard). */
export function delegateWorker(r: Roots, i: number, worker: Did): WorkerChains {
  const shard = r.fileShards[i]!;
  const files = ok(
    attenuate(shard, { subject: worker, budget_uj: BUDGETS.workerFilesUj, delegate_depth: 0, nonce: nonce() }, r.issuer),
    'files grant',
  );
  const memParent = r.channel ? r.memory : r.memoryShards[i]!;
  const budget = r.channel ? BUDGETS.workerMemoryUj : memParent.grant.budget_uj;
  const memory = ok(
    attenuate(memParent, { subject: worker, budget_uj: budget, delegate_depth: 0, nonce: nonce() }, r.issuer),
    'memory grant',
  );
  return {
    files: [r.files, shard, files],
    memory: r.channel ? [r.memory, memory] : [r.memory, memParent, memory],
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
