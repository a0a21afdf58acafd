/**
 * JcpClient and `notice` messages (docs/wire.md "MCP tools behind a node"): notices are routed by
 * request id, never matched FIFO, so they may arrive between the replies of pipelined requests;
 * a notice for no call in flight is dropped. Against a scripted jcp/1 peer on loopback.
 */
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { contentIdOfBytes, encodeWireMessage, frameMessage, FrameReader } from '../../core/index.ts';
import { CallTimeout, JcpClient, type McpNotification } from '../../client/index.ts';
import { cast, mint } from './fixtures.ts';

const { rng, alice, bob } = cast('client-notice');

const deny = (tag: number) =>
  encodeWireMessage({ kind: 'response', response: { decision: { verdict: 'deny', deny_reason: 'revoked' }, receipt: Uint8Array.of(tag) } });
const notice = (rid: string, progress: number) =>
  encodeWireMessage({
    kind: 'notice',
    request_id: rid,
    notification: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 1, progress } }),
  });

describe('client - notices', () => {
  let server: Server;
  let port = 0;
  /** Called with the request bodies once two have arrived; writes what it returns, in order. */
  let script: (bodies: Uint8Array[]) => Uint8Array[] = () => [];

  beforeAll(async () => {
    server = createServer((sock: Socket) => {
      const reader = new FrameReader();
      const got: Uint8Array[] = [];
      sock.on('data', (chunk: Buffer) => {
        got.push(...reader.push(new Uint8Array(chunk)));
        if (got.length === 2) for (const b of script(got.splice(0))) sock.write(frameMessage(b));
      });
      sock.on('error', () => undefined);
    });
    await new Promise<void>((r) => server.listen({ port: 0, host: '127.0.0.1' }, () => r()));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise<void>((r) => server.close(() => r()));
  });

  test('notices of B arriving before A’s reply go to B’s handler; replies still match FIFO', async () => {
    const client = await JcpClient.connect({ host: '127.0.0.1', port, signer: bob });
    try {
      const g = mint(alice, bob, 'tools', ['a', 'b'], 10n, rng);
      // B's notices come before A's reply, and one for no request at all in between.
      script = ([, b]) => {
        const ridB = contentIdOfBytes(b!);
        return [notice(ridB, 1), notice('00'.repeat(32), 99), deny(1), notice(ridB, 2), deny(2)];
      };
      const seenA: McpNotification[] = [];
      const seenB: McpNotification[] = [];
      const [ra, rb] = await Promise.all([
        client.call({ chain: [g], action: 'a', onNotice: (n) => seenA.push(n) }),
        client.call({ chain: [g], action: 'b', onNotice: (n) => seenB.push(n) }),
      ]);
      expect([...ra.receipt, ...rb.receipt]).toEqual([1, 2]);
      expect(seenA).toEqual([]);
      expect(seenB.map((n) => n.params?.['progress'])).toEqual([1, 2]);
      expect(ra.request.notify).toBe(1);
    } finally {
      await client.close();
    }
  });

  test('callRequest takes {onNotice, timeoutS} or, as before, a bare timeout in seconds', async () => {
    script = () => []; // never answers
    const client = await JcpClient.connect({ host: '127.0.0.1', port, signer: bob });
    try {
      const g = mint(alice, bob, 'tools', ['a'], 10n, rng);
      const req = await client.request({ chain: [g], action: 'a', notify: true });
      expect(req.notify).toBe(1);
      await expect(client.callRequest(req, 0.2)).rejects.toBeInstanceOf(CallTimeout);
      await expect(client.callRequest(req, { timeoutS: 0.2, onNotice: () => undefined })).rejects.toBeInstanceOf(CallTimeout);
    } finally {
      await client.close();
    }
  });
});
