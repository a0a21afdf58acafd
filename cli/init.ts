/**
 * `jcp init [DIR] --upstream …`: one command to a working setup (docs/bridge.md "jcp init"). Writes
 * an issuer key and an agent key (§2, mode 0600), one root grant chain per upstream (§4, issued by
 * the issuer to the agent), and a node config whose trust root for every resource is the issuer
 * (§7); prints the node and bridge commands and the MCP host entries (Claude Desktop, Cursor,
 * VS Code) with absolute paths. Nothing is overwritten: every target is checked first, the files
 * are written in a staging folder and hard-linked into place (a link never replaces a file).
 */
import { randomBytes } from 'node:crypto';
import { accessSync, constants, existsSync, linkSync, mkdtempSync, realpathSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pino } from 'pino';
import { type Actor, actorFromSeed, grantId, type SignedGrant } from '../core/index.ts';
import { makeDirs } from '../io/index.ts';
import {
  A2aEndpoint,
  type Endpoint,
  type EndpointConfig,
  McpHttpEndpoint,
  McpStdioEndpoint,
  type NodeConfig,
  NodeFault,
  configFromJson,
  upstreamResourcesJson,
  writeKeyFile,
} from '../node/index.ts';
import { writeChainFile } from '../client/index.ts';
import { actionsArg, expiryArg, hostPortArg, ujArg } from './args.ts';
import { CliError, type Command, UsageError, parse } from './command.ts';
import { mintRoot } from './grant.ts';

/** The folder `jcp init` writes when none is given (relative to the working folder). */
export const INIT_DEFAULT_DIR = 'jcp';
/** The node's listen address `jcp init` writes when `--listen` is not given. */
export const INIT_DEFAULT_LISTEN = '127.0.0.1:7700';
/** Each grant's budget when `--budget` is not given: 1 kJ, in µJ (10,000 calls at the meter's default estimate of 100,000 µJ). */
export const INIT_DEFAULT_BUDGET_UJ = 1_000_000_000n;
/** How long `jcp init` waits for an upstream's `tools/list` when no `--actions` names its tools (ms). */
export const INIT_DISCOVERY_TIMEOUT_MS = 20_000;
/** The stable code of an init refused because one of its files (or the data folder) exists (exit 2). */
export const INIT_EXISTS = 'init-exists';

const help = `Usage: jcp init [DIR] --upstream NAME=URL | --upstream 'NAME=COMMAND ARGS…' …
                 [--actions a,b | --actions NAME=a,b …] [--budget uj] [--expiry 0|unix|+secs]
                 [--listen host:port] [--name SERVER] [--json]

Writes a working setup into DIR (default ./${INIT_DEFAULT_DIR}, created mode 0700):
  issuer.key          the issuer (mode 0600): signs the grants; the node's trust root (§7).
                      The authority: move it off the agent's machine (nothing here runs on it)
  agent.key           the agent (mode 0600): the bridge signs every call with it
  NAME.chain.json     per upstream, a root grant (§4) from the issuer to the agent
  node.json           the node config: --listen, data folder DIR/data, one resource per upstream
                      (trust_roots: the issuer), its endpoint with absolute paths
and prints the command that starts the node, the bridge command, and the entries that start the
bridge from Claude Desktop and Cursor ({"mcpServers": …}) and from VS Code (.vscode/mcp.json
{"servers": …}), all with absolute paths.

--upstream is the syntax of 'jcp node start --upstream': NAME=http(s)://…/mcp (Streamable HTTP) or
'NAME=COMMAND ARGS…' (stdio, split at whitespace; the command is resolved to an absolute path
now, and relative arguments keep meaning what they mean here: the endpoint's cwd is this folder).
NAME is 1-64 of A-Z a-z 0-9 _ . - (it names the chain file).

  --actions a,b       the tools each grant allows (all upstreams); NAME=a,b for one upstream
                      (repeatable). Without it, init asks the upstream for its tools/list (it is
                      started once, for at most ${INIT_DISCOVERY_TIMEOUT_MS / 1000} s) and grants every tool listed now (a tool
                      the upstream adds later is not granted: mint a new grant)
  --budget uj         each grant's budget, µJ (default ${INIT_DEFAULT_BUDGET_UJ}: 1 kJ)
  --expiry            0 (never, default), unix seconds, or +N seconds from now
  --listen host:port  the node's jcp/1 address (default ${INIT_DEFAULT_LISTEN}; not port 0)
  --name SERVER       the server's name in the MCP host entries (default jcp)
  --json              print {dir, issuer, agent, node_config, chains, commands, mcp} as JSON

Refuses, exit 2 with error [${INIT_EXISTS}] and nothing written, when any of the files or DIR/data
(a node's log and steward key) exists already. Usage errors exit 2; an upstream whose tools cannot
be listed is error [upstream-unreachable] (exit 1: give --actions).`;

