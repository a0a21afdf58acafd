/**
 * The A2A gateway bench: `npm run bench -- a2a [--json out.json]`.
 *
 * The SDK's A2A client (`ClientFactory`, JSON-RPC binding) sends `SendMessage` to the SDK-built
 * test agent (testkit/a2a-agent.ts, skill `echo`: it answers with a Message), side by side in one
 * run:
 *  - direct: the client reads the agent's card and sends to it;
 *  - through: the client reads the card of `jcp bridge --a2a` (a child process holding the
 *    agent's key and a grant for the skill) and sends to it; the bridge signs an `agent-task`
 *    request to a node (a child process, durable receipt log), which decides, seals, logs and
 *    forwards the message to the agent (docs/a2a.md); the reply comes back as `agent-reply` data.
 * The agent runs in the bench's process for both paths; rounds alternate direct and through so
 * machine noise hits both alike.
 *
 * Figures: per-message latency p50/p99 at one client (µs) each way, and the added p50 (through −
 * direct; goal ≤ 2 ms, as for MCP tool calls in bench/gateway.ts) with its ratio to the direct p50.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { AGENT_CARD_PATH, type Message, Role } from '@a2a-js/sdk';
import { type Client, ClientFactory } from '@a2a-js/sdk/client';
import { writeChainFile } from '../client/index.ts';
import { newActor, seededRng, signGrant } from '../core/index.ts';
import { resourceIdOf, writeKeyFile } from '../node/index.ts';
import { freePort, startA2aAgent, stopChild } from '../testkit/index.ts';
import { type Figure, percentile, type SuiteOptions, sig } from './figures.ts';
import { startNode, stopNode } from './node.ts';

const repo = path.resolve(import.meta.dirname, '..');
const ROUNDS = Number(process.env['JCP_BENCH_A2A_ROUNDS'] ?? 3);
const CALLS_PER_ROUND = Number(process.env['JCP_BENCH_A2A_CALLS'] ?? 200);
/** The skill every message names. */
const SKILL = 'echo';

/** A `SendMessage` request naming {@link SKILL}; the text varies per message (no two requests are equal, §11). */
function message(i: number) {
  const m: Message = {
    messageId: randomUUID(),
    contextId: '',
    taskId: '',
    role: Role.ROLE_USER,
    parts: [{ content: { $case: 'text', value: `ping ${i}` }, metadata: undefined, filename: '', mediaType: 'text/plain' }],
    metadata: { skill: SKILL },
    extensions: [],
    referenceTaskIds: [],
  };
  return { tenant: '', message: m, configuration: undefined, metadata: undefined };
}

/** Sequential `SendMessage`s; per-message latency samples (µs). @throws Error when an answer is not the echo. */
async function latencies(c: Client, n: number, from: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const r = await c.sendMessage(message(from + i));
    out.push((performance.now() - t0) * 1000);
    const parts = 'parts' in r ? r.parts : [];
    const text = parts[0]?.content?.$case === 'text' ? parts[0].content.value : '';
    if (!text.startsWith('echo: ')) throw new Error(`unexpected answer: ${JSON.stringify(r).slice(0, 300)}`);
  }
  return out;
}

/** Writes the agent's key, its one-grant chain (skill `echo` on resource `agent`, 10^15 µJ) and the node's config under `dir`. */
function setUp(dir: string, seed: number, agentUrl: string): { key: string; chain: string; config: string } {
  const rng = seededRng(`bench/a2a/${seed}`);
  const issuer = newActor(rng);
  const caller = newActor(rng);
  const key = path.join(dir, 'caller.key');
  writeKeyFile(key, caller);
  const chain = path.join(dir, 'agent.chain.json');
  const grant = signGrant(
    {
      issuer: issuer.did,
      subject: caller.did,
      capability: { resource: resourceIdOf('agent'), actions: [SKILL] },
      budget_uj: 10n ** 15n,
      expiry: 0,
      nonce: rng(16),
    },
    issuer,
  );
  writeChainFile(chain, [grant]);
  const config = path.join(dir, 'node.json');
  writeFileSync(
    config,
    JSON.stringify({
      listen: '127.0.0.1:0',
      data_dir: path.join(dir, 'data'),
      log_level: 'warn',
      resources: [{ name: 'agent', endpoint: { kind: 'a2a', url: agentUrl } }],
      meter: { default_estimate_uj: 1, rungs: ['estimator'] },
    }),
  );
  return { key, chain, config };
}

