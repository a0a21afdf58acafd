/**
 * Bridge replicas sharing the call journal (`jcp bridge --journal-nats`, bridge/journal-nats.ts):
 * two `jcp bridge --http` processes for the same agent behind a round-robin TCP proxy, a live node
 * and server-everything behind them, one SDK v2 client pinned to 2026-07-28 whose calls alternate
 * between the two. Each call is one decision and one debit; a call whose client gave up is re-sent
 * (the same JSON-RPC id, arguments and bytes) to the other process: the same signed request, replayed
 * by the node (one decision, one debit). Each run has its own KV bucket, deleted afterwards.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { type Server as NetServer, type Socket, connect as netConnect, createServer as netServer } from 'node:net';
import path from 'node:path';
import { Readable } from 'node:stream';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect as natsConnect } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { BridgeAgent, NatsCallJournal } from '../../bridge/index.ts';
import { JcpClient, writeChainFile } from '../../client/index.ts';
import { grantId } from '../../core/index.ts';
import { type RunningNode, writeKeyFile } from '../../node/index.ts';
import { runJcp } from '../listeners.ts';
import { cast, liveNode, mint, tempDir } from '../node/fixtures.ts';
import { type Everything, startEverything } from '../node/upstreams.ts';

const { rng, alice, bob } = cast('bridge-replicas');
const JCP = path.resolve(import.meta.dirname, '../../bin/jcp.mjs');
const NATS = 'nats://127.0.0.1:4222';
const PIN = { versionNegotiation: { mode: { pin: '2026-07-28' } } } as const;
type Result = { content?: { type: string; text?: string }[]; isError?: boolean; _meta?: Record<string, unknown> };

/** A `fetch` that opens a new TCP connection per request (so the per-connection proxy alternates), recording each `tools/call` POST. */
function freshFetch(calls: { url: string; headers: Record<string, string>; body: string }[]): typeof fetch {
  return (async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const headers = Object.fromEntries(new Headers(init?.headers).entries());
    const body = init?.body === undefined || init.body === null ? undefined : String(init.body);
    if (body?.includes('"tools/call"')) calls.push({ url: url.href, headers, body });
    return new Promise<Response>((resolve, reject) => {
      const req = httpRequest(url, { method: init?.method ?? 'GET', headers, agent: false, signal: init?.signal ?? undefined }, (res) => {
        const h = new Headers();
        for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) h.set(k, Array.isArray(v) ? v.join(', ') : v);
        const empty = res.statusCode === 202 || res.statusCode === 204;
        resolve(new Response(empty ? null : (Readable.toWeb(res) as ReadableStream), { status: res.statusCode ?? 500, headers: h }));
      });
      req.on('error', reject);
      req.end(body);
    });
  }) as typeof fetch;
}

/** A TCP proxy on loopback handing each new connection to the next backend in turn (`route` sets the next one); counts them. */
async function roundRobin(
  ports: number[],
): Promise<{ port: number; counts: number[]; route: (i: number) => void; close: () => Promise<void> }> {
  const counts = [0, 0];
  const open = new Set<Socket>();
  let next = 0;
  const server: NetServer = netServer((client) => {
    const i = next++ % ports.length;
    counts[i]!++;
    const up = netConnect(ports[i]!, '127.0.0.1');
    for (const s of [client, up]) {
      open.add(s);
      s.on('close', () => open.delete(s));
      s.on('error', () => undefined);
    }
    client.pipe(up).pipe(client);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as { port: number }).port,
    counts,
    route: (i) => {
      next = i;
    },
    close: () =>
      new Promise<void>((r) => {
        for (const s of open) s.destroy();
        server.close(() => r());
      }),
  };
}

/** Starts `jcp bridge` with `args`; resolves to its `/mcp` url once it prints its listening line. */
function startBridge(args: string[], children: ChildProcess[]): Promise<string> {
  const child = spawn(process.execPath, [JCP, 'bridge', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  return new Promise<string>((resolve, reject) => {
    let out = '';
    let err = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('\n')) resolve((JSON.parse(out.split('\n')[0]!) as { listening: string }).listening);
    });
    child.stderr!.on('data', (d: Buffer) => {
      err += d.toString();
    });
    child.once('exit', (code) => reject(new Error(`jcp bridge exited ${code}: ${err}`)));
  });
}

