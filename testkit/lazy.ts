/**
 * The testkit's launchers whose libraries are heavy (express and `@a2a-js/sdk`, the MCP server
 * SDK), as the front door exports them: each loads its module on first call, so that a process
 * that imports the front door for something else (the demo, before it starts its nodes) does not
 * load them (docs/benchmarks.md "startup").
 */
import type { A2aAgent, A2aAgentOptions } from './a2a-agent.ts';

export type { A2aAgent };

/** {@link import('./a2a-agent.ts').startA2aAgent}, loaded on first call. */
export async function startA2aAgent(opts: A2aAgentOptions = {}): Promise<A2aAgent> {
  return (await import('./a2a-agent.ts')).startA2aAgent(opts);
}

/** {@link import('./mcp-tools-server.ts').serveToolsHttp}, loaded on first call. */
export async function serveToolsHttp(host = '127.0.0.1', port = 0): Promise<{ url: string; close: () => Promise<void> }> {
  return (await import('./mcp-tools-server.ts')).serveToolsHttp(host, port);
}
