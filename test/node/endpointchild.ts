/**
 * Child process of the endpoint warning test (test/node/endpoint.test.ts): one stdio endpoint in
 * front of `@modelcontextprotocol/server-filesystem`, `N` sequential `list_directory` calls, and
 * every process warning seen meanwhile. Node 20 warns past 10 `abort` listeners on one signal;
 * Node 22 (which `npx` may run, from node_modules/.bin) sets no limit on AbortSignals, so every
 * signal made here gets Node 20's limit of 10: the check holds on either. Prints one JSON line:
 * `{calls, errors, warnings}`.
 */
import { setMaxListeners } from 'node:events';
import path from 'node:path';
import { pino } from 'pino';
import { McpStdioEndpoint } from '../../node/index.ts';

const [root, n] = [process.argv[2]!, Number(process.argv[3] ?? 50)];
const repo = path.resolve(import.meta.dirname, '../..');
const server = path.join(repo, 'node_modules/@modelcontextprotocol/server-filesystem/dist/index.js');
const Native = globalThis.AbortController;
globalThis.AbortController = class extends Native {
  constructor() {
    super();
    setMaxListeners(10, this.signal);
  }
};
const warnings: string[] = [];
process.on('warning', (w) => warnings.push(`${w.name}: ${w.message}`));
const ep = new McpStdioEndpoint(
  'fs',
  { kind: 'mcp-stdio', command: process.execPath, args: [server, root], env: {}, cwd: undefined, timeoutMs: 10_000 },
  pino({ level: 'silent' }),
);
let calls = 0;
let errors = 0;
for (let i = 0; i < n; i++) {
  const r = JSON.parse(new TextDecoder().decode(await ep.invoke('list_directory', { path: root }))) as { isError?: boolean };
  calls++;
  if (r.isError === true) errors++;
}
await ep.close();
// A process warning is emitted on a later tick: let it arrive.
await new Promise((r) => setTimeout(r, 50));
process.stdout.write(`${JSON.stringify({ calls, errors, warnings })}\n`);
