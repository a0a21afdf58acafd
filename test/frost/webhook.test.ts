/**
 * The webhook approver against a reviewer that answers garbage (spec §2.2; docs/frost.md
 * "Approvals"): every answer other than a 2xx `{"approve": bool}` object is a refusal with a
 * reason that says what was wrong, and a reviewer that streams an endless body cannot make the
 * holder buffer it.
 */
import { chmodSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Did } from '../../core/index.ts';
import { type Approver, decodeCall, MAX_WEBHOOK_ANSWER_BYTES, readWebhookSecret, webhookApprover, webhookMac } from '../../frost/index.ts';
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

const SECRET = new Uint8Array(Buffer.from('k'.repeat(40)));
/** What the signing reviewer saw of the last request: whether its MAC verified. */
let lastRequestVerified: boolean | undefined;
let replayed: { headers: Record<string, string>; body: string } | undefined;

/** A reviewer holding SECRET: checks the request's MAC, then answers `approve` signed as `how` says. */
function signed(
  req: IncomingMessage,
  body: string,
  res: import('node:http').ServerResponse,
  how: 'good' | 'none' | 'wrong' | 'stale',
): void {
  const ts = String(req.headers['x-jcp-timestamp']);
  const mac = webhookMac(SECRET, 'POST', req.url ?? '', ts, body);
  lastRequestVerified = req.headers['x-jcp-signature'] === `v1=${mac}`;
  const answer = '{"approve": true, "reason": "looks fine"}';
  const now = String(Math.floor(Date.now() / 1000) - (how === 'stale' ? 3600 : 0));
  const key = how === 'wrong' ? new Uint8Array(Buffer.from('x'.repeat(40))) : SECRET;
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (how !== 'none') {
    headers['x-jcp-timestamp'] = now;
    headers['x-jcp-signature'] = `v1=${webhookMac(key, 'ANSWER', mac, now, answer)}`;
  }
  res.writeHead(200, headers);
  res.end(answer);
}

beforeAll(async () => {
  server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      if (req.url === '/signed-replay') {
        // Replays the first signed answer it gave to every later request.
        if (replayed) {
          res.writeHead(200, replayed.headers);
          return res.end(replayed.body);
        }
        const end = res.end.bind(res);
        const head = res.writeHead.bind(res);
        res.writeHead = ((status: number, h: Record<string, string>) => {
          replayed = { headers: h, body: '' };
          return head(status, h);
        }) as never;
        res.end = ((b: string) => {
          replayed!.body = b;
          return end(b);
        }) as never;
        return signed(req, Buffer.concat(parts).toString('utf8'), res, 'good');
      }
      const m = /^\/signed-(good|none|wrong|stale)/.exec(req.url ?? '');
      if (m) return signed(req, Buffer.concat(parts).toString('utf8'), res, m[1] as 'good');
      answers[req.url ?? '']?.(res);
    });
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

describe('webhook approver / with a secret, only a signed answer approves', () => {
  it('signed / the request carries a MAC the reviewer verifies; its signed answer approves', async () => {
    const v = await webhookApprover(`${url}/signed-good?x=1`, { webhookSecret: SECRET }).decide(call);
    expect(lastRequestVerified).toBe(true);
    expect(v).toEqual({ approve: true, reason: 'webhook: looks fine' });
  });

  it('unsigned, wrong key, stale / an answer that does not verify is a refusal', async () => {
    const none = await webhookApprover(`${url}/signed-none`, { webhookSecret: SECRET }).decide(call);
    expect(none.approve).toBe(false);
    expect(none.reason).toMatch(/^webhook answer is not signed/);
    const wrong = await webhookApprover(`${url}/signed-wrong`, { webhookSecret: SECRET }).decide(call);
    expect(wrong).toEqual({ approve: false, reason: 'webhook answer signature does not verify' });
    const stale = await webhookApprover(`${url}/signed-stale`, { webhookSecret: SECRET }).decide(call);
    expect(stale.approve).toBe(false);
    expect(stale.reason).toMatch(/timestamp .* is not within 300 s/);
    // A signed answer captured from one call and replayed to another: bound to the first request's MAC, it does not verify.
    const hook = webhookApprover(`${url}/signed-replay`, { webhookSecret: SECRET });
    expect((await hook.decide(call)).approve).toBe(true);
    expect(await hook.decide({ ...call, session: '11'.repeat(16) })).toEqual({
      approve: false,
      reason: 'webhook answer signature does not verify',
    });
  });

  it('secret file / mode 0644 or too short is refused; 0600 is read, its trailing newline dropped', () => {
    const f = path.join(tmpdir(), `jcp-webhook-secret-${process.pid}`);
    writeFileSync(f, `${'s'.repeat(40)}\n`, { mode: 0o600 });
    expect(readWebhookSecret({ file: f }).length).toBe(40);
    chmodSync(f, 0o644);
    expect(() => readWebhookSecret({ file: f })).toThrow(/mode 0644 lets group or others read it/);
    writeFileSync(f, 'short', { mode: 0o600 });
    chmodSync(f, 0o600);
    expect(() => readWebhookSecret({ file: f })).toThrow(/at least 32 bytes/);
    chmodSync(f, 0o600);
    rmSync(f);
    expect(() => readWebhookSecret({ env: 'JCP_TEST_UNSET_WEBHOOK_SECRET' })).toThrow(/is not set/);
  });
});
