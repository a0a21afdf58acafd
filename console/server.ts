/**
 * The audit console's HTTP server (docs/console.md): read-only, GET and HEAD only (anything else
 * 405), on loopback by default:
 * - `/`: the page; `/console.js`: its script; `/vendor/chart.umd.min.js`: Chart.js from node_modules;
 * - `/api/state`: {@link ConsoleState} as JSON (re-read at most every second);
 * - `/api/receipt?hex=…`: the receipt inspector (200 with `{ok: false, code, why}` for bad input).
 * Unknown paths are 404. A request whose `Host` names neither loopback (`127.0.0.1`, `localhost`,
 * `[::1]`) nor the address it listens on is 421 (DNS rebinding: loopback binding alone lets a
 * web page the auditor opens read the state through a name of its own); listening on a wildcard
 * address (`0.0.0.0`, `::`) accepts any `Host`.
 */
import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { ConsoleData, ConsoleState } from './data.ts';
import { PAGE_HTML, PAGE_JS } from './page.ts';
import { createBoundedServer, type HttpLimits, readOnlyGuard } from '../io/index.ts';

/** Chart.js's UMD build, read from its installed package: beside its CommonJS entry (dist/chart.cjs). */
const chartJs = (): Buffer => readFileSync(path.join(path.dirname(createRequire(import.meta.url).resolve('chart.js')), 'chart.umd.min.js'));

/** A running console: its URL and how to stop it. */
export interface RunningConsole {
  readonly url: string;
  readonly server: Server;
  close(): Promise<void>;
}

/**
 * Serves the console for `data` on `host:port` (port 0: any free one). Connections are bounded by
 * `limits` (io/httplimits.ts; default `HTTP_LIMITS`: 1024 in all, 64 per peer address, 10 s for
 * the headers): one over a bound is closed as it is accepted (slow loris, file-handle exhaustion).
 * @throws Error when the address cannot be bound
 */
export async function serveConsole(data: ConsoleData, host = '127.0.0.1', port = 0, limits: HttpLimits = {}): Promise<RunningConsole> {
  let cached: { at: number; state: Promise<ConsoleState> } | undefined;
  const state = (): Promise<ConsoleState> => {
    if (cached === undefined || Date.now() - cached.at > 1_000) cached = { at: Date.now(), state: data.state() };
    return cached.state;
  };
  const vendor = chartJs();
  const guard = readOnlyGuard(host);
  const { server } = createBoundedServer((req, res) => {
    const send = (status: number, type: string, body: string | Buffer) => {
      res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
    const refused = guard(req.method, req.headers.host);
    if (refused?.status === 405) return send(405, 'text/plain', 'read-only: GET and HEAD only\n');
    if (refused?.status === 421) return send(421, 'text/plain', 'misdirected: open the console as http://127.0.0.1:PORT/ (or localhost)\n');
    const u = new URL(req.url ?? '/', 'http://console');
    if (u.pathname === '/') return send(200, 'text/html; charset=utf-8', PAGE_HTML);
    if (u.pathname === '/console.js') return send(200, 'text/javascript; charset=utf-8', PAGE_JS);
    if (u.pathname === '/vendor/chart.umd.min.js') return send(200, 'text/javascript; charset=utf-8', vendor);
    if (u.pathname === '/api/state') {
      state().then(
        (s) => send(200, 'application/json', JSON.stringify(s)),
        (e: Error) => send(500, 'application/json', JSON.stringify({ error: e.message })),
      );
      return;
    }
    if (u.pathname === '/api/receipt') {
      data.inspect(u.searchParams.get('hex') ?? '').then(
        (r) => send(200, 'application/json', JSON.stringify(r)),
        (e: Error) => send(500, 'application/json', JSON.stringify({ ok: false, code: 'internal', why: e.message })),
      );
      return;
    }
    send(404, 'text/plain', 'not found\n');
  }, limits);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const a = server.address() as AddressInfo;
  const h = a.family === 'IPv6' ? `[${a.address}]` : a.address;
  return {
    url: `http://${h}:${a.port}/`,
    server,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
