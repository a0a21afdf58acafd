/**
 * The planner's A2A task (run in the planner worker's process, demo/worker.ts): before its rounds
 * the planner hands a sub-task to the researcher agent over A2A, with a delegated grant of a
 * quarter of its files budget (docs/a2a.md).
 *
 * It starts a `jcp bridge --a2a` of its own (its key and its files and agents chains in files under
 * `job.dir`, the bridge's A2A face on a free loopback port) and talks to it with the SDK's A2A
 * client (`ClientFactory`, the agent card at the bridge's base url). The message names its skill
 * (`metadata.skill`) and asks the bridge to delegate (`metadata["jcp/delegate"]`: to the
 * researcher's did:key, the files resource, the quarter, µJ); the bridge mints the child grant,
 * forwards it as `jcp/delegation`, and the node decides and seals the `agent-task` before the
 * researcher sees it. The answer's `jcp/…` metadata carries the decision; a deny is an A2A error
 * naming its reason.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { AGENT_CARD_PATH, type Message, Role, type Task, TaskState } from '@a2a-js/sdk';
import { ClientFactory } from '@a2a-js/sdk/client';
import type { Actor, SignedGrant } from '../core/index.ts';
import { writeChainFile } from '../client/index.ts';
import { writeKeyFile } from '../node/index.ts';
import { freePort, JCP_BIN, stopChild, track } from '../testkit/index.ts';
import type { DelegatedEvent, NodeAddress, PlannerJob } from './messages.ts';

/** How long the planner waits for its bridge's A2A face to answer (ms). */
const BRIDGE_START_MS = 60_000;

/** The planner's bridge process and its A2A base url. */
interface A2aBridge {
  readonly child: ChildProcess;
  readonly url: string;
  stderr: string;
}

/**
 * Writes the planner's key and chains under `job.dir` and starts `jcp bridge --node … --a2a
 * 127.0.0.1:PORT`; resolves once its agent card answers. @throws Error when it exits or does not answer in time.
 */
async function startA2aBridge(
  me: Actor,
  node: NodeAddress,
  files: readonly SignedGrant[],
  agents: readonly SignedGrant[],
  job: PlannerJob,
): Promise<A2aBridge> {
  mkdirSync(job.dir, { recursive: true, mode: 0o700 });
  const key = join(job.dir, 'planner.key');
  writeKeyFile(key, me);
  const filesChain = join(job.dir, 'files.chain.json');
  const agentsChain = join(job.dir, 'agents.chain.json');
  writeChainFile(filesChain, files, { overwrite: true });
  writeChainFile(agentsChain, agents, { overwrite: true });
  const port = await freePort();
  const args = ['bridge', '--node', `${node.host}:${node.port}`, '--key', key, '--chain', agentsChain, '--chain', filesChain];
  const child = spawn(process.execPath, [JCP_BIN, ...args, '--a2a', `127.0.0.1:${port}`], {
    stdio: ['pipe', 'ignore', 'pipe'],
    env: { ...process.env, JCP_EXIT_WITH_PARENT: '1' },
  });
  track(child);
  const b: A2aBridge = { child, url: `http://127.0.0.1:${port}`, stderr: '' };
  child.stderr?.setEncoding('utf8').on('data', (d: string) => {
    b.stderr = (b.stderr + d).slice(-2000);
  });
  const deadline = Date.now() + BRIDGE_START_MS;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`the planner's jcp bridge --a2a exited (${child.exitCode ?? child.signalCode}): ${b.stderr.trim().slice(-500)}`);
    try {
      const r = await fetch(`${b.url}/${AGENT_CARD_PATH}`, { signal: AbortSignal.timeout(1_000) });
      await r.arrayBuffer();
      if (r.ok) return b;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) {
      await stopChild(child, 2_000);
      throw new Error(
        `the planner's jcp bridge --a2a did not serve its agent card within ${BRIDGE_START_MS} ms: ${b.stderr.trim().slice(-500)}`,
      );
    }
    await new Promise((r) => setTimeout(r, 150));
  }
}

