/**
 * The bridge's A2A face end to end (docs/a2a.md): the SDK's own A2A client (ClientFactory, over
 * JSON-RPC and HTTP+JSON, streaming and not) → the bridge's A2A face → a real node → a real SDK A2A
 * agent (testkit/a2a-agent.ts). Then budgets that follow delegation: the planner's bridge mints a
 * child grant on the tools resource for the researcher and forwards it in the message; the
 * researcher's bridge accepts it (listed delegator) for MCP tool calls, which draw on every link,
 * until the child's budget is spent (budget-exceeded while the planner still has budget) or the
 * planner revokes it (revoked).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { type Message, SendMessageRequest, type StreamResponse, type Task } from '@a2a-js/sdk';
import { ClientFactory, ClientFactoryOptions } from '@a2a-js/sdk/client';
import { Client as McpClient, ProtocolError, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  type A2aBridge,
  BridgeAgent,
  CallJournal,
  decodeDelegation,
  type HttpBridge,
  serveBridgeA2a,
  serveBridgeHttp,
} from '../../bridge/index.ts';
import { JcpClient } from '../../client/index.ts';
import { type Actor, grantId, type SignedGrant, signRevocation } from '../../core/index.ts';
import { type A2aAgent, startA2aAgent } from '../../testkit/index.ts';
import { writeChainFile } from '../../client/index.ts';
import { writeKeyFile } from '../../node/index.ts';
import { runJcpInProcess } from '../support.ts';
import { rawSendMessage } from './a2a-raw.ts';
import { cast, liveNode, mint, tempDir } from '../node/fixtures.ts';

const { rng, alice: steward, bob: planner, carol: researcher, mallory } = cast('bridge-a2a');
const TOOLS_SERVER = path.resolve(import.meta.dirname, '../../testkit/mcp-tools-server.ts');
const PRICE = 100n;

let agent: A2aAgent;
let node: Awaited<ReturnType<typeof liveNode>>;
let face: A2aBridge;
let researcherMcp: HttpBridge;
const closers: Array<() => Promise<unknown>> = [];
const dataDir = tempDir('bridge-a2a-node');
let nodeClosed = false;

const agentGrant = mint(steward, planner, 'agent', ['echo', 'stream'], 100_000n, rng);
const toolsGrant = mint(steward, planner, 'tools', ['test_simple_text'], 10_000n, rng);
let n = 0;

async function bridgeAgent(
  actor: Actor,
  name: string,
  chains: SignedGrant[][],
  accept: string[] = [],
  delegateTo?: readonly Actor[],
): Promise<BridgeAgent> {
  const client = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: actor });
  closers.push(() => client.close());
  return new BridgeAgent({
    name,
    signer: actor,
    chains,
    client,
    journal: new CallJournal(),
    acceptDelegationFrom: accept as never,
    ...(delegateTo !== undefined ? { delegateTo: delegateTo.map((a) => a.did) } : {}),
  });
}

/** The SDK's A2A client for the face, preferring `binding`. */
async function a2aClient(binding: 'JSONRPC' | 'HTTP+JSON') {
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: [binding] }));
  return factory.createFromUrl(face.url);
}

function send(text: string, metadata: Record<string, unknown>, messageId = `m-${++n}`): SendMessageRequest {
  return SendMessageRequest.fromJSON({ message: { messageId, role: 'ROLE_USER', parts: [{ text }], metadata } });
}

const textOf = (m: Message | undefined) => (m?.parts[0]?.content?.$case === 'text' ? m.parts[0].content.value : '');

/**
 * The stable code of an MCP error (`data.code`): through the client a v2 `ProtocolError`; from
 * `agent.call` in-process the bridge's own error (bridge/agent.ts, on the v1 types of the 2025
 * face), read by its JSON-RPC shape.
 */
async function mcpCode(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    const err = e as { code?: unknown; data?: { code?: unknown } };
    if (e instanceof ProtocolError || (e instanceof Error && typeof err.code === 'number')) return String(err.data?.code);
    throw e;
  }
  return 'no error';
}

