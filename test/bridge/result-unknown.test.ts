/**
 * A re-send of a journaled call that the node refuses `clock-skew` (the node came back after
 * its `max_skew_s` with the original decided and debited): the bridge keeps the call's entry
 * and answers `result-unknown` instead of signing the call afresh (a new request, a second
 * debit), until the replay window passes. The node is live; the client between the bridge and
 * the node plays the outage (the first answer lost after the node decided) and the node's
 * refusal of the late re-send.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { BridgeAgent, CallJournal } from '../../bridge/index.ts';
import { JcpClient, WireErrorReply } from '../../client/index.ts';
import { requestIdOf } from '../../core/index.ts';
import type { RunningNode } from '../../node/index.ts';
import { cast, liveNode, mint, tempDir } from '../node/fixtures.ts';

const { rng, alice, bob } = cast('bridge-result-unknown');
const SERVER = path.join(import.meta.dirname, 'vanishing-server.mjs');

describe('bridge: a late re-send of a journaled call', () => {
  let node: RunningNode & { cleanup: () => Promise<void> };
  let jcp: JcpClient;

  beforeAll(async () => {
    node = await liveNode({ resources: [{ name: 'vanishing', endpoint: { command: process.execPath, args: [SERVER] } }] });
    jcp = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
  }, 60_000);
  afterAll(async () => {
    await jcp?.close();
    await node?.cleanup();
  });

  test('clock-skew on a re-send: result-unknown, the entry kept, no second request until the window passes', async () => {
    const t = tempDir('result-unknown');
    const file = path.join(t.dir, 'calls.journal');
    const grant = mint(alice, bob, 'vanishing', ['echo'], 1_000n, rng);
    // The original's `now` is 25 s behind the node's clock (accepted); its re-sends come 31 s later.
    const wall = Math.floor(Date.now() / 1000);
    let clock = wall - 25;
    const decided: string[] = [];
    const refused = new Set<string>();
    const c = jcp;
    const real = c.callRequest.bind(c);
    c.callRequest = async (req, o) => {
      const id = requestIdOf(req);
      // The node's window for this request has passed (it was decided before the node went away).
      if (refused.has(id)) throw new WireErrorReply('clock-skew', `now ${req.now} is more than 30 s from the node's clock`);
      const r = await real(req, o);
      decided.push(id);
      if (decided.length === 1) {
        // Sealed and debited; the node is killed before its answer reaches the bridge.
        refused.add(id);
        throw new Error('connection lost');
      }
      return r;
    };
    try {
      const journal = new CallJournal({ file, windowS: 40 }, clock);
      const agent = new BridgeAgent({ name: 'bob', signer: bob, chains: [[grant]], client: c, journal, costUj: 7n, clockS: () => clock });
      const name = (await agent.tools())[0]!.name;
      const ctx = { mcpRequestId: 1, idempotencyKey: 'one-logical-call' };
      await expect(agent.call(name, { text: 'hi' }, ctx)).rejects.toMatchObject({ data: { code: 'node-unreachable' } });
      clock += 31;
      for (let i = 0; i < 2; i++) {
        const e = await agent.call(name, { text: 'hi' }, ctx).then(
          () => undefined,
          (x: unknown) => x as { message: string; data?: { code?: string } },
        );
        expect(e?.data?.code).toBe('result-unknown');
        expect(e?.message).toMatch(/^result-unknown: the node may have run this call/);
        expect(journal.openCalls).toBe(1);
      }
      // After a bridge restart too: the entry is in the file.
      journal.close();
      const again = new CallJournal({ file, windowS: 40 }, clock);
      const restarted = new BridgeAgent({
        name: 'bob',
        signer: bob,
        chains: [[grant]],
        client: c,
        journal: again,
        costUj: 7n,
        clockS: () => clock,
      });
      await expect(restarted.call(name, { text: 'hi' }, ctx)).rejects.toMatchObject({ data: { code: 'result-unknown' } });
      expect(decided).toHaveLength(1);
      // Past the replay window the call is a new one (a new request, decided on its own).
      clock = wall + 20; // 45 s after the original: past the 40 s window, within the node's skew

      const r = await restarted.call(name, { text: 'hi' }, ctx);
      expect(r._meta?.['jcp/verdict']).toBe('allow');
      expect(decided).toHaveLength(2);
      expect(new Set(decided).size).toBe(2);
      again.close();
    } finally {
      t.cleanup();
    }
  }, 60_000);
});
