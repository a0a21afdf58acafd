/**
 * A2A agents behind a node (docs/a2a.md): a real A2A v1.0 agent (testkit/a2a-agent.ts, the SDK's
 * server on loopback) behind a real node, called by JcpClient.agentTask. Every task is a sealed
 * agent-task decision made before the message reaches the agent; the reply is data; refusals
 * before the decision debit nothing; follow-ups are bound to the caller and grant.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { encodeWireRequest, frameMessage, grantId, MAX_DECLARABLE_LENGTH, openReceipt } from '../../core/index.ts';
import { type AgentTaskParams, JcpClient, WireErrorReply } from '../../client/index.ts';
import { AGENT_CARD_MAX_BYTES, AGENT_CARD_MAX_SKILLS, configFromJson, openOutcome, type OutcomeCore } from '../../node/index.ts';
import { type A2aAgent, JCP_BIN, startA2aAgent } from '../../testkit/internal.ts';
import { cast, liveNode, mint, RawConn, rid, tempDir } from './fixtures.ts';

const { rng, alice, bob, carol } = cast('a2a');
const SEND_UJ = 1000n;
const READ_UJ = 10n;

let agent: A2aAgent;
let node: Awaited<ReturnType<typeof liveNode>>;
let bobC: JcpClient;
let carolC: JcpClient;
let n = 0;

/** A user message JSON (A2A v1.0) with `text`, naming `skill` unless undefined. */
function message(text: string, skill?: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    message: {
      messageId: `m-${++n}-${Math.random()}`,
      role: 'ROLE_USER',
      parts: [{ text }],
      ...(skill !== undefined ? { metadata: { skill } } : {}),
      ...extra,
    },
  };
}

async function refusal(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    if (e instanceof WireErrorReply) return e.code;
    throw e;
  }
  return 'no refusal';
}

/** The measurement record of receipt `seq` (deferred: it rides a later batch, so it is waited for). */
async function measurement(seq: number): Promise<OutcomeCore> {
  for (let i = 0; i < 200; i++) {
    for await (const r of node.log.outcomes('measurement')) {
      if (r.seq !== seq) continue;
      const o = openOutcome(r.bytes, node.did);
      if (o.ok) return o.value;
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`no measurement for seq ${seq}`);
}

function seqOf(receipt: Uint8Array): number {
  const r = openReceipt(receipt, node.did);
  if (!r.ok) throw new Error('receipt does not open');
  return r.value.seq;
}

beforeAll(async () => {
  agent = await startA2aAgent();
  node = await liveNode({
    resources: [
      { name: 'agent', endpoint: { kind: 'a2a', url: agent.url, timeout_ms: 5000, max_streams_per_peer: 1 } },
      { name: 'mcp', endpoint: { kind: 'mcp-stdio', command: '/nonexistent/mcp-server' } },
    ],
    meter: {
      default_estimate_uj: Number(SEND_UJ),
      estimates_uj: { 'a2a:GetTask': Number(READ_UJ), 'a2a:ListTasks': Number(READ_UJ) },
      rungs: ['estimator'],
    },
  });
  bobC = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
  carolC = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: carol });
});

afterAll(async () => {
  await bobC?.close();
  await carolC?.close();
  await node?.cleanup();
  await agent?.stop();
});

const ALL = ['echo', 'stream', 'fail'];
const task = (c: JcpClient, p: Omit<AgentTaskParams, 'method'> & { method?: AgentTaskParams['method'] }) =>
  c.agentTask({ method: 'SendMessage', ...p });

