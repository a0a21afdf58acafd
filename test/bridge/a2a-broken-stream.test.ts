/**
 * A stream the agent broke after some events (the node's `jcp/error`, e.g. `endpoint-failed`) ends
 * with a `TASK_STATE_FAILED` status update for its task (bridge/a2a.ts `brokenStreamEnd`): before,
 * an A2A client saw the stream end on a `WORKING` event, its task never finished.
 */
import { SendMessageRequest, StreamResponse, TaskState } from '@a2a-js/sdk';
import { ClientFactory } from '@a2a-js/sdk/client';
import { describe, expect, test } from 'vitest';
import { BridgeAgent, brokenStreamEnd, CallJournal, serveBridgeA2a } from '../../bridge/internal.ts';
import { JcpClient } from '../../client/index.ts';
import { startA2aAgent } from '../../testkit/index.ts';
import { cast, liveNode, mint, tempDir } from '../node/fixtures.ts';

const error = { code: 'endpoint-failed', message: 'the agent failed mid-task: other side closed' };
const meta = { 'jcp/error': 'endpoint-failed' };
const working = StreamResponse.fromJSON({
  statusUpdate: { taskId: 't1', contextId: 'c1', status: { state: 'TASK_STATE_WORKING' } },
});

describe('a stream broken mid-task', () => {
  test('after a WORKING update: a FAILED update for the same task and context, naming the error', () => {
    const end = brokenStreamEnd(working, error, meta);
    const p = end?.payload;
    expect(p?.$case).toBe('statusUpdate');
    if (p?.$case !== 'statusUpdate') return;
    expect([p.value.taskId, p.value.contextId, p.value.status?.state]).toEqual(['t1', 'c1', TaskState.TASK_STATE_FAILED]);
    const part = p.value.status?.message?.parts[0]?.content;
    expect(part?.$case === 'text' && part.value).toBe('endpoint-failed: the agent failed mid-task: other side closed');
    expect(p.value.metadata).toMatchObject(meta);
  });

  test('after a task already ended, or a message: nothing more', () => {
    const done = StreamResponse.fromJSON({ task: { id: 't1', contextId: 'c1', status: { state: 'TASK_STATE_COMPLETED' } } });
    expect(brokenStreamEnd(done, error, meta)).toBeUndefined();
    const message = StreamResponse.fromJSON({ message: { messageId: 'm', role: 'ROLE_AGENT', parts: [{ text: 'x' }] } });
    expect(brokenStreamEnd(message, error, meta)).toBeUndefined();
    const submitted = StreamResponse.fromJSON({ task: { id: 't2', contextId: 'c2', status: { state: 'TASK_STATE_SUBMITTED' } } });
    expect(brokenStreamEnd(submitted, error, meta)?.payload?.$case).toBe('statusUpdate');
  });
});

describe('a stream broken mid-task, end to end', () => {
  test('the agent goes away after 3 events: the A2A client gets a FAILED update last, naming endpoint-failed', async () => {
    const { rng, alice: steward, bob: planner } = cast('a2a-broken-stream');
    const agent = await startA2aAgent();
    const dir = tempDir('a2a-broken-stream');
    const node = await liveNode(
      {
        resources: [{ name: 'agent', endpoint: { kind: 'a2a', url: agent.url, timeout_ms: 5000 } }],
        meter: { default_estimate_uj: 100, rungs: ['estimator'] },
      },
      {},
      dir.dir,
    );
    const client = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: planner });
    const grant = mint(steward, planner, 'agent', ['stream'], 100_000n, rng);
    const bridge = new BridgeAgent({ name: 'planner', signer: planner, chains: [[grant]], client, journal: new CallJournal() });
    const face = await serveBridgeA2a({ host: '127.0.0.1', port: 0, agents: [{ agent: bridge }] });
    try {
      const a2a = await new ClientFactory().createFromUrl(face.url);
      const events: StreamResponse[] = [];
      const req = SendMessageRequest.fromJSON({
        message: { messageId: 'broken-1', role: 'ROLE_USER', parts: [{ text: 'events=50 delay=100' }], metadata: { skill: 'stream' } },
      });
      for await (const e of a2a.sendMessageStream(req)) {
        events.push(StreamResponse.fromJSON(StreamResponse.toJSON(e as never)));
        if (events.length === 3) await agent.stop();
      }
      const last = events.at(-1)?.payload;
      expect(last?.$case).toBe('statusUpdate');
      if (last?.$case !== 'statusUpdate') return;
      expect(last.value.status?.state).toBe(TaskState.TASK_STATE_FAILED);
      expect(last.value.metadata?.['jcp/error']).toBe('endpoint-failed');
    } finally {
      await face.close();
      await client.close();
      await node.close();
      await agent.stop().catch(() => undefined);
      dir.cleanup();
    }
  }, 30_000);
});
