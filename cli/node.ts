/** `jcp node start`: runs an enforcement node (docs/node.md; docs/design.md "The way data flows"). */
import { pino } from 'pino';
import type { Did } from '../core/index.ts';
import { ClusterHooks, readClusterConfig } from '../node/index.ts';
import { type ConfigOverrides, type NodeConfig, NodeFault, loadConfig, startNode } from '../node/index.ts';
import { type Command, UsageError, parse, untilSignal } from './command.ts';

const help = `Usage: jcp node start [--config file] [--listen host:port] [--data dir] [--nats url] [--metrics host:port]
                      [--upstream NAME=URL | --upstream 'NAME=COMMAND ARGS…' …] [--trust-root NAME=did …]
                      [--revocation-staleness-s S] [--region NAME]
                      [--tls-cert f --tls-key f [--tls-ca f] [--tls-client-certs off|request|require]]
                      [--nats-ca f] [--nats-cert f --nats-key f]

Starts an enforcement node: jcp/1 over TCP in front of the configured MCP endpoints, deciding
every call against its signed grant chain (§7, §4.2), sealing every decision as a receipt (§8)
in a durable LevelDB log, and replying only once the receipt is on disk.

On first start the steward key is created (mode 0600) in the data folder and reused after; its
did:key is printed here and logged. On every start the node verifies and replays its own log
(§8.1); a corrupt or missing log stops it (see 'jcp receipts repair'). Logs are pino JSON on
stdout; human notes go to stderr. See docs/node.md for the config format.

--upstream fronts an MCP server without a config file: NAME=http(s)://…/mcp (Streamable HTTP)
or NAME=COMMAND ARGS… (stdio; split at whitespace, a bare command found in node_modules/.bin);
NAME=a2a+http(s)://HOST:PORT fronts an A2A v1.0 agent at that base URL (docs/a2a.md).
Each becomes the resource NAME (the id 'jcp grant mint --resource NAME' names), open to any root
issuer unless --trust-root NAME=did:key:… is given (repeatable). Every resource, its id and its
tools are printed at start.

Options:
  --config file        JSON config (docs/node.md); defaults apply without one
  --listen host:port   jcp/1 listen address (default 127.0.0.1:7400; port 0 = any free port)
  --data dir           data folder (default .data/node)
  --nats url           NATS URL for cluster streams (revocations, budget channels)
  --metrics host:port  serve /metrics, /healthz and /readyz there
  --revocation-staleness-s S
                       with --nats: refuse allows (Deny revoked, detail revocation-stale) once
                       the node could not confirm the latest revocations for S seconds
                       (default 30; 0 = off; docs/cluster.md "Revocation staleness")
  --region NAME        the region label of the cluster metrics (default local)
  --tls-cert f, --tls-key f
                       serve jcp/1 over TLS only (PEM certificate chain and key; docs/tls.md)
  --tls-ca f           CA bundle client certificates must chain to
  --tls-client-certs off|request|require
                       ask for client certificates (never a substitute for the caller's signature)
  --nats-ca f          CA bundle that signs the NATS servers' certificates (NATS over TLS)
  --nats-cert f, --nats-key f
                       client certificate for NATS servers that verify clients
  --upstream NAME=URL|NAME=a2a+URL|'NAME=COMMAND ARGS…'
                       one more resource NAME in front of that MCP server or A2A agent (repeatable)
  --trust-root NAME=did
                       a root issuer honoured for the --upstream resource NAME (repeatable;
                       without any, the resource is open to every root, §7)
  --accept-damaged-log start even if boot replay finds receipts that fail verification or a
                       continuity break (their spend is then not counted); without it such a
                       log stops the node with log-damaged
  -h, --help           show this help

Exit status: 0 after SIGINT/SIGTERM; 1 when the node cannot start or its log fails.`;

/** The options of `jcp node start` (see {@link help}). */
const OPTIONS = {
  config: { type: 'string' },
  listen: { type: 'string' },
  data: { type: 'string' },
  nats: { type: 'string' },
  metrics: { type: 'string' },
  upstream: { type: 'string', multiple: true },
  'trust-root': { type: 'string', multiple: true },
  'accept-damaged-log': { type: 'boolean' },
  'revocation-staleness-s': { type: 'string' },
  region: { type: 'string' },
  'tls-cert': { type: 'string' },
  'tls-key': { type: 'string' },
  'tls-ca': { type: 'string' },
  'tls-client-certs': { type: 'string' },
  'nats-ca': { type: 'string' },
  'nats-cert': { type: 'string' },
  'nats-key': { type: 'string' },
} as const;

