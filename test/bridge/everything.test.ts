/**
 * The bridge over Streamable HTTP in front of a node that fronts `@modelcontextprotocol/server-everything`
 * over Streamable HTTP: Streamable HTTP on both sides, the SDK `Client` unmodified. The tool list is
 * the upstream's (schemas and descriptions as it lists them), results pass through unchanged, and
 * progress notifications reach the client, with its own token, before the result.
 */
import { Client, type Progress, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { BridgeAgent, CallJournal, type HttpBridge, serveBridgeHttp } from '../../bridge/index.ts';
import { grantId } from '../../core/index.ts';
import type { RunningNode } from '../../node/index.ts';
import { JcpClient } from '../../client/index.ts';
import { cast, liveNode, mint } from '../node/fixtures.ts';
import { type Everything, startEverything } from '../node/upstreams.ts';

const { rng, alice, bob } = cast('bridge-everything');

describe('bridge: server-everything over Streamable HTTP behind the node', () => {
  let everything: Everything;
  let node: RunningNode & { cleanup: () => Promise<void> };
  let jcp: JcpClient;
  let bridge: HttpBridge;
  let client: Client;
  let direct: Client;
  const paid = mint(alice, bob, 'everything', ['trigger-long-running-operation'], 1_000n, rng);
  let paidBridge: HttpBridge;
  let paidClient: Client;
  const granted = ['echo', 'get-tiny-image', 'trigger-long-running-operation', 'get-structured-content', 'not-a-tool-upstream'];

  beforeAll(async () => {
    everything = await startEverything();
    node = await liveNode({ resources: [{ name: 'everything', endpoint: { url: everything.url, timeout_ms: 10_000 } }] });
    jcp = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    const agent = new BridgeAgent({
      name: 'bob',
      signer: bob,
      chains: [[mint(alice, bob, 'everything', granted, 1_000_000n, rng)]],
      client: jcp,
      journal: new CallJournal(),
    });
    bridge = await serveBridgeHttp({ host: '127.0.0.1', port: 0, agents: [{ agent }] });
    client = new Client({ name: 'through-bridge', version: '1' });
    await client.connect(new StreamableHTTPClientTransport(new URL(bridge.url)));
    direct = new Client({ name: 'direct', version: '1' });
    await direct.connect(new StreamableHTTPClientTransport(new URL(everything.url)));
    const paidAgent = new BridgeAgent({ name: 'paid', signer: bob, chains: [[paid]], client: jcp, journal: new CallJournal(), costUj: 5n });
    paidBridge = await serveBridgeHttp({ host: '127.0.0.1', port: 0, agents: [{ agent: paidAgent }] });
    paidClient = new Client({ name: 'paid', version: '1' });
    await paidClient.connect(new StreamableHTTPClientTransport(new URL(paidBridge.url)));
  }, 60_000);
  afterAll(async () => {
    await client?.close();
    await paidClient?.close();
    await paidBridge?.close();
    await direct?.close();
    await bridge?.close();
    await jcp?.close();
    await node?.cleanup();
    await everything?.kill();
  });

  test('tools/list: the granted tools the upstream has, with its definitions', async () => {
    const upstream = (await direct.listTools()).tools;
    const listed = (await client.listTools()).tools;
    const expected = upstream.filter((t) => granted.includes(t.name));
    expect(listed.map((t) => t.name).sort()).toEqual(expected.map((t) => t.name).sort());
    expect(listed.map((t) => t.name)).not.toContain('not-a-tool-upstream');
    const echo = listed.find((t) => t.name === 'echo')!;
    expect(echo).toEqual(expected.find((t) => t.name === 'echo'));
  });

  test('tools/call: results pass through unchanged (text, image, structuredContent), _meta added', async () => {
    for (const [name, args] of [
      ['echo', { message: 'through the bridge' }],
      ['get-tiny-image', {}],
      ['get-structured-content', { location: 'New York' }],
    ] as const) {
      const want = (await direct.callTool({ name, arguments: args })) as Record<string, unknown>;
      const got = (await client.callTool({ name, arguments: args })) as Record<string, unknown>;
      const { _meta, ...rest } = got;
      expect(rest).toEqual(want);
      expect((_meta as Record<string, unknown>)['jcp/verdict']).toBe('allow');
    }
  });

  test('progress: notifications reach the client, in order, with its own token, before the result', async () => {
    // Requests the upstream never sees, so the client's ids (its progress tokens) differ from the node's.
    await client.readResource({ uri: 'jcp://budget' });
    await client.listResources();
    const seen: Array<Progress | 'result'> = [];
    const r = await client.callTool(
      { name: 'trigger-long-running-operation', arguments: { duration: 0.3, steps: 3 } },
      { onprogress: (p) => seen.push(p) },
    );
    seen.push('result');
    expect(r.isError).not.toBe(true);
    expect(seen.map((s) => (s === 'result' ? s : s.progress))).toEqual([1, 2, 3, 'result']);
  });

  test('cancel / a client that gives up mid-call and re-sends with its idempotency key gets the same request: one debit', async () => {
    const params = {
      name: 'trigger-long-running-operation',
      arguments: { duration: 0.6, steps: 3 },
      _meta: { 'jcp/idempotency_key': 'order-17' },
    };
    const abort = new AbortController();
    const first = paidClient.callTool(params, {
      signal: abort.signal,
      onprogress: () => abort.abort('the user gave up'),
    });
    await expect(first).rejects.toThrow();
    const again = await paidClient.callTool(params);
    expect(again.isError).not.toBe(true);
    expect(again._meta?.['jcp/verdict']).toBe('allow');
    expect(node.ledger.spent(grantId(paid.grant))).toBe(5n);
    // Answered now, so the key names a new call: a second debit.
    const next = await paidClient.callTool({ ...params, _meta: { 'jcp/idempotency_key': 'order-18' } });
    expect(next._meta?.['jcp/request_id']).not.toBe(again._meta?.['jcp/request_id']);
    expect(node.ledger.spent(grantId(paid.grant))).toBe(10n);
  });
});
