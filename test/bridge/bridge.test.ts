/**
 * The bridge with real MCP on both sides: the SDK's `Client` (unmodified) over stdio (`jcp bridge`
 * as a child process) and over Streamable HTTP, a live node, and real servers behind it
 * (`@modelcontextprotocol/server-filesystem`, `@modelcontextprotocol/server-memory`).
 */
import { createHmac, hkdfSync } from 'node:crypto';
import { realpathSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Client, ProtocolError, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  type AnsweredScope,
  BridgeAgent,
  CallJournal,
  type HttpBridge,
  journalSecret,
  keyedCallKey,
  serveBridgeHttp,
} from '../../bridge/index.ts';
import { writeChainFile } from '../../client/index.ts';
import {
  type Actor,
  fromHex,
  grantId,
  openReceipt,
  receiptId,
  type SignedGrant,
  toHex,
  type WireRequest,
  verifyWireRequestSignature,
} from '../../core/index.ts';
import { type RunningNode, writeKeyFile } from '../../node/index.ts';
import { JcpClient } from '../../client/index.ts';
import { cast, liveNode, mint, tempDir } from '../node/fixtures.ts';

const { rng, alice, bob, carol } = cast('bridge');
const REPO = path.resolve(import.meta.dirname, '../..');

type Content = { type: string; text?: string };
type Result = { content: Content[]; isError?: boolean; _meta?: Record<string, unknown>; structuredContent?: unknown };
const text = (r: unknown) => ((r as Result).content ?? []).map((c) => c.text ?? '').join('');

/**
 * The stable code of an MCP error the bridge threw (`error.data.code`): through the client a v2
 * `ProtocolError`; from `agent.call` in-process the bridge's own error (bridge/agent.ts, on the
 * v1 types of the 2025 face), read by its JSON-RPC shape.
 */
async function mcpCode(p: Promise<unknown>, says?: string): Promise<string> {
  try {
    await p;
  } catch (e) {
    const err = e as { code?: unknown; message?: unknown; data?: { code?: unknown } };
    if (!(e instanceof ProtocolError) && !(e instanceof Error && typeof err.code === 'number')) throw e;
    if (says !== undefined) expect(String(err.message)).toContain(says);
    return String(err.data?.code);
  }
  throw new Error('expected an MCP error');
}

