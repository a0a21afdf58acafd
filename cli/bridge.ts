/**
 * `jcp bridge`: an MCP server (stdio, or Streamable HTTP at `/mcp`) in front of an enforcement
 * node, holding one agent's key and grant chains (or several agents' from a config file over
 * HTTP). Every `tools/call` becomes a caller-signed jcp/1 request (spec §11). See docs/bridge.md.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { DEFAULT_FRAME_CAP, type Did, parseDid, type SignedGrant } from '../core/index.ts';
import { connect as connectNats, type NatsConnection } from '@nats-io/transport-node';
import {
  BridgeAgent,
  BridgeConfigError,
  BridgeStdioTransport,
  CallJournal,
  DEFAULT_THRESHOLD_TIMEOUT_MS,
  type Journal,
  JournalError,
  NatsCallJournal,
  type HttpAgent,
  ThresholdCaller,
  serveBridgeStdio,
  randomSaltBase,
  serveBridgeHttp,
  type SessionLimits,
  type A2aBridge,
  serveBridgeA2a,
} from '../bridge/index.ts';
import { isFrostError } from '../frost/index.ts';
import { checkStreamName } from '../natsio/index.ts';
import { type ClientSigner, JcpClient } from '../client/index.ts';
import { readKeyFile, readSecretFile } from '../node/index.ts';
import { boundConsoleError } from '../io/index.ts';
import { hostPortArg, ujArg } from './args.ts';
import { readChainFile } from '../client/index.ts';
import { CliError, type Command, UsageError, connectionError, parse, untilSignal } from './command.ts';
import { TLS_FLAGS, TLS_HELP, clientTlsArgs } from './tlsargs.ts';

const help = `Usage: jcp bridge --node host:port --key agent.key --chain a.chain.json [--chain b.chain.json ...]
                  [--http host:port [--allow-remote] [--token-file file | --token-env NAME]
                   [--allow-origin ORIGIN ...] [--allow-host HOST:PORT ...] [--session-idle-s s] [--session-init-s s]
                   [--max-sessions-per-agent n] [--max-sessions n]]
                  [--a2a host:port [--allow-remote] [--token-file file | --token-env NAME]]
                  [--accept-delegation-from DID ...] [--delegate-to DID ...]
                  [--cost-uj uj] [--tool-cost TOOL=uj ...] [--journal file] [--replay-window-s s]
                  [--journal-nats URL [--journal-bucket NAME] [--journal-max-bytes n]]
                  [--nats-ca f] [--nats-cert f --nats-key f]
                  [--frame-cap bytes] [--nats URL [--frost-prefix P] [--frost-timeout-ms MS]]
                  [--ca file [--cert file --client-key file]]
       jcp bridge --http host:port --config bridge.json [--allow-remote]
       jcp bridge --a2a host:port --config bridge.json [--allow-remote]

An MCP server for one agent: it lists the upstream tools the agent's grants permit (each leaf
grant's resource and actions, intersected with the node's tool list; a name two resources share
becomes <resource>__<tool>) and turns each tools/call into a signed jcp/1 request (frame tool-call,
trust control, the arguments as payload). Serves stdio by default; --http serves Streamable HTTP
at /mcp (loopback only unless --allow-remote; a bearer token from --token-file or --token-env is
then required by every request). The resource jcp://budget reports each grant's budget.

  --allow-origin  with --http: a browser Origin (scheme://host[:port]) allowed besides the bridge's
                  own address (repeatable); a request with another Origin gets 403 origin-forbidden,
                  one without Origin (a non-browser client) is served
  --allow-host    with --http: a Host header (host:port) accepted besides the bridge's own address
                  (repeatable): a bridge on loopback behind a proxy sees the proxy's Host
  --session-idle-s  with --http: an initialized MCP session idle this long is closed (default 300)
  --session-init-s  with --http: a session that never sent notifications/initialized is closed
                  this long after its last request (default 15)
  --max-sessions-per-agent  with --http: open sessions per agent (default 64); past it,
                  initialize gets 429 session-limit-agent
  --max-sessions  with --http: open sessions in all (default 1024); past it 503 session-limit-total
  --a2a           also (or, without --http, only) serve A2A v1.0 for the agent(s): the agent card at
                  http://host:port/.well-known/agent-card.json lists the skills the grants permit
                  on A2A agents behind the node; JSON-RPC at /, HTTP+JSON at /rest; every message
                  is a signed agent-task request (docs/a2a.md). Bearer tokens and --allow-remote as
                  for --http
  --accept-delegation-from  a did:key whose delegated chains this agent accepts (repeatable): a
                  tools/call with _meta jcp/delegation, or an A2A message with metadata
                  jcp/delegation, is then made under that chain (debited from every link, §4.2);
                  chains from anyone else are refused delegation-delegator-not-accepted
  --delegate-to   a did:key this agent may hand a delegated grant to (repeatable; an A2A message
                  with metadata jcp/delegate {to, ..}). Without it, only an A2A face with a token
                  mints delegations (to any key); on a face without one every jcp/delegate is
                  refused delegate-target-refused, as anyone who reaches it could name their own key
  --cost-uj       cost claimed per call, µJ (default 0; the node prices at no less than its estimate)
  --tool-cost     cost of one tool by its listed name, µJ (repeatable; overrides --cost-uj)
  --journal       file that fixes the time of each open call, so a call re-sent after a restart
                  is the same request (replayed by the node, never debited twice)
  --replay-window-s  how long an unanswered call stays re-sendable (default 300)
  --journal-nats  share the call journal with the agent's other bridge processes (replicas behind
                  one proxy) in a NATS JetStream KV bucket at this url: a call re-sent to another
                  replica is the same request, one decision and one debit. Instead of --journal.
                  NATS unreachable: calls are refused journal-unavailable (nothing sent, nothing
                  debited); a full bucket: journal-full
  --journal-bucket  the KV bucket of --journal-nats (default jcp_bridge_journal; created if missing)
  --journal-max-bytes  the bucket's byte bound when --journal-nats creates it (default 67108864),
                       kept as a count of entries (docs/bridge.md)
  --nats-ca f     CA bundle that signs the NATS servers' certificates (--journal-nats, --nats)
  --nats-cert f, --nats-key f  a client certificate and key for NATS (--journal-nats, --nats)
${TLS_HELP}
  --frame-cap     the node's frame cap, bytes (default ${DEFAULT_FRAME_CAP}); larger calls are refused
  --nats          the chains' subject is a FROST threshold group (spec §2.2): each call is a
                  signing session with the group's holders over this NATS (each holder applies its
                  approval policy to the exact call); --key is then the coordinator identity the
                  sessions are signed with. A call the holders do not sign is a tool error result
                  (_meta jcp/error threshold-refused | threshold-unavailable | threshold-failed,
                  jcp/refusals naming each holder and its reason) and is never sent to the node
  --frost-prefix  the FROST subject prefix (default jcp.frost)
  --frost-timeout-ms  deadline of each signing round, ms (default ${DEFAULT_THRESHOLD_TIMEOUT_MS})
  --config        several agents over --http: {"node": "host:port", "agents": [{"name", "key",
                  "chains": [..], "token_file" | "token_env", "cost_uj"?, "tool_costs"?, "journal"?,
                  "accept_delegation_from"?: [did:key, ..], "delegate_to"?: [did:key, ..]}]}
                  (paths relative to the config file)

Exit status: 0 when the MCP client closes stdio (or on SIGINT/SIGTERM), 1 on a failure to start, or
[message-too-large] when a stdio message from the client passes the SDK's 10 MiB read buffer.`;

/** One agent's settings, from flags or a config file entry. */
interface AgentSpec {
  readonly name: string;
  readonly key: string;
  readonly chains: readonly string[];
  readonly token?: string;
  readonly costUj: bigint;
  readonly toolCosts: Map<string, bigint>;
  readonly journal?: string;
  /** Delegators whose chains this agent accepts (`--accept-delegation-from`, `accept_delegation_from`). */
  readonly acceptFrom: readonly string[];
  /** Keys this agent may delegate to (`--delegate-to`, `delegate_to`); undefined: see `AgentOptions.delegateTo`. */
  readonly delegateTo?: readonly string[];
}

