/**
 * The package as a stranger gets it: the current sources are built and packed (`npm pack`) in a
 * staging copy of the repository (the worktree's own dist/ is left alone, other tests may be
 * running it), the tarball is installed with `npm install -g --prefix <tmp>` (dependencies from
 * the npm cache: `--prefer-offline`, so no network once the cache holds them), and the installed
 * `jcp` is run from a folder outside the repository, with nothing of the repository on its
 * module path: a run-time import missing from `dependencies` fails here.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, stopChild, track } from '../../testkit/index.ts';

const exec = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '..', '..');
const work = mkdtempSync(path.join(tmpdir(), 'jcp-pkg-'));
const stage = path.join(work, 'stage');
const prefix = path.join(work, 'prefix');
const home = path.join(work, 'home');
const installed = path.join(prefix, 'lib', 'node_modules', 'jcp-cluster');
/** The environment of every installed run: the prefix's bin first, no repository on any path. */
const env = (): NodeJS.ProcessEnv => {
  const { JCP_DEBUG: _d, NODE_PATH: _n, NODE_OPTIONS: _o, ...rest } = process.env;
  const PATH = [path.join(prefix, 'bin'), ...(rest['PATH'] ?? '').split(path.delimiter).filter((d) => !d.includes('node_modules'))];
  return { ...rest, PATH: PATH.join(path.delimiter) };
};
const npm = (args: string[], cwd: string) => exec('npm', [...args, '--no-audit', '--no-fund'], { cwd, env: env(), maxBuffer: 1 << 24 });
const jcp = (args: string[]) => exec(path.join(prefix, 'bin', 'jcp'), args, { cwd: home, env: env() });
let tarball = '';

/** Every file under `dir`, relative to it. */
function walk(dir: string, base = dir, out: string[] = []): string[] {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p, base, out);
    else out.push(path.relative(base, p));
  }
  return out;
}