beforeAll(async () => {
  agent = await startA2aAgent();
  node = await liveNode(
    {
      resources: [
        { name: 'agent', endpoint: { kind: 'a2a', url: agent.url, timeout_ms: 5000 } },
        { name: 'tools', endpoint: { command: process.execPath, args: ['--import', 'tsx', TOOLS_SERVER, '--stdio'] } },
      ],
      meter: { default_estimate_uj: Number(PRICE), rungs: ['estimator'] },
    },
    {},
    dataDir.dir,
  );
  const plannerAgent = await bridgeAgent(planner, 'planner', [[agentGrant], [toolsGrant]], [], [researcher]);
  face = await serveBridgeA2a({ host: '127.0.0.1', port: 0, agents: [{ agent: plannerAgent }] });
  const researcherAgent = await bridgeAgent(researcher, 'researcher', [], [planner.did]);
  researcherMcp = await serveBridgeHttp({ host: '127.0.0.1', port: 0, agents: [{ agent: researcherAgent }] });
}, 60_000);

afterAll(async () => {
  await face?.close();
  await researcherMcp?.close();
  for (const c of closers.reverse()) await c().catch(() => undefined);
  if (!nodeClosed) await node?.close();
  dataDir.cleanup();
  await agent?.stop();
});

describe('the A2A face: an unmodified SDK client through bridge and node to an SDK agent', () => {
  test('the agent card lists the skills the grants permit, with both bindings', async () => {
    const card = (await (await fetch(`${face.url}/.well-known/agent-card.json`)).json()) as Record<string, unknown>;
    expect((card['skills'] as { id: string }[]).map((s) => s.id).sort()).toEqual(['echo', 'stream']);
    const ifaces = card['supportedInterfaces'] as { url: string; protocolBinding: string }[];
    expect(ifaces.map((i) => i.protocolBinding).sort()).toEqual(['HTTP+JSON', 'JSONRPC']);
  });

  for (const binding of ['JSONRPC', 'HTTP+JSON'] as const) {
    test(`${binding}: a message is a sealed agent-task; the reply carries the receipt, grant and budget; a re-send is a replay`, async () => {
      const client = await a2aClient(binding);
      const before = node.ledger.spent(grantId(agentGrant.grant));
      const req = send('hi', { skill: 'echo' });
      const r = (await client.sendMessage(req)) as Message;
      expect(textOf(r)).toBe('echo: hi');
      const meta = r.metadata!;
      expect(meta['jcp/verdict']).toBe('allow');
      expect(meta['jcp/grant_id']).toBe(grantId(agentGrant.grant));
      expect(meta['jcp/receipt']).toMatch(/^[0-9a-f]{64}$/);
      expect(BigInt(meta['jcp/budget_remaining_uj'] as string)).toBe(100_000n - before - PRICE);
      expect(node.ledger.spent(grantId(agentGrant.grant))).toBe(before + PRICE);
      // The same message again (same messageId): the node replays its decision, no second debit.
      const again = (await client.sendMessage(req)) as Message;
      expect(again.metadata!['jcp/receipt']).toBe(meta['jcp/receipt']);
      expect(node.ledger.spent(grantId(agentGrant.grant))).toBe(before + PRICE);
    });

    test(`${binding}: a streamed task arrives in order; the last event carries the decision`, async () => {
      const client = await a2aClient(binding);
      const events: StreamResponse[] = [];
      for await (const e of client.sendMessageStream(send('events=3 delay=5', { skill: 'stream' }))) events.push(e);
      const kinds = events.map((e) => e.payload?.$case);
      expect(kinds[0]).toBe('task');
      const steps = events
        .filter((e) => e.payload?.$case === 'statusUpdate')
        .map((e) => (e.payload?.$case === 'statusUpdate' ? textOf(e.payload.value.status?.message) : ''));
      expect(steps.slice(0, 3)).toEqual(['step 1', 'step 2', 'step 3']);
      expect(kinds).toContain('artifactUpdate');
      const last = events.at(-1)!.payload!.value as { metadata?: Record<string, unknown> };
      expect(last.metadata?.['jcp/verdict']).toBe('allow');
      expect(last.metadata?.['jcp/receipt']).toMatch(/^[0-9a-f]{64}$/);
    });
  }

  test('a long stream holds no other call: a message sent during it is answered before the stream ends', async () => {
    const client = await a2aClient('JSONRPC');
    const done: string[] = [];
    const stream = (async () => {
      for await (const _e of client.sendMessageStream(send('events=20 delay=100', { skill: 'stream' }))) {
        // read every event
      }
      done.push('stream');
    })();
    // the stream is under way (its task is at the agent) before the message goes out
    while (agent.openRequests() === 0) await new Promise((r) => setTimeout(r, 10));
    const r = (await client.sendMessage(send('during', { skill: 'echo' }))) as Message;
    done.push('echo');
    await stream;
    expect(textOf(r)).toBe('echo: during');
    expect(done).toEqual(['echo', 'stream']);
  });

  test('an A2A client that goes away mid-stream leaves no stream open at the bridge, the node or the agent', async () => {
    const ac = new AbortController();
    const res = await fetch(`${face.url}/`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', 'a2a-version': '1.0' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'SendStreamingMessage',
        params: {
          message: {
            messageId: `gone-${++n}`,
            role: 'ROLE_USER',
            parts: [{ text: 'events=100000 delay=5' }],
            metadata: { skill: 'stream' },
          },
        },
      }),
      signal: ac.signal,
    });
    const reader = res.body!.getReader();
    await reader.read(); // the first event: the stream runs
    expect(agent.openRequests()).toBeGreaterThan(0);
    ac.abort();
    // nothing else closes it: the agent would stream 100,000 events (over 8 minutes)
    while (agent.openRequests() > 0) await new Promise((r) => setTimeout(r, 20));
  });

  test('a chunked body past the cap, or one that is not JSON, gets the stable JSON error and no stack trace', async () => {
    const big = new ReadableStream<Uint8Array>({
      start(c) {
        for (let i = 0; i < 6; i++) c.enqueue(new Uint8Array(1 << 20).fill(0x61));
        c.close();
      },
    });
    const r = await fetch(`${face.url}/`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: big,
      duplex: 'half',
    } as RequestInit);
    const text = await r.text();
    expect(r.status).toBe(413);
    expect((JSON.parse(text) as { error: { data: { code: string } } }).error.data.code).toBe('payload-too-large');
    // a message between Express's default 100 KB and the documented 4 MiB goes through
    const long = 'y'.repeat(200_000);
    const echoed = (await (await a2aClient('JSONRPC')).sendMessage(send(long, { skill: 'echo' }))) as Message;
    expect(textOf(echoed)).toBe(`echo: ${long}`);
    const bad = await fetch(`${face.url}/`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{not json' });
    const badText = await bad.text();
    expect(badText).not.toContain('node_modules');
    expect(bad.status).toBeLessThan(500);
  });

  test('a deny is a rejected task naming the reason, sealed; a skill not granted is unknown-skill before any decision', async () => {
    const poor = mint(steward, mallory, 'agent', ['echo'], PRICE - 1n, rng);
    const poorAgent = await bridgeAgent(mallory, 'poor', [[poor]]);
    const poorFace = await serveBridgeA2a({ host: '127.0.0.1', port: 0, agents: [{ agent: poorAgent }] });
    closers.push(() => poorFace.close());
    const factory = new ClientFactory();
    const client = await factory.createFromUrl(poorFace.url);
    const received = agent.received.length;
    const t = (await client.sendMessage(send('x', {}))) as Task;
    expect(t.status?.state).toBe(7); // TASK_STATE_REJECTED
    expect(textOf(t.status?.message)).toBe('denied: budget-exceeded');
    expect(t.metadata?.['jcp/deny_reason']).toBe('budget-exceeded');
    expect(t.metadata?.['jcp/receipt']).toMatch(/^[0-9a-f]{64}$/);
    expect(agent.received.length).toBe(received);
    const bad = await (await a2aClient('JSONRPC')).sendMessage(send('x', { skill: 'fail' })).catch((e: Error) => e);
    expect((bad as Error).message).toContain('unknown-skill');
  });

  test('a message with no parts, or a part with no content (a shape the SDK drops), is part-invalid: nothing sealed or debited', async () => {
    const spent = node.ledger.spent(grantId(agentGrant.grant));
    const received = agent.received.length;
    // v0.3's {kind, text} is read by its `text`; these carry no text, raw, url or data
    const shapes: unknown[][] = [[], [{ kind: 'file', file: { uri: 'https://x' } }], [{ text: 'ok' }, { type: 'text', content: 'x' }]];
    for (const [i, parts] of shapes.entries()) {
      const req = SendMessageRequest.fromJSON({
        message: { messageId: `bad-${i}`, role: 'ROLE_USER', parts, metadata: { skill: 'echo' } },
      });
      for (const binding of ['JSONRPC', 'HTTP+JSON'] as const) {
        const client = await a2aClient(binding);
        const e = await client.sendMessage(req).catch((x: Error) => x);
        expect(e).toBeInstanceOf(Error);
        expect((e as Error).message).toContain('part-invalid');
        const streamed = await (async () => {
          for await (const _ of client.sendMessageStream(req)) return 'an event';
          return 'no event';
        })().catch((x: Error) => x);
        expect((streamed as Error).message).toContain('part-invalid');
      }
    }
    // the raw JSON-RPC error: invalid params with the stable code in its data
    const r = await rawSendMessage(face.url, { messageId: 'bad-raw', role: 'ROLE_USER', parts: [{}], metadata: { skill: 'echo' } });
    const { error } = (await r.json()) as { error: { code: number; data: Array<{ metadata?: Record<string, string> }> } };
    expect(error.code).toBe(-32602);
    expect(error.data[0]?.metadata?.['jcp/error']).toBe('part-invalid');
    // A part that is not an object (the SDK's reader would fail with an internal error, no code).
    for (const part of [null, 'x', 5, ['t']]) {
      for (const [url, body] of [
        [
          `${face.url}/`,
          {
            jsonrpc: '2.0',
            id: 2,
            method: 'SendMessage',
            params: { message: { messageId: 'n', role: 'ROLE_USER', parts: [{ text: 'a' }, part] } },
          },
        ],
        [`${face.url}/rest/message:send`, { message: { messageId: 'n', role: 'ROLE_USER', parts: [{ text: 'a' }, part] } }],
      ] as const) {
        const odd = await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
          body: JSON.stringify(body),
        });
        expect(odd.status).toBe(400);
        const j = (await odd.json()) as { error: { message: string; data: { code: string } } };
        expect(j.error.data.code).toBe('part-invalid');
        expect(j.error.message).toContain('part 1');
      }
    }
    expect(agent.received.length).toBe(received);
    expect(node.ledger.spent(grantId(agentGrant.grant))).toBe(spent);
    // an empty text part is content: it goes through
    const ok = (await (await a2aClient('JSONRPC')).sendMessage(send('', { skill: 'echo' }))) as Message;
    expect(textOf(ok)).toBe('echo: ');
  });
});

