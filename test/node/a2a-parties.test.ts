/**
 * An A2A agent behind a node (docs/a2a.md), seen from the parties that pay for it:
 * - open streams are bounded per caller (the did:key that signs and pays), with a larger bound
 *   per peer address and one in all: callers that share an address (every `jcp bridge --a2a` on a
 *   host reaches the node from 127.0.0.1) do not hold each other's streams;
 * - an agent that took the request and then broke the connection (killed mid-task, a cut reply)
 *   is charged `endpoint-failed`, like a timeout; an agent that was never reached (nothing
 *   listening) is reversed, as before.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type Actor, grantId, openReceipt } from '../../core/index.ts';
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

async function listen(s: Server): Promise<string> {
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
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

/** A front for a real agent: its card (interfaces rewritten to the front), and every POST to `onPost`. */
async function front(real: A2aAgent, onPost: (req: IncomingMessage, res: ServerResponse) => void) {
  let self = '';
  const posts: string[] = [];
  const server = createServer((req, res) => {
    if (req.method === 'GET') {
      void fetch(`${real.url}${req.url}`).then(async (r) => {
        res.writeHead(r.status, { 'content-type': 'application/json' }).end((await r.text()).split(real.url).join(self));
      });
      return;
    }
    let body = '';
    req.on('data', (d: Buffer) => {
      body += d.toString('utf8');
    });
    req.on('end', () => {
      posts.push(body);
      onPost(req, res);
    });
  });
  self = await listen(server);
  return { server, url: self, posts };
}

describe('an agent that fails mid-task is charged; one never reached is not', () => {
  let real: A2aAgent;
  let mode: 'hang-up' | 'cut' = 'hang-up';
  let f: Awaited<ReturnType<typeof front>>;
  let node: Awaited<ReturnType<typeof liveNode>>;
  let c: JcpClient;

  beforeAll(async () => {
    real = await startA2aAgent({ name: 'mid-task' });
    f = await front(real, (req, res) => {
      res.on('error', () => undefined);
      if (mode === 'cut') {
        // an answer begun, then the connection cut
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('{"jsonrpc":"2.0","id":1,"result":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"half');
      }
      // the agent worked a while on the task, then died: its connection goes with it
      setTimeout(() => req.socket.destroy(), 300);
    });
    node = await liveNode({
      resources: [{ name: 'mid', endpoint: { kind: 'a2a', url: f.url, timeout_ms: 5000 } }],
      meter: { default_estimate_uj: Number(SEND_UJ), rungs: ['estimator'] },
    });
    c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    await node.endpoints.get([...node.endpoints.keys()][0]!)!.endpoint.ensureTools();
  });

  afterAll(async () => {
    await c?.close();
    await node?.cleanup();
    f?.server.close();
    await real?.stop();
  });

  /** The reversal records in the node's log, by receipt seq. */
  async function reversals(): Promise<number[]> {
    const out: number[] = [];
    for await (const r of node.log.outcomes('reversal')) out.push(r.seq);
    return out;
  }

  const seqOf = (receipt: Uint8Array): number => {
    const r = openReceipt(receipt, node.did);
    if (!r.ok) throw new Error('receipt does not open');
    return r.value.seq;
  };

  for (const [m, method] of [
    ['hang-up', 'SendMessage'],
    ['cut', 'SendMessage'],
    ['hang-up', 'SendStreamingMessage'],
  ] as const) {
    test(`${method}, the agent ${m === 'cut' ? 'cuts its reply' : 'hangs up after taking the request'}: endpoint-failed, the debit stays`, async () => {
      mode = m;
      const g = mint(alice, bob, 'mid', ALL, 1_000_000n, rng);
      const posts = f.posts.length;
      const r = await c.agentTask({ method, chain: [g], skill: 'echo', params: message('work', 'echo') });
      expect(r.decision).toEqual({ verdict: 'allow' });
      expect(f.posts.length).toBe(posts + 1); // the agent had the request
      expect(r.error?.code).toBe('endpoint-failed');
      expect(String(r.error?.message)).toMatch(/the agent failed mid-task: the request was sent and then the connection broke/);
      expect(r.error?.['refunded_uj']).toBeUndefined();
      expect(node.ledger.spent(grantId(g.grant))).toBe(SEND_UJ);
      expect(await reversals()).not.toContain(seqOf(r.receipt));
    });
  }

  test('nothing listening (the agent is gone after its card was read): endpoint-unavailable phase start, reversed', async () => {
    f.server.close();
    f.server.closeAllConnections();
    const g = mint(alice, bob, 'mid', ALL, 1_000_000n, rng);
    const r = await c.agentTask({ method: 'SendMessage', chain: [g], skill: 'echo', params: message('x', 'echo') });
    expect(r.decision).toEqual({ verdict: 'allow' });
    expect([r.error?.code, r.error?.['phase'], r.error?.['refunded_uj']]).toEqual(['endpoint-unavailable', 'start', String(SEND_UJ)]);
    expect(String(r.error?.message)).toMatch(/the agent did not take the request: fetch failed: connect ECONNREFUSED/);
    expect(node.ledger.spent(grantId(g.grant))).toBe(0n);
    expect(await reversals()).toContain(seqOf(r.receipt));
  });
});
