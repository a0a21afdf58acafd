/**
 * `jcp cluster`: a --nats url that is not loopback is a usage error (exit 2, nothing made; it used
 * to be an internal error with a stack trace), and `status` reports what each node's /healthz
 * says, whatever became of the pid `up` recorded (a node restarted by hand runs under another pid
 * and used to be reported `down`). The nodes here are fake /healthz servers and a cluster.json.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type ClusterState, clusterStatus, freePort, loopbackNatsUrlProblem } from '../../testkit/index.ts';
import { runJcp } from '../listeners.ts';

const dirs: string[] = [];
const servers: Server[] = [];
const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), 'jcp-cluster-cli-'));
  dirs.push(d);
  return d;
};
afterAll(async () => {
  for (const s of servers) await new Promise((r) => s.close(r));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A fake node metrics endpoint: /healthz answers `status` with the steward `did`. */
async function healthz(status: number, did: string): Promise<string> {
  const s = createServer((req, res) => {
    if (req.url !== '/healthz') {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ ok: status === 200, steward: did, seq: 1 }));
  });
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const a = s.address();
  return `127.0.0.1:${typeof a === 'object' && a ? a.port : 0}`;
}

/** The pid of a process that has exited (a node killed with -9). */
async function deadPid(): Promise<number> {
  const c = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' });
  await new Promise((r) => c.once('exit', r));
  return c.pid!;
}

const did = (c: string) => `did:key:z6Mk${c.repeat(44)}`;

describe('jcp cluster up - NATS url', () => {
  it('a url that is not loopback: error [usage], exit 2, no stack, no folder', async () => {
    const dir = join(tmp(), 'c');
    const r = await runJcp(['cluster', 'up', '--nodes', '2', '--nats', 'nats://10.0.0.1:4222', '--dir', dir]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      "jcp cluster: error [usage]: --nats: expected a loopback nats:// url (nats://127.0.0.1:<port>, localhost or [::1]), or several separated by commas, got nats://10.0.0.1:4222\nRun 'jcp cluster --help'.\n",
    );
    expect(existsSync(dir)).toBe(false);
  });

  it('loopbackNatsUrlProblem: loopback urls (one, or a list) pass; others are named', () => {
    expect(loopbackNatsUrlProblem('nats://127.0.0.1:4222')).toBeUndefined();
    expect(loopbackNatsUrlProblem('nats://127.0.0.1:1,nats://localhost:2, nats://[::1]:3')).toBeUndefined();
    expect(loopbackNatsUrlProblem('nats://127.0.0.1:1,nats://example.com:2')).toMatch(/got nats:\/\/example\.com:2$/);
    expect(loopbackNatsUrlProblem('nats://127.0.0.1:1,nats://127.0.0.1:2', false)).toMatch(/^expected a loopback nats:\/\/ url/);
    expect(loopbackNatsUrlProblem('nats://127.0.0.1:99999')).toMatch(/got nats:\/\/127\.0\.0\.1:99999$/);
    expect(loopbackNatsUrlProblem('127.0.0.1:4222')).toMatch(/got 127\.0\.0\.1:4222$/);
  });
});

/** A cluster.json of four fake nodes: restarted by hand (recorded pid gone, healthy), unhealthy, down, another node on the port. */
async function fakeCluster() {
  const dir = tmp();
  const gone = await deadPid();
  const m = {
    n1: await healthz(200, did('a')),
    n2: await healthz(503, did('b')),
    n3: `127.0.0.1:${await freePort()}`,
    n4: await healthz(200, did('x')),
  };
  const node = (name: string, metrics: string, d: string, pid: number | undefined) => ({
    name,
    did: d,
    address: `127.0.0.1:${7400 + Number(name.slice(1))}`,
    metrics,
    pid,
    data_dir: join(dir, name, 'data'),
    log: join(dir, name, 'node.log'),
  });
  const state: ClusterState = {
    type: 'jcp-cluster',
    dir,
    nats: { urls: 'nats://127.0.0.1:4222', owned: false, pids: [] },
    nodes: [
      node('n1', m.n1, did('a'), gone),
      node('n2', m.n2, did('b'), process.pid),
      node('n3', m.n3, did('c'), process.pid),
      node('n4', m.n4, did('d'), gone),
    ],
  };
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'cluster.json'), JSON.stringify(state));
  return { dir, gone, m, state };
}

describe('jcp cluster status - what /healthz says', () => {
  it('jcp cluster status: a node restarted by hand (recorded pid gone) that answers /healthz is healthy; one that does not answer is down', async () => {
    const { dir, gone, m } = await fakeCluster();
    const r = await runJcp(['cluster', 'status', '--dir', dir]);
    expect(r.code).toBe(0);
    const lines = r.stdout.split('\n');
    expect(lines[1]).toMatch(new RegExp(`^n1 +127\\.0\\.0\\.1:7401 +healthy +pid ${gone} gone +${did('a')}$`));
    expect(lines[2]).toMatch(new RegExp(`^n2 +127\\.0\\.0\\.1:7402 +unhealthy \\(503\\) +pid ${process.pid} running +${did('b')}$`));
    expect(lines[3]).toMatch(new RegExp(`^n3 +127\\.0\\.0\\.1:7403 +down +pid ${process.pid} running +${did('c')}$`));
    expect(lines[4]).toMatch(/^n4 +127\.0\.0\.1:7404 +other node +pid \d+ gone/);
    expect(r.stdout).toContain(`n1: answers /healthz, but not as pid ${gone} that 'up' started (restarted by hand?)`);
    expect(r.stdout).toContain(`n3: /healthz on ${m.n3}: connection refused`);
    expect(r.stdout).toContain(`n4: /healthz on ${m.n4} is answered by a node with steward ${did('x')}, not ${did('d')}`);
  });

  it('clusterStatus: health from /healthz, the recorded pid apart', async () => {
    const { state } = await fakeCluster();
    const s = await clusterStatus(state);
    expect(s.map((x) => [x.name, x.health, x.pidRunning])).toEqual([
      ['n1', 'healthy', false],
      ['n2', 'unhealthy', true],
      ['n3', 'down', true],
      ['n4', 'other', false],
    ]);
    expect(s[1]!.httpStatus).toBe(503);
    expect(s[2]!.why).toBe('connection refused');
    expect(s[3]!.answeredBy).toBe(did('x'));
  });
});