/** The planner's message: the task text, its skill and the delegation request (docs/a2a.md names). */
function plannerMessage(job: PlannerJob, resource: string): Message {
  return {
    messageId: randomUUID(),
    contextId: '',
    taskId: '',
    role: Role.ROLE_USER,
    parts: [{ content: { $case: 'text', value: job.text }, metadata: undefined, filename: '', mediaType: 'text/plain' }],
    metadata: {
      skill: job.skill,
      'jcp/delegate': { to: job.researcher, resource, budget_uj: job.delegate_uj },
    },
    extensions: [],
    referenceTaskIds: [],
  };
}

/** The text of a task's artifacts (or of a message's parts), joined. */
function textOf(r: Message | Task): string {
  const parts = 'artifacts' in r ? r.artifacts.flatMap((a) => a.parts) : r.parts;
  return parts
    .map((p) => (p.content?.$case === 'text' ? p.content.value : ''))
    .filter((t) => t !== '')
    .join(' ');
}

/** The decision the answer carries in its `jcp/…` metadata, as a {@link DelegatedEvent}. */
function eventOf(r: Message | Task, sentMs: number): DelegatedEvent {
  const m = r.metadata ?? {};
  const str = (k: string): string | undefined => (typeof m[k] === 'string' || typeof m[k] === 'number' ? String(m[k]) : undefined);
  const verdict = str('jcp/verdict');
  const state = 'status' in r && r.status !== undefined ? TaskState[r.status.state] : undefined;
  const reason = str('jcp/deny_reason');
  const receipt = str('jcp/receipt');
  const requestId = str('jcp/request_id');
  const grantId = str('jcp/grant_id');
  const cost = str('jcp/cost_uj');
  return {
    type: 'delegated',
    verdict: verdict === 'allow' || verdict === 'deny' ? verdict : 'error',
    ...(reason !== undefined ? { reason } : {}),
    ...(receipt !== undefined ? { receipt } : {}),
    ...(requestId !== undefined ? { request_id: requestId } : {}),
    ...(grantId !== undefined ? { grant_id: grantId } : {}),
    ...(cost !== undefined ? { cost_uj: cost } : {}),
    ...(state !== undefined ? { state } : {}),
    summary: textOf(r),
    sent_ms: sentMs,
    done_ms: Date.now(),
  };
}

/**
 * Sends the planner's task (see the module comment) and resolves to what came back; a deny or a
 * failure to reach the researcher resolves to an event with verdict `deny` (the reason named by
 * the A2A error) or `error`. Stops its bridge before resolving.
 */
export async function delegateOverA2a(
  me: Actor,
  node: NodeAddress,
  files: readonly SignedGrant[],
  agents: readonly SignedGrant[],
  job: PlannerJob,
): Promise<DelegatedEvent> {
  const sent = Date.now();
  let bridge: A2aBridge | undefined;
  try {
    bridge = await startA2aBridge(me, node, files, agents, job);
    const client = await new ClientFactory().createFromUrl(bridge.url);
    const resource = files[files.length - 1]!.grant.capability.resource;
    const r = await client.sendMessage({
      tenant: '',
      message: plannerMessage(job, resource),
      configuration: undefined,
      metadata: undefined,
    });
    return eventOf(r, sent);
  } catch (e) {
    const text = (e as Error)?.message ?? String(e);
    const reason = /\b(budget-exceeded|revoked|[a-z]+(?:-[a-z]+)+)\b/.exec(text)?.[1];
    return {
      type: 'delegated',
      verdict: reason !== undefined && /denied|deny/i.test(text) ? 'deny' : 'error',
      ...(reason !== undefined ? { reason } : {}),
      summary: text.slice(0, 500),
      sent_ms: sent,
      done_ms: Date.now(),
    };
  } finally {
    if (bridge !== undefined) await stopChild(bridge.child, 3_000);
  }
}
