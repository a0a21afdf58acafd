/**
 * `jcp bridge` as a command: several agents over `--http` from a config file (tokens from a file
 * and from the environment, never inlined), and the refusals that stop it before it serves.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { writeChainFile } from '../../client/index.ts';
import { type RunningNode, writeKeyFile } from '../../node/index.ts';
import { runJcp } from '../listeners.ts';
import { cast, liveNode, mint, tempDir } from '../node/fixtures.ts';

const { rng, alice, bob, carol } = cast('bridge-cli');
const JCP = path.resolve(import.meta.dirname, '../../bin/jcp.mjs');

describe('jcp bridge (command)', () => {
  const work = tempDir('bridge-cli');
  let node: RunningNode & { cleanup: () => Promise<void> };
  let child: ChildProcess | undefined;
  const w = (name: string) => path.join(work.dir, name);

  beforeAll(async () => {
    node = await liveNode({
      resources: [
        { name: 'memory', endpoint: { kind: 'mcp-stdio', command: 'mcp-server-memory', env: { MEMORY_FILE_PATH: w('memory.jsonl') } } },
      ],
    });
    writeKeyFile(w('bob.key'), bob);
    writeKeyFile(w('carol.key'), carol);
    writeChainFile(w('bob.chain.json'), [mint(alice, bob, 'memory', ['read_graph'], 1_000n, rng)]);
    writeChainFile(w('carol.chain.json'), [mint(alice, carol, 'memory', ['read_graph', 'create_entities'], 1_000n, rng)]);
    writeFileSync(w('bob.token'), 'bob-token-from-a-file\n', { mode: 0o600 });
  });
  afterAll(async () => {
    child?.kill('SIGTERM');
    await node.cleanup();
    work.cleanup();
  });

  test('--http --config / two agents, each with its own token, key and chains', async () => {
    writeFileSync(
      w('bridge.json'),
      JSON.stringify({
        node: `127.0.0.1:${node.port}`,
        agents: [
          { name: 'bob', key: 'bob.key', chains: ['bob.chain.json'], token_file: 'bob.token' },
          { name: 'carol', key: 'carol.key', chains: ['carol.chain.json'], token_env: 'JCP_TEST_CAROL_TOKEN', cost_uj: 4 },
        ],
      }),
    );
    child = spawn(process.execPath, [JCP, 'bridge', '--http', '127.0.0.1:0', '--config', w('bridge.json')], {
      env: { ...process.env, JCP_TEST_CAROL_TOKEN: 'carol-token-from-env' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const line = await new Promise<string>((resolve, reject) => {
      let out = '';
      let err = '';
      child!.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('\n')) resolve(out.split('\n')[0]!);
      });
      child!.stderr!.on('data', (d: Buffer) => {
        err += d.toString();
      });
      child!.once('exit', (code) => reject(new Error(`jcp bridge exited ${code}: ${err}`)));
    });
    const started = JSON.parse(line) as { listening: string; agents: Array<{ name: string; did: string }> };
    expect(started.agents).toEqual([
      { name: 'bob', did: bob.did },
      { name: 'carol', did: carol.did },
    ]);
    const as = async (token: string) => {
      const c = new Client({ name: 'cli-test', version: '1' });
      await c.connect(
        new StreamableHTTPClientTransport(new URL(started.listening), { requestInit: { headers: { authorization: `Bearer ${token}` } } }),
      );
      return c;
    };
    const b = await as('bob-token-from-a-file');
    const c = await as('carol-token-from-env');
    expect((await b.listTools()).tools.map((t) => t.name)).toEqual(['read_graph']);
    expect((await c.listTools()).tools.map((t) => t.name).sort()).toEqual(['create_entities', 'read_graph']);
    const r = await c.callTool({ name: 'read_graph', arguments: {} });
    expect(r._meta?.['jcp/cost_uj']).toBe('4');
    await expect(as('not-a-token')).rejects.toThrow(/unauthorized/);
    await b.close();
    await c.close();
  });

  test("refusal / a --key that is not the subject of a chain's leaf grant (every call would be denied wrong-subject)", async () => {
    const wrong = await runJcp(['bridge', '--node', `127.0.0.1:${node.port}`, '--key', w('carol.key'), '--chain', w('bob.chain.json')]);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain('error [key-not-subject]');
    expect(wrong.stderr).toContain(bob.did);
    writeFileSync(
      w('mixed.json'),
      JSON.stringify({
        node: `127.0.0.1:${node.port}`,
        agents: [{ name: 'x', key: 'carol.key', chains: ['carol.chain.json', 'bob.chain.json'], token_file: 'bob.token' }],
      }),
    );
    const mixed = await runJcp(['bridge', '--http', '127.0.0.1:0', '--config', w('mixed.json')]);
    expect(mixed.code).toBe(1);
    expect(mixed.stderr).toContain('error [key-not-subject]');
  });

  test('refusals / a remote address without --allow-remote, an inlined token, a missing token variable', async () => {
    const remote = await runJcp([
      'bridge',
      '--node',
      `127.0.0.1:${node.port}`,
      '--key',
      w('bob.key'),
      '--chain',
      w('bob.chain.json'),
      '--http',
      '0.0.0.0:0',
    ]);
    expect(remote.code).toBe(1);
    expect(remote.stderr).toContain('error [remote-listen-refused]');
    writeFileSync(
      w('inline.json'),
      JSON.stringify({
        node: `127.0.0.1:${node.port}`,
        agents: [{ name: 'x', key: 'bob.key', chains: ['bob.chain.json'], token: 'secret' }],
      }),
    );
    const inline = await runJcp(['bridge', '--http', '127.0.0.1:0', '--config', w('inline.json')]);
    expect(inline.code).toBe(1);
    expect(inline.stderr).toContain('error [config-invalid]');
    expect(inline.stderr).toContain('never inlined');
    writeFileSync(
      w('noenv.json'),
      JSON.stringify({
        node: `127.0.0.1:${node.port}`,
        agents: [{ name: 'x', key: 'bob.key', chains: ['bob.chain.json'], token_env: 'JCP_TEST_UNSET_TOKEN' }],
      }),
    );
    const noenv = await runJcp(['bridge', '--http', '127.0.0.1:0', '--config', w('noenv.json')], { env: { JCP_TEST_UNSET_TOKEN: '' } });
    expect(noenv.stderr).toContain('error [token-invalid]');
    const usage = await runJcp(['bridge', '--node', '127.0.0.1:1', '--key', w('bob.key')]);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('--chain is required');
    const bridgeArgs = ['bridge', '--node', `127.0.0.1:${node.port}`, '--key', w('bob.key'), '--chain', w('bob.chain.json')];
    const win = await runJcp([...bridgeArgs, '--replay-window-s', 'abc']);
    expect(win.code).toBe(2);
    expect(win.stderr).toContain('--replay-window-s: expected a whole number of seconds');
    const cap = await runJcp([...bridgeArgs, '--frame-cap', '0']);
    expect(cap.code).toBe(2);
    expect(cap.stderr).toContain('--frame-cap: expected a whole number of bytes ≥ 1');
    const busy = await runJcp([...bridgeArgs, '--http', `127.0.0.1:${node.port}`]);
    expect(busy.code).toBe(1);
    expect(busy.stderr).toContain(`error [listen-failed]: cannot listen on 127.0.0.1:${node.port}`);
  });

  test('refusals / HTTP session limits without --http or below 1, an allowed origin with a path', async () => {
    const bridgeArgs = ['bridge', '--node', `127.0.0.1:${node.port}`, '--key', w('bob.key'), '--chain', w('bob.chain.json')];
    const idleNoHttp = await runJcp([...bridgeArgs, '--session-idle-s', '60']);
    expect(idleNoHttp.code).toBe(2);
    expect(idleNoHttp.stderr).toContain('--session-idle-s goes with --http');
    const noSessions = await runJcp([...bridgeArgs, '--http', '127.0.0.1:0', '--max-sessions', '0']);
    expect(noSessions.code).toBe(2);
    expect(noSessions.stderr).toContain('--max-sessions: expected a whole number of sessions ≥ 1');
    const origin = await runJcp([...bridgeArgs, '--http', '127.0.0.1:0', '--allow-origin', 'https://app.example/path']);
    expect(origin.code).toBe(1);
    expect(origin.stderr).toContain('error [origin-invalid]');
  }, 60_000);

  test('refusals / the shared journal: bucket flags without --journal-nats, with a journal file, a bad bucket name; --allow-host without --http', async () => {
    const bridgeArgs = ['bridge', '--node', `127.0.0.1:${node.port}`, '--key', w('bob.key'), '--chain', w('bob.chain.json')];
    const bucketAlone = await runJcp([...bridgeArgs, '--journal-bucket', 'b']);
    expect(bucketAlone.code).toBe(2);
    expect(bucketAlone.stderr).toContain('--journal-bucket/--journal-max-bytes go with --journal-nats');
    const both = await runJcp([...bridgeArgs, '--journal', w('x.journal'), '--journal-nats', 'nats://127.0.0.1:4222']);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('--journal-nats and a journal file exclude each other');
    const badName = await runJcp([...bridgeArgs, '--journal-nats', 'nats://127.0.0.1:4222', '--journal-bucket', 'a.b']);
    expect(badName.code).toBe(2);
    expect(badName.stderr).toContain('--journal-bucket: stream name "a.b"');
    const small = await runJcp([...bridgeArgs, '--journal-nats', 'nats://127.0.0.1:4222', '--journal-max-bytes', '10']);
    expect(small.code).toBe(2);
    expect(small.stderr).toContain('--journal-max-bytes: expected a whole number of bytes ≥ 4096');
    const host = await runJcp([...bridgeArgs, '--allow-host', '127.0.0.1:8080']);
    expect(host.code).toBe(2);
    expect(host.stderr).toContain('--allow-host goes with --http');
  }, 60_000);

  test('stdio / two bridge processes of one agent: the same call at the same moment is two requests', async () => {
    const open = async () => {
      const c = new Client({ name: 'cli-test', version: '1' });
      await c.connect(
        new StdioClientTransport({
          command: process.execPath,
          args: [JCP, 'bridge', '--node', `127.0.0.1:${node.port}`, '--key', w('bob.key'), '--chain', w('bob.chain.json')],
        }),
      );
      return c;
    };
    const [one, two] = await Promise.all([open(), open()]);
    try {
      for (let i = 0; i < 3; i++) {
        const rs = await Promise.all([one, two].map((c) => c.callTool({ name: 'read_graph', arguments: {} })));
        const ids = rs.map((r) => r._meta?.['jcp/request_id']);
        expect(ids[0]).toMatch(/^[0-9a-f]{64}$/);
        expect(ids[0]).not.toBe(ids[1]);
      }
    } finally {
      await one.close();
      await two.close();
    }
  });

  test('stdio / a message past the SDK stdio buffer (10 MiB) ends the bridge with an error line and exit 1, not silently', async () => {
    const c = spawn(
      process.execPath,
      [JCP, 'bridge', '--node', `127.0.0.1:${node.port}`, '--key', w('bob.key'), '--chain', w('bob.chain.json')],
      {
        stdio: ['pipe', 'pipe', 'pipe'],
      },
    );
    let err = '';
    c.stderr!.setEncoding('utf8').on('data', (d: string) => {
      err += d;
    });
    c.stdout!.resume();
    c.stdin!.on('error', () => undefined);
    const init = {
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
    };
    c.stdin!.write(`${JSON.stringify(init)}\n${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`);
    c.stdin!.write(
      `${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'read_graph', arguments: { x: 'x'.repeat(11 * 1024 * 1024) } } })}\n`,
    );
    const code = await new Promise<number | null>((resolve) => c.once('exit', (n) => resolve(n)));
    expect(err).toContain('error [message-too-large]');
    expect(code).toBe(1);
  });

  test('refusals / a journal that cannot be opened: one error line and exit 1, not a hung process', async () => {
    const r = await runJcp(
      [
        'bridge',
        '--node',
        `127.0.0.1:${node.port}`,
        '--key',
        w('bob.key'),
        '--chain',
        w('bob.chain.json'),
        '--journal',
        w('no/such/dir/calls.journal'),
      ],
      { killAfterMs: 10_000 },
    );
    expect(r.signal).toBeNull();
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('error [io]');
  });
});