/** A whole number flag of at least `min`, in `unit`. @throws UsageError */
function intArg(v: string, flag: string, unit: string, min: number): number {
  if (!/^\d+$/.test(v) || !Number.isSafeInteger(Number(v)) || Number(v) < min)
    throw new UsageError(`${flag}: expected a whole number of ${unit} ≥ ${min}, got ${v}`);
  return Number(v);
}

function toolCostArg(v: string, flag: string): [string, bigint] {
  const i = v.lastIndexOf('=');
  if (i <= 0) throw new UsageError(`${flag}: expected TOOL=uj, got ${v}`);
  return [v.slice(0, i), ujArg(v.slice(i + 1), flag)];
}

function tokenFrom(file: string | undefined, env: string | undefined, what: string): string | undefined {
  if (file !== undefined && env !== undefined) throw new UsageError(`${what}: give a token file or an environment variable, not both`);
  if (file !== undefined) {
    // Refused when group or others may read it, as key files are (node/keyfile.ts).
    try {
      return readSecretFile(file);
    } catch (e) {
      throw new CliError('token-invalid', `${what}: ${file}: ${(e as Error).message}`);
    }
  }
  if (env !== undefined) {
    const t = process.env[env]?.trim();
    if (t === undefined || t.length === 0) throw new CliError('token-invalid', `${what}: environment variable ${env} is not set`);
    return t;
  }
  return undefined;
}