describe('agent-task frames to an A2A agent', () => {
  test('allow: a sealed receipt, priced like a tool call, the reply as data, jcp/caller forwarded, the outcome tagged agent-reply/data', async () => {
    const g = mint(alice, bob, 'agent', ALL, 1_000_000n, rng);
    const before = agent.received.length;
    const r = await task(bobC, { chain: [g], skill: 'echo', params: message('hi', 'echo') });
    expect(r.decision).toEqual({ verdict: 'allow' });
    const core = openReceipt(r.receipt, node.did);
    expect(core.ok && [core.value.action, core.value.cost_uj, core.value.resource]).toEqual(['echo', SEND_UJ, rid('agent')]);
    const reply = r.reply as { message: { parts: { text: string }[]; metadata: Record<string, unknown> } };
    expect(reply.message.parts[0]!.text).toBe('echo: hi');
    expect(reply.message.metadata['jcp/caller']).toBe(bob.did);
    expect(agent.received.length).toBe(before + 1);
    expect(agent.received.at(-1)!.metadata).toMatchObject({ skill: 'echo', 'jcp/caller': bob.did });
    expect(node.ledger.spent(grantId(g.grant))).toBe(SEND_UJ);
    const m = await measurement(seqOf(r.receipt));
    expect([m.outcome, m.reply_kind, m.reply_trust]).toEqual(['ok', 'agent-reply', 'data']);
  });

  test('deny (budget-exceeded, action-not-granted): sealed, and the agent never gets the message', async () => {
    const before = agent.received.length;
    const poor = mint(alice, bob, 'agent', ALL, SEND_UJ - 1n, rng);
    const a = await task(bobC, { chain: [poor], skill: 'echo', params: message('x', 'echo') });
    expect(a.decision).toEqual({ verdict: 'deny', deny_reason: 'budget-exceeded' });
    const echoOnly = mint(alice, bob, 'agent', ['echo'], 1_000_000n, rng);
    const b = await task(bobC, { chain: [echoOnly], skill: 'stream', params: message('x', 'stream') });
    expect(b.decision).toEqual({ verdict: 'deny', deny_reason: 'action-not-granted' });
    expect(openReceipt(b.receipt, node.did).ok).toBe(true);
    expect(agent.received.length).toBe(before);
    expect([node.ledger.spent(grantId(poor.grant)), node.ledger.spent(grantId(echoOnly.grant))]).toEqual([0n, 0n]);
  });

  test('skill-required, skill-mismatch, unknown-skill: refused before the decision, nothing debited; one granted skill is the default', async () => {
    const before = agent.received.length;
    const two = mint(alice, bob, 'agent', ['echo', 'stream'], 1_000_000n, rng);
    expect(await refusal(task(bobC, { chain: [two], skill: 'echo', params: message('x') }))).toBe('skill-required');
    expect(await refusal(task(bobC, { chain: [two], skill: 'echo', params: message('x', 'stream') }))).toBe('skill-mismatch');
    const ghost = mint(alice, bob, 'agent', ['nope'], 1_000_000n, rng);
    expect(await refusal(task(bobC, { chain: [ghost], skill: 'nope', params: message('x', 'nope') }))).toBe('unknown-skill');
    expect(agent.received.length).toBe(before);
    expect([node.ledger.spent(grantId(two.grant)), node.ledger.spent(grantId(ghost.grant))]).toEqual([0n, 0n]);
    const one = mint(alice, bob, 'agent', ['echo'], 1_000_000n, rng);
    const r = await task(bobC, { chain: [one], skill: 'echo', params: message('solo') });
    expect(r.decision).toEqual({ verdict: 'allow' });
    expect(agent.received.at(-1)!.metadata?.['skill']).toBe('echo');
  });

  test('a frame kind that does not fit the resource is refused before the decision', async () => {
    const g = mint(alice, bob, 'agent', ALL, 1_000_000n, rng);
    const toolCall = bobC.call({ chain: [g], action: 'echo', payload: { method: 'SendMessage', params: message('x', 'echo') } });
    expect(await refusal(toolCall)).toBe('frame-kind-mismatch');
    const m = mint(alice, bob, 'mcp', ['work'], 1_000_000n, rng);
    expect(await refusal(task(bobC, { chain: [m], skill: 'work', params: message('x', 'work') }))).toBe('frame-kind-mismatch');
    expect([node.ledger.spent(grantId(g.grant)), node.ledger.spent(grantId(m.grant))]).toEqual([0n, 0n]);
  });

  test('a task that ran and failed is charged, its outcome task-failed', async () => {
    const g = mint(alice, bob, 'agent', ALL, 1_000_000n, rng);
    const r = await task(bobC, { chain: [g], skill: 'fail', params: message('x', 'fail') });
    expect(r.decision).toEqual({ verdict: 'allow' });
    expect((r.reply as { task: { status: { state: string } } }).task.status.state).toBe('TASK_STATE_FAILED');
    expect(node.ledger.spent(grantId(g.grant))).toBe(SEND_UJ);
    expect((await measurement(seqOf(r.receipt))).outcome).toBe('task-failed');
  });

  test('tool_list: the agent resource carries kind a2a and the card skills', async () => {
    const list = await bobC.listTools();
    const a = list.find((x) => x.name === 'agent')!;
    expect([a.kind, a.tools, a.skills?.map((s) => s['id'])]).toEqual(['a2a', [], ALL]);
    expect(list.find((x) => x.name === 'mcp')!.kind).toBeUndefined();
  });
});

