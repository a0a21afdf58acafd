/**
 * Child-process bookkeeping shared by the harness launchers (NATS servers, enforcement nodes):
 * free loopback ports, readiness polling, and a registry that kills every child still alive when
 * the parent exits, so a test or a chaos run that crashes never leaves servers behind.
 */
import type { ChildProcess } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { linkSync, lstatSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { stdioEnvironment } from '../node/index.ts';

/**
 * The package's root folder: one level above this file in the sources (`testkit/procs.ts`), two
 * in the compiled build (`dist/testkit/procs.js`).
 */
const ROOT_URL = new URL(import.meta.url.endsWith('.ts') ? '../' : '../../', import.meta.url);

/** The `jcp` command line of this checkout or installed package (bin/jcp.mjs), for the launchers that start nodes and FROST processes. */
export const JCP_BIN: string = fileURLToPath(new URL('bin/jcp.mjs', ROOT_URL));

/**
 * tsx's loader as an absolute file URL, resolved from this package, or undefined where tsx is not
 * installed (an installed package runs compiled JavaScript and needs no loader). A bare
 * `--import tsx` is resolved from the child's working directory, so `jcp demo` run from any
 * folder but the repository failed with ERR_MODULE_NOT_FOUND.
 */
export const TSX_IMPORT: string | undefined = (() => {
  try {
    return pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
  } catch {
    return undefined;
  }
})();

/**
 * The node arguments that run `script`: `[script]` for JavaScript, `['--import', <tsx>, script]`
 * for a TypeScript source (a checkout run from its sources).
 * @throws Error naming the script when it is TypeScript and tsx is not installed.
 */
export function scriptArgv(script: string): string[] {
  if (!script.endsWith('.ts')) return [script];
  if (TSX_IMPORT === undefined)
    throw new Error(`${script} is TypeScript and tsx is not installed: run \`npm run build\` or install the dev dependencies`);
  return ['--import', TSX_IMPORT, script];
}

/**
 * Variables an agent process the project starts (the demo's workers and researcher, FROST
 * participants) inherits from the caller's environment, beside the locale that
 * `stdioEnvironment` (node/endpoint.ts) adds: what Node and a terminal need to run, and the
 * project's one non-secret switch (`JCP_FROST_GROUP`, the group arithmetic). Nothing else: no
 * token, key or cloud credential the user happens to have set (README "Why": no agent holds an
 * ambient secret).
 */
const AGENT_ENV_INHERITED = ['PATH', 'HOME', 'TERM', 'TMPDIR', 'SYSTEMROOT', 'JCP_FROST_GROUP'] as const;

/**
 * The environment of an agent process: {@link AGENT_ENV_INHERITED} and the locale from this
 * process's (as a stdio upstream gets them: `stdioEnvironment`), then `extra` (its own variables,
 * e.g. an approver's secret named for it).
 */
export function agentEnvironment(extra: Readonly<Record<string, string>> = {}): Record<string, string> {
  const base: Record<string, string> = {};
  for (const k of AGENT_ENV_INHERITED) if (process.env[k] !== undefined) base[k] = process.env[k];
  return stdioEnvironment(base, extra);
}

const live = new Set<ChildProcess>();
let hooked = false;

/**
 * Registers `child` so it is SIGKILLed if this process exits while it still runs.
 * The entry is dropped when the child exits.
 */
export function track(child: ChildProcess): void {
  live.add(child);
  child.once('exit', () => live.delete(child));
  if (!hooked) {
    hooked = true;
    process.once('exit', killAllTracked);
    for (const sig of ['SIGINT', 'SIGTERM'] as const) {
      process.once(sig, () => exitAfterInterrupt(128 + (sig === 'SIGINT' ? 2 : 15)));
    }
  }
}

const interruptCleanups = new Set<() => Promise<unknown>>();
let exiting = false;

/** How long the clean-ups registered with {@link whenInterrupted} may take before the exit, ms. */
export const INTERRUPT_CLEANUP_MS = 4_000;

/**
 * Registers `fn` to run when this process is interrupted (SIGINT/SIGTERM), after every tracked
 * child has been SIGKILLed and before the exit (for example: deleting the streams a run made on a
 * NATS server that outlives it). Clean-ups run together, bounded by {@link INTERRUPT_CLEANUP_MS};
 * a failing one is ignored. @returns the function that unregisters `fn`.
 */
export function whenInterrupted(fn: () => Promise<unknown>): () => void {
  interruptCleanups.add(fn);
  return () => interruptCleanups.delete(fn);
}

/** How long the interrupted exit waits for the SIGKILLed children to be gone before its clean-ups run, ms. */
export const INTERRUPT_REAP_MS = 1_000;

/**
 * The interrupted exit: SIGKILLs every tracked child and waits until they have exited (at most
 * {@link INTERRUPT_REAP_MS}: a child's last requests to a server are then sent, so a clean-up runs
 * after them), runs the clean-ups registered with {@link whenInterrupted}, then exits with `code`;
 * all of it within {@link INTERRUPT_CLEANUP_MS}. A second call while the first runs does nothing.
 */
export function exitAfterInterrupt(code: number): void {
  if (exiting) return;
  exiting = true;
  // A second Ctrl-C must not kill this process before its clean-ups (the listeners that brought
  // it here were `once`): it is told what is going on, and the exit comes within the bound.
  for (const sig of ['SIGINT', 'SIGTERM'] as const)
    process.on(sig, () => process.stderr.write(`jcp: still stopping (at most ${INTERRUPT_CLEANUP_MS / 1000} s after the first signal)\n`));
  const killed = [...live];
  killAllTracked();
  const gone = Promise.all(
    killed.map((c) => (c.exitCode !== null || c.signalCode !== null ? undefined : new Promise((r) => c.once('exit', r)))),
  );
  const reaped = Promise.race([gone, sleep(INTERRUPT_REAP_MS)]);
  const all = reaped.then(() => Promise.allSettled([...interruptCleanups].map((f) => f())));
  const deadline = sleep(INTERRUPT_CLEANUP_MS);
  void Promise.race([all, deadline]).finally(() => process.exit(code));
}

/** True once {@link exitAfterInterrupt} has begun: this process exits soon, and a failure it sees now is the interrupt's doing. */
export function interrupting(): boolean {
  return exiting;
}

/** SIGKILLs every tracked child that is still alive (synchronous; used on exit). */
export function killAllTracked(): void {
  for (const c of live) {
    try {
      c.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
  live.clear();
}

/** The kernel's ephemeral port range (outgoing connections draw from it); Linux default if unreadable. */
function ephemeralRange(): [number, number] {
  try {
    const [lo, hi] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (Number.isInteger(lo) && Number.isInteger(hi)) return [lo!, hi!];
  } catch {
    // not Linux, or no procfs
  }
  return [32768, 60999];
}

const handedOut = new Set<number>();

/**
 * The folder of port claims shared by every process of this user that uses the test kit: one file
 * per claimed port, named by the port and holding the claiming process's pid. A claim is linked in
 * whole (never present without its pid), so two processes (two vitest forks, two suites side by
 * side) never both claim one port; a claim whose process is gone is taken over under a lock; a
 * process removes its own claims when it exits. One ended by a signal it does not handle (vitest
 * ends its forks with SIGTERM) leaves them to be taken over: a listener for SIGINT or SIGTERM here
 * would keep a process stuck in synchronous code from dying by them.
 */
export const CLAIMS_DIR: string = join(tmpdir(), `jcp-testkit-ports-${process.getuid?.() ?? 'user'}`);
const myClaims = new Set<string>();
let claimsUsable: boolean | undefined;

/** True while a process with `pid` exists (EPERM: it exists but belongs to someone else). */
export function pidAlive(pid: number | undefined): boolean {
  if (!pid || !Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function dropClaims(): void {
  for (const f of myClaims) {
    try {
      if (holderOf(f) === process.pid) unlinkSync(f);
    } catch {
      // already gone
    }
  }
  myClaims.clear();
}

/**
 * Whether {@link CLAIMS_DIR} can be trusted with claims (made here when missing): a directory, not
 * a symbolic link, owned by this user, closed to everyone else. Decided once per process; when it
 * cannot, ports are not claimed across processes and one line on stderr says why.
 */
function claimsFolder(): boolean {
  if (claimsUsable !== undefined) return claimsUsable;
  try {
    try {
      mkdirSync(CLAIMS_DIR, { mode: 0o700 });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    const st = lstatSync(CLAIMS_DIR);
    const uid = process.getuid?.();
    claimsUsable = st.isDirectory() && (uid === undefined || st.uid === uid) && (st.mode & 0o077) === 0;
  } catch {
    claimsUsable = false;
  }
  if (!claimsUsable)
    process.stderr.write(`jcp testkit: ports are not claimed across processes: ${CLAIMS_DIR} is not a folder of this user's alone\n`);
  return claimsUsable;
}

/**
 * Links a file holding this process's pid in at `file`, so `file` never exists without its pid.
 * @returns false when `file` exists. @throws the file system's error otherwise.
 */
function linkClaim(file: string): boolean {
  const tmp = `${file}.${process.pid}.${randomInt(2 ** 40)}.tmp`;
  writeFileSync(tmp, String(process.pid), { flag: 'wx', mode: 0o600 });
  try {
    linkSync(tmp, file);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw e;
  } finally {
    unlinkSync(tmp);
  }
}

/** The pid in claim `file`, or NaN when it is gone or unreadable. */
function holderOf(file: string): number {
  try {
    return Number.parseInt(readFileSync(file, 'utf8'), 10);
  } catch {
    return Number.NaN;
  }
}

/**
 * Takes over claim `file`, whose process `holder` is gone, under the lock `<file>.takeover`: the
 * claim is removed only if it still names `holder`. A lock is removed only by the process that
 * holds it, so one left by a process killed mid-takeover (a few microseconds) keeps that one port
 * from this folder's claims for good. @returns whether this process now holds the claim; false
 * when another process holds the lock or claimed the port first.
 */
function takeOver(file: string, holder: number): boolean {
  const lock = `${file}.takeover`;
  if (!linkClaim(lock)) return false;
  try {
    if (holderOf(file) !== holder) return false;
    unlinkSync(file);
    return linkClaim(file);
  } finally {
    try {
      unlinkSync(lock);
    } catch {
      // cannot happen while only its holder removes it
    }
  }
}

/**
 * Claims `port` for this process across processes ({@link CLAIMS_DIR}). True when claimed, or
 * when claims cannot be kept here at all (an untrusted folder: only this process's own record then
 * applies, or a file system error other than a missing folder: one stderr line says so); false
 * when a live process holds it or is taking it over.
 */
export function claimPort(port: number): boolean {
  if (!claimsFolder()) return true;
  const file = join(CLAIMS_DIR, String(port));
  try {
    if (!linkClaim(file)) {
      const holder = holderOf(file);
      if (Number.isNaN(holder) || pidAlive(holder) || !takeOver(file, holder)) return false;
    }
  } catch (e) {
    // The folder removed since it was checked (a temporary-file cleaner): check it again next time.
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') {
      claimsUsable = undefined;
      return false;
    }
    // Any other error would fail every claim, and freePort would fall back to the ephemeral range.
    claimsUsable = false;
    process.stderr.write(`jcp testkit: ports are not claimed across processes: ${(e as Error).message}\n`);
    return true;
  }
  if (myClaims.size === 0) process.once('exit', dropClaims);
  myClaims.add(file);
  return true;
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/**
 * A free TCP port on 127.0.0.1 for a server a child process will bind. Chosen below the kernel's
 * ephemeral range: a port found free inside that range can be taken by any outgoing connection
 * (a NATS client, a load generator) before the child binds it, which failed a cluster start with
 * EADDRINUSE. Never hands out the same port twice in one process, nor a port another process using
 * the test kit holds ({@link claimPort}: two suites side by side collided without it); falls back to binding port 0.
 */
export async function freePort(): Promise<number> {
  const [lo] = ephemeralRange();
  const base = 20_000;
  if (lo - base >= 2_000) {
    for (let i = 0; i < 100; i++) {
      const port = base + randomInt(lo - base);
      if (handedOut.has(port) || !(await canListen(port))) continue;
      handedOut.add(port);
      if (!claimPort(port)) continue;
      return port;
    }
  }
  return await new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/**
 * Polls `probe` every `everyMs` until it resolves true or `timeoutMs` passes.
 * @throws Error naming `what` on timeout.
 */
export async function waitUntil(probe: () => Promise<boolean>, what: string, timeoutMs = 15_000, everyMs = 50): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      if (await probe()) return;
    } catch (e) {
      last = e;
    }
    await sleep(everyMs);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
}

/**
 * Stops `child`: SIGCONT (in case it is paused), SIGTERM, then SIGKILL after `graceMs`.
 * Resolves once the process has exited.
 */
export async function stopChild(child: ChildProcess, graceMs = 3_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    child.kill('SIGCONT');
    child.kill('SIGTERM');
  } catch {
    // already gone
  }
  const timer = setTimeout(() => {
    try {
      child.kill('SIGKILL');
    } catch {
      // already gone
    }
  }, graceMs);
  await exited;
  clearTimeout(timer);
}

/** SIGKILLs `child` and resolves once it has exited. */
export async function killChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGKILL');
  await exited;
}
