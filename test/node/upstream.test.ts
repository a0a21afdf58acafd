/**
 * Upstreams: any MCP server behind a resource (docs/node.md "Endpoints"). server-everything over
 * Streamable HTTP behind a live node — tool list, `echo`, image content passed through unchanged,
 * progress notices before the response, an unknown tool refused with no receipt, the server
 * killed (`endpoint-unavailable`, the receipt stands) and restarted (the next call works) — and
 * a bearer header read from an environment variable reaching the server; and a stdio server of
 * our own that pages `tools/list`, changes its tools, and logs during a call.
 */
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { grantId, openReceipt } from '../../core/index.ts';
import type { McpStdioEndpoint, RunningNode } from '../../node/index.ts';
import { JcpClient, type McpNotification, resultJson, WireErrorReply } from '../../client/index.ts';
import { cast, liveNode, mint, rid } from './fixtures.ts';
// @ts-expect-error: a plain .mjs module shared with the server, no declarations
import { ODD } from './odd-result.mjs';
import { type BearerServer, type Everything, startBearerServer, startEverything } from './upstreams.ts';

const { rng, alice, bob } = cast('upstream');

type ToolResult = {
  content?: Array<{ type: string; text?: string; data?: string; mimeType?: string }>;
  isError?: boolean;
  jcp_error?: { code: string; message: string };
};
const text = (r: unknown) => ((r as ToolResult).content ?? []).map((c) => c.text ?? '').join('');