describe('streams', () => {
  test('SendStreamingMessage: every event reaches the caller in order, the reply is the last one', async () => {
    const g = mint(alice, bob, 'agent', ALL, 1_000_000n, rng);
    const events: Record<string, unknown>[] = [];
    const r = await task(bobC, {
      chain: [g],
      skill: 'stream',
      method: 'SendStreamingMessage',
      params: message('events=4 delay=5', 'stream'),
      onEvent: (e) => events.push(e),
    });
    expect(r.decision).toEqual({ verdict: 'allow' });
    const shape = events.map((e) => {
      const k = Object.keys(e)[0]!;
      const v = e[k] as { status?: { state: string; message?: { parts: { text: string }[] } } };
      return k === 'statusUpdate' ? `${v.status!.state}${v.status!.message ? `:${v.status!.message.parts[0]!.text}` : ''}` : k;
    });
    expect(shape).toEqual([
      'task',
      'TASK_STATE_WORKING:step 1',
      'TASK_STATE_WORKING:step 2',
      'TASK_STATE_WORKING:step 3',
      'TASK_STATE_WORKING:step 4',
      'artifactUpdate',
      'TASK_STATE_COMPLETED',
    ]);
    expect(r.reply).toEqual(events.at(-1));
  });

  test('a caller that disconnects mid-stream makes the node close the upstream stream; streams are bounded per caller', async () => {
    const g = mint(alice, bob, 'agent', ALL, 1_000_000n, rng);
    const req = await bobC.request({
      chain: [g],
      action: 'stream',
      kind: 'agent-task',
      notify: true,
      payload: { method: 'SendStreamingMessage', params: message('events=400 delay=50', 'stream') },
    });
    const raw = await RawConn.open(node.port);
    raw.write(frameMessage(encodeWireRequest(req), MAX_DECLARABLE_LENGTH));
    await raw.next(); // the first notice: the stream is open upstream
    expect(agent.openRequests()).toBe(1);
    // max_streams_per_peer 1 (per caller): a second stream of this caller is refused before the decision
    const second = task(bobC, { chain: [g], skill: 'stream', method: 'SendStreamingMessage', params: message('events=1', 'stream') });
    expect(await refusal(second)).toBe('stream-limit');
    raw.destroy();
    await expect.poll(() => agent.openRequests(), { timeout: 5000, interval: 25 }).toBe(0);
    // the slot is free again
    const third = await task(bobC, { chain: [g], skill: 'stream', method: 'SendStreamingMessage', params: message('events=1', 'stream') });
    expect(third.decision).toEqual({ verdict: 'allow' });
  });
});

