/**
 * `jcp node start --upstream NAME=URL | 'NAME=COMMAND ARGS…' [--trust-root NAME=did]` fronts MCP
 * servers without a config file (docs/node.md "Upstreams from the command line"): the resources,
 * their ids and their tools are printed, calls go through, a trust root closes its resource to
 * other roots, and the data folder defaults to `.data/node` under the working folder.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { main } from '../../cli/internal.ts';
import { JCP_BIN } from '../../testkit/internal.ts';
import { resourceIdOf } from '../../node/index.ts';
import { JcpClient, resultJson } from '../../client/index.ts';
import { cast, mint, tempDir } from './fixtures.ts';
import { type Everything, startEverything, V2_SERVER_STDIO } from './upstreams.ts';

const { rng, alice, bob, mallory } = cast('upstream-cli');
const PAGED = path.join(path.dirname(fileURLToPath(import.meta.url)), 'paged-server.mjs');

/** Runs the CLI in-process, capturing stdout and stderr. */
async function jcp(...argv: string[]): Promise<{ code: number; err: string }> {
  let err = '';
  const e = vi.spyOn(process.stderr, 'write').mockImplementation((s: string | Uint8Array) => {
    err += typeof s === 'string' ? s : Buffer.from(s).toString('utf8');
    return true;
  });
  const o = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
  try {
    return { code: await main(argv), err };
  } finally {
    e.mockRestore();
    o.mockRestore();
  }
}