/** Starts `jcp bridge --a2a` on a free loopback port; resolves once its agent card answers. @throws Error after 60 s or when it exits. */
async function startA2aBridge(nodePort: number, key: string, chain: string) {
  const port = await freePort();
  const args = ['bridge', '--node', `127.0.0.1:${nodePort}`, '--key', key, '--chain', chain, '--a2a', `127.0.0.1:${port}`];
  const child = spawn(process.execPath, [path.join(repo, 'bin/jcp.mjs'), ...args], { stdio: ['pipe', 'ignore', 'pipe'] });
  let err = '';
  child.stderr?.setEncoding('utf8').on('data', (d: string) => {
    err = (err + d).slice(-2000);
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`jcp bridge --a2a exited (${child.exitCode}): ${err}`);
    const ok = await fetch(`${url}/${AGENT_CARD_PATH}`, { signal: AbortSignal.timeout(1_000) }).then(
      async (r) => {
        await r.arrayBuffer();
        return r.ok;
      },
      () => false,
    );
    if (ok) return { child, url };
    if (Date.now() > deadline) {
      await stopChild(child, 2_000);
      throw new Error(`jcp bridge --a2a did not serve its card within 60 s: ${err}`);
    }
    await new Promise((r) => setTimeout(r, 150));
  }
}

/** The suite. */
export async function run({ seed }: SuiteOptions): Promise<Figure[]> {
  const dir = mkdtempSync(path.join(tmpdir(), 'jcp-bench-a2a-'));
  const agent = await startA2aAgent({ skills: [SKILL] });
  let node: Awaited<ReturnType<typeof startNode>> | undefined;
  let bridge: Awaited<ReturnType<typeof startA2aBridge>> | undefined;
  try {
    const { key, chain, config } = setUp(dir, seed, agent.url);
    node = await startNode(config, false);
    bridge = await startA2aBridge(node.port, key, chain);
    const factory = new ClientFactory();
    const direct = await factory.createFromUrl(agent.url);
    const through = await factory.createFromUrl(bridge.url);
    await latencies(direct, 50, 0); // warm-up: JIT, the node's endpoint start
    await latencies(through, 50, 0);
    const d: number[] = [];
    const t: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      d.push(...(await latencies(direct, CALLS_PER_ROUND, 1_000 + d.length)));
      t.push(...(await latencies(through, CALLS_PER_ROUND, 1_000 + t.length)));
    }
    return figures(d, t);
  } finally {
    if (bridge) await stopChild(bridge.child, 3_000);
    if (node) await stopNode(node);
    await agent.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The figures: p50/p99 (µs) each way, the added p50 (goal ≤ 2000 µs) and through ÷ direct at p50. */
function figures(d: number[], t: number[]): Figure[] {
  const dp50 = percentile(d, 50);
  const tp50 = percentile(t, 50);
  const added = tp50 - dp50;
  const n = `${ROUNDS} × ${CALLS_PER_ROUND}`;
  return [
    { name: `A2A direct: SDK client → SDK agent, SendMessage (JSON-RPC), one client, p50 (${n})`, value: sig(dp50), unit: 'µs' },
    { name: 'A2A direct: p99', value: sig(percentile(d, 99)), unit: 'µs' },
    {
      name: `A2A through: SDK client → jcp bridge --a2a → node (agent-task, durable log) → SDK agent, one client, p50 (${n})`,
      value: sig(tp50),
      unit: 'µs',
    },
    { name: 'A2A through: p99', value: sig(percentile(t, 99)), unit: 'µs' },
    {
      name: 'A2A through p50 − direct p50 (added per message); ratio: through ÷ direct p50',
      value: sig(added),
      unit: 'µs',
      floor: sig(dp50),
      ratio: sig(tp50 / dp50),
      goal: '≤ 2000 µs',
      met: added <= 2000,
    },
  ];
}