describe('a caller that does not read', () => {
  test('its notices pile up to the backlog cap, then the node drops the connection and closes the stream upstream', async () => {
    // The agent runs in a process of its own: its task keeps producing after the stream is closed.
    const proc = spawn(
      process.execPath,
      ['--import', 'tsx', fileURLToPath(new URL('../../testkit/a2a-agent-main.ts', import.meta.url)), 'chatty'],
      {
        stdio: ['pipe', 'pipe', 'inherit'],
      },
    );
    const url = await new Promise<string>((resolve, reject) => {
      let out = '';
      proc.stdout!.on('data', (d: Buffer) => {
        out += d.toString('utf8');
        const m = /\{"url":"([^"]+)"\}/.exec(out);
        if (m) resolve(m[1]!);
      });
      proc.once('exit', (code) => reject(new Error(`agent exited (${code})`)));
    });
    const n2 = await liveNode({ resources: [{ name: 'chatty', endpoint: { kind: 'a2a', url, timeout_ms: 10_000 } }] });
    const c = await JcpClient.connect({ host: '127.0.0.1', port: n2.port, signer: bob });
    const raw = await RawConn.open(n2.port);
    try {
      const g = mint(alice, bob, 'chatty', ALL, 1_000_000n, rng);
      const req = await c.request({
        chain: [g],
        action: 'stream',
        kind: 'agent-task',
        notify: true,
        payload: { method: 'SendStreamingMessage', params: message('events=200 delay=0 size=1048576', 'stream') },
      });
      raw.write(frameMessage(encodeWireRequest(req), MAX_DECLARABLE_LENGTH));
      await raw.next(); // the stream is open upstream
      raw.sock.pause(); // and from now on nothing is read
      // 200 events of 1 MiB: the backlog cap (8 MiB) drops the connection before the stream cap (64 MiB) ends the stream;
      // a paused socket sees the close once it reads what was sent
      await new Promise((r) => setTimeout(r, 3000));
      raw.sock.resume();
      await expect.poll(() => raw.closed, { timeout: 30_000, interval: 50 }).toBe(true);
    } finally {
      raw.destroy();
      await c.close();
      await n2.cleanup();
      proc.kill('SIGKILL');
    }
  }, 90_000);
});

describe('follow-ups', () => {
  test('bound to the caller and grant: another caller, or another grant, gets task-not-found as for an unknown task; the owner is answered, priced as a read', async () => {
    const g = mint(alice, bob, 'agent', ALL, 1_000_000n, rng);
    const started = await task(bobC, { chain: [g], skill: 'stream', params: message('events=1', 'stream') });
    const id = (started.reply as { task: { id: string } }).task.id;
    const gc = mint(alice, carol, 'agent', ALL, 1_000_000n, rng);
    const before = node.ledger.spent(grantId(gc.grant));
    for (const method of ['GetTask', 'CancelTask', 'SubscribeToTask'] as const) {
      expect(await refusal(carolC.agentTask({ chain: [gc], skill: 'stream', method, params: { id } }))).toBe('task-not-found');
    }
    expect(
      await refusal(
        carolC.agentTask({ chain: [gc], skill: 'stream', params: message('more', 'stream', { taskId: id }), method: 'SendMessage' }),
      ),
    ).toBe('task-not-found');
    expect(await refusal(carolC.agentTask({ chain: [gc], skill: 'stream', method: 'GetTask', params: { id: 'no-such-task' } }))).toBe(
      'task-not-found',
    );
    expect(node.ledger.spent(grantId(gc.grant))).toBe(before);
    // Bob's chain is no secret: carol presenting it as the caller still finds no task (not even a sealed deny).
    expect(await refusal(carolC.agentTask({ chain: [g], skill: 'stream', method: 'GetTask', params: { id } }))).toBe('task-not-found');
    const g2 = mint(alice, bob, 'agent', ALL, 1_000_000n, rng);
    expect(await refusal(bobC.agentTask({ chain: [g2], skill: 'stream', method: 'GetTask', params: { id } }))).toBe('task-not-found');
    expect(await refusal(bobC.agentTask({ chain: [g], skill: 'echo', method: 'GetTask', params: { id } }))).toBe('skill-mismatch');
    const spent = node.ledger.spent(grantId(g.grant));
    const got = await bobC.agentTask({ chain: [g], skill: 'stream', method: 'GetTask', params: { id } });
    expect(got.decision).toEqual({ verdict: 'allow' });
    expect((got.reply as { id: string }).id).toBe(id);
    const core = openReceipt(got.receipt, node.did);
    expect(core.ok && core.value.cost_uj).toBe(READ_UJ);
    expect(node.ledger.spent(grantId(g.grant))).toBe(spent + READ_UJ);
  });

  test('ListTasks shows the caller only its own tasks under that grant', async () => {
    const gb = mint(alice, bob, 'agent', ALL, 1_000_000n, rng);
    const gc = mint(alice, carol, 'agent', ALL, 1_000_000n, rng);
    const mine = (await task(bobC, { chain: [gb], skill: 'stream', params: message('events=1', 'stream') })).reply as {
      task: { id: string };
    };
    const theirs = (await task(carolC, { chain: [gc], skill: 'stream', params: message('events=1', 'stream') })).reply as {
      task: { id: string };
    };
    const r = await bobC.agentTask({ chain: [gb], skill: 'stream', method: 'ListTasks', params: {} });
    expect(r.decision).toEqual({ verdict: 'allow' });
    const ids = (r.reply as { tasks: { id: string }[] }).tasks.map((t) => t.id);
    expect(ids).toEqual([mine.task.id]);
    expect(ids).not.toContain(theirs.task.id);
    // a page of one: the agent's page token (it names the page's last task, anyone's) is not passed on
    const paged = await carolC.agentTask({ chain: [gc], skill: 'stream', method: 'ListTasks', params: { pageSize: 1 } });
    expect((paged.reply as { nextPageToken?: string }).nextPageToken ?? '').toBe('');
  });
});

