/**
 * The test kit's `freePort` across processes: two processes (two vitest forks, or two suites run
 * side by side) must not be handed the same port while neither has bound it yet. Before ports were
 * claimed across processes, a cluster node failed to listen with EADDRINUSE when another process
 * had been handed its port (chaos-regions, seed r10, run beside a second suite).
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CLAIMS_DIR, claimPort, freePort, scriptArgv, track } from '../../testkit/internal.ts';

const FIXTURE = fileURLToPath(new URL('./fixtures/claim-ports.ts', import.meta.url));
const claimed = (port: number): boolean => existsSync(join(CLAIMS_DIR, String(port)));
/** A port below the range freePort draws from, so no test kit process claims it on its own. */
const ASIDE = 19_999;

interface Fixture {
  readonly pid: number;
  /** The next line the fixture prints. @throws when it exits first. */
  line(): Promise<string>;
  /** Sends a line. */
  send(s: string): void;
  /** What it wrote to stderr so far. */
  stderr(): string;
  /** Asks it to exit; resolves with its exit code. */
  end(): Promise<number | null>;
  /** Sends it `signal`; resolves with its exit code and signal. */
  kill(signal: NodeJS.Signals): Promise<[number | null, NodeJS.Signals | null]>;
}

/** Starts test/testkit/fixtures/claim-ports.ts with `args` (and `env` over this process's). */
function fixture(args: string[], env: Record<string, string> = {}): Fixture {
  const child = spawn(process.execPath, [...scriptArgv(FIXTURE), ...args], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  track(child);
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (s: string) => {
    out += s;
  });
  child.stderr.setEncoding('utf8').on('data', (s: string) => {
    err += s;
  });
  const exited = once(child, 'exit');
  return {
    pid: child.pid ?? 0,
    async line() {
      while (!out.includes('\n')) {
        const [what] = await Promise.race([once(child.stdout, 'data'), exited.then(() => ['exit'])]);
        if (what === 'exit' && !out.includes('\n')) throw new Error(`fixture exited before a line: ${out} ${err}`);
      }
      const l = out.slice(0, out.indexOf('\n'));
      out = out.slice(l.length + 1);
      return l;
    },
    stderr: () => err,
    send(s) {
      child.stdin.write(`${s}\n`);
    },
    async end() {
      child.stdin.end('done\n');
      const [code] = await exited;
      return code as number | null;
    },
    async kill(signal) {
      child.kill(signal);
      const [code, sig] = await exited;
      return [code as number | null, sig as NodeJS.Signals | null];
    },
  };
}

/** Two fixtures racing with `claimPort` for ports [from, to] in claims folder under `tmp`; resolves with what each holds. */
async function race(tmp: string, from: number, to: number): Promise<[number[], number[]]> {
  const racers = [0, 1].map(() => fixture(['race', String(from), String(to)], { TMPDIR: tmp }));
  try {
    for (const r of racers) expect(await r.line()).toBe('ready');
    for (const r of racers) r.send('go');
    const [a, b] = await Promise.all(racers.map(async (r) => JSON.parse(await r.line()) as number[]));
    return [a!, b!];
  } finally {
    for (const r of racers) await r.end();
  }
}

