/**
 * The bridge asks the node for its tool list at most once per NODE_TOOLS_MAX_AGE_MS per agent
 * (bridge/agent.ts `nodeTools`): every A2A request, agent-card fetch and MCP `tools/list` needs the
 * list, and the node charges each `tool_list` to the bridge's address, so a stranger fetching the
 * card in a loop got every bridge on the host refused `rate-limited` (2026-12-07). Callers that
 * come while a fetch is in flight share it; a failed fetch is not kept.
 */
import { describe, expect, test } from 'vitest';
import { BridgeAgent, CallJournal } from '../../bridge/index.ts';
import type { JcpClient } from '../../client/index.ts';
import { cast } from '../node/fixtures.ts';

const { bob } = cast('bridge-tool-list-cache');

/** A node client whose `listTools` counts its calls, answers after 20 ms, and fails when `fail` is set. */
function countingClient() {
  const s = { calls: 0, fail: false };
  const client = {
    listTools: async () => {
      s.calls++;
      await new Promise((r) => setTimeout(r, 20));
      if (s.fail) throw new Error('node gone');
      return [{ name: 'fs', resource: 'r', tools: [{ name: 'list_directory' }] }];
    },
  } as unknown as JcpClient;
  return { s, agent: new BridgeAgent({ name: 'bob', signer: bob, chains: [], client, journal: new CallJournal() }) };
}

describe('the bridge reuses the node tool list', () => {
  test('50 callers at once and 50 after them cost the node one list', async () => {
    const { s, agent } = countingClient();
    const lists = await Promise.all(Array.from({ length: 50 }, () => agent.nodeTools()));
    expect(lists.every((l) => l?.[0]?.tools[0]?.name === 'list_directory')).toBe(true);
    for (let i = 0; i < 50; i++) await agent.nodeTools();
    await agent.tools();
    expect(s.calls).toBe(1);
  });

  test('a failed fetch is not kept: the next caller asks again', async () => {
    const { s, agent } = countingClient();
    s.fail = true;
    await expect(agent.nodeTools()).rejects.toThrow(/node gone/);
    s.fail = false;
    expect((await agent.nodeTools())?.[0]?.name).toBe('fs');
    expect(s.calls).toBe(2);
  });
});
