/**
 * `jcp node start` and signals: a supervisor that sends SIGTERM the moment it reads the
 * "listening on" line gets a graceful stop (exit 0), never death by the signal. The handlers must
 * be in place before the banner is written: here the signal is sent from inside the banner's own
 * write, which is the race a loaded machine produced (test/pkg saw `[null, 'SIGTERM']`). The same
 * for `jcp bridge --http` and its listening line on stdout.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { writeChainFile } from '../../client/index.ts';
import { writeKeyFile } from '../../node/index.ts';
import { cast, liveNode, mint } from './fixtures.ts';

const { rng, alice, bob } = cast('signals');
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/**
 * A script for `node --import tsx -e` that runs `jcp argv` in-process and sends itself SIGTERM from
 * inside the first write to `stream` that contains `needle`: the moment a supervisor reading that
 * stream would see it.
 */
function signalOnLine(stream: 'stdout' | 'stderr', needle: string, argv: readonly string[]): string {
  return `
const write = process.${stream}.write.bind(process.${stream});
let sent = false;
process.${stream}.write = (chunk, ...rest) => {
  const r = write(chunk, ...rest);
  if (!sent && String(chunk).includes(${JSON.stringify(needle)})) {
    sent = true;
    process.kill(process.pid, 'SIGTERM');
  }
  return r;
};
const { main } = await import('./cli/main.ts');
process.exitCode = await main(${JSON.stringify(argv)});`;
}

describe('jcp node start: signals', () => {
  it('a SIGTERM sent as the banner is written stops the node gracefully: exit 0, not killed by the signal', () => {
    const data = mkdtempSync(path.join(tmpdir(), 'jcp-signals-'));
    dirs.push(data);
    const script = signalOnLine('stderr', 'listening on', ['node', 'start', '--data', data, '--listen', '127.0.0.1:0']);
    const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(r.stderr).toMatch(/listening on 127\.0\.0\.1:\d+/);
    expect([r.status, r.signal], r.stderr).toEqual([0, null]);
  });

  it('jcp bridge --http: a SIGTERM sent as the listening line is written stops it gracefully: exit 0', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'jcp-signals-'));
    dirs.push(dir);
    const node = await liveNode({ resources: [{ name: 'memory', endpoint: { kind: 'mcp-stdio', command: 'mcp-server-memory' } }] });
    try {
      writeKeyFile(path.join(dir, 'bob.key'), bob);
      writeChainFile(path.join(dir, 'bob.chain.json'), [mint(alice, bob, 'memory', ['read_graph'], 1_000n, rng)]);
      const argv = [
        'bridge',
        '--http',
        '127.0.0.1:0',
        '--node',
        `127.0.0.1:${node.port}`,
        '--key',
        path.join(dir, 'bob.key'),
        '--chain',
        path.join(dir, 'bob.chain.json'),
      ];
      const script = signalOnLine('stdout', 'listening', argv);
      const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
        cwd: ROOT,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
      });
      child.stderr.on('data', (d: Buffer) => {
        out += d.toString();
      });
      const [status, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
        child.once('exit', (c, s) => resolve([c, s])),
      );
      expect(out).toMatch(/"listening":"http:\/\/127\.0\.0\.1:\d+/);
      expect([status, signal], out).toEqual([0, null]);
    } finally {
      await node.cleanup();
    }
  });
});
