/**
 * `jcp init` - one command to a working setup: the printed node command started as a process, the
 * printed MCP host entry started by the SDK's StdioClientTransport as a host would, a tool called
 * through it and its receipt found in the node's log; a second init refused with nothing changed.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterAll, describe, expect, test } from 'vitest';
import { readChainFile } from '../../client/index.ts';
import { jcpInvocation, shellWord } from '../../cli/internal.ts';
import { grantId } from '../../core/index.ts';
import { readKeyFile } from '../../node/index.ts';
import { freePort, stopChild, track } from '../../testkit/index.ts';
import { runJcp } from '../listeners.ts';
import { tempFolders } from '../node/fixtures.ts';

const temp = tempFolders('init');
const FS_SERVER = path.join(
  path.dirname(createRequire(import.meta.url).resolve('@modelcontextprotocol/server-filesystem/package.json')),
  'dist',
  'index.js',
);

/** The text after the line `label` up to the next blank line. */
function section(out: string, label: string): string {
  const lines = out.split('\n');
  const i = lines.findIndex((l) => l.startsWith(label));
  expect(i, `no '${label}' in:\n${out}`).toBeGreaterThanOrEqual(0);
  const end = lines.findIndex((l, j) => j > i && l.trim() === '');
  return lines.slice(i + 1, end).join('\n');
}

/** Every file under `dir` (relative path → content and mode), to compare before and after. */
function snapshotOf(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    const p = path.join(e.parentPath, e.name);
    const rel = path.relative(dir, p);
    out[rel] = e.isFile() ? `${(statSync(p).mode & 0o777).toString(8)} ${readFileSync(p, 'utf8')}` : 'dir';
  }
  return out;
}

/** Waits until `child`'s stderr holds `text`; rejects with what it printed if it exits first. */
function stderrUntil(child: ChildProcess, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let err = '';
    child.stderr!.setEncoding('utf8').on('data', (d: string) => {
      err += d;
      if (err.includes(text)) resolve(err);
    });
    child.once('exit', (code) => reject(new Error(`exited ${code} before '${text}':\n${err}`)));
  });
}

