/**
 * The demo's researcher agent (a child process of `jcp demo`, spawned by demo/delegation.ts): a
 * real A2A v1.0 server built on `@a2a-js/sdk` (express, loopback, a port of its own) with one
 * skill, `research`, that the demo's node fronts as the resource `researcher` (docs/a2a.md).
 *
 * For each task it reads the delegated grant chain the planner's bridge put in the message's
 * `metadata["jcp/delegation"]` and calls filesystem tools through a bridge of its own (the bridge
 * library in this process, as the workers have theirs: a `BridgeAgent` with its key and no grant
 * of its own, accepting chains delegated by the planner, what `jcp bridge --accept-delegation-from`
 * does; its MCP server linked in memory to the MCP SDK's `Client`), passing that chain in each
 * call's `_meta["jcp/delegation"]`, so every call draws on the planner's budget (§4.2) through
 * the researcher's own quarter of it. It reads until a call is denied (its quarter spent:
 * `budget-exceeded`) or it has read everything twice, and answers with a completed task whose
 * artifact says what it read and how it was stopped. Each call's receipt is verified under the
 * node's did (§8) and reported to the orchestrator.
 *
 * Command line: the demo's folder (only so `ps` tells which demo it belongs to), then the loopback
 * port to serve on (0 or absent: any free one; the demo picks it first so that the nodes' configs
 * can name the url while this process is still starting).
 *
 * IPC (demo/messages.ts): `hello` {did, url} at once; `go` {node, planner, dir, …} → `ready` once
 * its bridge is up; a `call` per tool call and a `task` per finished task; `stop` ends it.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { AGENT_CARD_PATH, type AgentCard, type Message, type Part, type Task, TaskState } from '@a2a-js/sdk';
import {
  type AgentExecutor,
  AgentEvent,
  DefaultRequestHandler,
  type ExecutionEventBus,
  InMemoryTaskStore,
  type RequestContext,
} from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, restHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import { Client, InMemoryTransport } from '@modelcontextprotocol/client';
import express from 'express';
import { BridgeAgent, bridgeServer, CallJournal } from '../bridge/index.ts';
import { JcpClient } from '../client/index.ts';
import { type Actor, actorFromSeed, fromHex, openReceipt } from '../core/index.ts';
import { chainFromBase64url, chainToHex, type FromResearcher, type ToResearcher } from './messages.ts';
import { RESEARCH_SKILL } from './setup.ts';

type Go = Extract<ToResearcher, { type: 'go' }>;

/** At most this many tool calls per task (its quarter ends it long before). */
const MAX_CALLS_PER_TASK = 40;
/** At most this many tasks in the process's life (the demo sends one). */
const MAX_TASKS = 8;

function send(m: FromResearcher): void {
  process.send?.(m);
}

const inbox: ToResearcher[] = [];
let wake: (() => void) | undefined;
process.on('message', (m: ToResearcher) => {
  inbox.push(m);
  wake?.();
});
process.on('disconnect', () => process.exit(0));

/** The next message of `type` (or `stop`, which throws), waiting up to `timeoutMs`. */
async function next<T extends ToResearcher['type']>(type: T, timeoutMs: number): Promise<Extract<ToResearcher, { type: T }>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const i = inbox.findIndex((m) => m.type === type || m.type === 'stop');
    if (i >= 0) {
      const m = inbox.splice(i, 1)[0]!;
      if (m.type === 'stop' && type !== 'stop') throw new Error('stopped');
      return m as Extract<ToResearcher, { type: T }>;
    }
    if (Date.now() > deadline) throw new Error(`no '${type}' from the orchestrator within ${timeoutMs} ms`);
    await new Promise<void>((r) => {
      wake = r;
      setTimeout(r, 200);
    });
  }
}

