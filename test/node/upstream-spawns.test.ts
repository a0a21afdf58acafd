/**
 * One stdio upstream process per connection (node/endpoint.ts): the SDK v2 client in `auto` mode
 * spawns a disposable sibling process for its `server/discover` probe when given the SDK's own
 * stdio transport, then the connection's process; the node's transport is a subclass, probed in
 * place. A test server appends a line to a file at each start, so spawns are counted: one per
 * connection for a 2025-only server and for a 2026-07-28 one; a 2025-only server that exits on the
 * probe costs one extra start, once (later connections skip the probe).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import pino from 'pino';
import { afterEach, describe, expect, test } from 'vitest';
import { McpStdioEndpoint } from '../../node/index.ts';
import { tempDir } from './fixtures.ts';
import { V2_SERVER_STDIO } from './upstreams.ts';

const SERVER = path.join(import.meta.dirname, 'counted-server.mjs');
const quiet = pino({ level: 'silent' });

describe('stdio upstreams: one process per connection', () => {
  const work = tempDir('upstream-spawns');
  const open: McpStdioEndpoint[] = [];
  afterEach(async () => {
    for (const e of open.splice(0)) await e.close();
  });

  /** An endpoint for the counted server with `env`, and a function counting its starts so far. */
  function counted(
    name: string,
    env: Record<string, string> = {},
    cmd: { command: string; args: readonly string[] } = { command: process.execPath, args: [SERVER] },
  ): { endpoint: McpStdioEndpoint; starts: () => number } {
    const file = path.join(work.dir, `${name}.starts`);
    writeFileSync(file, '');
    const endpoint = new McpStdioEndpoint(
      name,
      { kind: 'mcp-stdio', ...cmd, env: { COUNT_FILE: file, ...env }, cwd: undefined, timeoutMs: 10_000 },
      quiet,
    );
    open.push(endpoint);
    return { endpoint, starts: () => readFileSync(file, 'utf8').split('\n').filter(Boolean).length };
  }

  test('a 2025-only server: one start per connection, the call on it', async () => {
    const { endpoint, starts } = counted('legacy');
    await endpoint.start();
    expect(endpoint.protocol()).toEqual({ era: 'legacy', version: '2025-11-25' });
    expect(starts()).toBe(1);
    expect(new TextDecoder().decode(await endpoint.invoke('t0', {}))).toContain('ran t0');
    expect(starts()).toBe(1);
    // A new connection (the old one closed): one more start.
    await endpoint.close();
    await endpoint.start();
    expect(starts()).toBe(2);
  }, 60_000);

  test('a 2025-only server that exits on the probe: one extra start, once; later connections skip the probe', async () => {
    const { endpoint, starts } = counted('exits', { EXIT_BEFORE_INIT: '1' });
    await endpoint.start();
    expect(endpoint.protocol()).toEqual({ era: 'legacy', version: '2025-11-25' });
    expect(endpoint.tools()?.map((t) => t['name'])).toEqual(['t0']);
    expect(starts()).toBe(2);
    await endpoint.close();
    await endpoint.start();
    expect(endpoint.tools()?.map((t) => t['name'])).toEqual(['t0']);
    expect(starts()).toBe(3);
  }, 60_000);

  test('a 2026-07-28 server: one start per connection', async () => {
    const { endpoint, starts } = counted('modern', {}, V2_SERVER_STDIO);
    await endpoint.start();
    expect(endpoint.protocol()).toEqual({ era: 'modern', version: '2026-07-28' });
    expect(starts()).toBe(1);
    await endpoint.close();
    await endpoint.start();
    expect(starts()).toBe(2);
  }, 60_000);

  test("the server inherits none of the node's LevelDB files (LOG, LOCK, write-ahead .log, MANIFEST)", async () => {
    // classic-level opens its files without O_CLOEXEC, as the receipt log's store does in a node.
    const store = path.join(work.dir, 'store');
    const db = new ClassicLevel(store);
    await db.open();
    try {
      await db.put('k', 'v');
      const fds = path.join(work.dir, 'fds');
      const { endpoint } = counted('fds', { FDS_FILE: fds });
      await endpoint.start();
      const lines = readFileSync(fds, 'utf8').split('\n').filter(Boolean);
      expect(lines.length).toBeGreaterThanOrEqual(3); // it did list its descriptors (0, 1, 2 at least)
      expect(lines.filter((l) => l.includes(store))).toEqual([]);
    } finally {
      await db.close();
    }
  }, 60_000);
});
