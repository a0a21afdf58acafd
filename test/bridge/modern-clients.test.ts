/**
 * The SDK v2 client (`@modelcontextprotocol/client`), pinned to 2026-07-28 and in its default mode
 * (the 2025 handshake), in front of `jcp bridge` run as a command: over stdio (the bridge a child
 * of the client's transport) and over Streamable HTTP (`jcp bridge --http`), with one node and
 * three reference servers behind it (`server-filesystem` and `server-memory` over stdio,
 * `server-everything` over Streamable HTTP). Per upstream: the list is what the grants allow, an
 * allowed call returns the upstream's result with the sealed receipt, grant id and budget left in
 * `_meta`, and a call over its grant's budget is a tool error naming the reason, sealed and not run
 * (spec §6 decision, §8 receipt; docs/bridge.md).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, realpathSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { writeChainFile } from '../../client/index.ts';
import { fromHex, grantId, openReceipt, receiptId, type SignedGrant } from '../../core/index.ts';
import { type RunningNode, writeKeyFile } from '../../node/index.ts';
import { cast, liveNode, mint, tempDir } from '../node/fixtures.ts';
import { type Everything, startEverything } from '../node/upstreams.ts';

const { rng, alice, bob } = cast('bridge-modern-clients');
const JCP = path.resolve(import.meta.dirname, '../../bin/jcp.mjs');
const PIN = { versionNegotiation: { mode: { pin: '2026-07-28' } } } as const;
const BIG = 10_000_000n;
const SMALL = 5n;
const COST = 3n;
const TOKEN = 'modern-clients-token';

type Result = { content?: { type: string; text?: string }[]; isError?: boolean; _meta?: Record<string, unknown> };
const text = (r: Result) => (r.content ?? []).map((c) => c.text ?? '').join('');

describe('bridge: the SDK v2 client (pinned 2026-07-28, default) over stdio and HTTP, filesystem, memory and everything behind the node', () => {
  const work = tempDir('bridge-modern-clients');
  const files = tempDir('bridge-modern-clients-fs');
  const root = realpathSync(files.dir);
  const w = (name: string) => path.join(work.dir, name);
  let everything: Everything;
  let node: RunningNode & { cleanup: () => Promise<void> };
  const toClose: Array<() => Promise<unknown>> = [];

  /** Per upstream: a big grant for the allowed call, a 5 µJ grant for a tool the bridge prices at 10 µJ. */
  const grants = {
    fs: { read: mint(alice, bob, 'fs', ['read_text_file'], BIG, rng), small: mint(alice, bob, 'fs', ['write_file'], SMALL, rng) },
    memory: {
      read: mint(alice, bob, 'memory', ['read_graph'], BIG, rng),
      small: mint(alice, bob, 'memory', ['create_entities'], SMALL, rng),
    },
    everything: {
      read: mint(alice, bob, 'everything', ['echo'], BIG, rng),
      small: mint(alice, bob, 'everything', ['get-sum'], SMALL, rng),
    },
  };
  const chainFiles = Object.entries(grants).flatMap(([name, g]) => [
    [w(`${name}.read.chain.json`), g.read] as const,
    [w(`${name}.small.chain.json`), g.small] as const,
  ]);

  beforeAll(async () => {
    writeFileSync(path.join(root, 'hello.txt'), 'hello, v2 client');
    everything = await startEverything();
    node = await liveNode({
      resources: [
        { name: 'fs', endpoint: { kind: 'mcp-stdio', command: 'mcp-server-filesystem', args: [root] } },
        { name: 'memory', endpoint: { kind: 'mcp-stdio', command: 'mcp-server-memory', env: { MEMORY_FILE_PATH: w('memory.jsonl') } } },
        { name: 'everything', endpoint: { url: everything.url, timeout_ms: 10_000 } },
      ],
    });
    writeKeyFile(w('bob.key'), bob);
    for (const [file, g] of chainFiles) writeChainFile(file, [g]);
  }, 60_000);
  afterAll(async () => {
    for (const f of toClose.reverse()) await f().catch(() => undefined);
    await node?.cleanup();
    await everything?.kill();
    work.cleanup();
    files.cleanup();
  });

  /** `jcp bridge`'s arguments: bob's key, the six chains, each allowed tool at 3 µJ and each denied one at 10 µJ. */
  const bridgeArgs = () => [
    JCP,
    'bridge',
    '--node',
    `127.0.0.1:${node.port}`,
    '--key',
    w('bob.key'),
    ...chainFiles.flatMap(([file]) => ['--chain', file]),
    ...['read_text_file', 'read_graph', 'echo'].flatMap((t) => ['--tool-cost', `${t}=${COST}`]),
    ...['write_file', 'create_entities', 'get-sum'].flatMap((t) => ['--tool-cost', `${t}=10`]),
  ];

  /** Starts `jcp bridge --http 127.0.0.1:0` (bearer token from the environment); resolves its `/mcp` URL. */
  async function httpBridge(): Promise<string> {
    const child: ChildProcess = spawn(process.execPath, [...bridgeArgs(), '--http', '127.0.0.1:0', '--token-env', 'JCP_TEST_TOKEN'], {
      env: { ...process.env, JCP_TEST_TOKEN: TOKEN },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    toClose.push(async () => child.kill('SIGTERM'));
    const line = await new Promise<string>((resolve, reject) => {
      let out = '';
      let err = '';
      child.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('\n')) resolve(out.split('\n')[0]!);
      });
      child.stderr!.on('data', (d: Buffer) => {
        err += d.toString();
      });
      child.once('exit', (code) => reject(new Error(`jcp bridge exited ${code}: ${err}`)));
    });
    return (JSON.parse(line) as { listening: string }).listening;
  }

  /** The sealed receipt behind a result's `_meta`, opened against the node's steward key. */
  function sealed(meta: Record<string, unknown>) {
    const bytes = fromHex(String(meta['jcp/receipt_cose']));
    expect(receiptId(bytes)).toBe(meta['jcp/receipt']);
    const opened = openReceipt(bytes, node.did);
    if (!opened.ok) throw new Error(`receipt does not open: ${JSON.stringify(opened)}`);
    return opened.value;
  }

  /** An allowed call: the upstream's own answer, and `_meta` naming the grant, the receipt and the budget left. */
  async function allowed(client: Client, grant: SignedGrant, name: string, args: Record<string, unknown>, says: string) {
    const id = grantId(grant.grant);
    const before = node.ledger.spent(id);
    const r = (await client.callTool({ name, arguments: args })) as Result;
    expect(r.isError, text(r)).not.toBe(true);
    expect(text(r)).toContain(says);
    const meta = r._meta!;
    expect(meta['jcp/verdict']).toBe('allow');
    expect(meta['jcp/grant_id']).toBe(id);
    const spent = node.ledger.spent(id);
    expect(spent - before).toBe(COST);
    expect(meta['jcp/cost_uj']).toBe(String(COST));
    expect(meta['jcp/budget_remaining_uj']).toBe(String(BIG - spent));
    const receipt = sealed(meta);
    expect(receipt.verdict).toBe('allow');
    expect(receipt.grant_id).toBe(id);
    expect(receipt.action).toBe(name);
    expect(String(receipt.budget_remaining_uj)).toBe(meta['jcp/budget_remaining_uj']);
  }

  /** A denied call: a tool error `denied: budget-exceeded`, sealed, nothing debited. */
  async function denied(client: Client, grant: SignedGrant, name: string, args: Record<string, unknown>) {
    const id = grantId(grant.grant);
    const r = (await client.callTool({ name, arguments: args })) as Result;
    expect(r.isError).toBe(true);
    expect(text(r)).toBe('denied: budget-exceeded');
    const meta = r._meta!;
    expect(meta['jcp/verdict']).toBe('deny');
    expect(meta['jcp/deny_reason']).toBe('budget-exceeded');
    expect(meta['jcp/grant_id']).toBe(id);
    expect(meta['jcp/budget_remaining_uj']).toBe(String(SMALL));
    const receipt = sealed(meta);
    expect(receipt.verdict).toBe('deny');
    expect(receipt.deny_reason).toBe('budget-exceeded');
    expect(receipt.grant_id).toBe(id);
    expect(receipt.action).toBe(name);
    expect(node.ledger.spent(id)).toBe(0n);
  }

  /** What every client sees, whatever its era and transport. */
  async function exercise(client: Client, modern: boolean, tag: string): Promise<void> {
    expect(client.getProtocolEra()).toBe(modern ? 'modern' : 'legacy');
    const listed = await client.listTools();
    expect(listed.tools.map((t) => t.name).sort()).toEqual([
      'create_entities',
      'echo',
      'get-sum',
      'read_graph',
      'read_text_file',
      'write_file',
    ]);

    await allowed(client, grants.fs.read, 'read_text_file', { path: path.join(root, 'hello.txt') }, 'hello, v2 client');
    await allowed(client, grants.memory.read, 'read_graph', {}, '"entities"');
    await allowed(client, grants.everything.read, 'echo', { message: `from ${tag}` }, `Echo: from ${tag}`);

    const note = path.join(root, `${tag}.txt`);
    await denied(client, grants.fs.small, 'write_file', { path: note, content: 'must not be written' });
    expect(existsSync(note)).toBe(false);
    await denied(client, grants.memory.small, 'create_entities', {
      entities: [{ name: tag, entityType: 'note', observations: ['must not be stored'] }],
    });
    const graph = (await client.callTool({ name: 'read_graph', arguments: {} })) as Result;
    expect(text(graph)).not.toContain(tag);
    await denied(client, grants.everything.small, 'get-sum', { a: 1, b: 2 });
  }

  for (const [label, modern, options] of [
    ['pinned to 2026-07-28', true, PIN],
    ['in its default mode', false, {}],
  ] as const) {
    const tag = modern ? 'pinned' : 'default';

    test(`stdio (jcp bridge as a child) / the v2 client ${label}: list, allowed and denied calls on each upstream`, async () => {
      const transport = new StdioClientTransport({ command: process.execPath, args: bridgeArgs(), stderr: 'pipe' });
      const client = new Client({ name: 'v2-stdio', version: '1' }, options);
      await client.connect(transport);
      toClose.push(() => client.close());
      await exercise(client, modern, `stdio-${tag}`);
    }, 90_000);

    test(`Streamable HTTP (jcp bridge --http) / the v2 client ${label}: list, allowed and denied calls on each upstream`, async () => {
      const url = await httpBridge();
      const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${TOKEN}` } } });
      const client = new Client({ name: 'v2-http', version: '1' }, options);
      await client.connect(transport);
      toClose.push(() => client.close());
      await exercise(client, modern, `http-${tag}`);
    }, 90_000);
  }
});
