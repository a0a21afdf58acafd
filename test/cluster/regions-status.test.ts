/**
 * `jcp cluster status` of a multi-region cluster whose launcher was killed (kill -9): the proxies
 * lived in the launcher, so every link between regions is gone. Status used to print the links
 * `up` (the state recorded at start); it now says `down` (launcher gone) or `unknown` (running,
 * not answering), keeps the recorded state in `recorded_state`, and exits 1. The text also names
 * a region's NATS server that is not running (it was only in `--json`).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../testkit/index.ts';
import { runJcpInProcess } from '../support.ts';

/** `jcp …` in this process: the command's logic is under test, not Node's start-up (a child took 2 s of CPU, 30 s at load 15). */
const runJcp = async (argv: string[]) => {
  const r = await runJcpInProcess(argv);
  return { code: r.code, stdout: r.out, stderr: r.err };
};

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function forgedState(pid: number, control: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'jcp-regions-status-'));
  dirs.push(dir);
  const link = (from: string, to: string) => ({ from, to, kind: 'gateway', state: 'up', rttMs: 40, jitterMs: 0 });
  writeFileSync(
    join(dir, 'cluster.json'),
    JSON.stringify({
      type: 'jcp-regions',
      home: 'a',
      regions: [
        { name: 'a', nats_urls: ['nats://127.0.0.1:1'], servers: [], nodes: [] },
        {
          name: 'b',
          nats_urls: ['nats://127.0.0.1:1'],
          servers: [{ name: 'b-s1', url: 'nats://127.0.0.1:1', pid: 0, running: false }],
          nodes: [],
        },
      ],
      links: [link('a', 'b'), link('b', 'a')],
      dir,
      control,
      pid,
    }),
  );
  return dir;
}

describe('jcp cluster status without its launcher', () => {
  it('a killed launcher: links down (recorded_state up), exit 1, and how to stop what is left', async () => {
    const dead = spawnSync(process.execPath, ['-e', 'process.exit(0)']).pid!;
    const dir = forgedState(dead, `http://127.0.0.1:${await freePort()}`);
    const json = await runJcp(['cluster', 'status', '--dir', dir, '--json']);
    expect(json.code).toBe(1);
    const report = JSON.parse(json.stdout) as { launcher: { answering: boolean }; links: { state: string; recorded_state?: string }[] };
    expect(report.launcher.answering).toBe(false);
    expect(report.links.map((l) => [l.state, l.recorded_state])).toEqual([
      ['down', 'up'],
      ['down', 'up'],
    ]);
    const text = await runJcp(['cluster', 'status', '--dir', dir]);
    expect(text.code).toBe(1);
    expect(text.stdout).toMatch(/link a -> b gateway {2}down rtt 40 ms/);
    expect(text.stdout).not.toMatch(/ up /);
    expect(text.stderr).toContain(`jcp cluster down --dir ${dir}`);
    // a region's NATS server that is not running is named in the text too (it was only in --json)
    expect(text.stdout).toMatch(/region b {2}NATS nats:\/\/127\.0\.0\.1:1 {2}NATS server\(s\) not running: b-s1\n/);
    expect(text.stdout).toMatch(/region a \(home: the streams live here\) {2}NATS nats:\/\/127\.0\.0\.1:1\n/);
  });

  it('cut/heal with the launcher gone: launcher-unreachable (exit 1); live health unknown without monitors', async () => {
    const dead = spawnSync(process.execPath, ['-e', 'process.exit(0)']).pid!;
    const dir = forgedState(dead, `http://127.0.0.1:${await freePort()}`);
    for (const verb of ['cut', 'heal']) {
      const r = await runJcp(['cluster', verb, 'a-b', '--dir', dir]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`jcp cluster: error [launcher-unreachable]: the region launcher (pid ${dead}, gone)`);
    }
    // the forged state records no monitoring port: nobody to ask /gatewayz
    const json = await runJcp(['cluster', 'status', '--dir', dir, '--json']);
    const report = JSON.parse(json.stdout) as { links: { live?: string }[] };
    expect(report.links.map((l) => l.live)).toEqual(['unknown', 'unknown']);
  });

  it('a launcher that runs but does not answer: links unknown', async () => {
    const dir = forgedState(process.pid, `http://127.0.0.1:${await freePort()}`);
    const json = await runJcp(['cluster', 'status', '--dir', dir, '--json']);
    expect(json.code).toBe(1);
    const report = JSON.parse(json.stdout) as { links: { state: string }[] };
    expect(report.links.map((l) => l.state)).toEqual(['unknown', 'unknown']);
  });
});
