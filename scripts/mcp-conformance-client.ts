/**
 * The node's upstream MCP client (node/endpoint.ts `McpHttpEndpoint`, the SDK v2 client in its
 * negotiating mode) as a client under test for the MCP conformance suite's client leg
 * (`conformance client --command "…" --scenario S`): the suite starts a server for scenario S and
 * runs this with its URL as the last argument, `MCP_CONFORMANCE_SCENARIO` and, for some
 * scenarios, `MCP_CONFORMANCE_CONTEXT` (JSON) in the environment.
 *
 * What it does is what a node does, nothing scenario-specific beyond the suite's own context: it
 * connects (server/discover, else the 2025 handshake), reads the tool list, and calls each listed
 * tool once with arguments made from its input schema (numbers 1, strings "x", booleans true),
 * or the calls the context names (`toolCalls: [{name, arguments}]`); a call answered
 * `input_required` is continued as a node continues it for its caller (the caller here declines
 * every elicitation), up to 10 rounds. Exit 0 unless it cannot
 * connect. Usage: node --import tsx scripts/mcp-conformance-client.ts URL
 */
import { pino } from 'pino';
import { McpHttpEndpoint } from '../node/index.ts';

/** Arguments a node's caller might send, from a tool's JSON Schema `properties` (required ones only when listed). */
function argsFor(tool: Record<string, unknown>): Record<string, unknown> {
  const schema = (tool['inputSchema'] ?? {}) as { properties?: Record<string, { type?: unknown }> };
  const out: Record<string, unknown> = {};
  for (const [k, p] of Object.entries(schema.properties ?? {})) {
    const t = Array.isArray(p?.type) ? p.type[0] : p?.type;
    out[k] = t === 'number' || t === 'integer' ? 1 : t === 'boolean' ? true : t === 'object' ? {} : t === 'array' ? [] : 'x';
  }
  return out;
}

async function main(): Promise<number> {
  const url = process.argv[process.argv.length - 1]!;
  const context = JSON.parse(process.env['MCP_CONFORMANCE_CONTEXT'] ?? '{}') as {
    toolCalls?: { name: string; arguments?: Record<string, unknown> }[];
  };
  const log = pino({ level: process.env['JCP_CONFORMANCE_VERBOSE'] ? 'debug' : 'silent' });
  const ep = new McpHttpEndpoint('conformance', { kind: 'mcp-http', url, headers: {}, timeoutMs: 10_000 } as never, log);
  try {
    await ep.ensureTools();
    const tools = ep.tools();
    if (tools === undefined) {
      process.stderr.write(`mcp-conformance-client: no tool list: ${ep.lastFailure() ?? 'unknown'}\n`);
      return 1;
    }
    const calls = context.toolCalls ?? tools.map((t) => ({ name: String(t['name']), arguments: argsFor(t) }));
    for (const c of calls) {
      const caller = {
        did: 'did:key:z6MkConformanceCaller',
        grantId: '0'.repeat(64),
        resource: '2'.repeat(64),
        peer: '127.0.0.1:0',
        receipt: '1'.repeat(64),
      };
      try {
        let r = await ep.invoke(c.name, c.arguments ?? {}, { caller });
        // An input_required result (2026-07-28): a node hands it to its caller and, when the
        // caller answers, sends the answers with the upstream's requestState exactly as it came
        // (node/enforcer.ts continuations). The caller here declines every elicitation.
        for (let round = 1; round <= 10; round++) {
          const v = JSON.parse(new TextDecoder().decode(r)) as { resultType?: string; inputRequests?: object; requestState?: unknown };
          if (v.resultType !== 'input_required') break;
          const responses = Object.fromEntries(Object.keys(v.inputRequests ?? {}).map((k) => [k, { action: 'decline' }]));
          const input = { responses, ...(typeof v.requestState === 'string' ? { state: v.requestState } : {}) };
          r = await ep.invoke(c.name, c.arguments ?? {}, { caller, input });
        }
        process.stdout.write(`${c.name}: ${new TextDecoder().decode(r).slice(0, 200)}\n`);
      } catch (e) {
        process.stdout.write(`${c.name}: ${(e as Error).message}\n`);
      }
    }
    process.stdout.write(`era: ${JSON.stringify(ep.protocol())}\n`);
    return 0;
  } finally {
    await ep.close();
  }
}

process.exitCode = await main();