/** Reads a multi-agent config file. @throws CliError `config-invalid` naming the field. */
function readConfig(file: string): { node?: string; agents: AgentSpec[] } {
  const bad = (why: string): never => {
    throw new CliError('config-invalid', `${file}: ${why}`);
  };
  let v: { node?: unknown; agents?: unknown };
  try {
    v = JSON.parse(readFileSync(file, 'utf8')) as typeof v;
  } catch (e) {
    return bad(`not a readable JSON file: ${(e as Error).message}`);
  }
  const dir = path.dirname(file);
  const rel = (p: string) => path.resolve(dir, p);
  if (!Array.isArray(v.agents) || v.agents.length === 0) bad('agents: expected a non-empty array');
  const agents = (v.agents as Array<Record<string, unknown>>).map((a, i) => {
    const f = `agents[${i}]`;
    if (typeof a?.['name'] !== 'string' || a['name'].length === 0) bad(`${f}.name: expected text`);
    if (typeof a['key'] !== 'string') bad(`${f}.key: expected a key file path`);
    const chains = a['chains'];
    if (!Array.isArray(chains) || chains.length === 0 || chains.some((c) => typeof c !== 'string'))
      bad(`${f}.chains: expected chain file paths`);
    if ('token' in a) bad(`${f}.token: a token is never inlined; use token_file or token_env`);
    const tf = a['token_file'];
    const te = a['token_env'];
    if (tf !== undefined && typeof tf !== 'string') bad(`${f}.token_file: expected a path`);
    if (te !== undefined && typeof te !== 'string') bad(`${f}.token_env: expected a variable name`);
    const token = tokenFrom(tf === undefined ? undefined : rel(tf as string), te as string | undefined, f);
    if (token === undefined) bad(`${f}: token_file or token_env is required`);
    const cost = a['cost_uj'] ?? 0;
    if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 0) bad(`${f}.cost_uj: expected a non-negative integer (µJ)`);
    const tc = (a['tool_costs'] ?? {}) as Record<string, unknown>;
    const toolCosts = new Map<string, bigint>();
    for (const [k, c] of Object.entries(tc)) {
      if (typeof c !== 'number' || !Number.isSafeInteger(c) || c < 0) bad(`${f}.tool_costs.${k}: expected a non-negative integer (µJ)`);
      toolCosts.set(k, BigInt(c as number));
    }
    const journal = a['journal'];
    if (journal !== undefined && typeof journal !== 'string') bad(`${f}.journal: expected a path`);
    const accept = a['accept_delegation_from'] ?? [];
    if (!Array.isArray(accept) || accept.some((d) => typeof d !== 'string' || !didOk(d)))
      bad(`${f}.accept_delegation_from: expected an array of did:key`);
    const delegateTo = a['delegate_to'];
    if (delegateTo !== undefined && (!Array.isArray(delegateTo) || delegateTo.some((d) => typeof d !== 'string' || !didOk(d))))
      bad(`${f}.delegate_to: expected an array of did:key`);
    return {
      name: a['name'] as string,
      key: rel(a['key'] as string),
      chains: (chains as string[]).map(rel),
      ...(token !== undefined ? { token } : {}),
      costUj: BigInt(cost as number),
      toolCosts,
      ...(journal !== undefined ? { journal: rel(journal as string) } : {}),
      acceptFrom: accept as string[],
      ...(delegateTo !== undefined ? { delegateTo: delegateTo as string[] } : {}),
    };
  });
  if (v.node !== undefined && typeof v.node !== 'string') bad('node: expected host:port');
  return { ...(typeof v.node === 'string' ? { node: v.node } : {}), agents };
}

