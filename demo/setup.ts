/**
 * What the demo (`jcp demo`, `npm start`) sets up before anything runs: the sample folder the
 * filesystem server fronts, the tools each grant names, the node's per-action energy estimates
 * (µJ), the budgets, and the `resources` and `meter` sections of every node's config
 * (docs/node.md "Configuration").
 *
 * The figures are chosen so that a run on a small machine takes seconds: each worker makes a few
 * dozen calls before its budgets run out.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Did, Uj } from '../core/index.ts';

/** Resource names as the nodes configure them (the resource id is `blake3({jcp_resource: name})`). */
export const FS_RESOURCE = 'files';
export const MEMORY_RESOURCE = 'memory';
/** The researcher agent's resource: an A2A agent behind the node (docs/a2a.md). */
export const AGENT_RESOURCE = 'researcher';
/** The researcher's one skill (its agent card lists it; the planner's agents grant names it). */
export const RESEARCH_SKILL = 'research';
/** The worker that acts as the planner: it delegates a quarter of its files budget to the researcher over A2A. */
export const PLANNER_INDEX = 0;
/** The researcher's share of the planner's files grant: budget ÷ this. */
export const DELEGATED_FRACTION = 4n;

/** Filesystem tools a worker's files grant names (`@modelcontextprotocol/server-filesystem`). */
export const FS_ACTIONS = ['read_text_file', 'search_files', 'directory_tree', 'get_file_info'] as const;
/** Memory tools a worker's memory grant names (`@modelcontextprotocol/server-memory`). */
export const MEMORY_ACTIONS = ['create_entities', 'add_observations', 'search_nodes', 'open_nodes'] as const;
/**
 * The irreversible action the threshold team approves. The filesystem server has no delete tool
 * (its destructive tools are `write_file`, `edit_file`, `move_file`, and a move can be undone), so
 * the team deletes an entity from the memory server's knowledge graph: `delete_entities` drops the
 * entity with its observations and relations, and the server keeps no history to restore it from.
 */
export const TEAM_ACTION = 'delete_entities';

/**
 * The node's per-action estimates (µJ). A call is debited before its tool runs (§5: enforced
 * before the side effect), at no less than this figure (node/pricing.ts), so these are what the
 * receipts debit when a caller claims nothing.
 */
export const ESTIMATES_UJ: Readonly<Record<string, Uj>> = {
  read_text_file: 30_000n,
  search_files: 60_000n,
  directory_tree: 25_000n,
  get_file_info: 15_000n,
  create_entities: 40_000n,
  add_observations: 30_000n,
  search_nodes: 40_000n,
  open_nodes: 25_000n,
  delete_entities: 80_000n,
  /** An A2A task sent to the researcher (an `agent-task` frame, priced like a tool call). */
  research: 100_000n,
};
/** The estimate for any other action (µJ). */
export const DEFAULT_ESTIMATE_UJ: Uj = 50_000n;

/** Budgets (µJ) and the channel window. */
export const BUDGETS = {
  /** The files root grant, split into one shard per node. */
  filesRootUj: 3_000_000n,
  /** Each node's shard of the files root. */
  shardUj: 1_000_000n,
  /** Each worker's files grant (from its node's shard). */
  workerFilesUj: 600_000n,
  /** The memory root grant: the shared grant every node serves as a budget channel. */
  memoryRootUj: 1_500_000n,
  /** Each worker's memory grant (together they ask for more than the channel holds: siblings share their root). */
  workerMemoryUj: 800_000n,
  /** Each node's unsettled window W_i on the memory channel. */
  channelWindowUj: 250_000n,
  /** The threshold team's grant for the one irreversible action. */
  teamUj: 200_000n,
  /** The agents root: tasks sent to the researcher over A2A. */
  agentsRootUj: 1_000_000n,
  /** The planner's agents grant (from the agents root). */
  plannerAgentsUj: 500_000n,
} as const;

/** The sample folder's files (path relative to the folder → text). */
export const SAMPLE_FILES: Readonly<Record<string, string>> = {
  'README.txt':
    'Sample folder for the JCP demo.\nEvery read, search and listing of these files went through an enforcement node,\nwas debited from a joule budget and sealed as a signed receipt.\n',
  'notes/energy.txt':
    'Energy is first-class (spec section 5).\nEvery grant carries a joule budget, debited per action before the side effect.\nMeasured when the platform exposes it, estimated when it does not; the provenance always says which.\n',
  'notes/grants.txt':
    'A grant is a signed, bounded, debited capability.\nDelegation only narrows: actions, budget, expiry, depth.\nA revoked grant takes its whole subtree with it.\n',
  'notes/threshold.txt':
    'An irreversible action can need k of n approvers.\nThe team key is split with FROST; no single member can produce a signature the node accepts.\n',
  'ledger.csv': 'worker,task,estimate_uj\nw1,summarise notes,300000\nw2,index files,250000\nw3,draft report,200000\n',
};

/** Writes the sample folder; returns the absolute path of each file, in a fixed order. */
export function writeSample(dir: string): string[] {
  const paths: string[] = [];
  for (const [rel, text] of Object.entries(SAMPLE_FILES)) {
    const p = join(dir, rel);
    mkdirSync(dirname(p), { recursive: true });
    writeFileSync(p, text);
    paths.push(p);
  }
  return paths;
}

/** The `meter` section of each node's config: the estimates above (µJ, JSON numbers). */
export function meterSection(): Record<string, unknown> {
  const estimates: Record<string, number> = {};
  for (const [a, uj] of Object.entries(ESTIMATES_UJ)) estimates[a] = Number(uj);
  return { estimates_uj: estimates, default_estimate_uj: Number(DEFAULT_ESTIMATE_UJ) };
}

/**
 * The `resources` section of one node's config: the filesystem server over `sampleDir` and the
 * memory server with its own file, and, given its base url, the researcher agent over A2A
 * (`{"kind": "a2a", "url"}`, docs/a2a.md), all honouring only `issuer` as root (§7 trust roots).
 */
export function resourcesSection(sampleDir: string, memoryFile: string, issuer: Did, researcherUrl?: string): unknown[] {
  const agent =
    researcherUrl === undefined
      ? []
      : [{ name: AGENT_RESOURCE, trust_roots: [issuer], endpoint: { kind: 'a2a', url: researcherUrl, timeout_ms: 60_000 } }];
  return [
    {
      name: FS_RESOURCE,
      trust_roots: [issuer],
      endpoint: { kind: 'mcp-stdio', command: 'mcp-server-filesystem', args: [sampleDir], timeout_ms: 15_000 },
    },
    {
      name: MEMORY_RESOURCE,
      trust_roots: [issuer],
      endpoint: { kind: 'mcp-stdio', command: 'mcp-server-memory', env: { MEMORY_FILE_PATH: memoryFile }, timeout_ms: 15_000 },
    },
    ...agent,
  ];
}