const OPTIONS = {
  upstream: { type: 'string', multiple: true },
  actions: { type: 'string', multiple: true },
  budget: { type: 'string' },
  expiry: { type: 'string' },
  listen: { type: 'string' },
  name: { type: 'string' },
  json: { type: 'boolean' },
} as const;

/** How to run this `jcp` again: from a shell, and from an MCP host (absolute paths only). */
export interface JcpInvocation {
  /** The words before `node start …` / `bridge …` in a shell: `jcp`, or `node /abs/bin/jcp.mjs`. */
  readonly shell: readonly string[];
  /** An MCP host's `command` (the absolute node binary) and the `args` before `bridge …`. */
  readonly host: { readonly command: string; readonly args: readonly string[] };
}

/** The absolute path `name` resolves to on `pathEnv`, skipping `node_modules/.bin` folders unless told (npx puts them there for its run only). */
function onPath(name: string, pathEnv: string, skipNodeModules = true): string | undefined {
  for (const d of pathEnv.split(path.delimiter)) {
    if (d === '' || !path.isAbsolute(d) || (skipNodeModules && d.split(path.sep).join('/').endsWith('node_modules/.bin'))) continue;
    const p = path.join(d, name);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // not here
    }
  }
  return undefined;
}

function real(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return p;
  }
}

/**
 * How this `jcp` was invoked, to print commands that run the same one. `script` is the path Node
 * ran (process.argv[1]): a bin link named `jcp` (npm's .bin, a global install) prints `jcp` when
 * that name on PATH (outside node_modules/.bin) is the same file, else the link's absolute path; a
 * script (`node bin/jcp.mjs`) prints `node` (or the absolute node binary when `node` on PATH is
 * another one) and the script's absolute path. MCP hosts get the absolute node binary and the
 * script's real path, so no PATH of theirs (Claude Desktop's is minimal) matters.
 */
export function jcpInvocation(
  script: string | undefined = process.argv[1],
  execPath: string = process.execPath,
  pathEnv: string = process.env['PATH'] ?? '',
): JcpInvocation {
  const abs = path.resolve(
    script ?? path.join(import.meta.dirname, ...(import.meta.url.endsWith('.ts') ? ['..'] : ['..', '..']), 'bin', 'jcp.mjs'),
  );
  const host = { command: execPath, args: [real(abs)] };
  if (path.basename(abs) === 'jcp') {
    const found = onPath('jcp', pathEnv);
    return { shell: [found !== undefined && real(found) === real(abs) ? 'jcp' : abs], host };
  }
  const node = onPath('node', pathEnv);
  return { shell: [node !== undefined && real(node) === real(execPath) ? 'node' : execPath, abs], host };
}

/** One word as a POSIX shell reads it: as is when safe, else single-quoted. */
export function shellWord(w: string): string {
  return /^[A-Za-z0-9_./:=@%+,-]+$/.test(w) ? w : `'${w.replaceAll("'", "'\\''")}'`;
}

/** The resource names init accepts: they name files and MCP entries. */
const NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$/;

/** One upstream as planned: its config entry (endpoint paths absolute) and the files it gets. */
interface PlannedUpstream {
  readonly name: string;
  readonly resource: Record<string, unknown>;
  readonly chainFile: string;
}

/**
 * The `--upstream` flags as `resources[]` entries with absolute paths: a stdio command resolved
 * against this folder (a bare one in the project's node_modules/.bin, as the node looks it up,
 * else on PATH), `cwd` this folder. `trust_roots` is the issuer.
 * @throws UsageError for a malformed flag or name; CliError `command-not-found`.
 */
