/**
 * Notifications and server-to-client requests through the bridge, with testkit/mcp-tools-server.ts
 * over stdio behind a node: log messages reach the client in order, before the result, at or above
 * the level it set; an upstream's sampling request reaches the client, which declared sampling, as a
 * server request on its call (the node relays the upstream's input_required result; docs/bridge.md).
 */
import path from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { BridgeAgent, CallJournal, type HttpBridge, serveBridgeHttp } from '../../bridge/index.ts';
import type { RunningNode } from '../../node/index.ts';
import { JcpClient } from '../../client/index.ts';
import { grantId } from '../../core/index.ts';
import { cast, liveNode, mint } from '../node/fixtures.ts';

const { rng, alice, bob } = cast('bridge-notices');
const SERVER = path.resolve(import.meta.dirname, '../../testkit/mcp-tools-server.ts');

describe('bridge: notifications and server-to-client requests', () => {
  let node: RunningNode & { cleanup: () => Promise<void> };
  let jcp: JcpClient;
  let bridge: HttpBridge;
  let client: Client;
  const seen: string[] = [];
  let asked = 0;
  const grant = mint(alice, bob, 'tools', ['test_tool_with_logging', 'test_sampling'], 1_000n, rng);

  beforeAll(async () => {
    node = await liveNode({
      resources: [{ name: 'tools', endpoint: { command: process.execPath, args: ['--import', 'tsx', SERVER, '--stdio'] } }],
    });
    jcp = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    const agent = new BridgeAgent({
      name: 'bob',
      signer: bob,
      chains: [[grant]],
      costUj: 1n,
      client: jcp,
      journal: new CallJournal(),
    });
    bridge = await serveBridgeHttp({ host: '127.0.0.1', port: 0, agents: [{ agent }] });
    client = new Client({ name: 'notices', version: '1' }, { capabilities: { sampling: {} } });
    client.setNotificationHandler('notifications/message', (n) => {
      seen.push(String(n.params.data));
    });
    client.setRequestHandler('sampling/createMessage', async () => {
      asked++;
      return { role: 'assistant', content: { type: 'text', text: 'never' }, model: 'none' };
    });
    await client.connect(new StreamableHTTPClientTransport(new URL(bridge.url)));
  }, 60_000);
  afterAll(async () => {
    await client?.close();
    await bridge?.close();
    await jcp?.close();
    await node?.cleanup();
  });

  test('logging / info messages arrive in order before the result; below the set level they are dropped', async () => {
    await client.setLoggingLevel('info');
    seen.length = 0;
    const r = await client.callTool({ name: 'test_tool_with_logging', arguments: {} });
    seen.push('result');
    expect(r.isError).not.toBe(true);
    expect(seen).toEqual(['Tool execution started', 'Tool processing data', 'Tool execution completed', 'result']);

    await client.setLoggingLevel('warning');
    seen.length = 0;
    await client.callTool({ name: 'test_tool_with_logging', arguments: { again: 1 } });
    expect(seen).toEqual([]);
  });

  test('sampling / an upstream asking the client for a completion reaches the client (it declared sampling); its answer reaches the tool, one debit', async () => {
    const before = node.ledger.spent(grantId(grant.grant));
    const r = (await client.callTool({ name: 'test_sampling', arguments: { prompt: 'hello' } })) as {
      isError?: boolean;
      content?: { text?: string }[];
      _meta?: Record<string, unknown>;
    };
    expect(r.isError).not.toBe(true);
    expect(r.content?.[0]?.text).toMatch(/never/);
    expect(r._meta?.['jcp/verdict']).toBe('allow');
    expect(asked).toBe(1);
    expect(node.ledger.spent(grantId(grant.grant)) - before).toBe(1n);
  });
});