describe('upstream: server-everything over Streamable HTTP', () => {
  let everything: Everything;
  let node: RunningNode & { cleanup: () => Promise<void> };
  let client: JcpClient;

  beforeAll(async () => {
    everything = await startEverything();
    node = await liveNode({
      resources: [{ name: 'everything', endpoint: { url: everything.url, timeout_ms: 10_000 } }, { name: 'tools' }],
    });
    client = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
  });
  afterAll(async () => {
    await client?.close();
    await node?.cleanup();
    await everything?.kill();
  });

  test('list_tools / the upstream tools, all pages, for the resource id; no receipt', async () => {
    const seq = node.enforcer.nextSeq;
    const listed = await client.listTools();
    expect(listed.map((r) => [r.name, r.resource])).toEqual([['everything', rid('everything')]]);
    const names = listed[0]!.tools.map((t) => t['name']);
    expect(names).toEqual(expect.arrayContaining(['echo', 'get-tiny-image', 'trigger-long-running-operation']));
    // The node's MCP client declares no sampling / elicitation / roots: tools that need them are not offered.
    expect(names).not.toContain('trigger-sampling-request');
    expect(names).not.toContain('trigger-elicitation-request');
    expect(JSON.parse(listed[0]!.toolsJson)).toEqual(listed[0]!.tools);
    expect(node.enforcer.nextSeq).toBe(seq);
  });

  test('echo / an allowed call returns the tool’s CallToolResult as data', async () => {
    const g = mint(alice, bob, 'everything', ['echo'], 1_000_000n, rng);
    const r = await client.call({ chain: [g], action: 'echo', payload: { message: 'hello upstream' } });
    expect(r.decision).toEqual({ verdict: 'allow' });
    expect(text(resultJson(r.result))).toBe('Echo: hello upstream');
  });

  test('image / image content passes through exactly as the server sends it', async () => {
    const direct = new Client({ name: 'direct', version: '1' });
    await direct.connect(new StreamableHTTPClientTransport(new URL(everything.url)));
    const expected = await direct.callTool({ name: 'get-tiny-image', arguments: {} });
    await direct.close();
    const g = mint(alice, bob, 'everything', ['get-tiny-image'], 1_000_000n, rng);
    const r = await client.call({ chain: [g], action: 'get-tiny-image', payload: {} });
    const got = resultJson(r.result) as ToolResult;
    expect(got.content?.some((c) => c.type === 'image' && c.mimeType === 'image/png' && (c.data ?? '').length > 0)).toBe(true);
    expect(got).toEqual(expected);
  });

  test('notify / progress notices arrive in order, before the response, with the node’s token', async () => {
    const g = mint(alice, bob, 'everything', ['trigger-long-running-operation'], 1_000_000n, rng);
    const seen: McpNotification[] = [];
    let resolved = false;
    const r = await client.call({
      chain: [g],
      action: 'trigger-long-running-operation',
      payload: { duration: 0.3, steps: 3 },
      onNotice: (n) => {
        expect(resolved).toBe(false);
        seen.push(n);
      },
    });
    resolved = true;
    expect(r.decision.verdict).toBe('allow');
    expect(r.request.notify).toBe(1);
    expect(text(resultJson(r.result))).toMatch(/Long running operation completed/);
    const progress = seen.filter((n) => n.method === 'notifications/progress');
    expect(progress.map((n) => n.params?.['progress'])).toEqual([1, 2, 3]);
    expect(progress.every((n) => n.params?.['progressToken'] !== undefined)).toBe(true);
  });

  test('notify / a call without notify gets no notices', async () => {
    const g = mint(alice, bob, 'everything', ['trigger-long-running-operation'], 1_000_000n, rng);
    const req = await client.request({ chain: [g], action: 'trigger-long-running-operation', payload: { duration: 0.2, steps: 2 } });
    const seen: McpNotification[] = [];
    const r = await client.callRequest(req, { onNotice: (n) => seen.push(n) });
    expect(r.decision.verdict).toBe('allow');
    expect(seen).toEqual([]);
  });

  test('unknown-tool / a tool the upstream does not list is refused before the decision: no receipt, no debit', async () => {
    const g = mint(alice, bob, 'everything', ['no-such-tool'], 1_000_000n, rng);
    const seq = node.enforcer.nextSeq;
    const e = await client
      .call({ chain: [g], action: 'no-such-tool', payload: {}, cost: { uj: 5n, provenance: 'Estimator' } })
      .catch((x: unknown) => x);
    expect(e).toBeInstanceOf(WireErrorReply);
    expect((e as WireErrorReply).code).toBe('unknown-tool');
    expect(node.enforcer.nextSeq).toBe(seq);
    expect(node.ledger.spent(grantId(g.grant))).toBe(0n);
  });

  test('restart / killed: endpoint-unavailable and the receipt stands; restarted: the next call works', async () => {
    const g = mint(alice, bob, 'everything', ['echo'], 1_000_000n, rng);
    await everything.kill();
    const down = await client.call({
      chain: [g],
      action: 'echo',
      payload: { message: 'anyone?' },
      cost: { uj: 7n, provenance: 'Estimator' },
    });
    expect(down.decision.verdict).toBe('allow');
    expect(openReceipt(down.receipt, node.did).ok).toBe(true);
    const result = resultJson(down.result) as ToolResult;
    expect(result.isError).toBe(true);
    expect(result.jcp_error?.code).toBe('endpoint-unavailable');
    everything = await startEverything(everything.port);
    const up = await client.call({ chain: [g], action: 'echo', payload: { message: 'back' } });
    expect(text(resultJson(up.result))).toBe('Echo: back');
  });

  test('restart / killed during a call: endpoint-unavailable, not a wait for the timeout; the receipt stands, nothing charged', async () => {
    const g = mint(alice, bob, 'everything', ['trigger-long-running-operation', 'echo'], 1_000_000n, rng);
    let killing: Promise<void> | undefined;
    const r = await client.call({
      chain: [g],
      action: 'trigger-long-running-operation',
      payload: { duration: 30, steps: 30 },
      cost: { uj: 11n, provenance: 'Estimator' },
      onNotice: () => {
        killing ??= everything.kill();
      },
    });
    await killing;
    expect(r.decision.verdict).toBe('allow');
    expect(openReceipt(r.receipt, node.did).ok).toBe(true);
    expect((resultJson(r.result) as ToolResult).jcp_error?.code).toBe('endpoint-unavailable');
    // The call got no answer: the allow receipt stands and a reversal hands the 11 µJ back.
    everything = await startEverything(everything.port);
    expect(node.ledger.spent(grantId(g.grant))).toBe(0n);
    const next = await client.call({ chain: [g], action: 'echo', payload: { message: 'after' } });
    expect(text(resultJson(next.result))).toBe('Echo: after');
  });

  test('restart / restarted between two calls: the stale session is replaced and the call goes through', async () => {
    const g = mint(alice, bob, 'everything', ['echo'], 1_000_000n, rng);
    expect(text(resultJson((await client.call({ chain: [g], action: 'echo', payload: { message: 'one' } })).result))).toBe('Echo: one');
    await everything.kill();
    everything = await startEverything(everything.port);
    const r = await client.call({ chain: [g], action: 'echo', payload: { message: 'two' } });
    expect(text(resultJson(r.result))).toBe('Echo: two');
  });
});