/** The flags of `jcp bridge` (see `help`). */
const OPTIONS = {
  node: { type: 'string' },
  key: { type: 'string' },
  chain: { type: 'string', multiple: true },
  http: { type: 'string' },
  a2a: { type: 'string' },
  'accept-delegation-from': { type: 'string', multiple: true },
  'delegate-to': { type: 'string', multiple: true },
  'allow-remote': { type: 'boolean' },
  'allow-origin': { type: 'string', multiple: true },
  'allow-host': { type: 'string', multiple: true },
  'session-idle-s': { type: 'string' },
  'session-init-s': { type: 'string' },
  'max-sessions-per-agent': { type: 'string' },
  'max-sessions': { type: 'string' },
  'token-file': { type: 'string' },
  'token-env': { type: 'string' },
  config: { type: 'string' },
  'cost-uj': { type: 'string' },
  'tool-cost': { type: 'string', multiple: true },
  journal: { type: 'string' },
  'replay-window-s': { type: 'string' },
  'frame-cap': { type: 'string' },
  nats: { type: 'string' },
  'frost-prefix': { type: 'string' },
  'frost-timeout-ms': { type: 'string' },
  'journal-nats': { type: 'string' },
  'journal-bucket': { type: 'string' },
  'journal-max-bytes': { type: 'string' },
  'nats-ca': { type: 'string' },
  'nats-cert': { type: 'string' },
  'nats-key': { type: 'string' },
  ...TLS_FLAGS,
} as const;

/** The parsed flags of `jcp bridge`. */
type BridgeValues = ReturnType<typeof parse<typeof OPTIONS>>['values'];

/** What the flags ask for, checked: the node, the agents, and the shared settings. */
interface BridgePlan {
  readonly host: string;
  readonly port: number;
  /** `host:port` of the node, as given (for error messages). */
  readonly nodeAddr: string;
  readonly specs: readonly AgentSpec[];
  readonly http: { host: string; port: number } | undefined;
  /** `--a2a`: where the A2A face listens. */
  readonly a2a: { host: string; port: number } | undefined;
  /** The replay window of the call journals (seconds). */
  readonly windowS: number;
  /** The largest frame the bridge sends (bytes). */
  readonly frameCap: number;
  /** How long a threshold signing session may take (ms). */
  readonly frostTimeoutMs: number;
  /** TLS to the node (`--ca`, `--cert`, `--client-key`), or undefined for plain TCP. */
  readonly tls: ReturnType<typeof clientTlsArgs>;
  /** The HTTP face's session bounds (`--session-*`, `--max-sessions*`; absent: the defaults). */
  readonly limits: Partial<SessionLimits>;
  /** `--allow-origin` values. */
  readonly origins: readonly string[];
  /** `--allow-host` values. */
  readonly hosts: readonly string[];
  /** `--journal-nats`: the journal replicas share, or undefined (a journal per process). */
  readonly shared: { servers: string; bucket: string | undefined; maxBytes: number | undefined } | undefined;
  /** `--nats-ca`, `--nats-cert`, `--nats-key`: TLS of the bridge's NATS connections, or undefined (as the url says). */
  readonly natsTls: { caFile?: string; certFile?: string; keyFile?: string } | undefined;
}

/** The `--session-*`/`--max-sessions*` flags as session limits. @throws UsageError (a bad number, or without `--http`). */
function limitsArg(values: BridgeValues, http: boolean): Partial<SessionLimits> {
  const given = (
    ['session-idle-s', 'session-init-s', 'max-sessions-per-agent', 'max-sessions', 'allow-origin', 'allow-host'] as const
  ).filter((f) => values[f] !== undefined);
  if (!http && given.length > 0) throw new UsageError(`--${given[0]} goes with --http`);
  const out: { -readonly [K in keyof SessionLimits]?: number } = {};
  if (values['session-idle-s'] !== undefined) out.idleMs = intArg(values['session-idle-s'], '--session-idle-s', 'seconds', 1) * 1000;
  if (values['session-init-s'] !== undefined) out.initMs = intArg(values['session-init-s'], '--session-init-s', 'seconds', 1) * 1000;
  if (values['max-sessions-per-agent'] !== undefined)
    out.perAgent = intArg(values['max-sessions-per-agent'], '--max-sessions-per-agent', 'sessions', 1);
  if (values['max-sessions'] !== undefined) out.total = intArg(values['max-sessions'], '--max-sessions', 'sessions', 1);
  return out;
}

/** The node connections and journals opened so far, and the NATS connection of a threshold subject. */
interface Opened {
  readonly list: Array<{ client: JcpClient; journal: Journal }>;
  nc: NatsConnection | undefined;
  /** The journal the agents share (`--journal-nats`), once opened. */
  shared?: NatsCallJournal;
}

