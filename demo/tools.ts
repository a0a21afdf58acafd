/**
 * The tools of the real MCP servers the demo's nodes front, asked of the nodes themselves once they
 * listen (jcp/1 `list_tools`, docs/wire.md): each node lists what its own upstreams answered to
 * `tools/list`, so every server is started once, by its node (the demo used to start each one a
 * second time only to list its tools, 2 more processes competing for the CPU at start). The demo
 * prints the lists and checks that every action its grants name is a tool the server has, so a
 * server release that renames a tool fails here with a clear message rather than mid-run.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { JcpClient, WireErrorReply } from '../client/index.ts';

/** A tool as the server lists it. */
export interface ToolInfo {
  readonly name: string;
  /** The server's own annotation: the tool may destroy data. */
  readonly destructive: boolean;
}

/** Where a node listens for jcp/1, and its name for messages. */
export interface ListedNode {
  readonly name: string;
  readonly host: string;
  readonly port: number;
}

/** Pause between two lists while an upstream has not answered yet (ms; the node backs off its reconnects too). */
const RELIST_MS = 500;

/**
 * The tools of each named resource of `node` (`list_tools` over one jcp/1 connection), by resource
 * name. A resource whose list is still empty (its server has not answered `tools/list` yet: the node
 * connects its upstreams as it starts, and reconnects after a back-off) is asked again until
 * `timeoutMs`. @throws Error naming the node and the resources still without tools after
 * `timeoutMs` (their server did not start: the node's log says why), or the connection's error.
 */
export async function nodeTools(node: ListedNode, resources: readonly string[], timeoutMs = 90_000): Promise<Record<string, ToolInfo[]>> {
  const deadline = Date.now() + timeoutMs;
  const client = await JcpClient.connect({ host: node.host, port: node.port, timeoutS: timeoutMs / 1000 });
  try {
    for (;;) {
      const left = Math.max(1, deadline - Date.now());
      const listed = await client.listTools().then(
        (r) => r,
        (e: Error) => e,
      );
      if (listed instanceof Error) {
        // A node counts lists while an upstream is down against the asker's rate limit: wait and ask again.
        const limited = listed instanceof WireErrorReply && listed.code === 'rate-limited';
        if (!limited || Date.now() + RELIST_MS >= deadline)
          throw new Error(`node ${node.name} could not list its tools: ${listed.message}`);
        await sleep(Math.min(RELIST_MS, left));
        continue;
      }
      const out: Record<string, ToolInfo[]> = {};
      for (const r of listed)
        out[r.name] = r.tools.map((t) => ({
          name: String(t['name']),
          destructive: (t['annotations'] as { destructiveHint?: unknown } | undefined)?.destructiveHint === true,
        }));
      const empty = resources.filter((n) => (out[n]?.length ?? 0) === 0);
      if (empty.length === 0) return out;
      if (Date.now() + RELIST_MS >= deadline)
        throw new Error(
          `node ${node.name}: the MCP server of ${empty.join(', ')} listed no tools within ${timeoutMs} ms (it did not start, or lists none): see ${node.name}/node.log`,
        );
      await sleep(Math.min(RELIST_MS, left));
    }
  } finally {
    await client.close().catch(() => undefined);
  }
}

/** The actions a server lacks, of those a grant names. */
export function missingTools(tools: readonly ToolInfo[], actions: readonly string[]): string[] {
  const have = new Set(tools.map((t) => t.name));
  return actions.filter((a) => !have.has(a));
}