function planUpstreams(specs: readonly string[], dir: string, issuer: string): PlannedUpstream[] {
  let raw: Array<Record<string, unknown>>;
  try {
    raw = upstreamResourcesJson(specs);
  } catch (e) {
    if (e instanceof NodeFault) throw new UsageError(e.message.replace(/^config: /, ''));
    throw e;
  }
  return raw.map((r) => {
    const name = String(r['name']);
    if (!NAME.test(name)) throw new UsageError(`--upstream: resource name ${JSON.stringify(name)}: expected 1-64 of A-Z a-z 0-9 _ . -`);
    const ep = r['endpoint'] as { url?: string; command?: string; args?: string[] };
    let endpoint: Record<string, unknown> = { url: ep.url };
    if (ep.command !== undefined) {
      let command = ep.command;
      if (command.includes('/')) command = path.resolve(command);
      else {
        // As the node resolves it (a bare name in the project's node_modules/.bin first), else on PATH.
        const cfg = configFromJson({ resources: [{ name, endpoint: { command } }] });
        const ep0 = cfg.resources[0]?.endpoint;
        const local = ep0?.kind === 'mcp-stdio' && path.isAbsolute(ep0.command) ? ep0.command : undefined;
        const found = local ?? onPath(command, process.env['PATH'] ?? '', false);
        if (found === undefined) throw new CliError('command-not-found', `--upstream ${name}: ${command} is not found on PATH`);
        command = found;
      }
      endpoint = { command, args: ep.args ?? [], cwd: process.cwd() };
    }
    return { name, resource: { name, trust_roots: [issuer], endpoint }, chainFile: path.join(dir, `${name}.chain.json`) };
  });
}

/** The `--actions` flags: one list for every upstream, and lists for named ones. @throws UsageError */
function actionsPlan(values: readonly string[], names: readonly string[]): { all?: string[]; named: Map<string, string[]> } {
  const named = new Map<string, string[]>();
  let all: string[] | undefined;
  for (const v of values) {
    const m = /^([A-Za-z0-9_][A-Za-z0-9_.-]*)=(.*)$/s.exec(v);
    if (m && names.includes(m[1]!)) {
      if (named.has(m[1]!)) throw new UsageError(`--actions: ${m[1]} given twice`);
      named.set(m[1]!, actionsArg(m[2]!));
    } else if (m) throw new UsageError(`--actions: no --upstream named ${m[1]}`);
    else {
      if (all !== undefined) throw new UsageError('--actions: one list for every upstream, given twice (use NAME=a,b for one upstream)');
      all = actionsArg(v);
    }
  }
  return { ...(all !== undefined ? { all } : {}), named };
}

/**
 * The names of every tool an upstream lists now: the endpoint the node would use (node/endpoint.ts),
 * started once, closed after, at most {@link INIT_DISCOVERY_TIMEOUT_MS}.
 * @throws CliError `upstream-unreachable` (no list: give --actions; the message says why: the
 *   connect's error with a stdio server's stderr tail, or no answer in time) or `no-tools` (an empty list).
 */
async function discoverTools(name: string, ep: EndpointConfig): Promise<string[]> {
  const log = pino({ level: 'silent' });
  const endpoint: Endpoint =
    ep.kind === 'a2a'
      ? new A2aEndpoint(name, ep, log)
      : ep.kind === 'mcp-stdio'
        ? new McpStdioEndpoint(name, ep, log)
        : new McpHttpEndpoint(name, ep, log);
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      endpoint.ensureTools(),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, INIT_DISCOVERY_TIMEOUT_MS);
      }),
    ]);
    // An A2A agent's actions are its card's skill ids (docs/a2a.md), named `id` instead of `name`.
    const tools = endpoint.kind === 'a2a' ? endpoint.skills?.()?.map((s) => ({ name: s['id'] })) : endpoint.tools();
    if (tools === undefined) {
      // Why: the connect's error (with a stdio server's stderr tail), or no answer in time.
      const why = endpoint.lastFailure?.() ?? `no list within ${INIT_DISCOVERY_TIMEOUT_MS / 1000} s`;
      throw new CliError(
        'upstream-unreachable',
        `--upstream ${name}: cannot list its tools (${why}): give the tools to grant with --actions ${name}=TOOL,TOOL…`,
      );
    }
    const names = tools.map((t) => String(t['name']));
    if (names.length === 0)
      throw new CliError('no-tools', `--upstream ${name}: the server lists no tools; a grant needs at least one action`);
    return names;
  } finally {
    clearTimeout(timer);
    await endpoint.close().catch(() => undefined);
  }
}

/** The files of a setup in DIR, by role. */
interface Targets {
  readonly issuerKey: string;
  readonly agentKey: string;
  readonly nodeConfig: string;
  readonly dataDir: string;
}

function targetsIn(dir: string): Targets {
  return {
    issuerKey: path.join(dir, 'issuer.key'),
    agentKey: path.join(dir, 'agent.key'),
    nodeConfig: path.join(dir, 'node.json'),
    dataDir: path.join(dir, 'data'),
  };
}