/** The JSON-RPC answer with `id` in a POST's body (JSON, or the last matching `data:` line of an SSE stream). */
function answerOf(text: string, id: unknown): { result?: Result; error?: unknown } {
  if (text.trimStart().startsWith('{')) return JSON.parse(text) as { result?: Result };
  const msgs = text
    .split('\n')
    .filter((l) => l.startsWith('data:'))
    .map((l) => JSON.parse(l.slice(5)) as { id?: unknown; result?: Result; error?: unknown });
  return msgs.filter((m) => m.id === id).at(-1) ?? {};
}

describe('bridge replicas: two processes for one agent share the call journal over NATS', () => {
  const work = tempDir('bridge-replicas');
  const w = (name: string) => path.join(work.dir, name);
  const bucket = `jcp_test_journal_${randomBytes(6).toString('hex')}`;
  const children: ChildProcess[] = [];
  const toClose: Array<() => Promise<unknown>> = [];
  let everything: Everything;
  let node: RunningNode & { cleanup: () => Promise<void> };
  const paid = mint(alice, bob, 'everything', ['echo', 'trigger-long-running-operation'], 1_000n, rng);

  beforeAll(async () => {
    everything = await startEverything();
    node = await liveNode({ resources: [{ name: 'everything', endpoint: { url: everything.url, timeout_ms: 10_000 } }] });
    writeKeyFile(w('bob.key'), bob);
    writeChainFile(w('paid.chain.json'), [paid]);
  }, 60_000);
  afterAll(async () => {
    for (const f of toClose.reverse()) await f().catch(() => undefined);
    await Promise.all(
      children.map(
        (c) =>
          new Promise<void>((r) => {
            if (c.exitCode !== null || c.signalCode !== null) return r();
            c.once('exit', () => r());
            c.kill('SIGTERM');
          }),
      ),
    );
    const nc = await natsConnect({ servers: NATS, reconnect: false });
    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete(`KV_${bucket}`).catch(() => undefined);
    await nc.close();
    await node?.cleanup();
    await everything?.kill();
    work.cleanup();
  });

  test('calls alternate between the processes: one decision and one debit each; a re-send on the other process is a replay', async () => {
    const ports: number[] = [];
    const proxy = await roundRobin(ports);
    toClose.push(() => proxy.close());
    const args = [
      ...['--node', `127.0.0.1:${node.port}`, '--key', w('bob.key'), '--chain', w('paid.chain.json'), '--cost-uj', '5'],
      ...['--http', '127.0.0.1:0', '--allow-host', `127.0.0.1:${proxy.port}`],
      ...['--journal-nats', NATS, '--journal-bucket', bucket],
    ];
    for (const url of await Promise.all([startBridge(args, children), startBridge(args, children)])) ports.push(Number(new URL(url).port));

    const calls: { url: string; headers: Record<string, string>; body: string }[] = [];
    const send = freshFetch(calls);
    const client = new Client({ name: 'v2-replicas', version: '1' }, PIN);
    await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${proxy.port}/mcp`), { fetch: send }));
    toClose.push(() => client.close());
    const spent = () => node.ledger.spent(grantId(paid.grant));

    const start = [...proxy.counts];
    const requests = new Set<unknown>();
    for (let i = 0; i < 6; i++) {
      const r = (await client.callTool({ name: 'echo', arguments: { message: 'same' } })) as Result;
      expect(r._meta!['jcp/verdict']).toBe('allow');
      requests.add(r._meta!['jcp/request_id']);
    }
    expect(proxy.counts.map((n, i) => n - start[i]!)).toEqual([3, 3]);
    expect(requests.size).toBe(6);
    expect(spent()).toBe(30n);

    // The client gives up on a long call at its first progress; the very same POST (JSON-RPC id,
    // arguments, headers) is sent again and lands on the other process.
    const seqBefore = await node.log.lastSeq();
    const abort = new AbortController();
    const at = [...proxy.counts];
    const first = client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 0.6, steps: 3 } }, {
      signal: abort.signal,
      onprogress: () => abort.abort('the user gave up'),
    } as never);
    await expect(first).rejects.toThrow();
    const original = at.findIndex((n, i) => proxy.counts[i] !== n);
    const resent = calls.at(-1)!;
    expect(JSON.parse(resent.body)).toMatchObject({ method: 'tools/call', params: { name: 'trigger-long-running-operation' } });
    proxy.route(1 - original);
    const before = [...proxy.counts];
    const res = await send(resent.url, { method: 'POST', headers: resent.headers, body: resent.body });
    const again = answerOf(await res.text(), (JSON.parse(resent.body) as { id: unknown }).id).result!;
    expect(proxy.counts[1 - original]! - before[1 - original]!).toBe(1);
    expect(again._meta!['jcp/verdict']).toBe('allow');
    expect(spent()).toBe(35n);
    expect((await node.log.lastSeq()) - seqBefore).toBe(1);

    // A new call after it (another id) is a new request: its own decision and debit.
    const next = (await client.callTool({ name: 'echo', arguments: { message: 'after' } })) as Result;
    expect(next._meta!['jcp/request_id']).not.toBe(again._meta!['jcp/request_id']);
    expect(spent()).toBe(40n);
  }, 90_000);

  test('two replicas given one call with an idempotency key, the first answered before the second reads the journal: one request, one debit', async () => {
    const agents: BridgeAgent[] = [];
    for (const name of ['replica-a', 'replica-b']) {
      const jcp = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
      const journal = new NatsCallJournal({ servers: NATS, bucket });
      toClose.push(
        () => jcp.close(),
        () => journal.close(),
      );
      agents.push(new BridgeAgent({ name, signer: bob, chains: [[paid]], client: jcp, journal, costUj: 1n }));
    }
    const [a, b] = agents as [BridgeAgent, BridgeAgent];
    const spent = () => node.ledger.spent(grantId(paid.grant));
    const before = spent();
    const seq = await node.log.lastSeq();
    // In turn (the worst case of a race: A has answered and closed the call before B's journal read), then at once.
    for (let i = 0; i < 10; i++) {
      const ctx = { mcpRequestId: 1, idempotencyKey: `race-${i}` };
      const first = await a.call('echo', { message: `race ${i}` }, ctx);
      const second = await b.call('echo', { message: `race ${i}` }, ctx);
      expect(second._meta!['jcp/request_id']).toBe(first._meta!['jcp/request_id']);
      expect(second._meta!['jcp/receipt']).toBe(first._meta!['jcp/receipt']);
    }
    const pairs = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        Promise.all([a, b].map((r) => r.call('echo', { message: `both ${i}` }, { mcpRequestId: 1, idempotencyKey: `both-${i}` }))),
      ),
    );
    for (const [x, y] of pairs) expect(y!._meta!['jcp/request_id']).toBe(x!._meta!['jcp/request_id']);
    expect(spent() - before).toBe(20n);
    expect((await node.log.lastSeq()) - seq).toBe(20);
    // Named by its MCP id alone (stateless, no key), an answered call's id and arguments again are a
    // new call (docs/bridge.md "Re-sent calls"): its own decision and debit.
    const bare = await a.call('echo', { message: 'bare' }, { mcpRequestId: 7 });
    const again = await b.call('echo', { message: 'bare' }, { mcpRequestId: 7 });
    expect(again._meta!['jcp/request_id']).not.toBe(bare._meta!['jcp/request_id']);
    expect(spent() - before).toBe(22n);
  }, 30_000);

  test('NATS unreachable: a call is refused journal-unavailable before it is signed (nothing debited); the command does not start', async () => {
    const jcp = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    toClose.push(() => jcp.close());
    const journal = new NatsCallJournal({ servers: 'nats://127.0.0.1:1', bucket, link: { deadlineMs: 300 } });
    toClose.push(() => journal.close());
    const agent = new BridgeAgent({ name: 'cut-off', signer: bob, chains: [[paid]], client: jcp, journal, costUj: 5n });
    const spent = node.ledger.spent(grantId(paid.grant));
    const seq = await node.log.lastSeq();
    const e = await agent.call('echo', { message: 'no journal' }, { mcpRequestId: 1 }).catch((x: unknown) => x);
    expect((e as { data?: { code?: string } }).data?.code).toBe('journal-unavailable');
    expect(node.ledger.spent(grantId(paid.grant))).toBe(spent);
    expect(await node.log.lastSeq()).toBe(seq);

    const cli = await runJcp([
      ...['bridge', '--node', `127.0.0.1:${node.port}`, '--key', w('bob.key'), '--chain', w('paid.chain.json')],
      ...['--http', '127.0.0.1:0', '--journal-nats', 'nats://127.0.0.1:1', '--journal-bucket', bucket],
    ]);
    expect(cli.code).toBe(1);
    expect(cli.stderr).toContain('error [journal-unavailable]');
  }, 30_000);
});
