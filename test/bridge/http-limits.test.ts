/**
 * The Streamable HTTP face under attack (bridge/http.ts): idle and never-initialized sessions
 * expire and their transports are closed (counted by `sessions()`, not RSS); sessions are capped
 * per agent (429 `session-limit-agent`) and in all (503 `session-limit-total`); a foreign `Origin`
 * gets 403 `origin-forbidden` (none is fine: a non-browser client); and a bad `Host` or
 * `Content-Type` is refused from the headers, before the body is read.
 */
import { connect as netConnect } from 'node:net';
import { describe, expect, test } from 'vitest';
import { BridgeAgent, CallJournal, type HttpBridge, serveBridgeHttp } from '../../bridge/index.ts';
import type { JcpClient } from '../../client/index.ts';
import { cast } from '../node/fixtures.ts';

const { alice, bob } = cast('bridge-http-limits');
/** No node: these tests only initialize, ping and close sessions, which never reach it. */
const noNode = {} as JcpClient;
const agentOf = (name: string, signer = bob) => new BridgeAgent({ name, signer, chains: [], client: noNode, journal: new CallJournal() });

const INIT =
  '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}';

const base = (token?: string): Record<string, string> => ({
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': '2025-06-18',
  ...(token !== undefined ? { authorization: `Bearer ${token}` } : {}),
});

/** Opens a session (initialize; `ready`: also notifications/initialized); returns its id, or the refusal. */
async function openSession(
  b: HttpBridge,
  token?: string,
  ready = true,
): Promise<{ id: string } | { status: number; body: { error: { message: string; data?: { code: string; limit: number } } } }> {
  const r = await fetch(b.url, { method: 'POST', headers: base(token), body: INIT });
  if (r.status !== 200) return { status: r.status, body: (await r.json()) as never };
  await r.text();
  const id = r.headers.get('mcp-session-id')!;
  if (ready) {
    const n = await fetch(b.url, {
      method: 'POST',
      headers: { ...base(token), 'mcp-session-id': id },
      body: '{"jsonrpc":"2.0","method":"notifications/initialized"}',
    });
    expect(n.status).toBe(202);
  }
  return { id };
}

/** The HTTP status of a `ping` on session `id`. */
async function ping(b: HttpBridge, id: string, token?: string): Promise<number> {
  const r = await fetch(b.url, {
    method: 'POST',
    headers: { ...base(token), 'mcp-session-id': id },
    body: '{"jsonrpc":"2.0","id":9,"method":"ping"}',
  });
  await r.text();
  return r.status;
}