/**
 * Checks the flags and reads the agents (from `--config` or from `--key`/`--chain`), in this
 * order of errors: the numbers, the `--frost-*` flags without `--nats`, the config's exclusions, a
 * missing `--key`/`--chain`/`--node`, `--allow-remote` without `--http`.
 * @throws UsageError for a bad combination of flags; CliError `config-invalid` for a bad config file.
 */
function planBridge(values: BridgeValues): BridgePlan {
  const windowS = values['replay-window-s'] === undefined ? 300 : intArg(values['replay-window-s'], '--replay-window-s', 'seconds', 0);
  const frameCap = values['frame-cap'] === undefined ? DEFAULT_FRAME_CAP : intArg(values['frame-cap'], '--frame-cap', 'bytes', 1);
  const http = values.http === undefined ? undefined : hostPortArg(values.http, '--http');
  const a2a = values.a2a === undefined ? undefined : hostPortArg(values.a2a, '--a2a');
  let nodeAddr = values.node;
  let specs: AgentSpec[];
  if (values.nats === undefined && (values['frost-prefix'] !== undefined || values['frost-timeout-ms'] !== undefined)) {
    throw new UsageError('--frost-prefix/--frost-timeout-ms go with --nats');
  }
  const frostTimeoutMs =
    values['frost-timeout-ms'] === undefined
      ? DEFAULT_THRESHOLD_TIMEOUT_MS
      : intArg(values['frost-timeout-ms'], '--frost-timeout-ms', 'milliseconds', 1);
  if (values.config !== undefined) {
    if (values.nats !== undefined) throw new UsageError('--nats (a threshold subject) is for one agent, not with --config');
    if (http === undefined && a2a === undefined)
      throw new UsageError('--config serves several agents over --http or --a2a; give --http host:port');
    for (const f of [
      'key',
      'chain',
      'token-file',
      'token-env',
      'cost-uj',
      'tool-cost',
      'journal',
      'accept-delegation-from',
      'delegate-to',
    ] as const) {
      if (values[f] !== undefined) throw new UsageError(`--${f} goes in the config file's agents with --config`);
    }
    const cfg = readConfig(values.config);
    nodeAddr ??= cfg.node;
    specs = cfg.agents;
  } else specs = [agentFromFlags(values, http !== undefined || a2a !== undefined)];
  if (nodeAddr === undefined) throw new UsageError('--node is required');
  if (values['allow-remote'] === true && http === undefined && a2a === undefined)
    throw new UsageError('--allow-remote needs --http or --a2a');
  const { host, port } = hostPortArg(nodeAddr, '--node');
  const tls = clientTlsArgs(values);
  const limits = limitsArg(values, http !== undefined || a2a !== undefined);
  const shared = sharedJournalArgs(values, specs);
  const natsTls = natsTlsArgs(values);
  return {
    ...{ host, port, nodeAddr, specs, http, a2a, windowS, frameCap, frostTimeoutMs, tls, limits, shared, natsTls },
    origins: values['allow-origin'] ?? [],
    hosts: (values['allow-host'] ?? []).map((h) => {
      hostPortArg(h, '--allow-host');
      return h;
    }),
  };
}

/**
 * `--journal-nats` with `--journal-bucket`/`--journal-max-bytes`, or undefined.
 * @throws UsageError for a bucket flag without `--journal-nats`, or with a journal file (flag or config).
 */
function sharedJournalArgs(values: BridgeValues, specs: readonly AgentSpec[]): BridgePlan['shared'] {
  const url = values['journal-nats'];
  if (url === undefined) {
    if (values['journal-bucket'] !== undefined || values['journal-max-bytes'] !== undefined)
      throw new UsageError('--journal-bucket/--journal-max-bytes go with --journal-nats');
    return undefined;
  }
  if (specs.some((s) => s.journal !== undefined))
    throw new UsageError('--journal-nats and a journal file exclude each other (the shared journal replaces it)');
  const bucket = values['journal-bucket'];
  if (bucket !== undefined) {
    try {
      checkStreamName(bucket);
    } catch (e) {
      throw new UsageError(`--journal-bucket: ${(e as Error).message}`);
    }
  }
  const maxBytes =
    values['journal-max-bytes'] === undefined ? undefined : intArg(values['journal-max-bytes'], '--journal-max-bytes', 'bytes', 4096);
  return { servers: url, bucket, maxBytes };
}

