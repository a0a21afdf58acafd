/**
 * The bridge in both MCP eras on the same endpoints, with the SDK v2 client
 * (`@modelcontextprotocol/client`) pinned to 2026-07-28 and in its default mode (the 2025
 * handshake), over stdio (`jcp bridge`) and Streamable HTTP, a live node and real upstreams
 * (`server-memory`, `server-everything`) behind it. The wire answers are read as the client got
 * them: `resultType` and the caching hints (`ttlMs: 0`, `cacheScope: 'private'` for the tool list)
 * on 2026-07-28 only. Stateless HTTP: two bridges for one agent behind a round-robin TCP proxy serve
 * one 2026-07-28 client whose calls alternate between them: one decision and one debit per call,
 * and a call re-sent after its client gave up is the same request (one debit).
 */
import { spawn } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { type Server as NetServer, type Socket, connect as netConnect, createServer as netServer } from 'node:net';
import path from 'node:path';
import { Readable } from 'node:stream';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { BridgeAgent, CallJournal, type HttpBridge, serveBridgeHttp } from '../../bridge/index.ts';
import { JcpClient, writeChainFile } from '../../client/index.ts';
import { grantId } from '../../core/index.ts';
import { type RunningNode, writeKeyFile } from '../../node/index.ts';
import { cast, liveNode, mint, tempDir } from '../node/fixtures.ts';
import { type Everything, startEverything } from '../node/upstreams.ts';

const { rng, alice, bob } = cast('bridge-modern');
const JCP = path.resolve(import.meta.dirname, '../../bin/jcp.mjs');
const PIN = { versionNegotiation: { mode: { pin: '2026-07-28' } } } as const;

type Wire = { id?: unknown; method?: string; result?: Record<string, unknown>; error?: unknown };
type Result = { content?: { type: string; text?: string }[]; isError?: boolean; _meta?: Record<string, unknown> };
const text = (r: Result) => (r.content ?? []).map((c) => c.text ?? '').join('');

/** Records every message the client's transport receives (after connect, before the client reads it). */
function tap(t: { onmessage?: (m: never, e?: never) => void }): Wire[] {
  const seen: Wire[] = [];
  const sdk = t.onmessage;
  t.onmessage = (m: never, e?: never) => {
    seen.push(m as Wire);
    sdk?.(m, e);
  };
  return seen;
}