describe('jcp init', { timeout: 150_000 }, () => {
  const children: ChildProcess[] = [];
  afterAll(async () => {
    for (const c of children) await stopChild(c);
  });

  test('init / the printed node command and the printed MCP entry call a tool; the node seals its receipt', async () => {
    const work = temp();
    const shared = path.join(work, 'shared');
    mkdirSync(shared);
    writeFileSync(path.join(shared, 'hello.txt'), 'hello from jcp init\n');
    const port = await freePort();
    // A relative argument, as a user types it: init records the working folder as the endpoint's cwd.
    const run = await runJcp(['init', '--upstream', `files=node ${FS_SERVER} shared`, '--listen', `127.0.0.1:${port}`], { cwd: work });
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const dir = path.join(work, 'jcp');
    for (const k of ['issuer.key', 'agent.key']) expect(statSync(path.join(dir, k)).mode & 0o777).toBe(0o600);
    expect(readdirSync(dir).sort()).toEqual(['agent.key', 'files.chain.json', 'issuer.key', 'node.json']);
    const chain = readChainFile(path.join(dir, 'files.chain.json'));
    const issuer = readKeyFile(path.join(dir, 'issuer.key'));
    const agent = readKeyFile(path.join(dir, 'agent.key'));
    expect(chain[0]!.grant.issuer).toBe(issuer.did);
    expect(chain[0]!.grant.subject).toBe(agent.did);
    expect(chain[0]!.grant.capability.actions).toContain('read_text_file'); // every tool the server lists
    expect(chain[0]!.grant.budget_uj).toBe(1_000_000_000n);

    // The node, exactly as printed, from another folder (the printed paths are absolute).
    const nodeLine = section(run.stdout, 'Start the node').trim();
    expect(nodeLine).toMatch(/^node \/\S+\/bin\/jcp\.mjs node start --config \/\S+\/node\.json$/);
    const node = spawn('sh', ['-c', `exec ${nodeLine}`], { cwd: path.parse(work).root, stdio: ['ignore', 'ignore', 'pipe'] });
    track(node);
    children.push(node);
    await stderrUntil(node, 'jcp node: resource files');

    // The bridge, exactly as the Claude Desktop entry says, started by the SDK's stdio transport.
    const entry = (JSON.parse(section(run.stdout, 'Claude Desktop')) as { mcpServers: Record<string, { command: string; args: string[] }> })
      .mcpServers['jcp']!;
    expect(path.isAbsolute(entry.command)).toBe(true);
    const vscode = JSON.parse(section(run.stdout, 'VS Code')) as { servers: Record<string, unknown> };
    expect(vscode.servers['jcp']).toEqual({ type: 'stdio', ...entry });
    expect(section(run.stdout, 'The bridge').trim()).toBe(`node ${entry.args.join(' ')}`);
    const client = new Client({ name: 'init-test', version: '1' });
    await client.connect(
      new StdioClientTransport({ command: entry.command, args: entry.args, cwd: path.parse(work).root, stderr: 'pipe' }),
    );
    try {
      const tools = await client.listTools();
      expect(tools.tools.map((t) => t.name)).toContain('read_text_file');
      const r = await client.callTool({ name: 'read_text_file', arguments: { path: path.join(shared, 'hello.txt') } });
      expect(r.isError ?? false).toBe(false);
      expect((r.content as Array<{ text?: string }>)[0]?.text).toContain('hello from jcp init');
      expect(r._meta?.['jcp/verdict']).toBe('allow');
      expect(r._meta?.['jcp/grant_id']).toBe(grantId(chain[0]!.grant));
    } finally {
      await client.close();
    }
    await stopChild(node);
    expect(node.exitCode).toBe(0);

    // The node's log holds the sealed receipt of that call, attributed to the agent under its grant.
    const att = await runJcp(['receipts', 'attribute', path.join(dir, 'data')]);
    expect(att.code).toBe(0);
    const rows = (JSON.parse(att.stdout) as { attribution: Array<{ grant_id: string; subject: string; allowed: number }> }).attribution;
    expect(rows).toEqual([expect.objectContaining({ grant_id: grantId(chain[0]!.grant), subject: agent.did, allowed: 1 })]);
  });

  test('init / a second init into the same folder is refused, exit 2 init-exists, nothing changed', async () => {
    const work = temp();
    const dir = path.join(work, 'setup');
    const first = await runJcp(['init', dir, '--upstream', 'a=http://127.0.0.1:9/mcp', '--actions', 'x,y', '--json'], { cwd: work });
    expect(first.code).toBe(0);
    const report = JSON.parse(first.stdout) as { chains: Array<{ actions: string[]; file: string }>; commands: { bridge: string[] } };
    expect(report.chains.map((c) => c.actions)).toEqual([['x', 'y']]);
    const before = snapshotOf(dir);
    // Another upstream name: only the keys and the config clash, and still nothing is written.
    const again = await runJcp(['init', dir, '--upstream', 'b=http://127.0.0.1:9/mcp', '--actions', 'z'], { cwd: work });
    expect(again.code).toBe(2);
    expect(again.stdout).toBe('');
    expect(again.stderr).toMatch(/^jcp init: error \[init-exists\]: refusing to overwrite .*issuer\.key.*nothing was written/);
    expect(snapshotOf(dir)).toEqual(before);
  });

  test('init / one chain file in the way: refused before any key is written', async () => {
    const work = temp();
    const dir = path.join(work, 'jcp');
    mkdirSync(dir);
    writeFileSync(path.join(dir, 'b.chain.json'), 'mine\n');
    const r = await runJcp(['init', '--upstream', 'a=http://127.0.0.1:9/mcp', '--upstream', 'b=http://127.0.0.1:9/mcp', '--actions', 'x'], {
      cwd: work,
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('[init-exists]');
    expect(r.stderr).toContain('b.chain.json');
    expect(readdirSync(dir)).toEqual(['b.chain.json']);
  });

  test('init / --actions NAME=… per upstream; a bare command written absolute; an unreachable upstream without --actions, a missing command refused', async () => {
    const work = temp();
    const per = await runJcp(
      [
        'init',
        'p',
        '--upstream',
        'a=http://127.0.0.1:9/mcp',
        '--upstream',
        'b=http://127.0.0.1:9/mcp',
        '--actions',
        'x',
        '--actions',
        'b=y,z',
        '--json',
      ],
      { cwd: work },
    );
    expect(per.code).toBe(0);
    const rep = JSON.parse(per.stdout) as { chains: Array<{ resource: string; actions: string[] }> };
    expect(rep.chains.map((c) => [c.resource, c.actions])).toEqual([
      ['a', ['x']],
      ['b', ['y', 'z']],
    ]);
    const down = await runJcp(['init', 'q', '--upstream', 'a=http://127.0.0.1:9/mcp'], { cwd: work });
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(/error \[upstream-unreachable\].*--actions a=TOOL,TOOL/);
    // It says why: the connect's error down to its cause, or a stdio server's stderr.
    expect(down.stderr).toMatch(/cannot list its tools \(.*fetch failed: [^)]+\)/);
    const crashed = await runJcp(['init', 'r', '--upstream', 'c=node --eval=console.error("boom4242");process.exit(3)'], { cwd: work });
    expect(crashed.code).toBe(1);
    expect(crashed.stderr).toMatch(/error \[upstream-unreachable\]: --upstream c: cannot list its tools \(.*stderr: boom4242\)/);
    expect(readdirSync(work).sort()).toEqual(['p']);
    // A bare command: found as the node finds it (the project's node_modules/.bin), written absolute.
    // (npx vitest puts node_modules/.bin on PATH; a user's shell does not)
    const PATH = (process.env['PATH'] ?? '')
      .split(path.delimiter)
      .filter((d) => !d.endsWith(`node_modules${path.sep}.bin`))
      .join(path.delimiter);
    const bare = await runJcp(['init', 'm', '--upstream', 'mem=mcp-server-memory', '--actions', 'read_graph'], {
      cwd: work,
      env: { PATH },
    });
    expect(bare.code, bare.stderr).toBe(0);
    const ep = (
      JSON.parse(readFileSync(path.join(work, 'm', 'node.json'), 'utf8')) as { resources: Array<{ endpoint: Record<string, unknown> }> }
    ).resources[0]!.endpoint;
    expect(ep).toEqual({ command: expect.stringMatching(/^\/.*node_modules\/\.bin\/mcp-server-memory$/), args: [], cwd: work });
    const missing = await runJcp(['init', 'n', '--upstream', 'x=no-such-command-jcp-init', '--actions', 'a'], { cwd: work });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/error \[command-not-found\]: --upstream x: no-such-command-jcp-init is not found on PATH/);
    expect(readdirSync(work).sort()).toEqual(['m', 'p']);
  });

  test('init / the output says issuer.key is the authority, to move off the agent machine (nothing printed to run needs it)', async () => {
    const work = temp();
    const r = await runJcp(['init', '--upstream', 'a=http://127.0.0.1:9/mcp', '--actions', 'x'], { cwd: work });
    expect(r.code, r.stderr).toBe(0);
    const issuerKey = path.join(work, 'jcp', 'issuer.key');
    const note = section(r.stdout, `${issuerKey} is the authority`);
    expect(note).toBe(
      "  whoever can read it can mint grants. Move it off the agent's machine: the node and the bridge\n" +
        '  run without it (the node trusts its did, in node.json); keep it where you mint grants.',
    );
    // True of what was printed: no command nor MCP host entry names the issuer key.
    const printed = r.stdout.slice(r.stdout.indexOf('Start the node'));
    expect(printed).not.toContain('issuer.key');
  });

  test('init / usage errors exit 2 and write nothing', async () => {
    const work = temp();
    for (const [args, why] of [
      [['--actions', 'x'], /--upstream is required/],
      [['--upstream', 'a/b=http://127.0.0.1:9/mcp', '--actions', 'x'], /resource name/],
      [['--upstream', 'a=http://127.0.0.1:9/mcp', '--actions', 'x', '--listen', '127.0.0.1:0'], /--listen: give a fixed port/],
      [['--upstream', 'a=http://127.0.0.1:9/mcp', '--actions', 'c=x'], /no --upstream named c/],
      [['--upstream', 'a=http://127.0.0.1:9/mcp', '--actions', 'x', '--budget', '0'], /--budget/],
    ] as const) {
      const u = await runJcp(['init', 'u', ...args], { cwd: work });
      expect(u.code, u.stderr).toBe(2);
      expect(u.stderr).toMatch(why);
    }
    expect(readdirSync(work)).toEqual([]);
  });
});

