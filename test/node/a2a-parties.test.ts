/**
 * An A2A agent behind a node (docs/a2a.md), seen from the parties that pay for it:
 * - open streams are bounded per caller (the did:key that signs and pays), with a larger bound
 *   per peer address and one in all: callers that share an address (every `jcp bridge --a2a` on a
 *   host reaches the node from 127.0.0.1) do not hold each other's streams.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Actor } from '../../core/index.ts';
import { JcpClient, WireErrorReply } from '../../client/index.ts';
import { type A2aAgent, startA2aAgent } from '../../testkit/internal.ts';
import { cast, liveNode, mint } from './fixtures.ts';

const { rng, alice, bob, carol, mallory } = cast('a2a-parties');
const SEND_UJ = 1000n;
const ALL = ['echo', 'stream', 'fail'];
let n = 0;

function message(text: string, skill: string): Record<string, unknown> {
  return { message: { messageId: `m-${++n}-${Math.random()}`, role: 'ROLE_USER', parts: [{ text }], metadata: { skill } } };
}

async function refusal(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    if (e instanceof WireErrorReply) return e.message.startsWith(e.code) ? e.message : `${e.code}: ${e.message}`;
    throw e;
  }
  return 'no refusal';
}

describe('stream bounds: per caller first, per address larger, in all', () => {
  let agent: A2aAgent;
  let node: Awaited<ReturnType<typeof liveNode>>;
  const clients: JcpClient[] = [];

  beforeAll(async () => {
    agent = await startA2aAgent({ name: 'streams' });
    // 2 per caller, 6 in all: the per-address bound is max(2, 6 / 2) = 3.
    node = await liveNode({
      resources: [
        { name: 'agent', endpoint: { kind: 'a2a', url: agent.url, timeout_ms: 10_000, max_streams_per_peer: 2, max_streams: 6 } },
      ],
      meter: { default_estimate_uj: Number(SEND_UJ), rungs: ['estimator'] },
    });
  });

  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => undefined);
    await node?.cleanup();
    await agent?.stop();
  });

  /** Opens a long stream as `who` on a connection of its own (from 127.0.0.1); resolves once its first event arrived. */
  async function hold(who: Actor): Promise<void> {
    const c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: who });
    clients.push(c);
    const g = mint(alice, who, 'agent', ALL, 1_000_000n, rng);
    let first!: () => void;
    const opened = new Promise<void>((r) => {
      first = r;
    });
    const done = c.agentTask({
      chain: [g],
      skill: 'stream',
      method: 'SendStreamingMessage',
      params: message('events=400 delay=50', 'stream'),
      onEvent: () => first(),
    });
    done.catch(() => undefined); // ended by the client's close at the end
    await Promise.race([opened, done.then((r) => Promise.reject(new Error(`the stream ended: ${JSON.stringify(r.error)}`)))]);
  }

  /** One more stream of `who` on a fresh connection (from 127.0.0.1): its refusal, or 'no refusal'. */
  async function another(who: Actor): Promise<string> {
    const c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: who });
    clients.push(c);
    const g = mint(alice, who, 'agent', ALL, 1_000_000n, rng);
    return refusal(c.agentTask({ chain: [g], skill: 'stream', method: 'SendStreamingMessage', params: message('events=1', 'stream') }));
  }

  test("a caller at its bound does not block another caller from the same address; the address's own bound is larger", async () => {
    await hold(bob);
    await hold(bob);
    expect(agent.openRequests()).toBe(2);
    // bob is at his bound (max_streams_per_peer 2, per caller): his next is refused
    expect(await another(bob)).toMatch(/^stream-limit: caller did:key:\S+ has 2 streams open/);
    // carol, from the same address, still opens one (the per-address bound of 2 refused her before)
    await hold(carol);
    expect(agent.openRequests()).toBe(3);
    // 127.0.0.1 now holds 3: the per-address bound (half of max_streams) refuses a third caller
    expect(await another(mallory)).toMatch(/^stream-limit: 127\.0\.0\.1 has 3 streams open/);
    // closing bob's connections frees his streams upstream and his count
    for (const c of clients.splice(0, 3)) await c.close().catch(() => undefined);
    await expect.poll(() => agent.openRequests(), { timeout: 5000, interval: 25 }).toBe(1);
    expect(await another(bob)).toBe('no refusal');
  }, 30_000);
});
