/**
 * The real MCP servers the demo's nodes front, asked directly for their tool lists before the run:
 * the demo prints them and checks that every action its grants name is a tool the server has, so a
 * server release that renames a tool fails here with a clear message rather than mid-run.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

/** This package's root: demo/tools.ts in the sources, dist/demo/tools.js in the build. */
const ROOT = fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? '../' : '../../', import.meta.url));

/**
 * A server's command from this package's node_modules/.bin, or from the one its dependencies were
 * hoisted into when the package is installed as a dependency; the bare name (PATH) otherwise.
 */
const bin = (name: string): string =>
  [join(ROOT, 'node_modules', '.bin', name), join(ROOT, '..', '.bin', name)].find((p) => existsSync(p)) ?? name;

/** A tool as the server lists it. */
export interface ToolInfo {
  readonly name: string;
  /** The server's own annotation: the tool may destroy data. */
  readonly destructive: boolean;
}

/** Starts `command` over stdio, lists its tools, stops it. @throws Error when the server does not start within `timeoutMs`. */
export async function listTools(
  command: string,
  args: readonly string[],
  env: Record<string, string>,
  timeoutMs = 60_000,
): Promise<ToolInfo[]> {
  const transport = new StdioClientTransport({
    command: bin(command),
    args: [...args],
    env: { ...process.env, ...env } as Record<string, string>,
    stderr: 'pipe',
  });
  const client = new Client({ name: 'jcp-demo', version: '0.1.0' });
  let timer: NodeJS.Timeout | undefined;
  try {
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${command} did not list its tools within ${timeoutMs} ms`)), timeoutMs);
    });
    await Promise.race([client.connect(transport), timeout]);
    const { tools } = await Promise.race([client.listTools(), timeout]);
    return tools.map((t) => ({ name: t.name, destructive: t.annotations?.destructiveHint === true }));
  } finally {
    clearTimeout(timer);
    await client.close().catch(() => undefined);
  }
}

/** The actions a server lacks, of those a grant names. */
export function missingTools(tools: readonly ToolInfo[], actions: readonly string[]): string[] {
  const have = new Set(tools.map((t) => t.name));
  return actions.filter((a) => !have.has(a));
}
