/**
 * The bridge's tool catalogue: which upstream tools one agent may call, under which MCP names.
 * Pure: grant chains and the node's tool list in, the listed tools out (no I/O, no clock).
 *
 * A chain's leaf grant (spec §4.1) names one resource and the actions granted on it; a tool is
 * listed when the node serves that resource and its upstream lists a tool of that name (the
 * node's `list_tools`, docs/wire.md). Listing is not authority: the node still decides every
 * call (§7), so an expired or revoked grant is listed and its calls come back as denies.
 *
 * Naming rule (stable, documented in docs/bridge.md):
 *  1. Chains are read in the order given; a (resource, tool) pair granted by two chains is listed
 *     once, exercised with the first chain that grants it.
 *  2. A tool name offered by exactly one listed resource keeps its upstream name.
 *  3. A name offered by two or more listed resources is qualified as `<label>__<tool>`, where
 *     `<label>` is the resource's name in the node's config with every character outside
 *     `[A-Za-z0-9_-]` replaced by `_` (or `r` + the first 8 hex digits of the resource id when
 *     the node gave no name).
 *  4. A qualified name that is still taken gets `_2`, `_3`, … appended, in listing order.
 */
import type { ContentId, SignedGrant } from '../core/index.ts';

/** An MCP tool definition as an upstream lists it (`tools/list`); only `name` is read here. */
export interface McpToolDef {
  readonly name: string;
  readonly [key: string]: unknown;
}

/** One resource the node serves and its upstream's tools (the node's `tool_list`, parsed). */
export interface NodeResourceTools {
  /** The resource's name in the node's config. */
  readonly name: string;
  /** The resource's content id (what grants name). */
  readonly resource: ContentId;
  /** The upstream's `tools/list` `tools`, in its order. */
  readonly tools: readonly McpToolDef[];
  /** `a2a` when an A2A agent stands behind the resource (docs/a2a.md). */
  readonly kind?: 'a2a';
  /** A2A only: the agent card's skills (A2A `AgentSkill` JSON objects; `id` is read). */
  readonly skills?: readonly McpToolDef[];
}

/**
 * One skill the bridge's A2A face lists (bridge/a2a.ts), and how a task for it is made: the same
 * shape as a tool ({@link BridgeTool}): `name` the skill id the A2A client sees, `action` the
 * upstream agent's skill id, `definition` its AgentSkill JSON with `id` replaced by `name`.
 */
export type BridgeSkill = BridgeTool;

/**
 * The A2A skills an agent holding `chains` may ask for: each leaf grant's actions that name a skill
 * of the A2A agent behind its resource (the node's `tool_list` entries with `kind: "a2a"`), named
 * by the same rule as tools (a skill id two resources share becomes `<label>__<id>`).
 */
export function skillCatalogue(chains: readonly (readonly SignedGrant[])[], node: readonly NodeResourceTools[] | undefined): BridgeSkill[] {
  const agents = (node ?? [])
    .filter((r) => r.kind === 'a2a')
    .map((r) => ({
      name: r.name,
      resource: r.resource,
      tools: (r.skills ?? []).map((k) => ({ ...k, skillName: k['name'], name: String(k['id']) })),
    }));
  return catalogue(chains, agents).map((t) => {
    const { name: _id, skillName, ...skill } = t.definition;
    return {
      name: t.name,
      action: t.action,
      resource: t.resource,
      ...(t.resourceName !== undefined ? { resourceName: t.resourceName } : {}),
      chainIndex: t.chainIndex,
      definition: { ...skill, id: t.name, name: typeof skillName === 'string' ? skillName : t.name } as unknown as McpToolDef,
    };
  });
}

/** One tool the bridge lists, and how a call to it is made. */
export interface BridgeTool {
  /** The name the MCP client sees (unique in the catalogue). */
  readonly name: string;
  /** The upstream tool's name: the frame's `action`. */
  readonly action: string;
  /** The resource the call is framed against. */
  readonly resource: ContentId;
  /** The resource's name in the node's config, when the node gave one. */
  readonly resourceName?: string;
  /** Index (into the chains given) of the chain the call is made with. */
  readonly chainIndex: number;
  /** The MCP tool definition listed to the client (the upstream's, with `name` replaced). */
  readonly definition: McpToolDef;
}

/** Input schema listed for a granted action when the node did not list its tools (an older node). */
const ANY_OBJECT = { type: 'object' } as const;

/** The label of a resource in a qualified tool name (rule 3). */
export function resourceLabel(resource: ContentId, name?: string): string {
  if (name !== undefined && name.length > 0) return name.replace(/[^A-Za-z0-9_-]/g, '_');
  return `r${resource.slice(0, 8)}`;
}

/**
 * The tools an agent holding `chains` may call (see the naming rule above).
 * @param chains the agent's grant chains, root first in each; empty chains are skipped.
 * @param node the node's tool list, or undefined when the node does not list tools: each granted
 *   action is then listed as a tool taking any JSON object (`inputSchema: {type: "object"}`).
 * @returns the catalogue in listing order: chains in order, then tools in upstream order.
 */
export function catalogue(chains: readonly (readonly SignedGrant[])[], node: readonly NodeResourceTools[] | undefined): BridgeTool[] {
  const entries: Array<Omit<BridgeTool, 'name'>> = [];
  const seen = new Set<string>();
  chains.forEach((chain, chainIndex) => {
    const leaf = chain[chain.length - 1];
    if (leaf === undefined) return;
    const { resource, actions } = leaf.grant.capability;
    const granted = new Set(actions);
    const served = node?.find((r) => r.resource === resource);
    const defs: McpToolDef[] =
      node === undefined
        ? actions.map((a) => ({ name: a, description: `granted action ${a} (the node did not list its tools)`, inputSchema: ANY_OBJECT }))
        : (served?.tools ?? []).filter((t) => granted.has(t.name));
    for (const def of defs) {
      const key = `${resource}\u0000${def.name}`;
      if (seen.has(key)) continue;
      seen.add(key);
      entries.push({
        action: def.name,
        resource,
        ...(served !== undefined ? { resourceName: served.name } : {}),
        chainIndex,
        definition: def,
      });
    }
  });
  const resourcesOf = new Map<string, Set<ContentId>>();
  for (const e of entries) {
    const s = resourcesOf.get(e.action) ?? new Set<ContentId>();
    s.add(e.resource);
    resourcesOf.set(e.action, s);
  }
  const taken = new Set<string>(entries.filter((e) => resourcesOf.get(e.action)!.size === 1).map((e) => e.action));
  return entries.map((e) => {
    let name = e.action;
    if (resourcesOf.get(e.action)!.size > 1) {
      const base = `${resourceLabel(e.resource, e.resourceName)}__${e.action}`;
      name = base;
      for (let n = 2; taken.has(name); n++) name = `${base}_${n}`;
      taken.add(name);
    }
    return { ...e, name, definition: { ...e.definition, name } };
  });
}