describe('an agent that cannot take the task', () => {
  test('agent down after its card was read: endpoint-unavailable phase start, the debit reversed', async () => {
    const gone = await startA2aAgent({ name: 'gone' });
    const down = await liveNode({
      resources: [{ name: 'gone', endpoint: { kind: 'a2a', url: gone.url, timeout_ms: 2000 } }],
      meter: { default_estimate_uj: Number(SEND_UJ), rungs: ['estimator'] },
    });
    const c = await JcpClient.connect({ host: '127.0.0.1', port: down.port, signer: bob });
    try {
      const list = await c.listTools();
      expect(list[0]!.skills?.length).toBe(3);
      await gone.stop();
      const g = mint(alice, bob, 'gone', ALL, 1_000_000n, rng);
      const r = await c.agentTask({ method: 'SendMessage', chain: [g], skill: 'echo', params: message('x', 'echo') });
      expect(r.decision).toEqual({ verdict: 'allow' });
      expect([r.error?.code, r.error?.['phase'], r.error?.['refunded_uj']]).toEqual(['endpoint-unavailable', 'start', String(SEND_UJ)]);
      expect(down.ledger.spent(grantId(g.grant))).toBe(0n);
    } finally {
      await c.close();
      await down.cleanup();
    }
  });
});

describe('configured headers stay with the configured origin', () => {
  test('an agent that redirects (card or message) to another origin never receives the headers or the message there', async () => {
    const captured: { method: string; url: string; headers: Record<string, unknown> }[] = [];
    const capture = createServer((req, res) => {
      captured.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
      res.writeHead(404).end();
    });
    await new Promise<void>((r) => capture.listen(0, '127.0.0.1', r));
    const elsewhere = `http://127.0.0.1:${(capture.address() as AddressInfo).port}`;
    const real = await startA2aAgent({ name: 'redirected' });
    let redirectCard = false;
    // Same origin as configured: serves the real card (its interfaces rewritten to itself) and
    // answers every POST with a 307 to another origin (a 307 keeps the method and the body).
    const front = createServer((req, res) => {
      if (req.method === 'GET' && !redirectCard) {
        void fetch(`${real.url}${req.url}`).then(async (r) => {
          const text = (await r.text()).split(real.url).join(self);
          res.writeHead(r.status, { 'content-type': 'application/json' }).end(text);
        });
        return;
      }
      res.writeHead(307, { location: `${elsewhere}${req.url}` }).end();
    });
    await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
    const self = `http://127.0.0.1:${(front.address() as AddressInfo).port}`;
    const t = tempDir('a2a-redirect');
    const keyFile = `${t.dir}/api-key`;
    writeFileSync(keyFile, 'secret-api-key-123', { mode: 0o600 });
    const n2 = await liveNode({
      resources: [{ name: 'redir', endpoint: { kind: 'a2a', url: self, timeout_ms: 3000, headers: { 'X-Api-Key': { file: keyFile } } } }],
      meter: { default_estimate_uj: Number(SEND_UJ), rungs: ['estimator'] },
    });
    const c = await JcpClient.connect({ host: '127.0.0.1', port: n2.port, signer: bob });
    try {
      const g = mint(alice, bob, 'redir', ALL, 1_000_000n, rng);
      const r = await c.agentTask({ method: 'SendMessage', chain: [g], skill: 'echo', params: message('secret body', 'echo') });
      expect(r.decision).toEqual({ verdict: 'allow' });
      expect(r.error?.code).toBe('endpoint-unavailable');
      expect(n2.ledger.spent(grantId(g.grant))).toBe(0n);
      redirectCard = true;
      const n3 = await liveNode({
        resources: [{ name: 'redir', endpoint: { kind: 'a2a', url: self, timeout_ms: 3000, headers: { 'X-Api-Key': { file: keyFile } } } }],
      });
      await n3.endpoints.get(rid('redir'))?.endpoint.ensureTools();
      expect(n3.endpoints.get(rid('redir'))?.endpoint.skills?.()).toBeUndefined();
      await n3.cleanup();
      expect(captured).toEqual([]);
      expect(real.received.length).toBe(0);
    } finally {
      await c.close();
      await n2.cleanup();
      await real.stop();
      front.close();
      capture.close();
      t.cleanup();
    }
  });
});