/** The command-line options given, as {@link loadConfig} overrides (absent options stay absent). */
function overridesFrom(values: ReturnType<typeof parse<typeof OPTIONS>>['values']): ConfigOverrides {
  return {
    ...(values.listen !== undefined ? { listen: values.listen } : {}),
    ...(values.data !== undefined ? { data: values.data } : {}),
    ...(values.nats !== undefined ? { nats: values.nats } : {}),
    ...(values.metrics !== undefined ? { metrics: values.metrics } : {}),
    ...(values.upstream !== undefined ? { upstream: values.upstream } : {}),
    ...(values['trust-root'] !== undefined ? { trustRoot: values['trust-root'] } : {}),
    ...(values['revocation-staleness-s'] !== undefined ? { revocationStalenessS: values['revocation-staleness-s'] } : {}),
    ...(values.region !== undefined ? { region: values.region } : {}),
    ...(values['tls-cert'] !== undefined ? { tlsCert: values['tls-cert'] } : {}),
    ...(values['tls-key'] !== undefined ? { tlsKey: values['tls-key'] } : {}),
    ...(values['tls-ca'] !== undefined ? { tlsCa: values['tls-ca'] } : {}),
    ...(values['tls-client-certs'] !== undefined ? { tlsClientCerts: values['tls-client-certs'] } : {}),
    ...(values['nats-ca'] !== undefined ? { natsCa: values['nats-ca'] } : {}),
    ...(values['nats-cert'] !== undefined ? { natsCert: values['nats-cert'] } : {}),
    ...(values['nats-key'] !== undefined ? { natsKey: values['nats-key'] } : {}),
  };
}

/**
 * The lines printed on stderr once the node listens: steward, address (and metrics port), the log
 * replay (receipts, bad, breaks, seconds, snapshot), and with a cluster the transparency-log check.
 */
function startBanner(node: Awaited<ReturnType<typeof startNode>>, cfg: NodeConfig, clustered: boolean): string {
  return (
    `jcp node: steward ${node.did}\njcp node: listening on ${node.host}:${node.port}` +
    (node.metricsPort !== undefined ? `, metrics on ${cfg.metrics!.host}:${node.metricsPort}` : '') +
    `\njcp node: log replayed: ${node.boot.receipts} receipts (${node.boot.bad} bad, ${node.boot.breaks} breaks) in ${node.boot.seconds.toFixed(3)} s` +
    (node.boot.snapshot
      ? ` (from the snapshot of seq ${node.boot.snapshot.seq}: ${node.boot.snapshot.replayed} receipts replayed after it)`
      : '') +
    '\n' +
    (clustered ? `jcp node: transparency log: ${node.witnessCheck}\n` : '')
  );
}

/** The `jcp node` command. */
export const command: Command = {
  name: 'node',
  summary: 'run an enforcement node (jcp node start ...)',
  help,
  async run(argv) {
    const [verb, ...rest] = argv;
    if (verb !== 'start') throw new UsageError(verb === undefined ? 'expected a verb: start' : `unknown verb '${verb}'`);
    const { values } = parse(rest, OPTIONS, false);
    let cfg: NodeConfig;
    try {
      cfg = loadConfig(values.config, overridesFrom(values));
    } catch (e) {
      return fault(e);
    }
    let fatal: Error | undefined;
    let node: Awaited<ReturnType<typeof startNode>>;
    let stopped!: () => void;
    const done = new Promise<void>((r) => {
      stopped = r;
    });
    // The signal handlers go in before the node starts, not after its banner: a supervisor that
    // sends SIGTERM the moment it reads "listening" (or during start-up) stops the node gracefully,
    // exit 0, instead of racing the handler's installation (seen: death by SIGTERM under load).
    // They stay until the node has closed: a second signal meanwhile is not fatal either.
    const signalled = untilSignal();
    void signalled.then(() => stopped());
    const dropSignals = () => signalled.off();
    // With NATS the node joins the cluster: budget channels and the revocation stream (docs/cluster.md).
    const logger = pino({ level: cfg.logLevel, base: { svc: 'jcp-node' } });
    let cluster: ClusterHooks | undefined;
    try {
      const clusterCfg = readClusterConfig(cfg.cluster);
      cluster =
        cfg.nats === undefined
          ? undefined
          : new ClusterHooks(cfg.nats, clusterCfg, logger, {
              revocationStalenessS: cfg.revocationStalenessS,
              region: cfg.region,
              natsTls: cfg.natsTls,
            });
      node = await startNode(cfg, {
        logger,
        ...(values['accept-damaged-log'] ? { acceptDamagedLog: true } : {}),
        ...(cluster ? { ...cluster.nodeOptions, witnessed: (d: Did) => cluster!.witnessed(d) } : {}),
        onFatal: (e) => {
          fatal = e;
          stopped();
        },
      });
    } catch (e) {
      await cluster?.close();
      dropSignals();
      return fault(e);
    }
    cluster?.attach(node.steward, node.ledger, node.amendments);
    cluster?.startWitnessing(node, logger);
    cluster?.observe(node.metrics.registry);
    process.stderr.write(startBanner(node, cfg, cluster !== undefined));
    // The resources are printed as their upstreams answer; a signal meanwhile stops the node at once
    // (an upstream that never answers must not hold the node past SIGTERM).
    await Promise.race([printResources(node), done]);
    await done;
    await node.close();
    await cluster?.close();
    dropSignals();
    if (fatal) {
      process.stderr.write(`jcp node: stopped: ${fatal.message}\n`);
      return 1;
    }
    return 0;
  },
};

