/**
 * Fake loopback listeners for the tests of what the CLI and the harness do when a url leads to
 * something that is not NATS: a listener that accepts TCP and never writes, one that answers like
 * an HTTP server, and a child-process runner for `jcp` with a deadline.
 */
import { spawn } from 'node:child_process';
import { createServer, type Server, type Socket } from 'node:net';
import { JCP_BIN } from '../testkit/internal.ts';

/** A loopback TCP listener; `open` counts the connections still open on the server side. */
export interface FakeListener {
  readonly port: number;
  readonly url: string;
  /** Connections accepted so far. */
  accepted: number;
  /** Connections open now (the server side has not seen them close). */
  readonly open: () => number;
  /** Resolves once no connection is open, or false after `ms`. */
  readonly drained: (ms: number) => Promise<boolean>;
  readonly close: () => Promise<void>;
}

/** Starts a listener on 127.0.0.1 that runs `onConnection` for every client (default: never writes). */
export async function fakeListener(onConnection: (s: Socket) => void = () => {}): Promise<FakeListener> {
  const sockets = new Set<Socket>();
  const l = { accepted: 0 } as { accepted: number };
  const server: Server = createServer((s) => {
    l.accepted++;
    sockets.add(s);
    s.on('error', () => {});
    s.once('close', () => sockets.delete(s));
    onConnection(s);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return Object.assign(l, {
    port,
    url: `nats://127.0.0.1:${port}`,
    open: () => sockets.size,
    drained: async (ms: number) => {
      const deadline = Date.now() + ms;
      while (sockets.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      return sockets.size === 0;
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  });
}

/** A listener that accepts TCP and never says anything. */
export const silentListener = (): Promise<FakeListener> => fakeListener();

/** A listener that answers any connection like an HTTP server that got garbage (and keeps the connection). */
export const httpListener = (): Promise<FakeListener> =>
  fakeListener((s) => {
    s.on('data', () => s.write('HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n'));
  });

/** The outcome of one `jcp` run. */
export interface JcpRun {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs `node bin/jcp.mjs ...args` as a child process; SIGKILLs it after `killAfterMs` (the result
 * then has `signal: 'SIGKILL'`), so a command that hangs fails the test instead of hanging it.
 */
export function runJcp(
  args: readonly string[],
  opts: { cwd?: string; env?: NodeJS.ProcessEnv; killAfterMs?: number } = {},
): Promise<JcpRun> {
  const child = spawn(process.execPath, [JCP_BIN, ...args], {
    cwd: opts.cwd ?? process.cwd(),
    env: { ...process.env, ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    stdout += d;
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    stderr += d;
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.killAfterMs ?? 30_000);
  return new Promise((resolve) => {
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/**
 * What a bounded HTTP listener on loopback `port` (io/httplimits.ts, `maxPerPeer` = `bound`) does
 * with `bound` + 1 connections from 127.0.0.1: `extraClosed` (the last one is closed within a
 * second), `heldOpen` (the first `bound` still are) and `otherServed` (the HTTP status a GET of
 * `path` from 127.0.0.2 gets meanwhile, 0 for none). Closes every connection it opened.
 */
export async function perPeerBound(
  port: number,
  bound: number,
  path = '/',
): Promise<{ extraClosed: boolean; heldOpen: boolean; otherServed: number }> {
  const { connect: tcp } = await import('node:net');
  const { get } = await import('node:http');
  const socks: Socket[] = [];
  const openOne = () =>
    new Promise<{ closed: Promise<void> }>((resolve, reject) => {
      const s = tcp({ host: '127.0.0.1', port, localAddress: '127.0.0.1' });
      socks.push(s);
      const closed = new Promise<void>((r) => s.once('close', () => r()));
      s.once('error', reject);
      s.once('connect', () => {
        s.removeListener('error', reject);
        s.on('error', () => {});
        resolve({ closed });
      });
    });
  const within = (p: Promise<void>, ms: number) =>
    Promise.race([p.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);
  try {
    const held = [];
    for (let i = 0; i < bound; i++) held.push(await openOne());
    await new Promise((r) => setTimeout(r, 50));
    const extraClosed = await within((await openOne()).closed, 1000);
    const heldOpen = !(await Promise.all(held.map((h) => within(h.closed, 50)))).some((c) => c);
    const otherServed = await new Promise<number>((resolve) => {
      get({ host: '127.0.0.1', port, path, localAddress: '127.0.0.2', agent: false }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      }).on('error', () => resolve(0));
    });
    return { extraClosed, heldOpen, otherServed };
  } finally {
    for (const s of socks) s.destroy();
  }
}