describe('the node calls only the configured origin', () => {
  test('a card whose interfaces are all elsewhere is not taken (agent-card-origin); nothing is sent there', async () => {
    const captured: string[] = [];
    const capture = createServer((req, res) => {
      captured.push(`${req.method} ${req.url}`);
      res.writeHead(404).end();
    });
    await new Promise<void>((r) => capture.listen(0, '127.0.0.1', r));
    const elsewhere = `http://127.0.0.1:${(capture.address() as AddressInfo).port}`;
    const real = await startA2aAgent({ name: 'pointing' });
    const card = (await (await fetch(`${real.url}/.well-known/agent-card.json`)).text()).split(real.url).join(elsewhere);
    const front = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(card));
    await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
    const self = `http://127.0.0.1:${(front.address() as AddressInfo).port}`;
    const n2 = await liveNode({
      resources: [{ name: 'pointing', endpoint: { kind: 'a2a', url: self, timeout_ms: 3000 } }],
      meter: { default_estimate_uj: Number(SEND_UJ), rungs: ['estimator'] },
    });
    const c = await JcpClient.connect({ host: '127.0.0.1', port: n2.port, signer: bob });
    try {
      const ep = n2.endpoints.get(rid('pointing'))!.endpoint;
      await ep.ensureTools();
      expect(ep.lastFailure?.()).toContain('agent-card-origin');
      const g = mint(alice, bob, 'pointing', ALL, 1_000_000n, rng);
      const r = await c.agentTask({ method: 'SendMessage', chain: [g], skill: 'echo', params: message('to elsewhere', 'echo') });
      expect(r.error?.code).toBe('endpoint-unavailable');
      expect(n2.ledger.spent(grantId(g.grant))).toBe(0n);
      expect(captured).toEqual([]);
    } finally {
      await c.close();
      await n2.cleanup();
      front.close();
      capture.close();
      await real.stop();
    }
  });
});

