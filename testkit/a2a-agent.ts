/**
 * A real A2A v1.0 agent for tests, the demo and the bench, built on `@a2a-js/sdk`'s server
 * (`DefaultRequestHandler`, an in-memory task store) behind express on loopback: its agent card at
 * `<url>/.well-known/agent-card.json`, JSON-RPC at `<url>/`, HTTP+JSON at `<url>/a2a/rest`.
 *
 * Skills (the message names one in `metadata.skill`; none = `echo`):
 * - `echo`: answers with a Message (no task): the text `echo: <text>`, and in its metadata
 *   `jcp/caller` as the agent received it (so a test sees what the node forwarded);
 * - `stream`: a task: `submitted`, then N `working` status updates (`step 1` … `step N`) D ms
 *   apart, an artifact `done: <text>`, then `completed`. N and D come from the text
 *   (`events=N delay=D size=S`, default 3, 10 and 0: S pads each status text with S bytes); the task stops early when canceled;
 * - `fail`: a task that runs and fails: `submitted`, `working`, then `failed`.
 *
 * The handle counts what reached the agent ({@link A2aAgent.received}) and the HTTP requests it
 * holds open now ({@link A2aAgent.openRequests}: a stream whose client went away closes its
 * request), so a test can prove a denied task never reached it and a dropped stream was released.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  A2A_PROTOCOL_VERSION,
  AGENT_CARD_PATH,
  type AgentCard,
  type AgentSkill,
  type Message,
  Role,
  type Task,
  TaskState,
} from '@a2a-js/sdk';
import {
  AgentEvent,
  type AgentExecutor,
  DefaultRequestHandler,
  type ExecutionEventBus,
  InMemoryTaskStore,
  type RequestContext,
} from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, restHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import express from 'express';

/** The skills of the test agent, by id. */
export const TEST_AGENT_SKILLS = ['echo', 'stream', 'fail'] as const;

/** Options of {@link startA2aAgent}. */
export interface A2aAgentOptions {
  /** Listen host (default 127.0.0.1). */
  readonly host?: string;
  /** Listen port (default 0: any free port). */
  readonly port?: number;
  /** The card's name (default `test-agent`). */
  readonly name?: string;
  /** The skills listed on the card (default all of {@link TEST_AGENT_SKILLS}). */
  readonly skills?: readonly (typeof TEST_AGENT_SKILLS)[number][];
}

