/**
 * The webhook approver against a reviewer that answers garbage (spec §2.2; docs/frost.md
 * "Approvals"): every answer other than a 2xx `{"approve": bool}` object is a refusal with a
 * reason that says what was wrong, and a reviewer that streams an endless body cannot make the
 * holder buffer it.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Did } from '../../core/index.ts';
import { type Approver, decodeCall, MAX_WEBHOOK_ANSWER_BYTES, webhookApprover } from '../../frost/index.ts';
import { callBytes } from './approval-call.ts';

let server: Server;
let url = '';
/** The answer of the next request, by path. */
const answers: Record<string, (res: import('node:http').ServerResponse) => void> = {
  '/null': (res) => res.end('null'),
  '/list': (res) => res.end('[true]'),
  '/ok': (res) => res.end('{"approve": true}'),
  // An endless body: 1 MiB chunks until the client goes away.
  '/endless': (res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write('{"approve": true, "reason": "');
    const chunk = 'x'.repeat(1 << 20);
    const more = (): void => {
      while (!res.destroyed && res.write(chunk)) {
        /* until the socket pushes back */
      }
      if (!res.destroyed) res.once('drain', more);
    };
    more();
  },
};

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => answers[req.url ?? '']?.(res));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => {
  server.closeAllConnections();
  server.close();
});

const call: Parameters<Approver['decide']>[0] = {
  ...decodeCall(callBytes({ args: { path: '/srv/out/a' } })),
  group: 'did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK' as Did,
  holder: 'did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK' as Did,
  session: '00'.repeat(16),
};

describe('webhook approver / garbage answers are refusals that say why', () => {
  it('not an object / null and a list are refused as answers that are not a JSON object', async () => {
    for (const p of ['/null', '/list']) {
      const v = await webhookApprover(url + p, { timeoutMs: 5000 }).decide(call);
      expect(v).toEqual({ approve: false, reason: 'webhook answer is not a JSON object' });
    }
    expect((await webhookApprover(`${url}/ok`).decide(call)).approve).toBe(true);
  });

  it('endless / a body over the cap is refused at the cap (not buffered until the 20 s deadline)', async () => {
    const v = await webhookApprover(`${url}/endless`, { timeoutMs: 20_000 }).decide(call);
    expect(v).toEqual({ approve: false, reason: `webhook answer is over ${MAX_WEBHOOK_ANSWER_BYTES} bytes` });
  });
});