beforeAll(async () => {
  // A staging copy of the sources with the worktree's node_modules (tsc), built and packed there.
  const skip = new Set(['node_modules', 'dist', '.git', '.data', '.scratch', 'coverage', 'test-artifacts']);
  cpSync(ROOT, stage, { recursive: true, filter: (src) => !skip.has(path.basename(src)) || path.dirname(src) !== ROOT });
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(stage, 'node_modules'));
  mkdirSync(home);
  const packed = await npm(['pack', '--json', '--pack-destination', work], stage);
  const [info] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf('['))) as Array<{ filename: string }>;
  tarball = path.join(work, info!.filename);
  await npm(['install', '-g', '--prefix', prefix, '--prefer-offline', tarball], home);
}, 600_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('the packed and installed package', () => {
  it('ships compiled JavaScript with declarations and no TypeScript source, test, bench or dev-only dependency', () => {
    const files = walk(installed).filter((f) => !f.startsWith(`node_modules${path.sep}`));
    expect(files.filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))).toEqual([]);
    expect(files.filter((f) => /^(test|bench|scripts|mutants|testkit)\//.test(f))).toEqual([]);
    for (const f of [
      'dist/cli/main.js',
      'dist/cli/main.d.ts',
      'dist/client/library.d.ts',
      'dist/node/worker.js',
      'node/worker.mjs',
      'dist/node/snapshotchild.js',
      'node/snapshotproc.mjs',
      'bin/jcp.mjs',
    ])
      expect(files).toContain(f);
    const pkg = JSON.parse(readFileSync(path.join(installed, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    expect(Object.keys(pkg.dependencies)).not.toContain('tsx');
    expect(existsSync(path.join(installed, 'node_modules', 'tsx'))).toBe(false);
  });

  it('jcp --help lists the commands', async () => {
    const { stdout } = await jcp(['--help']);
    expect(stdout).toMatch(/^Usage: jcp <command>/);
    for (const c of ['node', 'bridge', 'key', 'init', 'demo']) expect(stdout).toMatch(new RegExp(`^  ${c} `, 'm'));
  });

  it('jcp key new writes a key file and prints its did:key', async () => {
    const out = path.join(home, 'agent.key');
    const { stdout } = await jcp(['key', 'new', '--out', out]);
    expect(stdout.trim()).toMatch(/^did:key:z6Mk\w+$/);
    expect(existsSync(out)).toBe(true);
  });

  it('jcp node start on an empty folder listens, then stops on SIGTERM', async () => {
    const data = path.join(home, 'node-data');
    const child: ChildProcess = spawn(path.join(prefix, 'bin', 'jcp'), ['node', 'start', '--data', data, '--listen', '127.0.0.1:0'], {
      cwd: home,
      env: env(),
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    track(child);
    let err = '';
    const up = new Promise<void>((resolve) => {
      child.stderr?.setEncoding('utf8').on('data', (d: string) => {
        err += d;
        if (/listening on 127\.0\.0\.1:\d+/.test(err)) resolve();
      });
      child.once('exit', () => resolve());
    });
    try {
      await up;
      expect(err).toMatch(/listening on 127\.0\.0\.1:\d+/);
    } finally {
      await stopChild(child);
    }
    expect([child.exitCode, child.signalCode], err).toEqual([0, null]);
    expect(existsSync(path.join(data, 'steward.key'))).toBe(true);
  });

  it('jcp init with the installed filesystem server: the printed node command and MCP entry call a tool, decided and sealed', async () => {
    const shared = path.join(home, 'shared');
    mkdirSync(shared);
    writeFileSync(path.join(shared, 'hello.txt'), 'hello from the tarball\n');
    const fsServer = path.join(installed, 'node_modules', '@modelcontextprotocol', 'server-filesystem', 'dist', 'index.js');
    const setup = path.join(home, 'setup');
    const listen = `127.0.0.1:${await freePort()}`;
    const init = await jcp(['init', setup, '--upstream', `files=${process.execPath} ${fsServer} ${shared}`, '--listen', listen]);
    const lines = init.stdout.split('\n');
    const linesAfter = (label: string) => lines.slice(lines.findIndex((l) => l.startsWith(label)) + 1);
    const nodeLine = linesAfter('Start the node')[0]!.trim();
    expect(nodeLine).toMatch(/jcp node start --config \/\S+\/node\.json$/);
    const child: ChildProcess = spawn('sh', ['-c', `exec ${nodeLine}`], { cwd: home, env: env(), stdio: ['ignore', 'ignore', 'pipe'] });
    track(child);
    let err = '';
    try {
      await new Promise<void>((resolve, reject) => {
        child.stderr?.setEncoding('utf8').on('data', (d: string) => {
          err += d;
          if (err.includes('jcp node: resource files')) resolve();
        });
        child.once('exit', (code) => reject(new Error(`node exited ${code}: ${err}`)));
      });
      const block = linesAfter('Claude Desktop');
      const json = block
        .slice(
          0,
          block.findIndex((l) => l.trim() === ''),
        )
        .join('\n');
      const entry = (JSON.parse(json) as { mcpServers: Record<string, { command: string; args: string[] }> }).mcpServers['jcp']!;
      // A host's PATH may be minimal: the entry names the node binary and the installed bin absolutely.
      expect(path.isAbsolute(entry.command)).toBe(true);
      expect(entry.args[0]).toContain(installed);
      const client = new Client({ name: 'pkg-test', version: '1' });
      await client.connect(
        new StdioClientTransport({ command: entry.command, args: entry.args, cwd: home, env: env() as Record<string, string> }),
      );
      try {
        const r = await client.callTool({ name: 'read_text_file', arguments: { path: path.join(shared, 'hello.txt') } });
        expect((r.content as Array<{ text?: string }>)[0]?.text).toContain('hello from the tarball');
        expect(r._meta?.['jcp/verdict']).toBe('allow');
        expect(typeof r._meta?.['jcp/receipt']).toBe('string');
      } finally {
        await client.close();
      }
    } finally {
      await stopChild(child);
    }
  }, 120_000);

  it('jcp bridge --help prints its usage', async () => {
    const { stdout } = await jcp(['bridge', '--help']);
    expect(stdout).toMatch(/^Usage: jcp bridge --node host:port/);
  });

  it('npx runs the bin from the tarball (npm exec --package <tarball> -- jcp bridge --help)', async () => {
    const npx = path.join(homedir(), '.npm', '_npx');
    const before = new Set(existsSync(npx) ? readdirSync(npx) : []);
    try {
      const { stdout } = await npm(['exec', '--yes', '--prefer-offline', '--package', tarball, '--', 'jcp', 'bridge', '--help'], home);
      expect(stdout).toMatch(/^Usage: jcp bridge --node host:port/);
    } finally {
      // npx keeps what it installed under the npm cache: drop this run's entry, and only it (the
      // one whose package.json names this tarball): another run of this suite on the same machine
      // may be using an entry it made meanwhile, and removing that failed its npx.
      const ours = (e: string) => {
        try {
          return readFileSync(path.join(npx, e, 'package.json'), 'utf8').includes(path.basename(path.dirname(tarball)));
        } catch {
          return false;
        }
      };
      for (const e of existsSync(npx) ? readdirSync(npx) : [])
        if (!before.has(e) && ours(e)) rmSync(path.join(npx, e), { recursive: true, force: true });
    }
  });
});
