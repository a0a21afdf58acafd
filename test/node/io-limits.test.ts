import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { decodeWireMessage, encodeWireMessage, frameMessage } from '../../core/index.ts';
import { McpStdioEndpoint, headerValue } from '../../node/index.ts';
import { NodeMetrics, serveMetrics } from '../../node/index.ts';
import { runJcp } from '../listeners.ts';
import { liveNode, quiet, RawConn, tempDir } from './fixtures.ts';

const stdio = (command: string, args: string[], env: Record<string, string> = {}) =>
  new McpStdioEndpoint('t', { kind: 'mcp-stdio', command, args, env, timeoutMs: 2_000 } as never, quiet);

describe('stdio upstreams, token files, list_tools re-spawns', () => {
  const t = tempDir('io-limits');
  afterAll(() => t.cleanup());

  test("a stdio upstream gets its configured env and the minimal set, never the node's other secrets", async () => {
    const out = path.join(t.dir, 'env.txt');
    process.env['JCP_TEST_OTHER_UPSTREAM_TOKEN'] = 'secret-of-another-upstream';
    try {
      const e = stdio('/bin/sh', ['-c', `env > ${out}; exit 1`], { CONFIGURED_TOKEN: 'mine' });
      await e.start();
      await e.close();
    } finally {
      delete process.env['JCP_TEST_OTHER_UPSTREAM_TOKEN'];
    }
    const env = readFileSync(out, 'utf8');
    expect(env).toContain('CONFIGURED_TOKEN=mine');
    expect(env).toMatch(/^PATH=/m);
    expect(env).not.toContain('secret-of-another-upstream');
  });

  test('repeated list_tools against a dead stdio upstream spawns it a bounded number of times', async () => {
    const log = path.join(t.dir, 'spawns.txt');
    writeFileSync(log, '');
    const e = stdio('/bin/sh', ['-c', `echo spawn >> ${log}; exit 1`]);
    for (let i = 0; i < 20; i++) await e.ensureTools();
    await e.close();
    const spawns = readFileSync(log, 'utf8')
      .split('\n')
      .filter((l) => l === 'spawn').length;
    expect(spawns).toBeGreaterThanOrEqual(1);
    expect(spawns).toBeLessThanOrEqual(2);
  });

  test('list_tools while an upstream is down draws on the peer’s bucket: rate-limited past it, other peers still answered', async () => {
    const node = await liveNode({
      abuse: { burst: 3, refill_per_s: 0 },
      resources: [{ name: 'down', endpoint: { kind: 'mcp-stdio', command: '/bin/sh', args: ['-c', 'exit 1'] } }],
    });
    try {
      const ask = async (c: RawConn): Promise<string> => {
        c.write(frameMessage(encodeWireMessage({ kind: 'list_tools' })));
        const m = decodeWireMessage(await c.next());
        return m.kind === 'error' ? m.error.code : m.kind;
      };
      const greedy = await RawConn.open(node.port, '127.0.0.2');
      const got: string[] = [];
      for (let i = 0; i < 5; i++) got.push(await ask(greedy));
      expect(got).toEqual(['tool_list', 'tool_list', 'tool_list', 'rate-limited', 'rate-limited']);
      const other = await RawConn.open(node.port, '127.0.0.3');
      expect(await ask(other)).toBe('tool_list');
      greedy.destroy();
      other.destroy();
    } finally {
      await node.cleanup();
    }
  });

  test('a header token file readable by group or others is refused; 0600 is read', () => {
    const f = path.join(t.dir, 'token');
    writeFileSync(f, 'tok-123\n');
    chmodSync(f, 0o644);
    expect(() => headerValue('authorization', { file: f, prefix: 'Bearer ' })).toThrow(/mode 644 lets others read the token/);
    chmodSync(f, 0o600);
    expect(headerValue('authorization', { file: f, prefix: 'Bearer ' })).toBe('Bearer tok-123');
  });
});

describe('jcp bridge --token-file', () => {
  const t = tempDir('io-limits-bridge');
  afterAll(() => t.cleanup());

  test('a token file that others may read is refused (token-invalid), before the bridge starts', async () => {
    const f = path.join(t.dir, 'bridge.token');
    writeFileSync(f, 'tok\n', { mode: 0o644 });
    chmodSync(f, 0o644);
    const args = ['bridge', '--node', '127.0.0.1:1', '--key', path.join(t.dir, 'k'), '--chain', path.join(t.dir, 'c')];
    const r = await runJcp([...args, '--http', '127.0.0.1:0', '--token-file', f]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('error [token-invalid]');
    expect(r.stderr).toContain('mode 644 lets others read the token');
    expect(r.stderr).not.toContain('tok\n');
  });
});

describe('a bare length header on jcp/1', () => {
  let node: Awaited<ReturnType<typeof liveNode>>;
  beforeAll(async () => {
    node = await liveNode({ read_timeout_ms: 200, idle_timeout_ms: 60_000, frame_cap: 64 << 20 });
  });
  afterAll(async () => node.cleanup());

  test('a connection that sends only a 4-byte header is closed by the read timeout (read-timeout), not the idle one', async () => {
    const c = await RawConn.open(node.port);
    c.write(Uint8Array.of(0x04, 0, 0, 0)); // declares 64 MiB, sends nothing more
    const m = decodeWireMessage(await c.next(5_000));
    expect(m.kind === 'error' ? m.error.code : m.kind).toBe('read-timeout');
    expect(await c.waitClosed(5_000)).toBe(true);
    c.destroy();
  });
});

describe('the metrics port is read-only and refuses a foreign Host', () => {
  let port: number;
  let close: () => void;
  beforeAll(async () => {
    const s = await serveMetrics(new NodeMetrics(), () => ({ ok: true, detail: {} }), '127.0.0.1', 0);
    port = s.port;
    close = () => s.server.close();
  });
  afterAll(() => close());

  const ask = (method: string, host: string, url = '/metrics') =>
    new Promise<number>((resolve, reject) => {
      const r = httpRequest({ host: '127.0.0.1', port, method, path: url, headers: { host } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      r.on('error', reject);
      r.end();
    });

  test('GET with a loopback Host is served; a foreign Host is 421; POST is 405', async () => {
    expect(await ask('GET', `127.0.0.1:${port}`)).toBe(200);
    expect(await ask('HEAD', `localhost:${port}`, '/healthz')).toBe(200);
    expect(await ask('GET', `rebind.attacker.example:${port}`)).toBe(421);
    expect(await ask('GET', `rebind.attacker.example:${port}`, '/healthz')).toBe(421);
    expect(await ask('POST', `127.0.0.1:${port}`)).toBe(405);
    expect(await ask('DELETE', `127.0.0.1:${port}`, '/healthz')).toBe(405);
  });
});