describe('budgets that follow delegation', () => {
  let mcp: McpClient;
  const call = (chainText: string) =>
    mcp.callTool({ name: 'test_simple_text', arguments: {}, _meta: { 'jcp/delegation': chainText } }) as Promise<{
      isError?: boolean;
      content: { text?: string }[];
      _meta?: Record<string, unknown>;
    }>;

  /** The planner delegates `budget` µJ of its tools grant to the researcher in an A2A message; the chain as the agent received it. */
  async function delegate(budget: bigint): Promise<string> {
    const client = await a2aClient('JSONRPC');
    const r = (await client.sendMessage(
      send('research this', {
        skill: 'echo',
        'jcp/delegate': { to: researcher.did, resource: 'tools', budget_uj: budget.toString(), actions: ['test_simple_text'] },
      }),
    )) as Message;
    expect(r.metadata?.['jcp/verdict']).toBe('allow');
    const got = agent.received.at(-1)!.metadata!;
    expect(got['jcp/delegate']).toBeUndefined();
    return got['jcp/delegation'] as string;
  }

  beforeAll(async () => {
    mcp = new McpClient({ name: 'researcher', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(researcherMcp.url)));
    closers.push(() => mcp.close());
  });

  test('a delegated chain is spent to its end: budget-exceeded for the researcher while the planner still has budget', async () => {
    const text = await delegate(250n);
    const chain = decodeDelegation(text);
    expect(chain.map((g) => g.grant.subject)).toEqual([planner.did, researcher.did]);
    const child = grantId(chain[1]!.grant);
    const a = await call(text);
    expect(a.isError).not.toBe(true);
    expect(a._meta?.['jcp/grant_id']).toBe(child);
    await call(text);
    const c = await call(text);
    expect(c.isError).toBe(true);
    expect(c._meta?.['jcp/deny_reason']).toBe('budget-exceeded');
    // Every link was debited (§4.2): the child 200, the planner's tools grant too.
    expect(node.ledger.spent(child)).toBe(2n * PRICE);
    expect(node.ledger.spent(grantId(toolsGrant.grant))).toBeGreaterThanOrEqual(2n * PRICE);
    expect(node.ledger.spent(grantId(toolsGrant.grant))).toBeLessThan(toolsGrant.grant.budget_uj);
  });

  test('the delegator revokes its child: the researcher’s next call is revoked', async () => {
    const text = await delegate(1000n);
    const chain = decodeDelegation(text);
    expect((await call(text)).isError).not.toBe(true);
    const client = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: planner });
    closers.push(() => client.close());
    await client.revoke(signRevocation(grantId(chain[1]!.grant), planner, rng(16)), chain[1]!.grant);
    const r = await call(text);
    expect(r.isError).toBe(true);
    expect(r._meta?.['jcp/deny_reason']).toBe('revoked');
  });

  test('the sending bridge mints only for --delegate-to keys; with no list, only through a face with a token', async () => {
    const own = mint(steward, planner, 'agent', ['echo'], 10_000n, rng);
    const ask = (to: Actor) =>
      send('x', { skill: 'echo', 'jcp/delegate': { to: to.did, resource: 'agent', budget_uj: '10', actions: ['echo'] } });
    const refusal = (p: Promise<unknown>) =>
      p.then(
        () => 'sent',
        (e: Error) => e.message,
      );
    // The planner's face lists the researcher: a stranger naming its own key is refused.
    expect(await refusal((await a2aClient('JSONRPC')).sendMessage(ask(mallory)))).toContain('delegate-target-refused');
    // No list, no token: anyone who reaches the face could name any key, so none.
    const open = await serveBridgeA2a({ host: '127.0.0.1', port: 0, agents: [{ agent: await bridgeAgent(planner, 'open', [[own]]) }] });
    closers.push(() => open.close());
    const openClient = await new ClientFactory().createFromUrl(open.url);
    expect(await refusal(openClient.sendMessage(ask(researcher)))).toContain('delegate-target-refused');
    const before = agent.received.length;
    // No list, a token: the token's holder is the agent; any key, as before.
    const secured = await serveBridgeA2a({
      host: '127.0.0.1',
      port: 0,
      agents: [{ agent: await bridgeAgent(planner, 'secured', [[own]]), token: 'sesame' }],
    });
    closers.push(() => secured.close());
    const r = await rawSendMessage(secured.url, (SendMessageRequest.toJSON(ask(mallory)) as { message: Record<string, unknown> }).message, {
      authorization: 'Bearer sesame',
    });
    expect(r.status).toBe(200);
    expect(agent.received.length).toBe(before + 1);
    expect(typeof agent.received.at(-1)!.metadata!['jcp/delegation']).toBe('string');
  });

  test('abuse is refused by the receiving bridge: another resource, a delegator not listed', async () => {
    // A chain for the agent resource, used on a tool of the tools resource.
    const client = await a2aClient('JSONRPC');
    await client.sendMessage(
      send('x', { skill: 'echo', 'jcp/delegate': { to: researcher.did, resource: 'agent', budget_uj: '10', actions: ['echo'] } }),
    );
    const wrong = agent.received.at(-1)!.metadata!['jcp/delegation'] as string;
    expect(await mcpCode(call(wrong))).toBe('delegation-resource-mismatch');
    // A bad jcp/delegate is refused before anything is sent.
    const bad = await client
      .sendMessage(send('x', { skill: 'echo', 'jcp/delegate': { to: researcher.did, resource: 'tools', budget_uj: '999999999' } }))
      .catch((e: Error) => e);
    expect((bad as Error).message).toContain('delegate-not-narrower');
    // A researcher bridge that does not list the planner.
    const strict = await bridgeAgent(researcher, 'strict', []);
    const text = await delegate(10n);
    expect(await mcpCode(strict.call('test_simple_text', {}, { mcpRequestId: 1, delegation: text }))).toBe(
      'delegation-delegator-not-accepted',
    );
  });
});

