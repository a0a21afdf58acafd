/**
 * The A2A face's bounds on what one client can hold or make the bridge keep (bridge/a2a.ts): open
 * requests per client address (`perPeer`, 429 `request-limit-peer`: one address trickling bodies
 * held all 64 of an agent's requests, 2026-12-07), at the agent's bound a newcomer from a lighter
 * address in place of a body still being sent by the heaviest (two addresses held all 64), and ids no longer than A2A_MAX_ID_CHARS
 * (`id-too-long`: 1,000,000-character message ids grew a bridge to 1.1 GB).
 */
import { connect, type Socket } from 'node:net';
import { describe, expect, test } from 'vitest';
import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import { A2A_MAX_ID_CHARS, BridgeAgent, CallJournal, OpenRequests, serveBridgeA2a } from '../../bridge/internal.ts';
import type { JcpClient } from '../../client/index.ts';
import { cast } from '../node/fixtures.ts';
import { rawSendMessage } from './a2a-raw.ts';

const { bob } = cast('bridge-a2a-limits');

/** A node client that lists one A2A resource with the skill `echo` and decides nothing. */
const listingOnly = {
  listTools: async () => [{ name: 'agent', resource: 'r', kind: 'a2a', tools: [], skills: [{ id: 'echo', name: 'echo' }] }],
} as unknown as JcpClient;

/** A POST from `from` whose body never comes whole; resolves to what the bridge answers within `ms` ('' for nothing). */
function trickle(port: number, from: string, ms: number, socks: Socket[]): Promise<string> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port, localAddress: from });
    socks.push(s);
    let got = '';
    s.on('data', (d: Buffer) => {
      got += d.toString('latin1');
    });
    s.on('error', () => {});
    s.on('connect', () =>
      s.write(`POST / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"js`),
    );
    setTimeout(() => resolve(got), ms);
  });
}

describe('the A2A face bounds one client', () => {
  test('past perPeer open requests from one address: 429 request-limit-peer; another address is still taken', async () => {
    const agent = new BridgeAgent({ name: 'bob', signer: bob, chains: [], client: listingOnly, journal: new CallJournal() });
    const face = await serveBridgeA2a({ host: '127.0.0.1', port: 0, agents: [{ agent }], limits: { perPeer: 2, perAgent: 8 } });
    const socks: Socket[] = [];
    try {
      expect(await trickle(face.port, '127.0.0.1', 100, socks)).toBe('');
      expect(await trickle(face.port, '127.0.0.1', 100, socks)).toBe('');
      const third = await trickle(face.port, '127.0.0.1', 500, socks);
      expect(third).toMatch(/^HTTP\/1\.1 429/);
      expect(third).toContain('request-limit-peer');
      expect(await trickle(face.port, '127.0.0.2', 200, socks)).toBe('');
      expect(face.open()).toBe(3);
    } finally {
      for (const s of socks) s.destroy();
      await face.close();
    }
  });

  test('at the agent bound, a newcomer from a lighter address takes the place of a body still being sent by the heaviest', async () => {
    const agent = new BridgeAgent({ name: 'bob', signer: bob, chains: [], client: listingOnly, journal: new CallJournal() });
    const face = await serveBridgeA2a({ host: '127.0.0.1', port: 0, agents: [{ agent }], limits: { perPeer: 3, perAgent: 4 } });
    const socks: Socket[] = [];
    try {
      for (const from of ['127.0.0.1', '127.0.0.1', '127.0.0.1', '127.0.0.3']) expect(await trickle(face.port, from, 100, socks)).toBe('');
      // The agent is full: 127.0.0.2 (none held) gets the place of 127.0.0.1's oldest, which is closed.
      expect(await trickle(face.port, '127.0.0.2', 200, socks)).toBe('');
      expect(socks[0]!.destroyed || socks[0]!.readableEnded).toBe(true);
      expect(face.open()).toBe(4);
      // 127.0.0.1 holds 2, the others 1: 127.0.0.4 takes another of 127.0.0.1's.
      expect(await trickle(face.port, '127.0.0.4', 200, socks)).toBe('');
      // Now every address holds one: nobody holds more than a newcomer's 0 + 1, so 127.0.0.5 is refused.
      const refused = await trickle(face.port, '127.0.0.5', 500, socks);
      expect(refused).toMatch(/^HTTP\/1\.1 429/);
      expect(refused).toContain('request-limit-agent');
      expect(face.open()).toBe(4);
    } finally {
      for (const s of socks) s.destroy();
      await face.close();
    }
  });

  test('a request whose body was read whole is never evicted', () => {
    const agent = new BridgeAgent({ name: 'bob', signer: bob, chains: [], client: listingOnly, journal: new CallJournal() });
    const open = new OpenRequests({ perAgent: 2, perPeer: 2, total: 10 });
    const destroyed: number[] = [];
    const res = (i: number) =>
      Object.assign(new EventEmitter(), { req: { socket: { destroy: () => destroyed.push(i) } } }) as unknown as ServerResponse;
    const [a, b] = [res(0), res(1)];
    expect(open.hold(agent, '10.0.0.1', a)).toBeUndefined();
    expect(open.hold(agent, '10.0.0.1', b)).toBeUndefined();
    open.bodyDone(agent, a);
    open.bodyDone(agent, b);
    expect(open.hold(agent, '10.0.0.2', res(2))?.[1]).toBe('request-limit-agent');
    expect(destroyed).toEqual([]);
  });

  test(`a message id over ${A2A_MAX_ID_CHARS} characters is id-too-long, before anything is signed or sent`, async () => {
    // The node client can only list: a message that got as far as signing and sending would fail otherwise.
    const agent = new BridgeAgent({ name: 'bob', signer: bob, chains: [], client: listingOnly, journal: new CallJournal() });
    const face = await serveBridgeA2a({ host: '127.0.0.1', port: 0, agents: [{ agent }] });
    try {
      const send = (messageId: string) =>
        rawSendMessage(face.url, { messageId, role: 'ROLE_USER', parts: [{ text: 'x' }], metadata: { skill: 'echo' } }).then(async (r) =>
          JSON.stringify(await r.json()),
        );
      const long = await send('m'.repeat(A2A_MAX_ID_CHARS + 1));
      expect(long).toContain('id-too-long');
      expect(long).toContain(`message.messageId has ${A2A_MAX_ID_CHARS + 1} characters`);
      expect(await send('m'.repeat(A2A_MAX_ID_CHARS))).not.toContain('id-too-long');
    } finally {
      await face.close();
    }
  });
});