describe('upstream: a server the node never reached', () => {
  test('no tool list: list_tools says [], names are not checked, an allowed call is endpoint-unavailable with its receipt', async () => {
    const closed = await new Promise<number>((resolve) => {
      const srv = createServer();
      srv.listen({ port: 0, host: '127.0.0.1' }, () => {
        const { port } = srv.address() as AddressInfo;
        srv.close(() => resolve(port));
      });
    });
    const node = await liveNode({ resources: [{ name: 'gone', endpoint: { url: `http://127.0.0.1:${closed}/mcp` } }] });
    const client = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    try {
      expect(await client.listTools()).toEqual([{ name: 'gone', resource: rid('gone'), tools: [], toolsJson: '[]' }]);
      const g = mint(alice, bob, 'gone', ['anything'], 1_000n, rng);
      const r = await client.call({ chain: [g], action: 'anything', payload: {} });
      expect(r.decision.verdict).toBe('allow');
      expect(openReceipt(r.receipt, node.did).ok).toBe(true);
      expect((resultJson(r.result) as ToolResult).jcp_error?.code).toBe('endpoint-unavailable');
    } finally {
      await client.close();
      await node.cleanup();
    }
  });
});

describe('upstream: headers from the environment', () => {
  const TOKEN = 's3cr3t-token-for-the-test';
  let bearer: BearerServer;
  let node: (RunningNode & { cleanup: () => Promise<void> }) | undefined;

  beforeAll(async () => {
    bearer = await startBearerServer(TOKEN);
  });
  afterAll(async () => {
    await node?.cleanup();
    await bearer?.close();
    delete process.env['JCP_TEST_UPSTREAM_TOKEN'];
  });

  test('bearer / the Authorization header read from an env var reaches the server', async () => {
    process.env['JCP_TEST_UPSTREAM_TOKEN'] = TOKEN;
    node = await liveNode({
      resources: [
        {
          name: 'guarded',
          endpoint: { url: bearer.url, headers: { Authorization: { env: 'JCP_TEST_UPSTREAM_TOKEN', prefix: 'Bearer ' } } },
        },
      ],
    });
    const client = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    try {
      const g = mint(alice, bob, 'guarded', ['whoami'], 1_000_000n, rng);
      const r = await client.call({ chain: [g], action: 'whoami', payload: {} });
      expect(r.decision.verdict).toBe('allow');
      expect(text(resultJson(r.result))).toBe(`Bearer ${TOKEN}`);
      expect(bearer.seen.length).toBeGreaterThan(0);
      expect(bearer.seen.every((h) => h === `Bearer ${TOKEN}`)).toBe(true);
    } finally {
      await client.close();
    }
  });
});