/** `--nats-ca`, `--nats-cert`, `--nats-key` as the NATS client's TLS files, or undefined. @throws UsageError (cert without key, or no NATS flag). */
function natsTlsArgs(values: BridgeValues): BridgePlan['natsTls'] {
  const ca = values['nats-ca'];
  const cert = values['nats-cert'];
  const key = values['nats-key'];
  if ((cert === undefined) !== (key === undefined)) throw new UsageError('--nats-cert and --nats-key go together');
  if (ca === undefined && cert === undefined) return undefined;
  if (values.nats === undefined && values['journal-nats'] === undefined)
    throw new UsageError('--nats-ca/--nats-cert/--nats-key go with --journal-nats or --nats');
  return { ...(ca !== undefined ? { caFile: ca } : {}), ...(cert !== undefined ? { certFile: cert, keyFile: key! } : {}) };
}

/** The one agent of `--key`/`--chain` (its costs in µJ). @throws UsageError when `--key` or `--chain` is missing, or a token flag comes without `--http`. */
function agentFromFlags(values: BridgeValues, overHttp: boolean): AgentSpec {
  if (values.key === undefined) throw new UsageError('--key is required');
  if (values.chain === undefined || values.chain.length === 0) throw new UsageError('--chain is required (one or more)');
  if (!overHttp && (values['token-file'] !== undefined || values['token-env'] !== undefined)) {
    throw new UsageError('--token-file/--token-env need --http (stdio has no bearer token)');
  }
  const token = tokenFrom(values['token-file'], values['token-env'], '--token');
  return {
    name: 'agent',
    key: values.key,
    chains: values.chain,
    ...(token !== undefined ? { token } : {}),
    costUj: ujArg(values['cost-uj'] ?? '0', '--cost-uj'),
    toolCosts: new Map((values['tool-cost'] ?? []).map((v) => toolCostArg(v, '--tool-cost'))),
    ...(values.journal !== undefined ? { journal: values.journal } : {}),
    acceptFrom: didsArg(values['accept-delegation-from'] ?? [], '--accept-delegation-from'),
    ...(values['delegate-to'] !== undefined ? { delegateTo: didsArg(values['delegate-to'], '--delegate-to') } : {}),
  };
}

/** The did:keys given to a repeatable `flag`. @throws UsageError naming the flag and the first that is not one. */
function didsArg(values: readonly string[], flag: string): string[] {
  return values.map((d) => {
    if (!didOk(d)) throw new UsageError(`${flag}: expected a did:key, got ${d}`);
    return d;
  });
}

/** Whether `d` is a did:key this build reads. */
function didOk(d: string): boolean {
  try {
    parseDid(d as Did);
    return true;
  } catch {
    return false;
  }
}

/** Closes every node connection and journal opened, then the NATS connection; never throws. */
async function closeOpened(o: Opened): Promise<void> {
  for (const x of o.list) {
    await x.client.close().catch(() => undefined);
    await x.journal.close();
  }
  await o.shared?.close();
  await o.nc?.close().catch(() => undefined);
}

/**
 * A threshold subject's signer: the group every chain's leaf names, signing through a FROST session
 * over the NATS at `natsUrls` (comma-separated) that `key` coordinates (docs/bridge.md "A threshold
 * subject"). @throws UsageError when the chains name different subjects; CliError `nats-unreachable`,
 * or the FROST error's own code.
 */
async function thresholdSigner(
  values: BridgeValues & { nats: string },
  plan: BridgePlan,
  key: ReturnType<typeof readKeyFile>,
  chains: readonly SignedGrant[][],
  opened: Opened,
): Promise<{ signer: ClientSigner; threshold: ThresholdCaller }> {
  // A threshold subject: the caller is the group the leaf grants name; the key coordinates.
  const subjects = [...new Set(chains.map((c) => c[c.length - 1]?.grant.subject))];
  if (subjects.length !== 1 || subjects[0] === undefined)
    throw new UsageError('--nats: every --chain must name the same subject (the threshold group) in its leaf grant');
  const group = subjects[0];
  let nc: NatsConnection;
  try {
    nc = await connectNats({
      servers: values.nats.split(','),
      name: 'jcp-bridge',
      ...(plan.natsTls !== undefined ? { tls: plan.natsTls } : {}),
    });
  } catch (e) {
    throw new CliError('nats-unreachable', `cannot reach NATS at ${values.nats}: ${(e as Error).message}`);
  }
  opened.nc = nc;
  let threshold: ThresholdCaller;
  try {
    threshold = await ThresholdCaller.open({
      nc,
      group,
      coordinator: key,
      timeoutMs: plan.frostTimeoutMs,
      ...(values['frost-prefix'] !== undefined ? { prefix: values['frost-prefix'] } : {}),
    });
  } catch (e) {
    if (isFrostError(e)) throw new CliError(e.code, e.message);
    throw e;
  }
  return { signer: { did: threshold.did, sign: threshold.sign }, threshold };
}