async function waitUntil(cond: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('bridge over HTTP / sessions expire and are capped', () => {
  test('a session that never sent notifications/initialized expires (init timeout); an initialized one stays', async () => {
    const b = await serveBridgeHttp({
      host: '127.0.0.1',
      port: 0,
      agents: [{ agent: agentOf('bob') }],
      limits: { initMs: 1500, idleMs: 600_000 },
    });
    try {
      const half = (await openSession(b, undefined, false)) as { id: string };
      const whole = (await openSession(b)) as { id: string };
      expect(b.sessions()).toBe(2);
      await waitUntil(() => b.sessions() === 1, 'the uninitialized session to expire');
      expect(b.sessionStats()).toMatchObject({ open: 1, expired: 1 });
      expect(await ping(b, half.id)).toBe(404);
      expect(await ping(b, whole.id)).toBe(200);
    } finally {
      await b.close();
    }
  });

  test('an initialized session with no request for idleMs expires; its transport is closed and its id is unknown', async () => {
    const b = await serveBridgeHttp({ host: '127.0.0.1', port: 0, agents: [{ agent: agentOf('bob') }], limits: { idleMs: 150 } });
    try {
      const s = (await openSession(b)) as { id: string };
      expect(b.sessions()).toBe(1);
      await waitUntil(() => b.sessions() === 0, 'the idle session to expire');
      expect(b.sessionStats().expired).toBe(1);
      expect(await ping(b, s.id)).toBe(404);
    } finally {
      await b.close();
    }
  });

  test('past the per-agent cap 429 session-limit-agent, past the total 503 session-limit-total; a closed session frees its slot', async () => {
    const b = await serveBridgeHttp({
      host: '127.0.0.1',
      port: 0,
      agents: [
        { agent: agentOf('bob'), token: 'tok-bob' },
        { agent: agentOf('alice', alice), token: 'tok-alice' },
      ],
      limits: { perAgent: 2, total: 3 },
    });
    try {
      const first = (await openSession(b, 'tok-bob')) as { id: string };
      await openSession(b, 'tok-bob');
      const third = await openSession(b, 'tok-bob');
      expect(third).toMatchObject({ status: 429, body: { error: { data: { code: 'session-limit-agent', limit: 2 } } } });
      await openSession(b, 'tok-alice');
      const fourth = await openSession(b, 'tok-alice');
      expect(fourth).toMatchObject({ status: 503, body: { error: { data: { code: 'session-limit-total', limit: 3 } } } });
      expect(b.sessionStats()).toMatchObject({ open: 3, refused: 2 });
      const del = await fetch(b.url, { method: 'DELETE', headers: { ...base('tok-bob'), 'mcp-session-id': first.id } });
      expect(del.status).toBe(200);
      expect(b.sessions()).toBe(2);
      expect(await openSession(b, 'tok-alice')).toHaveProperty('id');
    } finally {
      await b.close();
    }
  });
});

describe('bridge over HTTP / headers are checked before the body', () => {
  test('a foreign Origin gets 403 origin-forbidden; its own origin, a configured one and none are served', async () => {
    const b = await serveBridgeHttp({
      host: '127.0.0.1',
      port: 0,
      agents: [{ agent: agentOf('bob') }],
      allowedOrigins: ['https://console.example'],
    });
    try {
      const post = (origin?: string) =>
        fetch(b.url, { method: 'POST', headers: { ...base(), ...(origin !== undefined ? { origin } : {}) }, body: INIT });
      const foreign = await post('https://evil.example');
      expect(foreign.status).toBe(403);
      expect(((await foreign.json()) as { error: { data: { code: string } } }).error.data.code).toBe('origin-forbidden');
      expect(b.sessions()).toBe(0);
      for (const ok of [`http://127.0.0.1:${b.port}`, `http://localhost:${b.port}`, 'https://console.example', undefined]) {
        const r = await post(ok);
        expect(r.status, String(ok)).toBe(200);
        await r.text();
      }
    } finally {
      await b.close();
    }
  });

  /** Sends `head` and 64 KiB of a 100 MiB body, and resolves to the status line answered before the rest is sent. */
  const early = (port: number, head: string): Promise<string> =>
    new Promise((resolve) => {
      const s = netConnect(port, '127.0.0.1');
      let got = '';
      const t = setTimeout(() => {
        s.destroy();
        resolve('no answer while the body was still being sent');
      }, 5000);
      s.on('data', (d: Buffer) => {
        got += d.toString('latin1');
        if (got.includes('\r\n')) {
          clearTimeout(t);
          s.destroy();
          resolve(got.slice(0, got.indexOf('\r\n')));
        }
      });
      s.on('error', () => undefined);
      s.write(`${head}content-length: ${100 * 1024 * 1024}\r\n\r\n`);
      s.write(Buffer.alloc(64 * 1024, 0x20));
    });

  test('a bad Host, a bad Content-Type, an oversized Content-Length: refused before the 100 MiB body is sent', async () => {
    const b = await serveBridgeHttp({ host: '127.0.0.1', port: 0, agents: [{ agent: agentOf('bob') }] });
    try {
      const json = 'content-type: application/json\r\naccept: application/json, text/event-stream\r\n';
      expect(await early(b.port, `POST /mcp HTTP/1.1\r\nhost: evil.example:${b.port}\r\n${json}`)).toBe('HTTP/1.1 403 Forbidden');
      expect(await early(b.port, `POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:${b.port}\r\ncontent-type: text/plain\r\n`)).toBe(
        'HTTP/1.1 415 Unsupported Media Type',
      );
      expect(await early(b.port, `POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:${b.port}\r\norigin: https://evil.example\r\n${json}`)).toBe(
        'HTTP/1.1 403 Forbidden',
      );
      expect(await early(b.port, `POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:${b.port}\r\n${json}`)).toBe('HTTP/1.1 413 Payload Too Large');
    } finally {
      await b.close();
    }
  });
});