describe('freePort across processes', () => {
  it('never hands another process a port this one holds, nor one it holds to this one', async () => {
    const mine: number[] = [];
    for (let i = 0; i < 400; i++) mine.push(await freePort());
    expect(new Set(mine).size).toBe(400);
    const other = fixture(['400']);
    const theirs = JSON.parse(await other.line()) as number[];
    try {
      expect(theirs).toHaveLength(400);
      expect(theirs.filter((p) => mine.includes(p))).toEqual([]);
      const after: number[] = [];
      for (let i = 0; i < 400; i++) after.push(await freePort());
      expect(after.filter((p) => theirs.includes(p))).toEqual([]);
      expect(mine.every(claimed)).toBe(true);
      expect(theirs.every(claimed)).toBe(true);
    } finally {
      expect(await other.end()).toBe(0);
    }
    expect(theirs.filter(claimed)).toEqual([]);
  }, 60_000);

  it('gives each port to one of two processes claiming the same ports at once, stale claims or none', async () => {
    const tmp = mkdtempSync(join(tmpdir(), 'jcp-ports-race-'));
    try {
      const dir = join(tmp, `jcp-testkit-ports-${process.getuid?.() ?? 'user'}`);
      const [a, b] = await race(tmp, 10_000, 12_999);
      expect(a.filter((p) => b.includes(p))).toEqual([]);
      expect(a.length + b.length).toBe(3000);
      // Both exited normally: no claim, temporary file or lock is left.
      expect(readdirSync(dir)).toEqual([]);
      // Every port claimed again, by a process that is gone: between them, the racers take over all.
      const gone = spawn(process.execPath, ['-e', '']);
      await once(gone, 'exit');
      for (let p = 10_000; p <= 12_999; p++) writeFileSync(join(dir, String(p)), String(gone.pid));
      // The first 100 also hold a takeover lock its process left (killed mid-takeover): those stay out of reach.
      for (let p = 10_000; p < 10_100; p++) writeFileSync(join(dir, `${p}.takeover`), String(gone.pid));
      const [c, d] = await race(tmp, 10_000, 12_999);
      expect(c.filter((p) => d.includes(p))).toEqual([]);
      expect(c.length + d.length).toBe(2900);
      expect([...c, ...d].every((p) => p >= 10_100)).toBe(true);
      expect(readdirSync(dir).length).toBe(200);
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  }, 60_000);

  it('leaves how a signal ends it as it was: by the signal, or as its own handler says', async () => {
    const f = fixture(['20']);
    const ports = JSON.parse(await f.line()) as number[];
    expect(ports.every(claimed)).toBe(true);
    expect(await f.kill('SIGTERM')).toEqual([null, 'SIGTERM']);
    // Its claims stay, naming a process that is gone: the next claim takes one over.
    expect(ports.every(claimed)).toBe(true);
    expect(claimPort(ports[0]!)).toBe(true);
    expect(readFileSync(join(CLAIMS_DIR, String(ports[0])), 'utf8')).toBe(String(process.pid));
    // A process with its own SIGTERM handler keeps it, and drops its claims as it exits.
    const g = fixture(['20', 'graceful']);
    const theirs = JSON.parse(await g.line()) as number[];
    expect(await g.kill('SIGTERM')).toEqual([0, null]);
    expect(theirs.filter(claimed)).toEqual([]);
  });

  it("takes over a claim whose process is gone, and leaves a live process's claim alone", async () => {
    const file = join(CLAIMS_DIR, String(ASIDE));
    const gone = spawn(process.execPath, ['-e', '']);
    const [code] = await once(gone, 'exit');
    expect(code).toBe(0);
    const other = fixture(['1']);
    await other.line();
    try {
      writeFileSync(file, String(other.pid));
      expect(claimPort(ASIDE)).toBe(false);
      expect(readFileSync(file, 'utf8')).toBe(String(other.pid));
      // A claim read before its pid is in it (an empty file) is not taken for a stale one.
      writeFileSync(file, '');
      expect(claimPort(ASIDE)).toBe(false);
      writeFileSync(file, String(gone.pid));
      expect(claimPort(ASIDE)).toBe(true);
      expect(readFileSync(file, 'utf8')).toBe(String(process.pid));
    } finally {
      rmSync(file, { force: true });
      await other.end();
    }
  });

  it('claims nothing in a folder that is a link, or open to other users, and says so', async () => {
    for (const make of ['link', 'open'] as const) {
      const tmp = mkdtempSync(join(tmpdir(), 'jcp-ports-trust-'));
      try {
        const dir = join(tmp, `jcp-testkit-ports-${process.getuid?.() ?? 'user'}`);
        const target = join(tmp, 'elsewhere');
        mkdirSync(target, { mode: 0o700 });
        writeFileSync(join(target, '10000'), 'precious');
        if (make === 'link') symlinkSync(target, dir);
        else {
          mkdirSync(dir);
          chmodSync(dir, 0o777);
        }
        const f = fixture(['race', '10000', '10004'], { TMPDIR: tmp });
        expect(await f.line()).toBe('ready');
        f.send('go');
        // Unclaimed across processes, every port is this process's own.
        expect(JSON.parse(await f.line())).toEqual([10_000, 10_001, 10_002, 10_003, 10_004]);
        await f.end();
        expect(f.stderr()).toContain('ports are not claimed across processes');
        expect(readFileSync(join(target, '10000'), 'utf8')).toBe('precious');
        expect(existsSync(join(target, '10001'))).toBe(false);
        if (make === 'open') expect(existsSync(join(dir, '10001'))).toBe(false);
      } finally {
        rmSync(tmp, { recursive: true, force: true });
      }
    }
  });
});
