/**
 * A stdio endpoint for test/node/counted-server.mjs, which appends a line to `COUNT_FILE` at each
 * start: the endpoint, its starts so far, and the node's log lines with a given message. Shared by
 * the respawn and oversized-result tests of node/endpoint.ts.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { McpStdioEndpoint, type RespawnOptions } from '../../node/index.ts';

const SERVER = path.join(import.meta.dirname, 'counted-server.mjs');

/**
 * A counted-server endpoint named `name` in `dir` (its start file there), with the server's `env`
 * and the back-off knobs `opts`; pushed onto `open` so the caller's afterEach closes it.
 */
export function countedEndpoint(
  dir: string,
  open: McpStdioEndpoint[],
  name: string,
  env: Record<string, string> = {},
  opts: RespawnOptions = {},
) {
  const file = path.join(dir, `${name}.starts`);
  writeFileSync(file, '');
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString().split('\n')) if (l.length > 0) lines.push(JSON.parse(l) as Record<string, unknown>);
      done();
    },
  });
  const endpoint = new McpStdioEndpoint(
    name,
    { kind: 'mcp-stdio', command: process.execPath, args: [SERVER], env: { COUNT_FILE: file, ...env }, cwd: undefined, timeoutMs: 10_000 },
    pino({ level: 'info' }, sink),
    opts,
  );
  open.push(endpoint);
  const starts = () => readFileSync(file, 'utf8').split('\n').filter(Boolean).length;
  return { endpoint, starts, logged: (msg: string) => lines.filter((l) => l['msg'] === msg) };
}