/** A text part (A2A v1.0 JSON shape, as the SDK types it). */
function textPart(text: string): Part {
  return { content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' };
}

/** A data part. */
function dataPart(value: unknown): Part {
  return { content: { $case: 'data', value }, metadata: undefined, filename: '', mediaType: 'application/json' };
}

/** The agent card: one skill, JSON-RPC and HTTP+JSON on loopback. */
function agentCard(base: string): AgentCard {
  return {
    name: 'JCP demo researcher',
    description: 'Reads the sample folder through its own jcp bridge, on a grant its delegator hands it.',
    supportedInterfaces: [
      { url: `${base}/a2a/jsonrpc`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' },
      { url: `${base}/a2a/rest`, protocolBinding: 'HTTP+JSON', tenant: '', protocolVersion: '1.0' },
    ],
    provider: undefined,
    version: '1.0.0',
    capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain', 'application/json'],
    skills: [
      {
        id: RESEARCH_SKILL,
        name: 'Research the sample folder',
        description:
          'Reads the sample files with the filesystem tools, on the delegated grant in metadata["jcp/delegation"], until done or refused.',
        tags: ['files', 'delegation'],
        examples: ['summarise the notes'],
        inputModes: ['text/plain'],
        outputModes: ['text/plain', 'application/json'],
        securityRequirements: [],
      },
    ],
    signatures: [],
  };
}

/** The researcher's bridge: its node connection, the MCP client in front of it, and the job (the node whose receipts it verifies). */
interface Bridge {
  readonly node: JcpClient;
  readonly mcp: Client;
  readonly job: Go;
}

/** What one tool call under a delegated chain came to. */
interface CallOutcome {
  readonly verdict: 'allow' | 'deny';
  readonly reason: string | undefined;
  readonly costUj: bigint;
}

/** An MCP `CallToolResult` as the bridge returns it (loose). */
type ToolResult = { content?: { text?: string }[]; _meta?: Record<string, unknown> };

/**
 * One tool call through the bridge with the delegated chain in `_meta`; reports it and returns its
 * decision (from the verified receipt). @throws Error when the result carries no receipt or it does not verify.
 */
async function callTool(b: Bridge, delegation: string, action: string, args: Record<string, unknown>): Promise<CallOutcome> {
  const r = (await b.mcp.callTool({ name: action, arguments: args, _meta: { 'jcp/delegation': delegation } })) as ToolResult;
  const meta = r._meta ?? {};
  const cose = meta['jcp/receipt_cose'];
  if (typeof cose !== 'string') throw new Error(`the bridge's result for ${action} carries no receipt: ${JSON.stringify(r).slice(0, 300)}`);
  const opened = openReceipt(fromHex(cose), b.job.node.did);
  if (!opened.ok) throw new Error(`the receipt for ${action} does not verify under ${b.job.node.name}: ${opened.error.why}`);
  const c = opened.value;
  send({
    type: 'call',
    action,
    verdict: c.verdict,
    ...(c.deny_reason !== undefined ? { reason: c.deny_reason } : {}),
    grant_id: c.grant_id,
    request_id: String(meta['jcp/request_id']),
    cost_uj: c.cost_uj.toString(),
    remaining_uj: c.budget_remaining_uj.toString(),
    budget_uj: c.budget_uj.toString(),
  });
  return { verdict: c.verdict, reason: c.deny_reason, costUj: c.verdict === 'allow' ? c.cost_uj : 0n };
}

/** What the researcher did for one task. */
interface Work {
  allowed: number;
  spentUj: bigint;
  denied: string;
  readonly read: string[];
}

/** Reads the sample files (a different `head` each call: no two requests are equal, §11) until refused or done. */
async function research(b: Bridge, delegation: string): Promise<Work> {
  const w: Work = { allowed: 0, spentUj: 0n, denied: '', read: [] };
  const paths = b.job.paths;
  for (let i = 0; i < Math.min(MAX_CALLS_PER_TASK, paths.length * 2); i++) {
    const path = paths[i % paths.length]!;
    const o = await callTool(b, delegation, 'read_text_file', { path, head: 5 + i });
    if (o.verdict === 'deny') {
      w.denied = o.reason ?? 'deny';
      break;
    }
    w.allowed++;
    w.spentUj += o.costUj;
    w.read.push(path.slice(b.job.sampleDir.length + 1));
  }
  return w;
}

/** The task's final events: an artifact saying what was read and how it ended, then `completed` (or `failed` with the reason). */
function finish(bus: ExecutionEventBus, ctx: RequestContext, text: string, data: unknown, state: TaskState): void {
  const { taskId, contextId } = ctx;
  bus.publish(
    AgentEvent.artifactUpdate({
      taskId,
      contextId,
      artifact: {
        artifactId: randomUUID(),
        name: 'research',
        description: 'What the researcher read, on whose budget, and how it was stopped',
        parts: [textPart(text), dataPart(data)],
        metadata: undefined,
        extensions: [],
      },
      append: false,
      lastChunk: true,
      metadata: undefined,
    }),
  );
  const status = { state, timestamp: new Date().toISOString(), message: undefined };
  bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status, metadata: undefined }));
}

/** The executor: one task at a time (a queue), each researched under the chain its message carries. */
class Researcher implements AgentExecutor {
  #bridge: Bridge | undefined;
  #queue: Promise<unknown> = Promise.resolve();
  #tasks = 0;

  setBridge(b: Bridge): void {
    this.#bridge = b;
  }

  cancelTask = async (): Promise<void> => undefined;

