/**
 * The bridge's answers to bad MCP input, and its budget figure after a refunded call: raw
 * JSON-RPC over the SDK's in-memory transport to `bridgeServer` in front of a live node (the
 * client-side SDK would refuse to send most of these), and the SDK `Client` for the refund.
 */
import path from 'node:path';
import { Client, InMemoryTransport, type JSONRPCMessage } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { BridgeAgent, bridgeServer, CallJournal } from '../../bridge/index.ts';
import { JcpClient } from '../../client/index.ts';
import { grantId } from '../../core/index.ts';
import type { RunningNode } from '../../node/index.ts';
import { cast, liveNode, mint } from '../node/fixtures.ts';

const { rng, alice, bob } = cast('bridge-bad-input');
const SERVER = path.join(import.meta.dirname, 'vanishing-server.mjs');

type Reply = { id?: unknown; result?: Record<string, unknown>; error?: { code: number; message: string; data?: { code?: string } } };

describe('bridge: bad input and refunds', () => {
  let node: RunningNode & { cleanup: () => Promise<void> };
  let jcp: JcpClient;
  const grant = mint(alice, bob, 'vanishing', ['echo', 'vanish'], 1_000n, rng);
  const agent = () => new BridgeAgent({ name: 'bob', signer: bob, chains: [[grant]], client: jcp, journal: new CallJournal(), costUj: 7n });

  beforeAll(async () => {
    node = await liveNode({ resources: [{ name: 'vanishing', endpoint: { command: process.execPath, args: [SERVER] } }] });
    jcp = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
  }, 60_000);
  afterAll(async () => {
    await jcp?.close();
    await node?.cleanup();
  });

  /** An initialized raw session: `ask` sends one request and resolves to its reply (or `'no answer'` after 15 s). */
  async function rawSession(): Promise<{ ask: (m: JSONRPCMessage) => Promise<Reply | 'no answer'>; close: () => Promise<void> }> {
    const [mine, theirs] = InMemoryTransport.createLinkedPair();
    await bridgeServer(agent()).connect(theirs);
    const waiting = new Map<unknown, (r: Reply) => void>();
    mine.onmessage = (m) => waiting.get((m as Reply).id)?.(m as Reply);
    await mine.start();
    const ask = (m: JSONRPCMessage) =>
      new Promise<Reply | 'no answer'>((resolve) => {
        const t = setTimeout(() => resolve('no answer'), 15_000);
        waiting.set((m as { id?: unknown }).id, (r) => {
          clearTimeout(t);
          resolve(r);
        });
        void mine.send(m);
      });
    const init = await ask({
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    });
    expect(init).not.toBe('no answer');
    await mine.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    return { ask, close: () => mine.close() };
  }

  test('arguments-invalid / tools/call arguments that are not an object: -32602 with the stable code, nothing debited', async () => {
    const s = await rawSession();
    try {
      for (const [id, args, kind] of [
        [1, 'x', 'a string'],
        [2, [1, 2], 'an array'],
        [3, null, 'null'],
        [4, 5, 'a number'],
      ] as const) {
        const r = await s.ask({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: args } });
        expect(r).not.toBe('no answer');
        const { error } = r as Reply;
        expect(error?.code).toBe(-32602);
        expect(error?.data?.code).toBe('arguments-invalid');
        expect(error?.message).toBe(`arguments-invalid: tools/call arguments must be a JSON object, not ${kind}`);
      }
      expect(node.ledger.spent(grantId(grant.grant))).toBe(0n);
      // The session still works.
      const ok = await s.ask({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'echo', arguments: { a: 1 } } });
      expect(ok).toMatchObject({ id: 9 });
      expect((ok as Reply).result?.['content']).toEqual([{ type: 'text', text: 'echo {"a":1}' }]);
    } finally {
      await s.close();
    }
  });

  test('progress-token-invalid / a progressToken that is an object is answered -32602 at once, not left hanging', async () => {
    const s = await rawSession();
    try {
      const before = node.ledger.spent(grantId(grant.grant));
      for (const [id, method, params] of [
        [1, 'tools/call', { name: 'echo', arguments: {}, _meta: { progressToken: { a: 1 } } }],
        [2, 'tools/call', { name: 'echo', arguments: {}, _meta: { progressToken: [1] } }],
        [3, 'tools/list', { _meta: { progressToken: true } }],
      ] as const) {
        const r = await s.ask({ jsonrpc: '2.0', id, method, params } as unknown as JSONRPCMessage);
        expect(r).not.toBe('no answer');
        const { error } = r as Reply;
        expect(error?.code).toBe(-32602);
        expect(error?.data?.code).toBe('progress-token-invalid');
        expect(error?.message).toMatch(new RegExp(`^progress-token-invalid: ${method} _meta.progressToken must be a string or a number`));
      }
      expect(node.ledger.spent(grantId(grant.grant))).toBe(before);
      // Tokens MCP allows still work.
      const ok = await s.ask({
        jsonrpc: '2.0',
        id: 8,
        method: 'tools/call',
        params: { name: 'echo', arguments: {}, _meta: { progressToken: 'p' } },
      });
      expect((ok as Reply).result?.['isError']).not.toBe(true);
    } finally {
      await s.close();
    }
  });

  test('refund / after a call the upstream never answered, _meta and jcp://budget show the budget left after the refund', async () => {
    const [mine, theirs] = InMemoryTransport.createLinkedPair();
    await bridgeServer(agent()).connect(theirs);
    const client = new Client({ name: 'refund', version: '1' });
    await client.connect(mine);
    try {
      const spent = node.ledger.spent(grantId(grant.grant));
      const left = 1_000n - spent;
      const gone = await client.callTool({ name: 'vanish', arguments: {} });
      expect(gone.isError).toBe(true);
      expect((gone as { jcp_error?: { code?: string; refunded_uj?: string } }).jcp_error).toMatchObject({
        code: 'endpoint-unavailable',
        refunded_uj: '7',
      });
      expect(gone._meta?.['jcp/verdict']).toBe('allow');
      expect(gone._meta?.['jcp/cost_uj']).toBe('7');
      expect(node.ledger.spent(grantId(grant.grant))).toBe(spent);
      expect(gone._meta?.['jcp/budget_remaining_uj']).toBe(left.toString());
      const budget = await client.readResource({ uri: 'jcp://budget' });
      const body = JSON.parse(String((budget.contents[0] as { text: string }).text)) as { grants: { remaining_uj: string }[] };
      expect(body.grants[0]?.remaining_uj).toBe(left.toString());
      // The next call is charged as usual (the node restarts the server).
      const next = await client.callTool({ name: 'echo', arguments: { after: true } });
      expect(next.isError).not.toBe(true);
      expect(next._meta?.['jcp/budget_remaining_uj']).toBe((left - 7n).toString());
    } finally {
      await client.close();
    }
  }, 60_000);
});