/**
 * The caller must be each leaf grant's subject (spec §7), else every call is a sealed deny.
 * @throws CliError `key-not-subject` naming the chain file and the subject its leaf grant names.
 */
function refuseForeignChains(s: AgentSpec, did: string, chains: readonly SignedGrant[][]): void {
  const foreign = s.chains.filter((_, i) => chains[i]![chains[i]!.length - 1]?.grant.subject !== did);
  if (foreign.length === 0) return;
  const leaf = chains[s.chains.indexOf(foreign[0]!)]!;
  throw new CliError(
    'key-not-subject',
    `${s.key} is ${did}, but the leaf grant of ${foreign.join(', ')} names ${String(leaf[leaf.length - 1]?.grant.subject)} as its subject: pass that subject's key`,
  );
}

/**
 * The journal every agent of this process shares with the other replicas (`--journal-nats`),
 * opened once (its bucket created if missing) and recorded in `opened`; undefined without the
 * flag. @throws CliError `journal-unavailable` when NATS or the bucket cannot be reached in time.
 */
async function sharedJournal(plan: BridgePlan, opened: Opened): Promise<NatsCallJournal | undefined> {
  if (plan.shared === undefined) return undefined;
  if (opened.shared !== undefined) return opened.shared;
  const j = new NatsCallJournal({
    servers: plan.shared.servers,
    windowS: plan.windowS,
    ...(plan.shared.bucket !== undefined ? { bucket: plan.shared.bucket } : {}),
    ...(plan.shared.maxBytes !== undefined ? { maxBytes: plan.shared.maxBytes } : {}),
    link: { ...(plan.natsTls !== undefined ? { tls: plan.natsTls } : {}) },
  });
  opened.shared = j;
  try {
    await j.ready();
  } catch (e) {
    if (e instanceof JournalError) throw new CliError(e.code, e.message.slice(e.code.length + 2));
    throw e;
  }
  return j;
}

/**
 * Opens each agent: its key and chains, its signer (a threshold group's with `--nats`), its call
 * journal, then its node connection (recorded in `opened`). @throws the key, chain, journal or
 * threshold errors; a connection error for the node.
 */
async function openAgents(values: BridgeValues, plan: BridgePlan, opened: Opened): Promise<HttpAgent[]> {
  const agents: HttpAgent[] = [];
  for (const s of plan.specs) {
    const key = readKeyFile(s.key);
    const chains: SignedGrant[][] = s.chains.map((c) => readChainFile(c));
    let signer: ClientSigner = key;
    let threshold: ThresholdCaller | undefined;
    if (values.nats !== undefined)
      ({ signer, threshold } = await thresholdSigner({ ...values, nats: values.nats }, plan, key, chains, opened));
    else refuseForeignChains(s, key.did, chains);
    // The journal first: a journal that cannot be opened must not leave a node connection
    // open (it kept the process alive after the error).
    // A random salt start per process: two bridges of one agent never sign one request for two calls.
    const journal: Journal =
      (await sharedJournal(plan, opened)) ??
      new CallJournal({ ...(s.journal !== undefined ? { file: s.journal } : {}), windowS: plan.windowS, saltBase: randomSaltBase() });
    let client: JcpClient;
    try {
      client = await JcpClient.connect({ host: plan.host, port: plan.port, signer, ...(plan.tls !== undefined ? { tls: plan.tls } : {}) });
    } catch (e) {
      if (journal !== opened.shared) await journal.close();
      throw connectionError(e, `node ${plan.nodeAddr}`);
    }
    opened.list.push({ client, journal });
    const agent = new BridgeAgent({
      name: s.name,
      signer,
      chains,
      client,
      journal,
      costUj: s.costUj,
      toolCostsUj: s.toolCosts,
      frameCap: plan.frameCap,
      ...(threshold !== undefined ? { threshold } : {}),
      acceptDelegationFrom: s.acceptFrom as Did[],
      ...(s.delegateTo !== undefined ? { delegateTo: s.delegateTo as Did[] } : {}),
    });
    agents.push({ agent, ...(s.token !== undefined ? { token: s.token } : {}) });
  }
  return agents;
}

/**
 * Serves one agent over stdio until the client closes stdin or a signal comes, then closes
 * everything; resolves to 0. @throws CliError `message-too-large` when a message passed the SDK's
 * stdio read buffer (10 MiB).
 */