describe('agent cards are bounded', () => {
  test('a card over 1 MiB or over 1,024 skills is not taken (agent-card-too-large), and nothing of it reaches tool_list', async () => {
    const real = await startA2aAgent({ name: 'big' });
    const card = (await (await fetch(`${real.url}/.well-known/agent-card.json`)).json()) as Record<string, unknown>;
    const skill = (card['skills'] as Record<string, unknown>[])[0]!;
    let body = '';
    const front = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(body));
    await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
    const self = `http://127.0.0.1:${(front.address() as AddressInfo).port}`;
    const cases = [
      { ...card, description: 'x'.repeat(AGENT_CARD_MAX_BYTES) },
      { ...card, skills: Array.from({ length: AGENT_CARD_MAX_SKILLS + 1 }, (_, i) => ({ ...skill, id: `s${i}` })) },
    ];
    try {
      for (const big of cases) {
        body = JSON.stringify(big).split(real.url).join(self);
        const n2 = await liveNode({ resources: [{ name: 'big', endpoint: { kind: 'a2a', url: self, timeout_ms: 3000 } }] });
        try {
          const ep = n2.endpoints.get(rid('big'))!.endpoint;
          await ep.ensureTools();
          expect(ep.skills?.()).toBeUndefined();
          expect(ep.lastFailure?.()).toContain('agent-card-too-large');
        } finally {
          await n2.cleanup();
        }
      }
      body = JSON.stringify({ ...card, skills: Array.from({ length: AGENT_CARD_MAX_SKILLS }, (_, i) => ({ ...skill, id: `s${i}` })) })
        .split(real.url)
        .join(self);
      const ok = await liveNode({ resources: [{ name: 'big', endpoint: { kind: 'a2a', url: self, timeout_ms: 3000 } }] });
      await ok.endpoints.get(rid('big'))!.endpoint.ensureTools();
      expect(ok.endpoints.get(rid('big'))!.endpoint.skills?.()?.length).toBe(AGENT_CARD_MAX_SKILLS);
      await ok.cleanup();
    } finally {
      front.close();
      await real.stop();
    }
  });
});

describe('agent replies are bounded as they arrive', () => {
  test('a 20 MB JSON reply is cut at the cap while it streams in (agent-reply-too-large), not buffered and then refused', async () => {
    const real = await startA2aAgent({ name: 'huge' });
    let bytesSent = 0;
    let self = '';
    const front = createServer((req, res) => {
      if (req.method === 'GET') {
        void fetch(`${real.url}${req.url}`).then(async (r) => {
          res.writeHead(r.status, { 'content-type': 'application/json' }).end((await r.text()).split(real.url).join(self));
        });
        return;
      }
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        const chunk = 'x'.repeat(1 << 20);
        res.write('{"jsonrpc":"2.0","id":1,"result":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"');
        const more = () => {
          while (bytesSent < 20 << 20) {
            bytesSent += chunk.length;
            if (!res.write(chunk)) return void res.once('drain', more);
          }
          res.end('"}]}}}');
        };
        res.on('error', () => undefined);
        more();
      });
    });
    await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
    self = `http://127.0.0.1:${(front.address() as AddressInfo).port}`;
    const n2 = await liveNode({
      resources: [{ name: 'huge', endpoint: { kind: 'a2a', url: self, timeout_ms: 10_000 } }],
      meter: { default_estimate_uj: Number(SEND_UJ), rungs: ['estimator'] },
    });
    const c = await JcpClient.connect({ host: '127.0.0.1', port: n2.port, signer: bob });
    try {
      const g = mint(alice, bob, 'huge', ALL, 1_000_000n, rng);
      const r = await c.agentTask({ method: 'SendMessage', chain: [g], skill: 'echo', params: message('big', 'echo') });
      expect(r.decision).toEqual({ verdict: 'allow' });
      expect(String(r.error?.message)).toContain('agent-reply-too-large');
      // the agent answered: charged (endpoint-failed), not reversed
      expect([r.error?.code, r.error?.['refunded_uj']]).toEqual(['endpoint-failed', undefined]);
      expect(n2.ledger.spent(grantId(g.grant))).toBe(SEND_UJ);
    } finally {
      await c.close();
      await n2.cleanup();
      front.close();
      await real.stop();
    }
  });
});

