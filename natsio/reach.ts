/**
 * Does a NATS url lead to a NATS server? A NATS server greets every client first, with one
 * `INFO {…}\r\n` line, before the client says anything. {@link natsGreeting} opens a TCP
 * connection of its own, waits for that line, and always destroys the socket.
 *
 * Why this exists: `@nats-io/transport-node` (3.4) leaves its socket open when `connect()` gives
 * up waiting for the greeting (its transport's `close()` does nothing on a connection that never
 * completed). Against a listener that accepts TCP but never speaks NATS (a silent port, an HTTP
 * server) every `connect()` attempt leaked a socket that kept the process alive forever: `jcp
 * channel audit` and `jcp demo --nats …` printed their failure (or nothing) and never exited.
 * Callers probe with this first and never hand `connect()` a server that accepted without
 * greeting ({@link greetingServers}: `usable`).
 */
import { connect as tcpConnect } from 'node:net';

export { NATS_UNAVAILABLE, NatsUnavailable } from './errors.ts';

/**
 * The outcome of {@link natsGreeting}. A failure is `down` when nothing held the connection open
 * (refused, reset, hung up: the NATS client fails fast there and leaks nothing), `foreign` when
 * something accepted and then said nothing or something else (the NATS client would leak its
 * socket there).
 */
export type Greeting = { readonly ok: true } | { readonly ok: false; readonly why: string; readonly kind: 'down' | 'foreign' };

/** Host and port of a NATS url (`nats://h:p`, `tls://h:p`, or bare `h:p`; port 4222 by default). Undefined if it does not parse. */
export function natsHostPort(url: string): { host: string; port: number } | undefined {
  let u: URL;
  try {
    u = new URL(url.includes('://') ? url : `nats://${url}`);
  } catch {
    return undefined;
  }
  const host = u.hostname.replace(/^\[(.*)\]$/, '$1');
  if (host === '') return undefined;
  const port = u.port === '' ? 4222 : Number(u.port);
  if (!Number.isInteger(port) || port < 1 || port > 65_535) return undefined;
  return { host, port };
}

/** `bytes` as printable text for a message: control characters escaped, at most 40 characters. */
function shown(bytes: Buffer): string {
  const text = bytes.subarray(0, 40).toString('latin1');
  return JSON.stringify(text);
}

/**
 * Connects to `url` and resolves `{ok: true}` once the server's first line starts with `INFO `,
 * else `{ok: false, why}` (refused, closed, something else said, or no greeting within
 * `timeoutMs`). Never rejects; the socket is destroyed in every case, also when `signal` aborts.
 */
export function natsGreeting(url: string, timeoutMs = 1_500, signal?: AbortSignal): Promise<Greeting> {
  const hp = natsHostPort(url);
  if (hp === undefined) return Promise.resolve({ ok: false, why: `not a NATS url: ${url}`, kind: 'foreign' });
  if (signal?.aborted) return Promise.resolve({ ok: false, why: 'aborted', kind: 'down' });
  return new Promise<Greeting>((resolve) => {
    let got = Buffer.alloc(0);
    let connected = false;
    const socket = tcpConnect({ host: hp.host, port: hp.port });
    const finish = (g: Greeting) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      socket.removeAllListeners();
      socket.on('error', () => {});
      socket.destroy();
      resolve(g);
    };
    const onAbort = () => finish({ ok: false, why: 'aborted', kind: 'down' });
    const timer = setTimeout(
      () =>
        finish({
          ok: false,
          why: connected
            ? got.length === 0
              ? `accepts connections but sent no NATS greeting within ${timeoutMs} ms (is it a NATS server?)`
              : `answered ${shown(got)}…, not a NATS greeting`
            : `no connection within ${timeoutMs} ms`,
          kind: 'foreign',
        }),
      timeoutMs,
    );
    signal?.addEventListener('abort', onAbort, { once: true });
    socket.once('connect', () => {
      connected = true;
    });
    socket.on('data', (d: Buffer) => {
      got = Buffer.concat([got, d]);
      const nl = got.indexOf(0x0a);
      const head = got.subarray(0, 5).toString('latin1');
      if (!'INFO '.startsWith(head)) {
        finish({ ok: false, why: `answered ${shown(got)}, not a NATS greeting (is it a NATS server?)`, kind: 'foreign' });
      } else if (nl >= 0 || got.length >= 64 * 1024) {
        finish(nl >= 0 ? { ok: true } : { ok: false, why: 'sent an over-long first line, not a NATS greeting', kind: 'foreign' });
      }
    });
    socket.once('error', (e: NodeJS.ErrnoException) => {
      finish({ ok: false, why: e.code === 'ECONNREFUSED' ? 'connection refused (nothing listens there)' : e.message, kind: 'down' });
    });
    socket.once('close', () => {
      finish(
        got.length === 0
          ? { ok: false, why: 'closed the connection without a NATS greeting', kind: 'down' }
          : { ok: false, why: `closed the connection after ${shown(got)}`, kind: 'foreign' },
      );
    });
  });
}

/**
 * Probes every url of `servers` at once. Resolves to the urls that greeted, the urls safe to hand
 * the NATS client (all but the `foreign` ones: a server that is down now stays in the list so the
 * client can reconnect to it later), both in the given order, and why for each that did not greet
 * (`url: why`).
 */
export async function greetingServers(
  servers: readonly string[],
  timeoutMs = 1_500,
  signal?: AbortSignal,
): Promise<{ greeted: string[]; usable: string[]; problems: string[] }> {
  const results = await Promise.all(servers.map((s) => natsGreeting(s, timeoutMs, signal)));
  const greeted: string[] = [];
  const usable: string[] = [];
  const problems: string[] = [];
  results.forEach((g, i) => {
    const s = servers[i]!;
    if (g.ok) greeted.push(s);
    else problems.push(`${s}: ${g.why}`);
    if (g.ok || g.kind === 'down') usable.push(s);
  });
  return { greeted, usable, problems };
}