describe('upstream: a stdio server that pages its tools and changes them', () => {
  const script = path.join(path.dirname(fileURLToPath(import.meta.url)), 'paged-server.mjs');
  let node: RunningNode & { cleanup: () => Promise<void> };
  let client: JcpClient;

  beforeAll(async () => {
    node = await liveNode({ resources: [{ name: 'paged', endpoint: { command: process.execPath, args: [script] } }] });
    client = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
  });
  afterAll(async () => {
    await client?.close();
    await node?.cleanup();
  });

  test('tools/list / every page is read, in order', async () => {
    const [paged] = await client.listTools();
    expect(paged!.tools.map((t) => t['name'])).toEqual([
      't1',
      't2',
      't3',
      'add-tool',
      'chatty',
      'odd',
      'malformed',
      'server-error',
      'whoami',
    ]);
    const g = mint(alice, bob, 'paged', ['t3'], 1_000n, rng);
    expect(text(resultJson((await client.call({ chain: [g], action: 't3', payload: {} })).result))).toBe('called t3');
  });

  test('list_changed / a tool the server adds is unknown before and callable after the refresh', async () => {
    const g = mint(alice, bob, 'paged', ['late', 'add-tool'], 1_000n, rng);
    const before = await client.call({ chain: [g], action: 'late', payload: {} }).catch((e: unknown) => e);
    expect((before as WireErrorReply).code).toBe('unknown-tool');
    await client.call({ chain: [g], action: 'add-tool', payload: {} });
    let names: unknown[] = [];
    for (let i = 0; i < 100 && !names.includes('late'); i++) {
      await new Promise((r) => setTimeout(r, 20));
      names = (await client.listTools())[0]!.tools.map((t) => t['name']);
    }
    expect(names).toContain('late');
    const after = await client.call({ chain: [g], action: 'late', payload: { n: 1 } });
    expect(text(resultJson(after.result))).toBe('called late');
  });

  test('result / mixed content, _meta and unknown fields come back exactly as the server sent them', async () => {
    const g = mint(alice, bob, 'paged', ['odd'], 1_000n, rng);
    const r = await client.call({ chain: [g], action: 'odd', payload: {} });
    expect(resultJson(r.result)).toEqual(ODD);
  });

  test('result / a reply that is not a CallToolResult is endpoint-failed; the server is kept', async () => {
    const ep = node.endpoints.get(rid('paged'))!.endpoint as McpStdioEndpoint;
    const pid = await ep.pid();
    const g = mint(alice, bob, 'paged', ['malformed', 't1'], 1_000n, rng);
    const r = await client.call({ chain: [g], action: 'malformed', payload: {} });
    expect(r.decision.verdict).toBe('allow');
    expect((resultJson(r.result) as ToolResult).jcp_error?.code).toBe('endpoint-failed');
    expect(text(resultJson((await client.call({ chain: [g], action: 't1', payload: {} })).result))).toBe('called t1');
    expect(await ep.pid()).toBe(pid);
  });

  test('result / a JSON-RPC error -32000 from a live server is endpoint-failed and charged, not a reversal', async () => {
    // -32000 is also the SDK's own ConnectionClosed code: only an error the server sent is its answer.
    const ep = node.endpoints.get(rid('paged'))!.endpoint as McpStdioEndpoint;
    const pid = await ep.pid();
    const g = mint(alice, bob, 'paged', ['server-error', 't1'], 1_000n, rng);
    const cost = { uj: 100n, provenance: 'Estimator' } as const;
    const r = await client.call({ chain: [g], action: 'server-error', payload: {}, cost });
    expect(r.decision.verdict).toBe('allow');
    const got = resultJson(r.result) as ToolResult;
    expect(got.jcp_error?.code).toBe('endpoint-failed');
    expect(got.jcp_error?.message).toContain('kaput');
    const next = await client.call({ chain: [g], action: 't1', payload: {}, cost });
    const core = openReceipt(next.receipt, node.did);
    expect(core.ok && core.value.budget_remaining_uj).toBe(800n);
    expect(await ep.pid()).toBe(pid);
  });

  test('notify / a logging message and progress reach the caller in order; structuredContent passes through', async () => {
    const g = mint(alice, bob, 'paged', ['chatty'], 1_000n, rng);
    const seen: McpNotification[] = [];
    const r = await client.call({ chain: [g], action: 'chatty', payload: {}, onNotice: (n) => seen.push(n) });
    expect(seen.map((n) => [n.method, n.params?.['progress'] ?? n.params?.['data']])).toEqual([
      ['notifications/message', 'working on it'],
      ['notifications/progress', 1],
      ['notifications/progress', 2],
    ]);
    expect(resultJson(r.result)).toEqual({ content: [{ type: 'text', text: 'done' }], structuredContent: { ok: true, ratio: 0.5 } });
  });
});