async function serveStdio(agent: BridgeAgent, opened: Opened): Promise<number> {
  const transport = new BridgeStdioTransport();
  // The stdio transport (as the SDK's) closes itself on a message past its read buffer (10 MiB): say so
  // and exit 1, rather than ending as if the client had closed stdio.
  let overflow: Error | undefined;
  transport.onerror = (e: Error) => {
    if (/ReadBuffer exceeded/.test(e.message)) overflow = e;
  };
  const done = new Promise<void>((resolve) => {
    transport.onclose = () => resolve();
    process.stdin.once('end', () => resolve());
    process.once('SIGINT', () => resolve());
    process.once('SIGTERM', () => resolve());
  });
  const served = await serveBridgeStdio(agent, transport);
  await done;
  await served.close().catch(() => undefined);
  await closeOpened(opened);
  if (overflow !== undefined) {
    throw new CliError(
      'message-too-large',
      `an MCP message from the client passed the stdio read buffer (${overflow.message}); the session is closed`,
    );
  }
  return 0;
}

/** Starts one listener, turning its config errors into CliErrors (after closing what was opened). */
async function listen<T>(
  what: string,
  addr: { host: string; port: number },
  start: () => Promise<T>,
  cleanup: () => Promise<void>,
): Promise<T> {
  try {
    return await start();
  } catch (e) {
    await cleanup();
    if (e instanceof BridgeConfigError) throw new CliError(e.code, e.message);
    if ((e as { syscall?: string }).syscall === 'listen')
      throw new CliError(
        'listen-failed',
        `cannot listen on ${addr.host}:${addr.port}${what === '--a2a' ? ' (--a2a)' : ''}: ${(e as Error).message}`,
      );
    throw e;
  }
}

/**
 * Serves the agents over Streamable HTTP at `--http` and/or A2A at `--a2a`, prints
 * `{listening?, a2a?, agents}` as one JSON line, and runs until SIGINT or SIGTERM; resolves to 0.
 * @throws CliError with the config error's code, or `listen-failed`.
 */
async function serveHttp(plan: BridgePlan, agents: HttpAgent[], allowRemote: boolean, opened: Opened): Promise<number> {
  let served: Awaited<ReturnType<typeof serveBridgeHttp>> | undefined;
  let a2a: A2aBridge | undefined;
  let restoreConsole: (() => void) | undefined;
  const cleanup = async () => {
    await served?.close();
    await closeOpened(opened);
  };
  if (plan.http !== undefined) {
    const http = plan.http;
    served = await listen(
      '--http',
      http,
      () =>
        serveBridgeHttp({
          ...{ host: http.host, port: http.port, agents, allowRemote, limits: plan.limits, allowedOrigins: plan.origins },
          allowedHosts: plan.hosts,
        }),
      cleanup,
    );
  }
  if (plan.a2a !== undefined) {
    const at = plan.a2a;
    // The A2A SDK logs every refused request with its stack trace: bounded, one line each (io/stderr.ts).
    restoreConsole = boundConsoleError();
    a2a = await listen(
      '--a2a',
      at,
      () => serveBridgeA2a({ host: at.host, port: at.port, agents, allowRemote, allowedOrigins: plan.origins }),
      cleanup,
    );
  }
  // The handlers go in before the listening line: a supervisor that signals the moment it reads
  // it stops the bridge gracefully, never by the signal's default action (test/node/signals.test.ts).
  const signalled = untilSignal();
  process.stdout.write(
    `${JSON.stringify({
      ...(served !== undefined ? { listening: served.url } : {}),
      ...(a2a !== undefined ? { a2a: a2a.url } : {}),
      agents: agents.map((a) => ({ name: a.agent.name, did: a.agent.did })),
    })}\n`,
  );
  await signalled;
  await a2a?.close();
  await cleanup();
  signalled.off();
  restoreConsole?.();
  return 0;
}

/** The `jcp bridge` command. */
export const command: Command = {
  name: 'bridge',
  summary: 'serve MCP (stdio or Streamable HTTP) for an agent, every call decided by a node',
  help,
  async run(argv) {
    const { values } = parse(argv, OPTIONS, false);
    const plan = planBridge(values);
    const opened: Opened = { list: [], nc: undefined };
    let agents: HttpAgent[];
    try {
      agents = await openAgents(values, plan, opened);
    } catch (e) {
      await closeOpened(opened);
      throw e;
    }
    if (plan.http === undefined && plan.a2a === undefined) return serveStdio(agents[0]!.agent, opened);
    return serveHttp(plan, agents, values['allow-remote'] === true, opened);
  },
};