/** Exit 2 with `error [init-exists]`, naming what exists. */
function refuseExisting(existing: readonly string[]): number {
  process.stderr.write(
    `jcp init: error [${INIT_EXISTS}]: refusing to overwrite ${existing.join(', ')}; nothing was written (choose another DIR, or move these away)\n`,
  );
  return 2;
}

/**
 * Writes `files` (final path → writer into a staging path) all or none: each is written in a
 * staging folder inside `dir`, then hard-linked to its final path (a link fails on an existing
 * file, never replaces it); on a failure the links made are removed. The staging folder is
 * always removed. @returns the final paths that existed (nothing linked then), or [] on success.
 */
function writeAllOrNone(dir: string, files: ReadonlyArray<[string, (tmp: string) => void]>): string[] {
  makeDirs(dir, 0o700);
  const staging = mkdtempSync(path.join(dir, '.jcp-init-'));
  const linked: string[] = [];
  try {
    const staged = files.map(([final, write]) => {
      const tmp = path.join(staging, path.basename(final));
      write(tmp);
      return [final, tmp] as const;
    });
    for (const [final, tmp] of staged) {
      try {
        linkSync(tmp, final);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'EEXIST') {
          for (const l of linked) unlinkSync(l);
          linked.length = 0;
          return [final];
        }
        throw e;
      }
      linked.push(final);
    }
    return [];
  } catch (e) {
    for (const l of linked) unlinkSync(l);
    throw e;
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

/** What one init wrote, for the text and `--json` output. */
interface Written {
  readonly dir: string;
  readonly targets: Targets;
  readonly issuer: Actor;
  readonly agent: Actor;
  readonly listen: string;
  readonly chains: ReadonlyArray<{ name: string; file: string; grant: SignedGrant }>;
}

/** The printed commands (argv arrays) and the MCP host entries of a setup. */
function outputsOf(w: Written, inv: JcpInvocation, server: string) {
  const nodeArgs = ['node', 'start', '--config', w.targets.nodeConfig];
  const bridgeArgs = ['bridge', '--node', w.listen, '--key', w.targets.agentKey, ...w.chains.flatMap((c) => ['--chain', c.file])];
  const entry = { command: inv.host.command, args: [...inv.host.args, ...bridgeArgs] };
  const mcpServers = { mcpServers: { [server]: entry } };
  return {
    commands: { node: [...inv.shell, ...nodeArgs], bridge: [...inv.shell, ...bridgeArgs] },
    mcp: { claude_desktop: mcpServers, cursor: mcpServers, vscode: { servers: { [server]: { type: 'stdio', ...entry } } } },
  };
}

function jsonReport(w: Written, out: ReturnType<typeof outputsOf>): string {
  return `${JSON.stringify(
    {
      dir: w.dir,
      issuer: { did: w.issuer.did, key: w.targets.issuerKey },
      agent: { did: w.agent.did, key: w.targets.agentKey },
      node_config: w.targets.nodeConfig,
      data_dir: w.targets.dataDir,
      listen: w.listen,
      chains: w.chains.map((c) => ({
        resource: c.name,
        resource_id: c.grant.grant.capability.resource,
        file: c.file,
        grant_id: grantId(c.grant.grant),
        actions: c.grant.grant.capability.actions,
        budget_uj: c.grant.grant.budget_uj.toString(),
        expiry: c.grant.grant.expiry,
      })),
      commands: {
        node: out.commands.node,
        bridge: out.commands.bridge,
        node_shell: out.commands.node.map(shellWord).join(' '),
        bridge_shell: out.commands.bridge.map(shellWord).join(' '),
      },
      mcp: out.mcp,
    },
    null,
    2,
  )}\n`;
}

function textReport(w: Written, out: ReturnType<typeof outputsOf>): string {
  const grants = w.chains.map((c) => {
    const g = c.grant.grant;
    return `  ${c.file}\n      grant ${grantId(g)}: ${c.name}, actions ${g.capability.actions.join(',')}, ${g.budget_uj} µJ, ${g.expiry === 0 ? 'no expiry' : `expires ${g.expiry}`}`;
  });
  const block = (v: unknown) => JSON.stringify(v, null, 2);
  return [
    `jcp init: wrote ${w.dir}`,
    `  ${w.targets.issuerKey}\n      issuer ${w.issuer.did} (mode 0600): signs the grants; the node's trust root`,
    `  ${w.targets.agentKey}\n      agent ${w.agent.did} (mode 0600): the bridge signs every call with it`,
    ...grants,
    `  ${w.targets.nodeConfig}\n      node config: listens on ${w.listen}, data in ${w.targets.dataDir}`,
    '',
    // The issuer key mints grants: left beside the agent's key, whoever reads one reads both.
    `${w.targets.issuerKey} is the authority:`,
    "  whoever can read it can mint grants. Move it off the agent's machine: the node and the bridge",
    '  run without it (the node trusts its did, in node.json); keep it where you mint grants.',
    '',
    'Start the node (keep it running):',
    `  ${out.commands.node.map(shellWord).join(' ')}`,
    '',
    'The bridge (an MCP server on stdio; an MCP host starts it from the entries below):',
    `  ${out.commands.bridge.map(shellWord).join(' ')}`,
    '',
    'Claude Desktop (claude_desktop_config.json) and Cursor (~/.cursor/mcp.json or .cursor/mcp.json):',
    block(out.mcp.claude_desktop),
    '',
    'VS Code (.vscode/mcp.json):',
    block(out.mcp.vscode),
    '',
  ].join('\n');
}

/** The `jcp init` command. */
export const command: Command = {
  name: 'init',
  summary: 'write keys, grants and a node config for one agent, print how to run them',
  help,
  async run(argv) {
    const { values, positionals } = parse(argv, OPTIONS);
    if (positionals.length > 1) throw new UsageError(`expected at most one DIR, got ${positionals.length}`);
    if (values.upstream === undefined || values.upstream.length === 0) throw new UsageError('--upstream is required (one or more)');
    const listen = values.listen ?? INIT_DEFAULT_LISTEN;
    if (hostPortArg(listen, '--listen').port === 0) throw new UsageError('--listen: give a fixed port (the bridge entries name it)');
    const server = values.name ?? 'jcp';
    if (!NAME.test(server)) throw new UsageError(`--name: expected 1-64 of A-Z a-z 0-9 _ . -, got ${JSON.stringify(server)}`);
    const budgetUj = ujArg(values.budget ?? String(INIT_DEFAULT_BUDGET_UJ), '--budget');
    if (budgetUj === 0n) throw new UsageError('--budget: a grant of 0 µJ allows no call');
    const expiryS = expiryArg(values.expiry ?? '0', Math.floor(Date.now() / 1000));
    const dir = path.resolve(positionals[0] ?? INIT_DEFAULT_DIR);
    const targets = targetsIn(dir);
    const issuer = actorFromSeed(new Uint8Array(randomBytes(32)));
    const agent = actorFromSeed(new Uint8Array(randomBytes(32)));
    const ups = planUpstreams(values.upstream, dir, issuer.did);
    const acts = actionsPlan(
      values.actions ?? [],
      ups.map((u) => u.name),
    );
    // Every target is checked before anything is started or written.
    const all = [targets.issuerKey, targets.agentKey, targets.nodeConfig, ...ups.map((u) => u.chainFile), targets.dataDir];
    const existing = all.filter((f) => existsSync(f));
    if (existing.length > 0) return refuseExisting(existing);
    const nodeJson = { listen, data_dir: targets.dataDir, resources: ups.map((u) => u.resource) };
    let cfg: NodeConfig;
    try {
      cfg = configFromJson(nodeJson, {}, dir);
    } catch (e) {
      if (e instanceof NodeFault) throw new CliError(e.code, e.message);
      throw e;
    }
    const chains: Array<{ name: string; file: string; grant: SignedGrant }> = [];
    for (const [i, u] of ups.entries()) {
      const r = cfg.resources[i]!;
      const actions = acts.named.get(u.name) ?? acts.all ?? (await discoverTools(u.name, r.endpoint!));
      const grant = mintRoot(issuer, { subject: agent.did, resource: r.id, actions, budgetUj, expiryS });
      chains.push({ name: u.name, file: u.chainFile, grant });
    }
    const clash = writeAllOrNone(dir, [
      [targets.issuerKey, (t) => writeKeyFile(t, issuer)],
      [targets.agentKey, (t) => writeKeyFile(t, agent)],
      ...chains.map((c): [string, (t: string) => void] => [c.file, (t) => writeChainFile(t, [c.grant])]),
      [targets.nodeConfig, (t) => writeFileSync(t, `${JSON.stringify(nodeJson, null, 2)}\n`, { flag: 'wx', mode: 0o600 })],
    ]);
    if (clash.length > 0) return refuseExisting(clash);
    const w: Written = { dir, targets, issuer, agent, listen, chains };
    const out = outputsOf(w, jcpInvocation(), server);
    process.stdout.write(values.json ? jsonReport(w, out) : textReport(w, out));
    return 0;
  },
};