describe('jcp bridge --a2a', () => {
  const work = tempDir('bridge-a2a-cli');
  let child: ChildProcess | undefined;
  afterAll(() => {
    child?.kill('SIGTERM');
    work.cleanup();
  });

  test('--config: one agent card per agent, addressed by its bearer token; none without a token', async () => {
    const w = (f: string) => path.join(work.dir, f);
    writeKeyFile(w('planner.key'), planner);
    writeKeyFile(w('researcher.key'), researcher);
    writeChainFile(w('planner.chain.json'), [agentGrant]);
    writeChainFile(w('researcher.chain.json'), [mint(steward, researcher, 'agent', ['stream'], 1000n, rng)]);
    writeFileSync(w('p.token'), 'planner-token', { mode: 0o600 });
    writeFileSync(w('r.token'), 'researcher-token', { mode: 0o600 });
    writeFileSync(
      w('bridge.json'),
      JSON.stringify({
        node: `127.0.0.1:${node.port}`,
        agents: [
          { name: 'planner', key: 'planner.key', chains: ['planner.chain.json'], token_file: 'p.token' },
          {
            name: 'researcher',
            key: 'researcher.key',
            chains: ['researcher.chain.json'],
            token_file: 'r.token',
            accept_delegation_from: [planner.did],
          },
        ],
      }),
    );
    const JCP = path.resolve(import.meta.dirname, '../../bin/jcp.mjs');
    child = spawn(process.execPath, [JCP, 'bridge', '--a2a', '127.0.0.1:0', '--config', w('bridge.json')], {
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
    const started = JSON.parse(line) as { a2a: string };
    const card = async (token?: string) => {
      const r = await fetch(
        `${started.a2a}/.well-known/agent-card.json`,
        token === undefined ? {} : { headers: { authorization: `Bearer ${token}` } },
      );
      return { status: r.status, body: (await r.json()) as { name?: string; skills?: { id: string }[] } };
    };
    expect((await card()).status).toBe(401);
    const p = await card('planner-token');
    expect([p.body.name, p.body.skills?.map((s) => s.id).sort()]).toEqual(['planner', ['echo', 'stream']]);
    const r = await card('researcher-token');
    expect([r.body.name, r.body.skills?.map((s) => s.id)]).toEqual(['researcher', ['stream']]);
  }, 60_000);

  test('a bad --accept-delegation-from or --delegate-to is a usage error', async () => {
    const base = ['bridge', '--node', '127.0.0.1:1', '--key', 'k', '--chain', 'c', '--a2a', '127.0.0.1:0'];
    for (const [flag, says] of [
      ['--accept-delegation-from', '--accept-delegation-from'],
      ['--delegate-to', '--delegate-to: expected a did:key'],
    ] as const) {
      const r = await runJcpInProcess([...base, flag, 'did:web:x']);
      expect(r.code, flag).not.toBe(0);
      expect(r.err).toContain(says);
    }
  });
});

describe('jcp receipts attribute --tree', () => {
  test('the delegation tree: the planner’s grant, its children for the researcher, spend per link', async () => {
    await face.close();
    await researcherMcp.close();
    await node.close();
    nodeClosed = true;
    const r = await runJcpInProcess(['receipts', 'attribute', dataDir.dir, '--tree']);
    expect(r.code).toBe(0);
    type Node = {
      grant_id: string;
      subject?: string;
      spent_uj: string;
      own_uj: string;
      allowed: number;
      refused: number;
      children: Node[];
    };
    const report = JSON.parse(r.out) as { attribution: unknown[]; delegation_tree: Node[] };
    expect(report.attribution.length).toBeGreaterThan(0);
    const root = report.delegation_tree.find((n) => n.grant_id === grantId(toolsGrant.grant))!;
    // Two delegations were exercised: 2 calls then budget-exceeded; 1 call then revoked.
    expect(root.children.map((c) => [c.subject, c.spent_uj, c.allowed, c.refused])).toEqual([
      [researcher.did, (2n * PRICE).toString(), 2, 1],
      [researcher.did, PRICE.toString(), 1, 1],
    ]);
    expect(root.spent_uj).toBe((3n * PRICE).toString());
    expect(root.own_uj).toBe('0');
    // The planner's own grant on the agent resource is a root of its own, with the planner as subject.
    const agentRoot = report.delegation_tree.find((n) => n.grant_id === grantId(agentGrant.grant))!;
    expect(agentRoot.subject).toBe(planner.did);
    expect(BigInt(agentRoot.own_uj)).toBe(BigInt(agentRoot.spent_uj));
    // Without --tree the report is as before.
    const plain = JSON.parse((await runJcpInProcess(['receipts', 'attribute', dataDir.dir])).out) as Record<string, unknown>;
    expect(plain['delegation_tree']).toBeUndefined();
  }, 60_000);
});