/** A running test agent. */
export interface A2aAgent {
  /** The agent's base URL (`http://host:port`): the card is read from there. */
  readonly url: string;
  readonly port: number;
  readonly card: AgentCard;
  /** Every message the agent's executor received, in order. */
  readonly received: readonly Message[];
  /** HTTP requests the agent holds open now (a live stream is one). */
  openRequests(): number;
  /** Stops listening and closes every connection. */
  stop(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function textOf(m: Message): string {
  const p = m.parts.find((x) => x.content?.$case === 'text');
  return p?.content?.$case === 'text' ? p.content.value : '';
}

function agentMessage(text: string, taskId: string, contextId: string, metadata: Record<string, unknown> = {}): Message {
  return {
    messageId: randomUUID(),
    contextId,
    taskId,
    role: Role.ROLE_AGENT,
    parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' }],
    metadata,
    extensions: [],
    referenceTaskIds: [],
  };
}

function status(bus: ExecutionEventBus, taskId: string, contextId: string, state: TaskState, text?: string): void {
  bus.publish(
    AgentEvent.statusUpdate({
      taskId,
      contextId,
      status: {
        state,
        message: text === undefined ? undefined : agentMessage(text, taskId, contextId),
        timestamp: new Date().toISOString(),
      },
      metadata: undefined,
    }),
  );
}

/** The executor behind the three skills. */
class TestExecutor implements AgentExecutor {
  readonly received: Message[] = [];
  readonly #canceled = new Set<string>();

  cancelTask = async (taskId: string, bus: ExecutionEventBus): Promise<void> => {
    this.#canceled.add(taskId);
    void bus;
  };

  async execute(ctx: RequestContext, bus: ExecutionEventBus): Promise<void> {
    const m = ctx.userMessage;
    this.received.push(m);
    const skill = typeof m.metadata?.['skill'] === 'string' ? (m.metadata['skill'] as string) : 'echo';
    const { taskId, contextId } = ctx;
    if (skill === 'echo') {
      bus.publish(
        AgentEvent.message(agentMessage(`echo: ${textOf(m)}`, '', contextId, { 'jcp/caller': m.metadata?.['jcp/caller'] ?? null })),
      );
      bus.finished();
      return;
    }
    const task: Task = ctx.task ?? {
      id: taskId,
      contextId,
      status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: new Date().toISOString() },
      artifacts: [],
      history: [m],
      metadata: { skill },
    };
    bus.publish(AgentEvent.task(task));
    if (skill === 'fail') {
      status(bus, taskId, contextId, TaskState.TASK_STATE_WORKING, 'trying');
      status(bus, taskId, contextId, TaskState.TASK_STATE_FAILED, 'failed on purpose');
      bus.finished();
      return;
    }
    const text = textOf(m);
    const events = Number(/events=(\d+)/.exec(text)?.[1] ?? 3);
    const delay = Number(/delay=(\d+)/.exec(text)?.[1] ?? 10);
    const pad = Number(/size=(\d+)/.exec(text)?.[1] ?? 0);
    for (let i = 1; i <= events; i++) {
      if (this.#canceled.has(taskId)) {
        status(bus, taskId, contextId, TaskState.TASK_STATE_CANCELED, 'canceled');
        bus.finished();
        return;
      }
      status(bus, taskId, contextId, TaskState.TASK_STATE_WORKING, pad > 0 ? `step ${i} ${'x'.repeat(pad)}` : `step ${i}`);
      await sleep(delay);
    }
    bus.publish(
      AgentEvent.artifactUpdate({
        taskId,
        contextId,
        artifact: {
          artifactId: randomUUID(),
          name: 'result',
          description: '',
          parts: [{ content: { $case: 'text', value: `done: ${text}` }, metadata: undefined, filename: '', mediaType: 'text/plain' }],
          metadata: undefined,
          extensions: [],
        },
        append: false,
        lastChunk: true,
        metadata: undefined,
      }),
    );
    status(bus, taskId, contextId, TaskState.TASK_STATE_COMPLETED);
    bus.finished();
  }
}

const SKILL_TEXT: Record<(typeof TEST_AGENT_SKILLS)[number], string> = {
  echo: 'Echoes the text back as a message.',
  stream: 'Runs a task that streams status updates, then an artifact.',
  fail: 'Runs a task that fails.',
};

/**
 * Starts the test agent on loopback (see the module docs for its skills); resolves once it listens.
 * @throws when the port cannot be bound.
 */
export async function startA2aAgent(opts: A2aAgentOptions = {}): Promise<A2aAgent> {
  const host = opts.host ?? '127.0.0.1';
  const app = express();
  let open = 0;
  app.use((req, res, next) => {
    open++;
    let done = false;
    res.on('close', () => {
      if (!done) open--;
      done = true;
    });
    void req;
    next();
  });
  const server: Server = createServer(app);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  const skills: AgentSkill[] = (opts.skills ?? TEST_AGENT_SKILLS).map((id) => ({
    id,
    name: id,
    description: SKILL_TEXT[id],
    tags: ['test'],
    examples: [],
    inputModes: ['text/plain'],
    outputModes: ['text/plain'],
    securityRequirements: [],
  }));
  const card: AgentCard = {
    name: opts.name ?? 'test-agent',
    description: 'A test agent for jcp-cluster (testkit/a2a-agent.ts)',
    supportedInterfaces: [
      { url: `${url}/`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: A2A_PROTOCOL_VERSION },
      { url: `${url}/a2a/rest`, protocolBinding: 'HTTP+JSON', tenant: '', protocolVersion: A2A_PROTOCOL_VERSION },
    ],
    provider: undefined,
    version: '1.0.0',
    capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills,
    signatures: [],
  };
  const executor = new TestExecutor();
  const requestHandler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor);
  // Bodies up to 4 MiB (the SDK's own parser keeps Express's 100 KB default; a parsed body is not parsed again).
  app.use(express.json({ limit: 4 << 20, type: ['application/json', 'application/a2a+json'], strict: false }));
  app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: requestHandler }));
  app.use('/a2a/rest', restHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication }));
  app.use(jsonRpcHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication }));
  return {
    url,
    port,
    card,
    received: executor.received,
    openRequests: () => open,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
