/**
 * `jcp demo` when it cannot run, and from another folder:
 *
 * - a --nats url that leads to a listener that never speaks NATS, or to an HTTP server, or to
 *   nothing: one line `jcp demo: error [nats-unavailable]: …` within seconds, exit 1, nothing
 *   left running, and no folder made (it used to hang after printing `jcp demo: failed: …`);
 * - a --nats url that is not loopback: `error [usage]`, exit 2, checked before anything is made;
 * - a --dir that is not empty: `error [dir-not-empty]`;
 * - run from a folder outside the repository: the workers start (they used to fail
 *   ERR_MODULE_NOT_FOUND: `--import tsx` was resolved from the working directory).
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, JCP_BIN } from '../../testkit/internal.ts';
import { jcpCommand, WorkerProc } from '../../demo/internal.ts';
import { type FakeListener, httpListener, runJcp, silentListener } from '../listeners.ts';

const dirs: string[] = [];
const listeners: FakeListener[] = [];
const tmp = (tag = 'jcp-demo-errors-') => {
  const d = mkdtempSync(join(tmpdir(), tag));
  dirs.push(d);
  return d;
};
afterAll(async () => {
  for (const l of listeners) await l.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Runs `jcp demo ...args` with its own TMPDIR (so a folder it makes can be seen) from a folder outside the repository. */
async function demoFails(args: string[]) {
  const own = tmp();
  const cwd = join(own, 'cwd');
  const tmpDir = join(own, 'tmp');
  mkdirSync(cwd);
  mkdirSync(tmpDir);
  const r = await runJcp(['demo', ...args], { cwd, env: { TMPDIR: tmpDir }, killAfterMs: 30_000 });
  // tsx keeps its cache under TMPDIR (tsx-0): only the demo's own folders count.
  return { ...r, made: readdirSync(tmpDir).filter((f) => f.startsWith('jcp-')) };
}

describe('jcp demo - a --nats that is no NATS', () => {
  for (const kind of ['silent', 'http'] as const) {
    it(`${kind === 'silent' ? 'a listener that never writes' : 'an HTTP server'}: error [nats-unavailable], exit 1 (not killed for hanging), no folder made`, async () => {
      const l = kind === 'silent' ? await silentListener() : await httpListener();
      listeners.push(l);
      const r = await demoFails(['--nats', l.url]);
      expect(r.signal).toBeNull();
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(
        `jcp demo: error [nats-unavailable]: no NATS with JetStream answers at ${l.url}: accepts connections but sent no NATS greeting within 1500 ms (is it a NATS server?)\n`,
      );
      expect(r.stdout).toBe('');
      expect(r.made).toEqual([]);
      expect(await l.drained(1_000)).toBe(true);
    });
  }

  it('nothing listens: error [nats-unavailable], exit 1; --json gets the code too', async () => {
    const url = `nats://127.0.0.1:${await freePort()}`;
    const json = join(tmp(), 'report.json');
    const r = await demoFails(['--nats', url, '--json', json]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      `jcp demo: error [nats-unavailable]: no NATS with JetStream answers at ${url}: connection refused (nothing listens there)\n`,
    );
    expect(r.made).toEqual([]);
    expect(JSON.parse(readFileSync(json, 'utf8'))).toMatchObject({ ok: false, exit_code: 1, code: 'nats-unavailable' });
  });

  it('not loopback: error [usage], exit 2, before anything is made', async () => {
    const r = await demoFails(['--nats', 'nats://10.0.0.1:4222']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /^jcp demo: error \[usage\]: --nats: expected a loopback nats:\/\/ url .*, got nats:\/\/10\.0\.0\.1:4222\nRun 'jcp demo --help'\.\n$/,
    );
    expect(r.stdout).not.toContain('Files go to');
    expect(r.made).toEqual([]);
  });

  it('a --dir that is not empty: error [dir-not-empty], exit 1', async () => {
    const d = tmp();
    writeFileSync(join(d, 'x'), 'x');
    const r = await demoFails(['--no-nats', '--dir', d]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^jcp demo: error \[dir-not-empty\]: --dir .* is not empty/);
  });
});

describe('jcp demo - from a folder outside the repository', () => {
  it('a worker process starts whatever the working directory', async () => {
    const cwd = process.cwd();
    process.chdir(tmp());
    let w: WorkerProc | undefined;
    try {
      w = new WorkerProc('w1', tmpdir(), () => {});
      expect(await w.hello()).toMatch(/^did:key:z/);
    } finally {
      process.chdir(cwd);
      await w?.stop();
    }
  });

  it('the report names jcp so that it runs from anywhere, never through npx (a registry name): node <path>', () => {
    expect(jcpCommand(process.cwd())).toBe(`node ${JCP_BIN}`);
    expect(jcpCommand(join(process.cwd(), 'harness'))).toBe(`node ${JCP_BIN}`);
    expect(jcpCommand(tmpdir())).toBe(`node ${JCP_BIN}`);
  });

  it('jcp demo --no-nats run from another folder completes, every receipt verifies', async () => {
    const cwd = tmp();
    const dir = join(tmp(), 'demo');
    const r = await runJcp(['demo', '--no-nats', '--pace', '0', '--dir', dir], { cwd, killAfterMs: 150_000 });
    expect(r.stderr).not.toContain('ERR_MODULE_NOT_FOUND');
    expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
    expect(r.stdout).toContain(`node ${JCP_BIN} receipts verify ${dir}/n1/data`);
  }, 180_000);
});