describe('jcp init / the command name as invoked', () => {
  test('invocation / a jcp bin link on PATH prints jcp; one only in node_modules/.bin prints its absolute path; a script prints node and its path', () => {
    const t = temp();
    const script = path.join(t, 'pkg', 'bin', 'jcp.mjs');
    mkdirSync(path.dirname(script), { recursive: true });
    writeFileSync(script, '#!/usr/bin/env node\n');
    chmodSync(script, 0o755);
    const global = path.join(t, 'global-bin');
    const local = path.join(t, 'proj', 'node_modules', '.bin');
    const nodeDir = path.join(t, 'node-bin');
    for (const d of [global, local, nodeDir]) mkdirSync(d, { recursive: true });
    symlinkSync(script, path.join(global, 'jcp'));
    symlinkSync(script, path.join(local, 'jcp'));
    symlinkSync(process.execPath, path.join(nodeDir, 'node'));
    const host = { command: process.execPath, args: [script] };
    expect(jcpInvocation(path.join(global, 'jcp'), process.execPath, global)).toEqual({ shell: ['jcp'], host });
    // npx puts node_modules/.bin on its own PATH: the user's shell will not find `jcp` there.
    expect(jcpInvocation(path.join(local, 'jcp'), process.execPath, `${local}:${nodeDir}`)).toEqual({
      shell: [path.join(local, 'jcp')],
      host,
    });
    expect(jcpInvocation(script, process.execPath, nodeDir)).toEqual({ shell: ['node', script], host });
    expect(jcpInvocation(script, process.execPath, global)).toEqual({ shell: [process.execPath, script], host });
    expect(shellWord("/a b/it's")).toBe("'/a b/it'\\''s'");
    expect(shellWord('/abs/node.json')).toBe('/abs/node.json');
  });
});