/** `MCP 2026-07-28 (server/discover)` or `MCP 2025-11-25 (initialize handshake)`: the era an upstream speaks. */
function eraNote(p: { readonly era: 'modern' | 'legacy'; readonly version: string }): string {
  return `MCP ${p.version} (${p.era === 'modern' ? 'server/discover' : 'initialize handshake'})`;
}

/**
 * Prints each resource on stderr, one line each, once its endpoint answered `tools/list` (or
 * could not be reached): `jcp node: resource NAME ID open|trust roots N tools: a, b` then
 * `jcp node: resource NAME speaks MCP 2026-07-28 (server/discover)` (or `MCP 2025-11-25
 * (initialize handshake)`: the era that upstream answered in) — or
 * `decisions only` without an endpoint, `tools: unknown (not reachable yet)` for an upstream down,
 * `agent skills: a, b` for an A2A agent (its card's skill ids; docs/a2a.md).
 */
async function printResources(node: Awaited<ReturnType<typeof startNode>>): Promise<void> {
  await Promise.all([...node.endpoints.values()].map((b) => b.endpoint.ensureTools()));
  for (const r of node.resources) {
    const trust = r.trustRoots === undefined ? 'open' : `trust roots ${r.trustRoots.length}`;
    const ep = node.endpoints.get(r.id)?.endpoint;
    const tools = ep?.tools();
    const what =
      ep === undefined
        ? 'decisions only'
        : ep.kind === 'a2a'
          ? agentLine(ep)
          : tools === undefined
            ? `tools: unknown (not reachable yet${ep.lastFailure?.() ? `: ${ep.lastFailure?.()}` : ''})`
            : `tools: ${tools.map((t) => String(t['name'])).join(', ') || '(none)'}`;
    process.stderr.write(`jcp node: resource ${r.name} ${r.id} ${trust} ${what}\n`);
    const spoken = tools !== undefined ? ep?.protocol?.() : undefined;
    if (spoken !== undefined) process.stderr.write(`jcp node: resource ${r.name} speaks ${eraNote(spoken)}\n`);
    if (r.trustRoots === undefined)
      process.stderr.write(
        `jcp node: warning: resource ${r.name} is open: a grant any key issues itself is decided (and allowed within its budget); give it --trust-root ${r.name}=DID or "trust_roots" in the config\n`,
      );
  }
}

/** The start-up words of an A2A agent: `agent skills: a, b`, or why its card is unknown. */
function agentLine(ep: { skills?(): readonly Record<string, unknown>[] | undefined; lastFailure?(): string | undefined }): string {
  const skills = ep.skills?.();
  if (skills === undefined) return `agent skills: unknown (card not read yet${ep.lastFailure?.() ? `: ${ep.lastFailure?.()}` : ''})`;
  return `agent skills: ${skills.map((s) => String(s['id'])).join(', ') || '(none)'}`;
}

/**
 * Prints a start failure as one line `jcp node: error [code]: message` and returns exit code 1.
 * A bad command-line value (`--listen`, `--metrics`, `--nats`: the fault's `where` is the flag) is
 * a usage mistake instead: thrown as a {@link UsageError} (exit 2). Anything not a NodeFault is
 * rethrown for cli/main.ts to print.
 */
function fault(e: unknown): number {
  if (e instanceof NodeFault) {
    if (e.where?.startsWith('--')) throw new UsageError(e.message.replace(/^config: /, ''));
    // Name the field once: most messages already start with it.
    const at = e.where && !e.message.includes(e.where) ? `${e.where}: ` : '';
    process.stderr.write(`jcp node: error [${e.code}]: ${at}${e.message}\n`);
    return 1;
  }
  throw e;
}
