/**
 * The bridge's guard over its real transports: `jcp bridge` over stdio (a child process, raw
 * JSON lines) and `serveBridgeHttp` over Streamable HTTP (raw fetch). Requests the SDK's JSON-RPC
 * schema refuses (an object `progressToken`, a malformed request) used to be dropped unanswered
 * over stdio (the client waited for ever) and answered 400 -32700 without their id over HTTP;
 * a non-string tool name got -32603 with a schema dump, and deeply nested arguments -32603
 * `Maximum call stack size exceeded`. Each must get -32602/-32600 with its stable code, nothing debited.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { BridgeAgent, CallJournal, serveBridgeHttp } from '../../bridge/index.ts';
import { JcpClient, writeChainFile } from '../../client/index.ts';
import { grantId } from '../../core/index.ts';
import { type RunningNode, writeKeyFile } from '../../node/index.ts';
import { cast, liveNode, mint, tempDir } from '../node/fixtures.ts';

const { rng, alice, bob } = cast('bridge-transports');
const JCP = path.resolve(import.meta.dirname, '../../bin/jcp.mjs');

type Reply = { id?: unknown; result?: unknown; error?: { code: number; message: string; data?: { code?: string } } };

const deep = (n: number): string => {
  let d = '1';
  for (let i = 0; i < n; i++) d = `{"a":${d}}`;
  return d;
};

/** The bad requests and the code each must get: [raw JSON-RPC text, JSON-RPC code, stable code]. */
const BAD: [string, number, string][] = [
  [
    '{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"read_graph","arguments":{},"_meta":{"progressToken":{"a":1}}}}',
    -32602,
    'progress-token-invalid',
  ],
  ['{"jsonrpc":"2.0","id":12,"method":"tools/list","params":{"_meta":{"progressToken":true}}}', -32602, 'progress-token-invalid'],
  ['{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":5,"arguments":{}}}', -32602, 'params-invalid'],
  ['{"jsonrpc":"2.0","id":14,"method":"tools/call"}', -32602, 'params-invalid'],
  [
    `{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"read_graph","arguments":{"d":${deep(6000)}}}}`,
    -32602,
    'arguments-invalid',
  ],
  ['{"jsonrpc":"2.0","id":16,"method":7}', -32600, 'request-invalid'],
];

describe('bridge: the guard over stdio and Streamable HTTP', () => {
  const work = tempDir('bridge-transports');
  const w = (name: string) => path.join(work.dir, name);
  let node: RunningNode & { cleanup: () => Promise<void> };
  const grant = mint(alice, bob, 'memory', ['read_graph'], 1_000n, rng);
  let child: ChildProcess | undefined;
  let jcp: JcpClient | undefined;

  beforeAll(async () => {
    node = await liveNode({
      resources: [
        { name: 'memory', endpoint: { kind: 'mcp-stdio', command: 'mcp-server-memory', env: { MEMORY_FILE_PATH: w('memory.jsonl') } } },
      ],
    });
    writeKeyFile(w('bob.key'), bob);
    writeChainFile(w('bob.chain.json'), [grant]);
  }, 60_000);
  afterAll(async () => {
    child?.kill('SIGTERM');
    await jcp?.close();
    await node?.cleanup();
    work.cleanup();
  });

  test('stdio (jcp bridge): every bad request is answered with its code; a good call still works', async () => {
    child = spawn(
      process.execPath,
      [JCP, 'bridge', '--node', `127.0.0.1:${node.port}`, '--key', w('bob.key'), '--chain', w('bob.chain.json')],
      {
        stdio: ['pipe', 'pipe', 'pipe'],
      },
    );
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const waiting = new Map<unknown, (r: Reply) => void>();
    let buf = '';
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
        const m = JSON.parse(buf.slice(0, i)) as Reply;
        buf = buf.slice(i + 1);
        waiting.get(m.id)?.(m);
      }
    });
    const ask = (text: string, id: number, ms = 15_000) =>
      new Promise<Reply | 'no answer'>((resolve) => {
        const t = setTimeout(() => resolve('no answer'), ms);
        waiting.set(id, (r) => {
          clearTimeout(t);
          resolve(r);
        });
        child!.stdin!.write(`${text}\n`);
      });
    const init = await ask(
      '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}',
      0,
      45_000,
    );
    expect(init, stderr).not.toBe('no answer');
    child.stdin!.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\n');
    for (const [text, code, stable] of BAD) {
      const id = (JSON.parse(text) as { id: number }).id;
      const r = await ask(text, id);
      expect(r, text.slice(0, 120)).not.toBe('no answer');
      expect((r as Reply).error?.code, text.slice(0, 120)).toBe(code);
      expect((r as Reply).error?.data?.code, text.slice(0, 120)).toBe(stable);
    }
    expect(node.ledger.spent(grantId(grant.grant))).toBe(0n);
    const ok = await ask('{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"read_graph","arguments":{}}}', 20);
    expect((ok as { result?: { _meta?: Record<string, unknown> } }).result?._meta?.['jcp/verdict']).toBe('allow');
  }, 180_000);

  test('Streamable HTTP: every bad request is answered 200 with its id and code', async () => {
    jcp = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    const agent = new BridgeAgent({ name: 'bob', signer: bob, chains: [[grant]], client: jcp, journal: new CallJournal() });
    const served = await serveBridgeHttp({ host: '127.0.0.1', port: 0, agents: [{ agent, token: 'tok' }] });
    try {
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: 'Bearer tok',
        'mcp-protocol-version': '2025-06-18',
      };
      const init = await fetch(served.url, {
        method: 'POST',
        headers,
        body: '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}',
      });
      expect(init.status).toBe(200);
      await init.text();
      headers['mcp-session-id'] = init.headers.get('mcp-session-id')!;
      const ready = await fetch(served.url, { method: 'POST', headers, body: '{"jsonrpc":"2.0","method":"notifications/initialized"}' });
      expect(ready.status).toBe(202);
      for (const [text, code, stable] of BAD.slice(0, 5)) {
        const r = await fetch(served.url, { method: 'POST', headers, body: text });
        expect(r.status, text.slice(0, 120)).toBe(200);
        const body = (await r.json()) as Reply;
        expect(body.id).toBe((JSON.parse(text) as { id: number }).id);
        expect(body.error?.code).toBe(code);
        expect(body.error?.data?.code).toBe(stable);
      }
      expect(node.ledger.spent(grantId(grant.grant))).toBe(0n);
    } finally {
      await served.close();
    }
  }, 60_000);
});