describe('jcp node start --upstream', () => {
  const cwd = tempDir('upstream-cli');
  let everything: Everything;
  let child: ChildProcess;
  let err = '';
  let port = 0;

  beforeAll(async () => {
    everything = await startEverything();
    // A stdio server that cannot start: says why on stderr and exits.
    const down = path.join(cwd.dir, 'down-server.mjs');
    writeFileSync(down, "process.stderr.write('Error: ENOENT: no such directory /srv/missing\\n'); process.exit(1);\n");
    child = spawn(
      process.execPath,
      [
        JCP_BIN,
        'node',
        'start',
        '--listen',
        '127.0.0.1:0',
        '--upstream',
        `everything=${everything.url}`,
        '--upstream',
        `paged=${process.execPath} ${PAGED}`,
        '--trust-root',
        `paged=${alice.did}`,
        '--upstream',
        `down=${process.execPath} ${down}`,
        '--upstream',
        `v2=${V2_SERVER_STDIO.command} ${V2_SERVER_STDIO.args.join(' ')}`,
        '--trust-root',
        `down=${alice.did}`,
      ],
      { cwd: cwd.dir, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    await new Promise<void>((resolve, reject) => {
      child.stderr!.on('data', (d: Buffer) => {
        err += d.toString('utf8');
        const m = /listening on 127\.0\.0\.1:(\d+)/.exec(err);
        if (m) port = Number(m[1]);
        if (
          port > 0 &&
          /resource paged speaks .*\n/.test(err) &&
          /resource everything speaks .*\n/.test(err) &&
          /resource down .*\n/.test(err)
        )
          if (/resource v2 speaks .*\n/.test(err)) resolve();
      });
      child.once('exit', (code) => reject(new Error(`jcp node exited (${code}): ${err}`)));
    });
  });
  afterAll(async () => {
    if (child && child.exitCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;
    }
    await everything?.kill();
    cwd.cleanup();
  });

  test('prints each resource with its id, who it is open to and its tools', () => {
    expect.soft(err, 'the whole start-up print').toContain('jcp node: resource v2 ');
    const line = (name: string) => err.split('\n').find((l) => l.startsWith(`jcp node: resource ${name} `)) ?? '';
    expect(line('everything')).toMatch(new RegExp(`^jcp node: resource everything ${resourceIdOf('everything')} open tools: .*\\becho\\b`));
    expect(line('paged')).toBe(
      `jcp node: resource paged ${resourceIdOf('paged')} trust roots 1 tools: t1, t2, t3, add-tool, chatty, odd, malformed, server-error, whoami`,
    );
    // Which era each upstream answered in: server-everything and the paged server are 2025-only (SDK v1).
    expect(err).toContain('jcp node: resource paged speaks MCP 2025-11-25 (initialize handshake)\n');
    expect(err).toContain('jcp node: resource everything speaks MCP 2025-11-25 (initialize handshake)\n');
    // The SDK v2 test server answers server/discover: the stateless revision, no handshake.
    expect(err).toContain('jcp node: resource v2 speaks MCP 2026-07-28 (server/discover)\n');
    expect(err).not.toMatch(/resource down speaks/);
    // An open resource is said to be open, loudly; one with a trust root is not.
    expect(err).toContain('jcp node: warning: resource everything is open: a grant any key issues itself is decided');
    expect(err).not.toMatch(/warning: resource (paged|down) is open/);
  });

  test('an upstream that cannot start is printed with its error and the tail of its stderr', () => {
    const line = err.split('\n').find((l) => l.startsWith('jcp node: resource down ')) ?? '';
    expect(line).toMatch(/tools: unknown \(not reachable yet: .+; stderr: Error: ENOENT: no such directory \/srv\/missing\)$/);
  });

  test('calls go through to both upstreams; the trust root closes paged to other roots; the data folder defaults under cwd', async () => {
    const client = await JcpClient.connect({ host: '127.0.0.1', port, signer: bob });
    try {
      const echo = mint(alice, bob, 'everything', ['echo'], 1_000_000_000n, rng);
      const r = await client.call({ chain: [echo], action: 'echo', payload: { message: 'via cli' } });
      expect(r.decision).toEqual({ verdict: 'allow' });
      expect(JSON.stringify(resultJson(r.result))).toContain('Echo: via cli');
      const byAlice = mint(alice, bob, 'paged', ['t1'], 1_000_000_000n, rng);
      expect((await client.call({ chain: [byAlice], action: 't1', payload: {} })).decision).toEqual({ verdict: 'allow' });
      const byMallory = mint(mallory, bob, 'paged', ['t1'], 1_000_000_000n, rng);
      expect((await client.call({ chain: [byMallory], action: 't1', payload: {} })).decision).toEqual({
        verdict: 'deny',
        deny_reason: 'untrusted-root',
      });
      const openToAll = mint(mallory, bob, 'everything', ['echo'], 1_000_000_000n, rng);
      expect((await client.call({ chain: [openToAll], action: 'echo', payload: { message: 'm' } })).decision.verdict).toBe('allow');
    } finally {
      await client.close();
    }
    expect(existsSync(path.join(cwd.dir, '.data', 'node', 'steward.key'))).toBe(true);
  });

  test('SIGTERM stops it with exit 0', async () => {
    const code = await new Promise<number | null>((r) => {
      child.once('exit', (c) => r(c));
      child.kill('SIGTERM');
    });
    expect(code).toBe(0);
  });
});

describe('jcp node start --upstream refusals', () => {
  test('a malformed --upstream or --trust-root is a usage error naming the flag, exit 2', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['--upstream', 'no-equals-sign'], /\[usage\]: --upstream: expected NAME=URL or NAME=COMMAND ARGS/],
      [['--upstream', 'a=x', '--upstream', 'a=y'], /\[usage\]: --upstream: resource a given twice/],
      [['--upstream', 'a=ftp://host/mcp'], /\[usage\]: --upstream a\.endpoint\.url: expected an http:\/\/ or https:\/\/ URL/],
      [['--upstream', 'a=http://127.0.0.1:1/mcp', '--trust-root', 'b=did:key:z6Mk'], /\[usage\]: --trust-root: no --upstream named b/],
      [
        ['--upstream', 'a=http://127.0.0.1:1/mcp', '--trust-root', 'a=not-a-did'],
        /\[usage\]: --trust-root: a: not a valid Ed25519 did:key/,
      ],
    ];
    const data = tempDir('upstream-cli-refused');
    for (const [flags, want] of cases) {
      const r = await jcp('node', 'start', '--listen', '127.0.0.1:0', '--data', data.dir, ...flags);
      expect(r.code, flags.join(' ')).toBe(2);
      expect(r.err, flags.join(' ')).toMatch(want);
    }
    expect(existsSync(path.join(data.dir, 'steward.key'))).toBe(false);
    data.cleanup();
  });
});
