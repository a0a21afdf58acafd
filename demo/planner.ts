/**
 * The planner's A2A task (run in the planner worker's process, demo/worker.ts): before its rounds
 * the planner hands a sub-task to the researcher agent over A2A, with a delegated grant of a
 * quarter of its files budget (docs/a2a.md).
 *
 * Its bridge's A2A face (`serveBridgeA2a`, what `jcp bridge --a2a` serves: the bridge library in
 * this process, holding the planner's key and its agents and files chains, on a free loopback
 * port) takes the message from the SDK's A2A client (`ClientFactory`, reading the face's agent
 * card over HTTP). The message names its skill (`metadata.skill`) and asks the bridge to delegate
 * (`metadata["jcp/delegate"]`: to the researcher's did:key, the files resource, the quarter, µJ);
 * the bridge mints the child grant, forwards it as `jcp/delegation`, and the node decides and
 * seals the `agent-task` before the researcher sees it. The answer's `jcp/…` metadata carries the
 * decision; a deny is a rejected task naming its reason.
 */
import { randomUUID } from 'node:crypto';
import { type Message, Role, type Task, TaskState } from '@a2a-js/sdk';
import { ClientFactory } from '@a2a-js/sdk/client';
import type { Actor, Did, SignedGrant } from '../core/index.ts';
import { type A2aBridge, BridgeAgent, CallJournal, serveBridgeA2a } from '../bridge/index.ts';
import { JcpClient } from '../client/index.ts';
import type { DelegatedEvent, NodeAddress, PlannerJob } from './messages.ts';

/** The planner's bridge: its node connection and its A2A face on a loopback port. */
interface PlannerBridge {
  readonly node: JcpClient;
  readonly face: A2aBridge;
}

/** Connects to the planner's node and serves its bridge's A2A face (agents chain first, then files: the one it delegates from). */
async function startFace(
  me: Actor,
  node: NodeAddress,
  files: readonly SignedGrant[],
  agents: readonly SignedGrant[],
  name: string,
  delegateTo: readonly Did[],
): Promise<PlannerBridge> {
  const client = await JcpClient.connect({ host: node.host, port: node.port, signer: me });
  try {
    const agent = new BridgeAgent({ name, signer: me, chains: [[...agents], [...files]], client, journal: new CallJournal(), delegateTo });
    const face = await serveBridgeA2a({ host: '127.0.0.1', port: 0, agents: [{ agent }] });
    return { node: client, face };
  } catch (e) {
    await client.close().catch(() => undefined);
    throw e;
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

/** The text of a task's artifacts and status message (or of a message's parts), joined. */
function textOf(r: Message | Task): string {
  const parts = 'artifacts' in r ? [...r.artifacts.flatMap((a) => a.parts), ...(r.status?.message?.parts ?? [])] : r.parts;
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
 * failure to reach the researcher resolves to an event with verdict `error` (the reason named by
 * the A2A error, whose message starts with the stable code). Closes its bridge before resolving.
 */
export async function delegateOverA2a(
  me: Actor,
  node: NodeAddress,
  files: readonly SignedGrant[],
  agents: readonly SignedGrant[],
  job: PlannerJob,
  name: string,
): Promise<DelegatedEvent> {
  const sent = Date.now();
  let bridge: PlannerBridge | undefined;
  try {
    bridge = await startFace(me, node, files, agents, name, [job.researcher]);
    const client = await new ClientFactory().createFromUrl(bridge.face.url);
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
    const reason = /^([a-z]+(?:-[a-z]+)+)\b/.exec(text)?.[1];
    return {
      type: 'delegated',
      verdict: 'error',
      ...(reason !== undefined ? { reason } : {}),
      summary: text.slice(0, 500),
      sent_ms: sent,
      done_ms: Date.now(),
    };
  } finally {
    await bridge?.face.close().catch(() => undefined);
    await bridge?.node.close().catch(() => undefined);
  }
}
