/**
 * The test kit's `freePort` across processes: two processes (two vitest forks, or two suites run
 * side by side) must not be handed the same port while neither has bound it yet. Before ports were
 * claimed across processes, a cluster node failed to listen with EADDRINUSE when another process
 * had been handed its port (chaos-regions, seed r10, run beside a second suite).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CLAIMS_DIR, claimPort, freePort, scriptArgv, track } from '../../testkit/internal.ts';

const FIXTURE = fileURLToPath(new URL('./fixtures/claim-ports.ts', import.meta.url));
const claimed = (port: number): boolean => existsSync(join(CLAIMS_DIR, String(port)));
/** A port below the range freePort draws from, so no test kit process claims it on its own. */
const ASIDE = 19_999;

/** Starts the fixture claiming `count` ports; resolves with its ports and a function that ends it. */
async function claimElsewhere(
  count: number,
): Promise<{ ports: number[]; pid: number; child: ChildProcess; end: () => Promise<number | null> }> {
  const child = spawn(process.execPath, [...scriptArgv(FIXTURE), String(count)], { stdio: ['pipe', 'pipe', 'inherit'] });
  track(child);
  let out = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (s: string) => {
    out += s;
  });
  while (!out.includes('\n')) {
    const [what] = await Promise.race([once(child.stdout, 'data'), once(child, 'exit').then(() => ['exit'])]);
    if (what === 'exit') throw new Error(`fixture exited before printing its ports: ${out}`);
  }
  const ports = JSON.parse(out.slice(0, out.indexOf('\n'))) as number[];
  const end = async (): Promise<number | null> => {
    const exited = once(child, 'exit');
    child.stdin.end('done\n');
    const [code] = await exited;
    return code as number | null;
  };
  return { ports, pid: child.pid ?? 0, child, end };
}

describe('freePort across processes', () => {
  it('never hands another process a port this one holds, nor one it holds to this one', async () => {
    const mine: number[] = [];
    for (let i = 0; i < 400; i++) mine.push(await freePort());
    expect(new Set(mine).size).toBe(400);
    const other = await claimElsewhere(400);
    try {
      expect(other.ports).toHaveLength(400);
      expect(other.ports.filter((p) => mine.includes(p))).toEqual([]);
      const after: number[] = [];
      for (let i = 0; i < 400; i++) after.push(await freePort());
      expect(after.filter((p) => other.ports.includes(p))).toEqual([]);
      expect(mine.every(claimed)).toBe(true);
      expect(other.ports.every(claimed)).toBe(true);
    } finally {
      expect(await other.end()).toBe(0);
    }
    expect(other.ports.filter(claimed)).toEqual([]);
  }, 60_000);

  it('drops its claims when it is stopped by SIGTERM, having started no child', async () => {
    const other = await claimElsewhere(20);
    expect(other.ports.every(claimed)).toBe(true);
    const exited = once(other.child, 'exit');
    other.child.kill('SIGTERM');
    const [code] = await exited;
    expect(code).toBe(128 + 15);
    expect(other.ports.filter(claimed)).toEqual([]);
  });

  it("takes over a claim whose process is gone, and leaves a live process's claim alone", async () => {
    const file = join(CLAIMS_DIR, String(ASIDE));
    const gone = spawn(process.execPath, ['-e', '']);
    const [code] = await once(gone, 'exit');
    expect(code).toBe(0);
    const other = await claimElsewhere(1);
    try {
      writeFileSync(file, String(other.pid));
      expect(claimPort(ASIDE)).toBe(false);
      expect(readFileSync(file, 'utf8')).toBe(String(other.pid));
      writeFileSync(file, String(gone.pid));
      expect(claimPort(ASIDE)).toBe(true);
      expect(readFileSync(file, 'utf8')).toBe(String(process.pid));
    } finally {
      rmSync(file, { force: true });
      await other.end();
    }
  });
});