describe('a restart', () => {
  test('follow-ups stay bound to their caller and grant across a node restart (rebuilt from the log)', async () => {
    const t = tempDir('a2a-restart');
    const cfg = {
      resources: [{ name: 'agent', endpoint: { kind: 'a2a', url: agent.url, timeout_ms: 5000 } }],
      meter: { default_estimate_uj: Number(SEND_UJ), rungs: ['estimator'] },
    };
    const g = mint(alice, bob, 'agent', ALL, 1_000_000n, rng);
    const gc = mint(alice, carol, 'agent', ALL, 1_000_000n, rng);
    let id: string;
    {
      const first = await liveNode(cfg, {}, t.dir);
      const c = await JcpClient.connect({ host: '127.0.0.1', port: first.port, signer: bob });
      const r = await c.agentTask({ method: 'SendMessage', chain: [g], skill: 'stream', params: message('events=1', 'stream') });
      id = (r.reply as { task: { id: string } }).task.id;
      await c.close();
      await first.close();
    }
    const again = await liveNode(cfg, {}, t.dir);
    const b = await JcpClient.connect({ host: '127.0.0.1', port: again.port, signer: bob });
    const c = await JcpClient.connect({ host: '127.0.0.1', port: again.port, signer: carol });
    try {
      const got = await b.agentTask({ method: 'GetTask', chain: [g], skill: 'stream', params: { id } });
      expect((got.reply as { id: string }).id).toBe(id);
      expect(await refusal(c.agentTask({ method: 'GetTask', chain: [gc], skill: 'stream', params: { id } }))).toBe('task-not-found');
    } finally {
      await b.close();
      await c.close();
      await again.close();
      t.cleanup();
    }
  });
});

describe('jcp node start --upstream NAME=a2a+URL', () => {
  test('prints the agent card skills beside the resource', async () => {
    const t = tempDir('a2a-cli');
    const child = spawn(
      process.execPath,
      [JCP_BIN, 'node', 'start', '--listen', '127.0.0.1:0', '--data', t.dir, '--upstream', `ag=a2a+${agent.url}`],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let err = '';
    try {
      const line = await new Promise<string>((resolve, reject) => {
        child.stderr!.on('data', (d: Buffer) => {
          err += d.toString('utf8');
          const m = /jcp node: resource ag .*\n/.exec(err);
          if (m) resolve(m[0]);
        });
        child.once('exit', (code) => reject(new Error(`jcp node exited (${code}): ${err}`)));
      });
      expect(line).toContain(`${rid('ag')} open agent skills: echo, stream, fail`);
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
      t.cleanup();
    }
  });

  test('SIGTERM stops it while an agent card is still being read (an agent that never answers holds nothing)', async () => {
    const held: import('node:http').ServerResponse[] = [];
    const silent = createServer((_req, res) => void held.push(res));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const t = tempDir('a2a-cli-silent');
    const cfg = `${t.dir}/node.json`;
    const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    writeFileSync(
      cfg,
      JSON.stringify({
        listen: '127.0.0.1:0',
        data_dir: `${t.dir}/data`,
        resources: [{ name: 'silent', endpoint: { kind: 'a2a', url, timeout_ms: 600_000 } }],
      }),
    );
    const child = spawn(process.execPath, [JCP_BIN, 'node', 'start', '--config', cfg], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    try {
      await new Promise<void>((resolve, reject) => {
        child.stderr!.on('data', (d: Buffer) => {
          err += d.toString('utf8');
          if (/listening on/.test(err)) resolve();
        });
        child.once('exit', (code) => reject(new Error(`jcp node exited (${code}): ${err}`)));
      });
      while (held.length === 0) await new Promise((r) => setTimeout(r, 20));
      const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      for (const r of held) r.destroy();
      silent.close();
      t.cleanup();
    }
  });
});

describe('config', () => {
  test('--upstream NAME=a2a+http://… is an a2a endpoint; a bare url stays mcp-http', () => {
    const c = configFromJson({}, { upstream: ['ag=a2a+http://127.0.0.1:9', 'm=http://127.0.0.1:9/mcp'] });
    expect(c.resources.map((r) => [r.name, r.endpoint?.kind])).toEqual([
      ['ag', 'a2a'],
      ['m', 'mcp-http'],
    ]);
    expect(c.resources[0]!.endpoint).toMatchObject({
      url: 'http://127.0.0.1:9',
      cardRefreshS: 300,
      maxStreams: 256,
      maxStreamsPerPeer: 16,
    });
    expect(() => configFromJson({ resources: [{ name: 'x', endpoint: { kind: 'a2a', url: 'ftp://x' } }] })).toThrow(/http/);
    expect(() => configFromJson({ resources: [{ name: 'x', endpoint: { kind: 'a2a', url: 'http://x', command: 'y' } }] })).toThrow(
      /unknown field/,
    );
  });
});
