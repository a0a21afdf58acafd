/**
 * The console answers only requests addressed to it by a loopback name (console/server.ts,
 * docs/console.md): loopback binding alone does not stop DNS rebinding, where a web page the
 * auditor opens points its own host name at 127.0.0.1 and reads `/api/state` (every grant id,
 * steward and spend) from the browser. A request whose `Host` is another name is 421.
 */
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConsoleData, type RunningConsole, serveConsole } from '../../console/index.ts';

/** GET `path` on `port` with the `Host` header `host`: status and body. */
function get(port: number, path: string, host: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const r = request({ host: '127.0.0.1', port, path, method: 'GET', headers: { host } }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => {
        body += c.toString();
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    r.on('error', reject);
    r.end();
  });
}

describe('console - Host header', () => {
  let c: RunningConsole;
  let port: number;
  beforeAll(async () => {
    c = await serveConsole(new ConsoleData([]));
    port = Number(new URL(c.url).port);
  });
  afterAll(async () => {
    await c?.close();
  });

  it('serves 127.0.0.1, localhost and [::1], with or without the port', async () => {
    for (const h of [`127.0.0.1:${port}`, '127.0.0.1', `localhost:${port}`, 'LOCALHOST', `[::1]:${port}`]) {
      const r = await get(port, '/api/state', h);
      expect({ h, status: r.status }).toEqual({ h, status: 200 });
      expect(JSON.parse(r.body)).toHaveProperty('nodes');
    }
  });

  it('refuses any other name with 421 and no state', async () => {
    for (const h of [`evil.example:${port}`, 'evil.example', '127.0.0.1.evil.example', 'localhost.evil.example']) {
      for (const path of ['/api/state', '/api/receipt?hex=00', '/']) {
        const r = await get(port, path, h);
        expect({ h, path, status: r.status }).toEqual({ h, path, status: 421 });
        expect(r.body).not.toContain('nodes');
      }
    }
  });
});