describe('bridge: real MCP clients and servers through a node', () => {
  const files = tempDir('bridge-fs');
  const memDir = tempDir('bridge-mem');
  const work = tempDir('bridge-work');
  const root = realpathSync(files.dir);
  let node: RunningNode & { cleanup: () => Promise<void> };
  const toClose: Array<() => Promise<unknown>> = [];

  const fsGrant = mint(alice, bob, 'fs', ['list_directory', 'read_text_file', 'write_file'], 1_000_000n, rng);
  const memGrant = mint(alice, bob, 'memory', ['create_entities', 'read_graph'], 1_000_000n, rng);

  /** An in-process agent over its own node connection. */
  async function agentFor(actor: Actor, chains: SignedGrant[][], extra: { journal?: CallJournal; costUj?: bigint } = {}) {
    const client = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: actor });
    const journal = extra.journal ?? new CallJournal();
    toClose.push(() => client.close());
    return new BridgeAgent({
      name: 'test',
      signer: actor,
      chains,
      client,
      journal,
      ...(extra.costUj !== undefined ? { costUj: extra.costUj } : {}),
    });
  }

  async function httpClient(url: string, token?: string): Promise<Client> {
    const c = new Client({ name: 'test-client', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(
      new URL(url),
      token === undefined ? {} : { requestInit: { headers: { authorization: `Bearer ${token}` } } },
    );
    await c.connect(transport);
    toClose.push(() => c.close());
    return c;
  }

  beforeAll(async () => {
    writeFileSync(path.join(root, 'hello.txt'), 'hello through the bridge');
    node = await liveNode({
      resources: [
        { name: 'fs', endpoint: { kind: 'mcp-stdio', command: 'mcp-server-filesystem', args: [root] } },
        {
          name: 'memory',
          endpoint: { kind: 'mcp-stdio', command: 'mcp-server-memory', env: { MEMORY_FILE_PATH: path.join(memDir.dir, 'memory.jsonl') } },
        },
      ],
    });
  });
  afterAll(async () => {
    for (const f of toClose.reverse()) await f().catch(() => undefined);
    await node.cleanup();
    files.cleanup();
    memDir.cleanup();
    work.cleanup();
  });

  test('stdio / `jcp bridge` lists the granted tools and an SDK client calls them; results carry the receipt', async () => {
    const key = path.join(work.dir, 'bob.key');
    writeKeyFile(key, bob);
    writeChainFile(path.join(work.dir, 'fs.chain.json'), [fsGrant]);
    writeChainFile(path.join(work.dir, 'mem.chain.json'), [memGrant]);
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [
        path.join(REPO, 'bin/jcp.mjs'),
        'bridge',
        '--node',
        `127.0.0.1:${node.port}`,
        '--key',
        key,
        '--chain',
        path.join(work.dir, 'fs.chain.json'),
        '--chain',
        path.join(work.dir, 'mem.chain.json'),
        '--tool-cost',
        'read_text_file=7',
      ],
      stderr: 'pipe',
    });
    const client = new Client({ name: 'stdio-test', version: '1.0.0' });
    await client.connect(transport);
    toClose.push(() => client.close());

    const listed = (await client.listTools()).tools.map((t) => t.name).sort();
    expect(listed).toEqual(['create_entities', 'list_directory', 'read_graph', 'read_text_file', 'write_file']);

    const r = (await client.callTool({ name: 'read_text_file', arguments: { path: path.join(root, 'hello.txt') } })) as Result;
    expect(r.isError).not.toBe(true);
    expect(text(r)).toBe('hello through the bridge');
    const meta = r._meta!;
    expect(meta['jcp/verdict']).toBe('allow');
    expect(meta['jcp/grant_id']).toBe(grantId(fsGrant.grant));
    expect(meta['jcp/cost_uj']).toBe('7');
    const receipt = fromHex(String(meta['jcp/receipt_cose']));
    expect(receiptId(receipt)).toBe(meta['jcp/receipt']);
    const core = openReceipt(receipt, node.did);
    expect(core.ok && core.value.action).toBe('read_text_file');
    expect(meta['jcp/budget_remaining_uj']).toBe(String(1_000_000n - node.ledger.spent(grantId(fsGrant.grant))));

    const m = (await client.callTool({
      name: 'create_entities',
      arguments: { entities: [{ name: 'bridge', entityType: 'gateway', observations: ['stdio works'] }] },
    })) as Result;
    expect(m.isError).not.toBe(true);
    expect(text(await client.callTool({ name: 'read_graph', arguments: {} }))).toContain('stdio works');

    const budget = await client.readResource({ uri: 'jcp://budget' });
    const b = JSON.parse(String((budget.contents[0] as { text: string }).text)) as {
      grants: Array<{ grant_id: string; remaining_uj: string | null }>;
    };
    const fsB = b.grants.find((g) => g.grant_id === grantId(fsGrant.grant))!;
    expect(fsB.remaining_uj).toBe(meta['jcp/budget_remaining_uj']);
    expect((await client.listResources()).resources.map((x) => x.uri)).toEqual(['jcp://budget']);
  });

  test('http / the SDK client over Streamable HTTP; a deny is a tool error naming the reason, sealed and not debited', async () => {
    const small = mint(alice, bob, 'fs', ['list_directory'], 5n, rng);
    const agent = await agentFor(bob, [[small]], { costUj: 10n });
    const served = await serveBridgeHttp({ host: '127.0.0.1', port: 0, agents: [{ agent }] });
    toClose.push(() => served.close());
    const c = await httpClient(served.url);
    expect((await c.listTools()).tools.map((t) => t.name)).toEqual(['list_directory']);
    const r = (await c.callTool({ name: 'list_directory', arguments: { path: root } })) as Result;
    expect(r.isError).toBe(true);
    expect(text(r)).toBe('denied: budget-exceeded');
    expect(r._meta!['jcp/verdict']).toBe('deny');
    expect(r._meta!['jcp/deny_reason']).toBe('budget-exceeded');
    const sealed = openReceipt(fromHex(String(r._meta!['jcp/receipt_cose'])), node.did);
    expect(sealed.ok && sealed.value.verdict).toBe('deny');
    expect(node.ledger.spent(grantId(small.grant))).toBe(0n);
  });

  test('bad input / unknown tool, arguments not an object, arguments past the frame cap: MCP errors, nothing debited', async () => {
    const g = mint(alice, bob, 'fs', ['list_directory', 'write_file'], 1_000_000n, rng);
    const agent = await agentFor(bob, [[g]]);
    const served = await serveBridgeHttp({ host: '127.0.0.1', port: 0, agents: [{ agent }] });
    toClose.push(() => served.close());
    const c = await httpClient(served.url);
    expect(await mcpCode(c.callTool({ name: 'read_text_file', arguments: { path: root } }))).toBe('unknown-tool');
    // On the wire the message starts with the stable code (the v2 client keeps the wire message as it is).
    await expect(c.callTool({ name: 'read_text_file', arguments: {} })).rejects.toMatchObject({
      code: -32602,
      message: expect.stringMatching(/^unknown-tool: no tool/),
    });
    await expect(c.readResource({ uri: 'jcp://other' })).rejects.toMatchObject({
      code: -32602,
      message: expect.stringMatching(/^unknown-resource: /),
    });
    expect(await mcpCode(agent.call('list_directory', [1, 2], { mcpRequestId: 1 }))).toBe('arguments-invalid');
    expect(await mcpCode(agent.call('list_directory', 'x', { mcpRequestId: 2 }))).toBe('arguments-invalid');
    const big = 'x'.repeat(1_100_000);
    expect(
      await mcpCode(c.callTool({ name: 'write_file', arguments: { path: path.join(root, 'big.txt'), content: big } }), 'nothing was sent'),
    ).toBe('frame-too-large');
    expect(node.ledger.spent(grantId(g.grant))).toBe(0n);
  });

  test('replay / a call whose client went away, re-sent to a restarted bridge, is the same request: one debit', async () => {
    const g = mint(alice, bob, 'fs', ['list_directory'], 1_000_000n, rng);
    const file = path.join(work.dir, 'replay.journal');
    const args = { path: root };
    const gone = AbortSignal.abort();
    const first = await (await agentFor(bob, [[g]], { journal: new CallJournal({ file }), costUj: 3n })).call('list_directory', args, {
      mcpRequestId: 4,
      signal: gone,
    });
    expect(first._meta!['jcp/verdict']).toBe('allow');
    // The bridge restarts (a new journal read from the file, a new node connection) and the client re-sends.
    const restarted = new CallJournal({ file });
    expect(restarted.openCalls).toBe(1);
    const again = await (await agentFor(bob, [[g]], { journal: restarted, costUj: 3n })).call('list_directory', args, { mcpRequestId: 4 });
    expect(again._meta!['jcp/request_id']).toBe(first._meta!['jcp/request_id']);
    expect(again._meta!['jcp/receipt']).toBe(first._meta!['jcp/receipt']);
    expect(text(again)).toBe(text(first));
    expect(node.ledger.spent(grantId(g.grant))).toBe(3n);
    expect(restarted.openCalls).toBe(0);
    // Answered now: named by its MCP id alone (no session, no idempotency key), the same call again
    // is a new request (every client's ids start alike): a second debit.
    const next = await (await agentFor(bob, [[g]], { journal: restarted, costUj: 3n })).call('list_directory', args, { mcpRequestId: 4 });
    expect(next._meta!['jcp/request_id']).not.toBe(first._meta!['jcp/request_id']);
    expect(node.ledger.spent(grantId(g.grant))).toBe(6n);
    restarted.close();
  });

  test('journal keys / a shared journal sees call keys keyed with the agent secret (HKDF of its key, HMAC), a private one the bare key', async () => {
    const g = mint(alice, bob, 'fs', ['list_directory'], 1_000_000n, rng);
    /** A journal that records the call keys it is handed. */
    class Recording extends CallJournal {
      readonly keys: string[] = [];
      readonly #shared: boolean;
      constructor(shared: boolean) {
        super();
        this.#shared = shared;
      }
      get shared(): boolean {
        return this.#shared;
      }
      override open(callKey: string, contentKey: string, clockS: number, answered?: AnsweredScope) {
        this.keys.push(callKey);
        return super.open(callKey, contentKey, clockS, answered);
      }
    }
    const [bare, shared] = [new Recording(false), new Recording(true)];
    for (const journal of [bare, shared])
      await (await agentFor(bob, [[g]], { journal, costUj: 1n })).call('list_directory', { path: root }, { mcpRequestId: 'k-1' });
    const [plain, keyed] = [bare.keys[0]!, shared.keys[0]!];
    expect(keyed).not.toBe(plain);
    const secret = hkdfSync('sha256', bob.key.seed, new Uint8Array(0), 'jcp-bridge-journal-key/v1', 32);
    expect(keyed).toBe(createHmac('sha256', Buffer.from(secret)).update(plain).digest('hex'));
    expect(keyed).toBe(keyedCallKey(journalSecret(bob.key.seed), plain));
  });

  test('concurrency / identical calls in flight at once (distinct MCP ids) are distinct requests: one debit each', async () => {
    const g = mint(alice, bob, 'fs', ['list_directory'], 1_000_000n, rng);
    const agent = await agentFor(bob, [[g]], { costUj: 5n });
    const rs = await Promise.all([1, 2, 3, 4].map((id) => agent.call('list_directory', { path: root }, { mcpRequestId: id })));
    expect(new Set(rs.map((r) => r._meta!['jcp/request_id'])).size).toBe(4);
    expect(new Set(rs.map((r) => r._meta!['jcp/receipt'])).size).toBe(4);
    expect(node.ledger.spent(grantId(g.grant))).toBe(20n);
  });

  test('concurrency / identical calls are told apart by a signed nonce, the arguments sent as they are', async () => {
    const g = mint(alice, bob, 'fs', ['list_directory'], 1_000_000n, rng);
    const sent: WireRequest[] = [];
    const c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    toClose.push(() => c.close());
    const callRequest = c.callRequest.bind(c);
    c.callRequest = (req, o) => {
      sent.push(req);
      return callRequest(req, o);
    };
    const watched = new BridgeAgent({ name: 'test', signer: bob, chains: [[g]], client: c, journal: new CallJournal() });
    const args = { path: root };
    const rs = await Promise.all([1, 2, 3].map((id) => watched.call('list_directory', args, { mcpRequestId: id })));
    expect(new Set(rs.map((r) => r._meta!['jcp/request_id'])).size).toBe(3);
    expect(sent.map((r) => new TextDecoder().decode(r.payload))).toEqual([
      JSON.stringify(args),
      JSON.stringify(args),
      JSON.stringify(args),
    ]);
    expect(sent.every((r) => r.nonce?.length === 16 && verifyWireRequestSignature(r))).toBe(true);
    expect(new Set(sent.map((r) => toHex(r.nonce!))).size).toBe(3);
  });

  test('sessions / the same call with the same MCP id from two live sessions at once is two requests; from one session, one', async () => {
    const g = mint(alice, bob, 'fs', ['list_directory'], 1_000_000n, rng);
    const agent = await agentFor(bob, [[g]], { costUj: 5n });
    const args = { path: root };
    const two = await Promise.all(
      ['session-a', 'session-b'].map((sessionId) => agent.call('list_directory', args, { mcpRequestId: 1, sessionId })),
    );
    expect(two[0]!._meta!['jcp/request_id']).not.toBe(two[1]!._meta!['jcp/request_id']);
    expect(node.ledger.spent(grantId(g.grant))).toBe(10n);
    // Over HTTP: two SDK clients of one agent, each its own session, whose first calls are the same.
    const served = await serveBridgeHttp({ host: '127.0.0.1', port: 0, agents: [{ agent }] });
    toClose.push(() => served.close());
    const [c1, c2] = await Promise.all([httpClient(served.url), httpClient(served.url)]);
    const rs = await Promise.all([c1, c2].map((c) => c.callTool({ name: 'list_directory', arguments: { path: root } })));
    expect(rs[0]!._meta!['jcp/request_id']).not.toBe(rs[1]!._meta!['jcp/request_id']);
    expect(node.ledger.spent(grantId(g.grant))).toBe(20n);
    // An explicit idempotency key is one call whatever the session.
    const keyed = await Promise.all(
      ['session-a', 'session-b'].map((sessionId) =>
        agent.call('list_directory', args, { mcpRequestId: 9, sessionId, idempotencyKey: 'same-call' }),
      ),
    );
    expect(keyed[0]!._meta!['jcp/request_id']).toBe(keyed[1]!._meta!['jcp/request_id']);
    expect(node.ledger.spent(grantId(g.grant))).toBe(25n);
    // In turn: answered in one session, the same MCP id and arguments from another session (ids
    // restart per session) is a new call; from the answered session again, the same request.
    const c = await agent.call('list_directory', args, { mcpRequestId: 3, sessionId: 'session-c' });
    const cAgain = await agent.call('list_directory', args, { mcpRequestId: 3, sessionId: 'session-c' });
    expect(cAgain._meta!['jcp/request_id']).toBe(c._meta!['jcp/request_id']);
    expect(node.ledger.spent(grantId(g.grant))).toBe(30n);
    const d = await agent.call('list_directory', args, { mcpRequestId: 3, sessionId: 'session-d' });
    expect(d._meta!['jcp/request_id']).not.toBe(c._meta!['jcp/request_id']);
    expect(node.ledger.spent(grantId(g.grant))).toBe(35n);
  });

  test('http / several agents: each by its own bearer token (401 otherwise), with its own key and chains', async () => {
    const bobAgent = await agentFor(bob, [[mint(alice, bob, 'fs', ['list_directory'], 1_000n, rng)]]);
    const carolAgent = await agentFor(carol, [[mint(alice, carol, 'memory', ['read_graph'], 1_000n, rng)]]);
    const served: HttpBridge = await serveBridgeHttp({
      host: '127.0.0.1',
      port: 0,
      agents: [
        { agent: bobAgent, token: 'bob-secret-token' },
        { agent: carolAgent, token: 'carol-secret-token' },
      ],
    });
    toClose.push(() => served.close());
    const init = {
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    };
    const post = (headers: Record<string, string>) =>
      fetch(served.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
        body: JSON.stringify(init),
      });
    const none = await post({});
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toBe('Bearer');
    expect(((await none.json()) as { error: { data?: { code?: string } } }).error.data?.code).toBe('unauthorized');
    expect((await post({ authorization: 'Bearer bob-secret-tokeX' })).status).toBe(401);
    expect((await post({ authorization: 'Bearer bob-secret-token-longer' })).status).toBe(401);

    const asBob = await httpClient(served.url, 'bob-secret-token');
    const asCarol = await httpClient(served.url, 'carol-secret-token');
    expect((await asBob.listTools()).tools.map((t) => t.name)).toEqual(['list_directory']);
    expect((await asCarol.listTools()).tools.map((t) => t.name)).toEqual(['read_graph']);
    const r = (await asCarol.callTool({ name: 'read_graph', arguments: {} })) as Result;
    expect(openReceipt(fromHex(String(r._meta!['jcp/receipt_cose'])), node.did).ok && r._meta!['jcp/verdict']).toBe('allow');
    // Bob's session with carol's token is no session of carol's.
    const bobSession = (asBob.transport as StreamableHTTPClientTransport).sessionId!;
    const hijack = await fetch(served.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: 'Bearer carol-secret-token',
        'mcp-session-id': bobSession,
        'mcp-protocol-version': '2025-06-18',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list', params: {} }),
    });
    expect(hijack.status).toBe(404);
  });

  test('http / a non-loopback address is refused without allowRemote; several agents need tokens', async () => {
    const agent = await agentFor(bob, [[fsGrant]]);
    await expect(serveBridgeHttp({ host: '0.0.0.0', port: 0, agents: [{ agent, token: 't' }] })).rejects.toMatchObject({
      code: 'remote-listen-refused',
    });
    await expect(serveBridgeHttp({ host: '0.0.0.0', port: 0, allowRemote: true, agents: [{ agent }] })).rejects.toMatchObject({
      code: 'token-required',
    });
    await expect(serveBridgeHttp({ host: '127.0.0.1', port: 0, agents: [{ agent }, { agent }] })).rejects.toMatchObject({
      code: 'token-required',
    });
  });
});