/** A `fetch` that opens a new TCP connection per request (so a per-connection round-robin proxy alternates). */
const freshFetch = (async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
  const url = new URL(input instanceof Request ? input.url : String(input));
  const headers = new Headers(init?.headers);
  const body = init?.body === undefined || init.body === null ? undefined : String(init.body);
  return new Promise<Response>((resolve, reject) => {
    const req = httpRequest(
      url,
      { method: init?.method ?? 'GET', headers: Object.fromEntries(headers.entries()), agent: false, signal: init?.signal ?? undefined },
      (res) => {
        const h = new Headers();
        for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) h.set(k, Array.isArray(v) ? v.join(', ') : v);
        const empty = res.statusCode === 202 || res.statusCode === 204;
        resolve(new Response(empty ? null : (Readable.toWeb(res) as ReadableStream), { status: res.statusCode ?? 500, headers: h }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}) as typeof fetch;

/** A TCP proxy on loopback handing each new connection to the next of `ports` in turn; counts them. */
async function roundRobin(
  backends: readonly { readonly port: number }[],
): Promise<{ port: number; counts: number[]; close: () => Promise<void> }> {
  const counts = [0, 0];
  const open = new Set<Socket>();
  let next = 0;
  const server: NetServer = netServer((client) => {
    const i = next++ % backends.length;
    counts[i]!++;
    const up = netConnect(backends[i]!.port, '127.0.0.1');
    for (const s of [client, up]) {
      open.add(s);
      s.on('close', () => open.delete(s));
      s.on('error', () => undefined);
    }
    client.pipe(up).pipe(client);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    counts,
    close: () =>
      new Promise<void>((r) => {
        for (const s of open) s.destroy();
        server.close(() => r());
      }),
  };
}

describe('bridge: 2026-07-28 and 2025 clients on the same endpoints (SDK v2 client)', () => {
  const work = tempDir('bridge-modern');
  const w = (name: string) => path.join(work.dir, name);
  let everything: Everything;
  let node: RunningNode & { cleanup: () => Promise<void> };
  const toClose: Array<() => Promise<unknown>> = [];
  const read = mint(alice, bob, 'memory', ['read_graph'], 1_000_000n, rng);
  const small = mint(alice, bob, 'memory', ['create_entities'], 5n, rng);

  beforeAll(async () => {
    everything = await startEverything();
    node = await liveNode({
      resources: [
        { name: 'memory', endpoint: { kind: 'mcp-stdio', command: 'mcp-server-memory', env: { MEMORY_FILE_PATH: w('memory.jsonl') } } },
        { name: 'everything', endpoint: { url: everything.url, timeout_ms: 10_000 } },
      ],
    });
    writeKeyFile(w('bob.key'), bob);
    writeChainFile(w('read.chain.json'), [read]);
    writeChainFile(w('small.chain.json'), [small]);
  }, 60_000);
  afterAll(async () => {
    for (const f of toClose.reverse()) await f().catch(() => undefined);
    await node?.cleanup();
    await everything?.kill();
    work.cleanup();
  });

  /** An in-process agent (read_graph on a big grant, create_entities on a 5 µJ grant at 10 µJ a call). */
  async function memoryAgent(): Promise<BridgeAgent> {
    const jcp = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    toClose.push(() => jcp.close());
    return new BridgeAgent({
      name: 'bob',
      signer: bob,
      chains: [[read], [small]],
      client: jcp,
      journal: new CallJournal(),
      toolCostsUj: new Map([['create_entities', 10n]]),
    });
  }

  /** What every client must see, in its era: the list, an allowed call, a deny, the wire shapes. */
  async function exercise(client: Client, seen: Wire[], modern: boolean): Promise<void> {
    expect(client.getProtocolEra()).toBe(modern ? 'modern' : 'legacy');
    if (modern) {
      const d = client.getDiscoverResult() as unknown as Record<string, unknown>;
      expect(d['supportedVersions']).toContain('2026-07-28');
    }
    const before = seen.length;
    const listed = await client.listTools(undefined, { cacheMode: 'bypass' } as never);
    expect(listed.tools.map((t) => t.name).sort()).toEqual(['create_entities', 'read_graph']);
    const wire = seen.slice(before).find((m) => m.result !== undefined && 'tools' in m.result)!.result!;
    if (modern) {
      expect(wire['resultType']).toBe('complete');
      expect(wire['ttlMs']).toBe(0);
      expect(wire['cacheScope']).toBe('private');
    } else {
      expect(wire['resultType']).toBeUndefined();
      expect(wire['ttlMs']).toBeUndefined();
      expect(wire['cacheScope']).toBeUndefined();
    }
    const spent = node.ledger.spent(grantId(read.grant));
    const ok = (await client.callTool({ name: 'read_graph', arguments: {} })) as Result;
    expect(ok.isError).not.toBe(true);
    expect(ok._meta!['jcp/verdict']).toBe('allow');
    expect(ok._meta!['jcp/grant_id']).toBe(grantId(read.grant));
    expect(typeof ok._meta!['jcp/receipt']).toBe('string');
    expect(ok._meta!['jcp/budget_remaining_uj']).toBe(String(1_000_000n - node.ledger.spent(grantId(read.grant))));
    expect(node.ledger.spent(grantId(read.grant)) - spent).toBe(BigInt(String(ok._meta!['jcp/cost_uj'])));
    const no = (await client.callTool({ name: 'create_entities', arguments: { entities: [] } })) as Result;
    expect(no.isError).toBe(true);
    expect(text(no)).toBe('denied: budget-exceeded');
    expect(no._meta!['jcp/verdict']).toBe('deny');
    expect(no._meta!['jcp/deny_reason']).toBe('budget-exceeded');
    expect(no._meta!['jcp/grant_id']).toBe(grantId(small.grant));
    expect(typeof no._meta!['jcp/receipt']).toBe('string');
    expect(no._meta!['jcp/budget_remaining_uj']).toBe('5');
    expect(node.ledger.spent(grantId(small.grant))).toBe(0n);
    const denyWire = seen.find((m) => m.result !== undefined && m.result['isError'] === true)!.result!;
    expect(denyWire['resultType']).toBe(modern ? 'complete' : undefined);
  }

  const stdioArgs = () => [
    JCP,
    'bridge',
    '--node',
    `127.0.0.1:${node.port}`,
    '--key',
    w('bob.key'),
    '--chain',
    w('read.chain.json'),
    '--chain',
    w('small.chain.json'),
    '--tool-cost',
    'create_entities=10',
  ];

  const AUTO = { versionNegotiation: { mode: 'auto' } } as const;
  for (const [label, modern, options] of [
    ['pinned to 2026-07-28', true, PIN],
    ['negotiating (auto: server/discover first)', true, AUTO],
    ['in its default mode', false, {}],
  ] as const) {
    test(`stdio (jcp bridge) / the v2 client ${label}: list, call, deny`, async () => {
      const transport = new StdioClientTransport({ command: process.execPath, args: stdioArgs(), stderr: 'pipe' });
      const client = new Client({ name: 'v2-stdio', version: '1' }, options);
      await client.connect(transport);
      toClose.push(() => client.close());
      await exercise(client, tap(transport as never), modern);
    }, 90_000);

    test(`Streamable HTTP / the v2 client ${label}: list, call, deny${modern ? ', no session' : ''}`, async () => {
      const served = await serveBridgeHttp({ host: '127.0.0.1', port: 0, agents: [{ agent: await memoryAgent(), token: 'tok' }] });
      toClose.push(() => served.close());
      const transport = new StreamableHTTPClientTransport(new URL(served.url), {
        requestInit: { headers: { authorization: 'Bearer tok' } },
      });
      const client = new Client({ name: 'v2-http', version: '1' }, options);
      await client.connect(transport);
      toClose.push(() => client.close());
      await exercise(client, tap(transport as never), modern);
      expect(served.sessions()).toBe(modern ? 0 : 1);
    }, 60_000);
  }

  test('Streamable HTTP / 2026-07-28 headers: a missing or mismatched Mcp-Method is refused in the revision shape, nothing debited', async () => {
    const served = await serveBridgeHttp({ host: '127.0.0.1', port: 0, agents: [{ agent: await memoryAgent() }] });
    toClose.push(() => served.close());
    const meta = {
      'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientCapabilities': {},
      'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
    };
    const body = JSON.stringify({
      jsonrpc: '2.0',
      id: 7,
      method: 'tools/call',
      params: { name: 'read_graph', arguments: {}, _meta: meta },
    });
    const base = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
    };
    const spent = node.ledger.spent(grantId(read.grant));
    const wrong = await fetch(served.url, {
      method: 'POST',
      headers: { ...base, 'mcp-method': 'tools/list', 'mcp-name': 'read_graph' },
      body,
    });
    const wrongBody = (await wrong.json()) as { error?: { code: number } };
    expect(wrong.status).toBe(400);
    expect(wrongBody.error?.code).toBe(-32020);
    const version = await fetch(served.url, {
      method: 'POST',
      headers: { ...base, 'mcp-method': 'tools/call', 'mcp-name': 'read_graph', 'mcp-protocol-version': '2025-06-18' },
      body,
    });
    expect(version.status).toBe(400);
    expect(((await version.json()) as { error?: { code: number } }).error?.code).toBe(-32020);
    expect(node.ledger.spent(grantId(read.grant))).toBe(spent);
    const right = await fetch(served.url, {
      method: 'POST',
      headers: { ...base, 'mcp-method': 'tools/call', 'mcp-name': 'read_graph' },
      body,
    });
    expect(right.status, await right.clone().text()).toBe(200);
    expect(right.headers.get('mcp-session-id')).toBeNull();
    const r = (await right.json()) as { id: number; result: Result & { resultType: string } };
    expect(r.id).toBe(7);
    expect(r.result.resultType).toBe('complete');
    expect(r.result._meta!['jcp/verdict']).toBe('allow');
  });

  test('the guard on 2026-07-28 requests: a bad progressToken or tool name gets its code over stdio and HTTP, nothing debited', async () => {
    const meta = {
      'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientCapabilities': {},
      'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
    };
    const bad: [Record<string, unknown>, string][] = [
      [{ name: 'read_graph', arguments: {}, _meta: { ...meta, progressToken: { a: 1 } } }, 'progress-token-invalid'],
      [{ name: 5, arguments: {}, _meta: meta }, 'params-invalid'],
    ];
    const child = spawn(process.execPath, stdioArgs(), { stdio: ['pipe', 'pipe', 'pipe'] });
    toClose.push(async () => child.kill('SIGTERM'));
    const replies = new Map<unknown, (r: { error?: { code: number; data?: { code?: string } } }) => void>();
    let buf = '';
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
        const m = JSON.parse(buf.slice(0, i)) as { id?: unknown; error?: { code: number; data?: { code?: string } } };
        buf = buf.slice(i + 1);
        replies.get(m.id)?.(m);
      }
    });
    const ask = (id: number, params: Record<string, unknown>) =>
      new Promise<{ error?: { code: number; data?: { code?: string } } }>((resolve) => {
        const t = setTimeout(() => resolve({}), 15_000);
        replies.set(id, (r) => {
          clearTimeout(t);
          resolve(r);
        });
        child.stdin!.write(`${JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params })}\n`);
      });
    const served = await serveBridgeHttp({ host: '127.0.0.1', port: 0, agents: [{ agent: await memoryAgent() }] });
    toClose.push(() => served.close());
    const spent = node.ledger.spent(grantId(read.grant));
    let id = 30;
    for (const [params, code] of bad) {
      const overStdio = await ask(++id, params);
      expect(overStdio.error?.code).toBe(-32602);
      expect(overStdio.error?.data?.code).toBe(code);
      const r = await fetch(served.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2026-07-28',
          'mcp-method': 'tools/call',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: ++id, method: 'tools/call', params }),
      });
      const body = (await r.json()) as { id: number; error?: { code: number; data?: { code?: string } } };
      expect(body.id).toBe(id);
      expect(body.error?.code).toBe(-32602);
      expect(body.error?.data?.code).toBe(code);
    }
    expect(node.ledger.spent(grantId(read.grant))).toBe(spent);
  }, 90_000);

  test('stateless HTTP / two bridges for one agent behind a round-robin proxy: one decision and one debit per call; a re-send is a replay', async () => {
    const paid = mint(alice, bob, 'everything', ['echo', 'trigger-long-running-operation'], 1_000n, rng);
    const jcp = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    toClose.push(() => jcp.close());
    const agent = new BridgeAgent({ name: 'paid', signer: bob, chains: [[paid]], client: jcp, journal: new CallJournal(), costUj: 5n });
    const bridges: HttpBridge[] = [];
    const proxy = await roundRobin(bridges);
    for (let i = 0; i < 2; i++) {
      const b = await serveBridgeHttp({
        host: '127.0.0.1',
        port: 0,
        agents: [{ agent, token: 'tok' }],
        allowedHosts: [`127.0.0.1:${proxy.port}`],
      });
      bridges.push(b);
      toClose.push(() => b.close());
    }
    toClose.push(() => proxy.close());
    const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${proxy.port}/mcp`), {
      fetch: freshFetch,
      requestInit: { headers: { authorization: 'Bearer tok' } },
    });
    const client = new Client({ name: 'v2-stateless', version: '1' }, PIN);
    await client.connect(transport);
    toClose.push(() => client.close());
    const start = [...proxy.counts];
    const receipts = new Set<unknown>();
    for (let i = 0; i < 6; i++) {
      const r = (await client.callTool({ name: 'echo', arguments: { message: 'same' } })) as Result;
      expect(r._meta!['jcp/verdict']).toBe('allow');
      receipts.add(r._meta!['jcp/receipt']);
    }
    expect(receipts.size).toBe(6);
    expect(node.ledger.spent(grantId(paid.grant))).toBe(30n);
    expect(proxy.counts.map((n, i) => n - start[i]!)).toEqual([3, 3]);
    for (const b of bridges) expect(b.sessions()).toBe(0);

    // A call whose client gives up mid-call (on the first progress) and re-sends with its
    // idempotency key lands on the other bridge: the same request, one debit.
    const params = {
      name: 'trigger-long-running-operation',
      arguments: { duration: 0.6, steps: 3 },
      _meta: { 'jcp/idempotency_key': 'order-1' },
    };
    const abort = new AbortController();
    const first = client.callTool(params, { signal: abort.signal, onprogress: () => abort.abort('the user gave up') } as never);
    await expect(first).rejects.toThrow();
    const at = [...proxy.counts];
    const again = (await client.callTool(params)) as Result;
    expect(again._meta!['jcp/verdict']).toBe('allow');
    expect(node.ledger.spent(grantId(paid.grant))).toBe(35n);
    expect(proxy.counts.reduce((a, b) => a + b, 0) - at.reduce((a, b) => a + b, 0)).toBe(1);
    const next = (await client.callTool({ ...params, _meta: { 'jcp/idempotency_key': 'order-2' } })) as Result;
    expect(next._meta!['jcp/request_id']).not.toBe(again._meta!['jcp/request_id']);
    expect(node.ledger.spent(grantId(paid.grant))).toBe(40n);
  }, 60_000);
});