  execute = (ctx: RequestContext, bus: ExecutionEventBus): Promise<void> => {
    const run = this.#queue.then(() => this.#run(ctx, bus));
    this.#queue = run.catch(() => undefined);
    return run;
  };

  async #run(ctx: RequestContext, bus: ExecutionEventBus): Promise<void> {
    const msg: Message = ctx.userMessage;
    const meta = msg.metadata ?? {};
    const task: Task = {
      id: ctx.taskId,
      contextId: ctx.contextId,
      status: { state: TaskState.TASK_STATE_WORKING, timestamp: new Date().toISOString(), message: undefined },
      artifacts: [],
      history: [msg],
      metadata: undefined,
    };
    bus.publish(AgentEvent.task(task));
    const delegation = meta['jcp/delegation'];
    const caller = typeof meta['jcp/caller'] === 'string' ? meta['jcp/caller'] : '';
    const b = this.#bridge;
    if (typeof delegation !== 'string' || delegation === '' || b === undefined || ++this.#tasks > MAX_TASKS) {
      const why =
        b === undefined
          ? 'my bridge is not up yet'
          : this.#tasks > MAX_TASKS
            ? `I take at most ${MAX_TASKS} tasks`
            : 'no delegated grant in metadata["jcp/delegation"]: I have no budget of my own';
      finish(bus, ctx, `Not started: ${why}.`, { error: why }, TaskState.TASK_STATE_REJECTED);
      return;
    }
    const chain = chainToHex(chainFromBase64url(delegation));
    const w = await research(b, delegation);
    const text = `Read ${w.allowed} file(s) (${w.read.join(', ')}) for ${w.spentUj.toLocaleString('en-US')} µJ on the delegated grant${
      w.denied ? `; then my next call was refused: ${w.denied}` : ''
    }.`;
    finish(
      bus,
      ctx,
      text,
      { allowed: w.allowed, spent_uj: w.spentUj.toString(), denied: w.denied, read: w.read },
      TaskState.TASK_STATE_COMPLETED,
    );
    send({
      type: 'task',
      task_id: ctx.taskId,
      chain,
      caller,
      allowed: w.allowed,
      spent_uj: w.spentUj.toString(),
      denied: w.denied,
      summary: text,
    });
  }
}

/** Starts the A2A server on 127.0.0.1:`port` (0: a free port); resolves to its base url and a closer. @throws the listen error (EADDRINUSE). */
async function serve(exec: Researcher, port: number): Promise<{ url: string; close: () => Promise<void> }> {
  const app = express();
  const server = app.listen(port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => {
    server.once('listening', () => resolve());
    server.once('error', reject);
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const card = agentCard(url);
  const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), exec);
  app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: handler }));
  app.use('/a2a/jsonrpc', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  app.use('/a2a/rest', restHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  return { url, close: () => new Promise<void>((r) => server.close(() => r())) };
}

/** Starts its bridge to the node: no grant of its own, accepting chains the planner delegates; an MCP client linked to it in memory. */
async function startBridge(me: Actor, job: Go): Promise<Bridge> {
  const node = await JcpClient.connect({ host: job.node.host, port: job.node.port, signer: me });
  const agent = new BridgeAgent({
    name: 'researcher',
    signer: me,
    chains: [],
    client: node,
    journal: new CallJournal(),
    acceptDelegationFrom: [job.planner],
  });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await bridgeServer(agent).connect(serverSide);
  const mcp = new Client({ name: 'jcp-demo-researcher', version: '0.1.0' });
  await mcp.connect(clientSide);
  return { node, mcp, job };
}

/** The researcher: hello with its did:key and url, wait (120 s) for `go`, start its bridge, serve until `stop`. */
async function main(): Promise<void> {
  const me: Actor = actorFromSeed(new Uint8Array(randomBytes(32)));
  const exec = new Researcher();
  const port = Number(process.argv[3] ?? 0);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new Error(`bad port '${process.argv[3]}'`);
  const server = await serve(exec, port);
  send({ type: 'hello', did: me.did, url: server.url });
  const job = await next('go', 120_000);
  const bridge = await startBridge(me, job);
  exec.setBridge(bridge);
  send({ type: 'ready' });
  try {
    await next('stop', 24 * 3_600_000);
  } finally {
    await bridge.mcp.close().catch(() => undefined);
    await bridge.node.close().catch(() => undefined);
    await server.close();
  }
}

main().then(
  () => process.disconnect?.(),
  (e: unknown) => {
    process.exitCode = 1;
    send({ type: 'failed', message: (e as Error)?.message ?? String(e) });
    process.disconnect?.();
  },
);
