/**
 * The demo (`jcp demo`, `npm start`): a local enforcement cluster on real MCP servers, end to end.
 *
 * 1. NATS: the server on 127.0.0.1:4222, else one started here, else none (single-node parts only).
 * 2. The issuer mints a files root (split into one shard per node, §4.5) and a memory root (one
 *    shared grant every node serves as a budget channel; sharded when there is no NATS), then
 *    three nodes start, each fronting `@modelcontextprotocol/server-filesystem` over a sample
 *    folder and `@modelcontextprotocol/server-memory`.
 * 3. Three agent workers (separate processes) get grants and call tools until their budgets run
 *    out; mid-run the issuer revokes one (§4.3) and steers another through a checkpoint and
 *    amendment to a tighter budget (§4.7). The first, acting as a planner, first hands a sub-task
 *    over A2A to a researcher agent (an SDK A2A server the nodes front as a resource) with a
 *    delegated grant of a quarter of its files budget; the researcher spends it through its own
 *    bridge until refused (docs/a2a.md).
 * 4. A 2-of-3 team made by FROST DKG over NATS approves one irreversible action (§2.2); one member
 *    alone is refused.
 * 5. Everything stops; the report is computed from each node's verified receipt log.
 *
 * Every child process is tracked (testkit/procs.ts): stopped here on success and failure, and
 * SIGKILLed if this process exits or is interrupted.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { type Actor, actorFromSeed, type ContentId, grantId, overdraftBound } from '../core/index.ts';
import { auditChannel, channelNames, JetStreamBus } from '../channel/index.ts';
import type { Probe } from '../meter/index.ts';
import type { Steering } from './actions.ts';
import { type Broker, chosenBroker, demoStreams, demoSubjectRoot, findBroker, NATS_INSTALL_HINT, removeDemoStreams } from './broker.ts';
import { freePort, interrupting, whenInterrupted } from '../testkit/index.ts';
import { DemoError, DemoErrorCodes } from './errors.ts';
import type { NodeEvidence } from './evidence.ts';
import { type CallEvent, chainToHex, type NodeAddress } from './messages.ts';
import { type DemoNode, metricsText, startNode, stopNode } from './nodes.ts';
import { delegateWorker, leafId, mintRoots, type Roots, teamGrant, type WorkerChains } from './plan.ts';
import type { RunFacts } from './compile.ts';
import type { DemoReport } from './report.ts';
import {
  AGENT_RESOURCE,
  BUDGETS,
  DELEGATED_FRACTION,
  FS_ACTIONS,
  FS_RESOURCE,
  MEMORY_ACTIONS,
  MEMORY_RESOURCE,
  meterSection,
  PLANNER_INDEX,
  RESEARCH_SKILL,
  resourcesSection,
  TEAM_ACTION,
  writeSample,
} from './setup.ts';
import { ResearcherProc } from './researchers.ts';
import type { Team } from './team.ts';

/** The entity prefix member 3's rules keep the team's deletions under (its "folder"). */
const TEAM_FOLDER = 'w1-';
/** A call outside the holders' policies: outside the folder, and it looks secret to the reviewer. */
const REFUSED_TARGET = 'w2-secrets';
/** The entity the team deletes through the bridge: inside every member's policy. */
const BRIDGE_TARGET = 'w1-scratch';
import { missingTools, nodeTools, type ToolInfo } from './tools.ts';
import { WorkerProc } from './workers.ts';

/** Options of {@link runDemo}. */
export interface DemoOptions {
  /** The demo's folder (must be empty or absent); a new temp folder by default. Kept afterwards: it holds the receipts. */
  readonly dir?: string;
  /** A NATS url to use (must answer). */
  readonly nats?: string;
  /** Run without NATS (no channel, no threshold team). */
  readonly noNats?: boolean;
  /** The NATS url tried first when `nats` is not given (default 127.0.0.1:4222). */
  readonly defaultNatsUrl?: string;
  /** Pause between a worker's rounds (ms, default 150). */
  readonly paceMs?: number;
  /** Where progress lines go. */
  readonly print: (line: string) => void;
  /**
   * Called once the nodes are up (and the channel open): their data folders, the NATS url and
   * subject root (undefined without NATS), and the channel grant with its per-point window (µJ).
   * `jcp demo` starts the audit console here. A rejection fails the demo.
   */
  readonly onNodesStarted?: (info: {
    readonly dataDirs: readonly string[];
    readonly natsUrl: string | undefined;
    readonly subjectRoot: string;
    readonly channels: ReadonlyArray<{ readonly grant_id: ContentId; readonly window_uj: bigint }>;
  }) => Promise<void>;
}

/** Worker 3 is revoked once it has this many allowed calls. */
const REVOKE_AFTER = 5;
/** Worker 2 is steered once it has this many allowed files calls. */
const STEER_AFTER = 6;
/** How long the workers may run, all together (ms). */
const RUN_DEADLINE_MS = 90_000;
const NODES = 3;
/** On an interrupt, how long the stream removal waits before it looks again for a stream made after it (ms). */
const INTERRUPT_SETTLE_MS = 300;
const WORKERS = ['w1', 'w2', 'w3'] as const;

function prepareDir(dir: string | undefined): string {
  if (dir === undefined) return mkdtempSync(join(tmpdir(), 'jcp-demo-'));
  const d = resolve(dir);
  if (existsSync(d) && readdirSync(d).length > 0) {
    throw new DemoError(
      DemoErrorCodes.DIR_NOT_EMPTY,
      `--dir ${d} is not empty: choose a new or empty folder (the demo's receipts go there)`,
    );
  }
  mkdirSync(d, { recursive: true });
  return d;
}

/**
 * What a running demo holds: its progress log, its problems, and everything it started (stopped by
 * `cleanups`, last first, on success and failure alike).
 */
interface DemoRun {
  readonly o: DemoOptions;
  /** When the run began (ms since the epoch). */
  readonly t0: number;
  /** Prints a progress line stamped with the seconds since `t0`. */
  readonly say: (s: string) => void;
  readonly problems: string[];
  readonly cleanups: (() => Promise<unknown>)[];
  readonly nodes: DemoNode[];
  readonly workers: WorkerProc[];
  /** The researcher agent (A2A), started first: the nodes front it. */
  researcher: ResearcherProc | undefined;
  /** Called on every call event of a worker (set before any worker is told to go). */
  react: (w: WorkerProc, e: CallEvent) => void;
  nc: NatsConnection | undefined;
  bus: JetStreamBus | undefined;
  team: Team | undefined;
  ticker: NodeJS.Timeout | undefined;
  streamsRemoved: boolean;
}

/** The NATS the demo uses (phase 1): the broker, its url (undefined without NATS) and the demo's subject root. */
interface DemoBroker {
  readonly b: Broker;
  readonly natsUrl: string | undefined;
  readonly root: string;
}

/** The run's results that the report takes from the workers' phase (§4.3 revocation, §4.7 steering). */
interface RunOutcome {
  readonly revocation: RunFacts['revocation'];
  readonly steering: Steering | undefined;
}

/** The threshold team's part of the report (phase 5), all undefined or empty without a team. */
type TeamOutcome = Pick<RunFacts, 'approval' | 'teamRefusal' | 'bridgeCall' | 'teamDecisions' | 'teamPolicies' | 'team' | 'teamGrant'>;

/** The entity the team approves deleting on the first node (§2.2). */
const TEAM_TARGET = 'w1-findings';

/** Runs the demo; resolves to the report (whose `exit_code` the command returns). @throws Error when the demo cannot run. */
export async function runDemo(o: DemoOptions): Promise<DemoReport> {
  const t0 = Date.now();
  const stamp = () => `[${((Date.now() - t0) / 1000).toFixed(1).padStart(5)} s]`;
  const run: DemoRun = {
    o,
    t0,
    say: (s: string) => o.print(`${stamp()} ${s}`),
    problems: [],
    cleanups: [],
    nodes: [],
    workers: [],
    researcher: undefined,
    react: () => undefined,
    nc: undefined,
    bus: undefined,
    team: undefined,
    ticker: undefined,
    streamsRemoved: false,
  };
  let made: string | undefined;
  let evidenceMade = false;
  try {
    // A NATS the user chose is checked before anything is made on disk.
    const chosen = o.nats !== undefined && !o.noNats ? await chosenBroker(o.nats) : undefined;
    const dir = prepareDir(o.dir);
    made = dir;
    o.print(`JCP demo: a local enforcement cluster on real MCP servers. Files go to ${dir}`);
    const sampleDir = join(dir, 'sample');
    const paths = writeSample(sampleDir);
    const broker = await openBroker(run, chosen, dir);
    const { issuer, stewards, roots } = mintPlan(run, broker.natsUrl);
    const { tools, probe } = await startParts(run, dir, sampleDir, broker, issuer, stewards, roots);
    if (broker.natsUrl !== undefined) await openChannel(run, broker, roots);
    // Interrupted (testkit's interrupted exit has begun): the console opens a channel bus of its
    // own, which would make the streams again.
    if (interrupting()) throw new Error('interrupted');
    await o.onNodesStarted?.({
      dataDirs: run.nodes.map((n) => n.dataDir),
      natsUrl: broker.natsUrl,
      subjectRoot: broker.root,
      channels: broker.natsUrl === undefined ? [] : [{ grant_id: grantId(roots.memory.grant), window_uj: BUDGETS.channelWindowUj }],
    });
    const chains: WorkerChains[] = [];
    const outcome = reactToCalls(run, issuer, chains);
    await launchWorkers(run, roots, chains, sampleDir, paths);
    const facts = await awaitRun(run, outcome);
    const team = await teamPhase(run, roots);
    const { metrics, channel } = await stopEverything(run, broker, roots);
    evidenceMade = true;
    const evidence: NodeEvidence[] = [];
    const { readEvidence } = await import('./evidence.ts');
    for (const n of run.nodes) evidence.push(await readEvidence(n.name, n.did, n.dataDir));
    const { buildReport } = await import('./compile.ts');
    return buildReport({
      startedAt: new Date(t0).toISOString(),
      runS: (Date.now() - t0) / 1000,
      dir,
      broker: broker.b,
      tools: { files: tools[0].map((t) => t.name), memory: tools[1].map((t) => t.name) },
      roots,
      nodes: run.nodes,
      evidence,
      workers: run.workers,
      chains,
      revocation: facts.revocation,
      steering: facts.steering,
      ...team,
      teamAction: TEAM_ACTION,
      target: TEAM_TARGET,
      channel,
      probe,
      metrics,
      researcher:
        run.researcher?.did === undefined ? undefined : { did: run.researcher.did, url: run.researcher.url!, tasks: run.researcher.tasks },
      problems: run.problems,
    });
  } finally {
    clearInterval(run.ticker);
    for (const c of run.cleanups.reverse()) await c().catch(() => undefined);
    await run.bus?.close().catch(() => undefined);
    await run.nc?.close().catch(() => undefined);
    // A temp folder from a run that failed before any node started holds nothing worth keeping.
    if (made !== undefined && o.dir === undefined && !evidenceMade && run.nodes.length === 0)
      rmSync(made, { recursive: true, force: true });
  }
}

/**
 * Phase 1: the NATS — the one the user chose, else the default url, else one started under `dir/nats`,
 * else none. On a NATS of the user's, the demo's streams are removed at the end (also on failure or
 * interruption). @throws Error from {@link findBroker}.
 */
async function openBroker(run: DemoRun, chosen: Broker | undefined, dir: string): Promise<DemoBroker> {
  const { o, say, cleanups } = run;
  const b =
    chosen ??
    (await findBroker({
      ...(o.noNats ? { disabled: true } : {}),
      ...(o.defaultNatsUrl !== undefined ? { defaultUrl: o.defaultNatsUrl } : {}),
      dir: join(dir, 'nats'),
    }));
  if (b.mode === 'started') cleanups.push(() => b.server.stop());
  if (b.mode === 'none') {
    say(`NATS: none (${b.why}). Running the parts that need no NATS: no budget channel, no threshold team.`);
    say(`      To see everything: ${NATS_INSTALL_HINT}`);
  } else say(`NATS: ${b.mode === 'external' ? 'using' : 'started'} ${b.url}${b.mode === 'started' ? ` (${b.bin})` : ''}`);
  const natsUrl = b.mode === 'none' ? undefined : b.url;
  // On a NATS of the user's, streams of the demo's own, removed at the end (also on failure).
  const root = demoSubjectRoot(b, randomBytes(4).toString('hex'));
  if (b.mode === 'external') {
    const url = b.url;
    // Interrupted, the removal below (with its second look) is the one: not this one beside it.
    const remove = () => (run.streamsRemoved || interrupting() ? Promise.resolve() : removeDemoStreams(url, root));
    cleanups.push(remove);
    cleanups.push(async () => unregisterStreams());
    // Interrupted: the nodes are SIGKILLed by then, but this process's own channel bus may be
    // ensuring the streams at that moment, and would make them again after the deletion (CI saw
    // STATEMENTS and REVOCATIONS left so). So no new bus, this one closed, and a second look.
    const unregisterStreams = whenInterrupted(async () => {
      await run.bus?.close().catch(() => undefined);
      if (!run.streamsRemoved) await removeDemoStreams(url, root, { settleMs: INTERRUPT_SETTLE_MS });
    });
  }
  return { b, natsUrl, root };
}

/** Phase 2: a fresh issuer and node stewards (Ed25519 from random seeds), and the roots (§4.5: files sharded, memory a channel when NATS is there). */
function mintPlan(run: DemoRun, natsUrl: string | undefined): { issuer: Actor; stewards: Actor[]; roots: Roots } {
  const { say } = run;
  const issuer: Actor = actorFromSeed(new Uint8Array(randomBytes(32)));
  const stewards = Array.from({ length: NODES }, () => actorFromSeed(new Uint8Array(randomBytes(32))));
  const roots: Roots = mintRoots(issuer, Math.floor(Date.now() / 1000), NODES, natsUrl !== undefined);
  say(`issuer ${issuer.did}`);
  say(
    `minted the files root ${grantId(roots.files.grant).slice(0, 16)}… (${fmt(roots.files.grant.budget_uj)}) and split it into ${NODES} shards of ${fmt(BUDGETS.shardUj)}, one per node (§4.5)`,
  );
  say(
    roots.channel
      ? `minted the memory root ${grantId(roots.memory.grant).slice(0, 16)}… (${fmt(roots.memory.grant.budget_uj)}): one shared grant, a budget channel across the ${NODES} nodes (window ${fmt(BUDGETS.channelWindowUj)} each)`
      : `minted the memory root ${grantId(roots.memory.grant).slice(0, 16)}… (${fmt(roots.memory.grant.budget_uj)}); channel mode not available without NATS, so it is sharded too`,
  );
  return { issuer, stewards, roots };
}

/**
 * Phase 3: the researcher first (the nodes read its agent card at start), then the nodes; once they
 * listen, in parallel, the worker processes, the threshold team (with NATS), the MCP servers' tool
 * lists (asked of the nodes, which started those servers: each server runs once) and the meter
 * probe. The nodes go first so that they do not wait for the CPU behind 6 other processes loading
 * their modules (docs/benchmarks.md "startup"). Waits for everything started, even when one part
 * fails, so the cleanups stop it. @throws the first failure, or Error when the installed MCP
 * servers lack a tool the grants name.
 */
async function startParts(
  run: DemoRun,
  dir: string,
  sampleDir: string,
  broker: DemoBroker,
  issuer: Actor,
  stewards: readonly Actor[],
  roots: Roots,
): Promise<{ tools: [ToolInfo[], ToolInfo[]]; probe: Probe }> {
  const { say, cleanups, nodes, workers } = run;
  const { natsUrl, root } = broker;
  say(
    `starting ${NODES} nodes (each with a filesystem and a memory MCP server, and the researcher agent over A2A), then ${WORKERS.length} worker processes${natsUrl !== undefined ? ' and 3 threshold participants' : ''}; this takes a few seconds`,
  );
  const onCall = (w: WorkerProc, e: CallEvent) => run.react(w, e);
  cleanups.push(() => Promise.all(workers.map((w) => w.stop())));
  cleanups.push(() => Promise.all(nodes.map((n) => stopNode(n))));
  const points = stewards.map((s) => s.did);
  // The researcher starts beside the nodes on a port chosen here, so that their configs can name
  // its url at once: a node reads the agent card after it listens, and again (after a back-off)
  // when a task comes while it has none (docs/a2a.md).
  const url = `http://127.0.0.1:${await freePort()}`;
  const researcher = startResearcher(run, dir, url);
  const nodesStarted = await Promise.allSettled([
    researcher,
    ...stewards.map(async (steward, i) => {
      const name = `n${i + 1}`;
      const ndir = join(dir, name);
      nodes[i] = await startNode({
        name,
        dir: ndir,
        steward,
        resources: resourcesSection(sampleDir, join(ndir, 'memory.jsonl'), issuer.did, url),
        meter: meterSection(),
        ...(natsUrl !== undefined
          ? {
              nats: natsUrl,
              subjectRoot: root,
              channels: [{ grantId: grantId(roots.memory.grant), windowUj: BUDGETS.channelWindowUj, points }],
            }
          : {}),
      });
      say(`node ${name} up: jcp/1 on 127.0.0.1:${nodes[i]!.port}, steward ${steward.did.slice(0, 24)}…`);
    }),
  ]);
  const nodeFailed = nodesStarted.find((x): x is PromiseRejectedResult => x.status === 'rejected');
  if (nodeFailed) throw nodeFailed.reason;
  for (const name of WORKERS) workers.push(new WorkerProc(name, dir, onCall));
  const teamReady = natsUrl === undefined ? Promise.resolve() : startDemoTeam(run, natsUrl, dir);
  const toolsReady = Promise.all(nodes.map((n) => nodeTools(n, [FS_RESOURCE, MEMORY_RESOURCE])));
  const probeReady = (async () => {
    const { createMeter, readMeterConfig } = await import('../meter/index.ts');
    const m = createMeter(readMeterConfig(meterSection()));
    try {
      return await m.probe();
    } finally {
      m.close();
    }
  })();
  const started = await Promise.allSettled([teamReady, toolsReady, probeReady]);
  const failed = started.find((x): x is PromiseRejectedResult => x.status === 'rejected');
  if (failed) throw failed.reason;
  const lists = (started[1] as PromiseFulfilledResult<Record<string, ToolInfo[]>[]>).value;
  const probe = (started[2] as PromiseFulfilledResult<Probe>).value;
  const tools: [ToolInfo[], ToolInfo[]] = [lists[0]![FS_RESOURCE]!, lists[0]![MEMORY_RESOURCE]!];
  say(`filesystem server tools: ${tools[0].map((t) => t.name).join(', ')}`);
  say(`memory server tools: ${tools[1].map((t) => t.name).join(', ')}`);
  // Every node's servers: the same packages, but each node started its own.
  const missing = new Set(
    lists.flatMap((l) => [
      ...missingTools(l[FS_RESOURCE]!, FS_ACTIONS),
      ...missingTools(l[MEMORY_RESOURCE]!, [...MEMORY_ACTIONS, TEAM_ACTION]),
    ]),
  );
  if (missing.size) throw new Error(`the installed MCP servers lack tools the grants name: ${[...missing].join(', ')}`);
  return { tools, probe };
}

/**
 * Phase 3: the researcher agent (demo/researcher.ts), an A2A server on `url` (a loopback port the
 * demo chose); its stop joins the cleanups. Each of its calls on the delegated grant is shown as it comes: the
 * first allowed one and every refusal. @throws Error when it does not say hello within 60 s.
 */
async function startResearcher(run: DemoRun, dir: string, url: string): Promise<{ did: string; url: string }> {
  let shown = false;
  const r = new ResearcherProc(
    dir,
    (c) => {
      if (c.verdict === 'deny')
        run.say(
          `researcher ${c.action} on its delegated grant: refused ${c.reason} (${fmt(BigInt(c.remaining_uj))} of ${fmt(BigInt(c.budget_uj))} left)`,
        );
      else if (!shown) {
        shown = true;
        run.say(`researcher ${c.action} on its delegated grant: allowed, ${fmt(BigInt(c.cost_uj))} debited`);
      }
    },
    Number(new URL(url).port),
  );
  run.researcher = r;
  run.cleanups.push(() => r.stop());
  const hello = await r.hello();
  if (hello.url !== url) throw new Error(`the researcher serves ${hello.url}, not ${url}`);
  run.say(
    `researcher agent up: an A2A server (@a2a-js/sdk) at ${hello.url}, skill ${RESEARCH_SKILL}, ${hello.did.slice(0, 24)}…; the nodes front it as the resource '${AGENT_RESOURCE}'`,
  );
  return hello;
}

/** Phase 3, with NATS: the 2-of-3 threshold team (FROST DKG over NATS, §2.2) under `dir/team`; its close joins the cleanups. */
async function startDemoTeam(run: DemoRun, natsUrl: string, dir: string): Promise<void> {
  run.nc = await connect({ servers: natsUrl, name: 'jcp-demo' });
  const { startTeam } = await import('./team.ts');
  run.team = await startTeam(run.nc, natsUrl, join(dir, 'team'), {
    resource: MEMORY_RESOURCE,
    action: TEAM_ACTION,
    costCapUj: BUDGETS.teamUj,
    arg: 'entityNames',
    folder: TEAM_FOLDER,
  });
  const t = run.team;
  run.cleanups.push(() => t.close());
  run.say(`threshold team: 3 participant processes made a 2-of-3 group key by DKG over NATS in ${t.dkgMs} ms: ${t.group.slice(0, 24)}…`);
}

/** The channel: waits until every node has settled once (a point allows nothing before, §4.5 profile). @throws Error after 20 s. */
async function openChannel(run: DemoRun, broker: DemoBroker, roots: Roots): Promise<void> {
  if (interrupting()) throw new Error('interrupted');
  run.bus = JetStreamBus.start(broker.natsUrl!, { names: channelNames(broker.root), name: 'jcp-demo' });
  await run.bus.ready(10_000);
  await waitSettled(run.bus, grantId(roots.memory.grant), NODES, 20_000);
  run.say(`budget channel: all ${NODES} nodes have settled once and serve the memory root`);
}

/**
 * Phase 4: each worker says hello and gets its grants (filled into `chains`, by worker index); the
 * researcher starts its bridge to the planner's node, accepting chains the planner delegates; the
 * workers are told to go, the planner (with its A2A task) once the researcher is ready.
 */
async function launchWorkers(run: DemoRun, roots: Roots, chains: WorkerChains[], sampleDir: string, paths: string[]): Promise<void> {
  const { nodes, workers, say } = run;
  const addresses: NodeAddress[] = nodes.map((n) => ({ name: n.name, host: n.host, port: n.port, did: n.did }));
  const dids: string[] = [];
  for (const [i, w] of workers.entries()) {
    dids.push(await w.hello());
    chains[i] = delegateWorker(roots, i, dids[i]!);
  }
  const researcher = run.researcher!;
  const ready = researcher.go({
    type: 'go',
    node: addresses[PLANNER_INDEX]!,
    planner: dids[PLANNER_INDEX]!,
    paths,
    sampleDir,
  });
  const order = [...workers.keys()].filter((i) => i !== PLANNER_INDEX).concat(PLANNER_INDEX);
  for (const i of order) {
    const w = workers[i]!;
    const c = chains[i]!;
    const files = c.files.at(-1)!.grant;
    if (i === PLANNER_INDEX) await ready;
    w.send({
      type: 'go',
      name: w.name,
      nodes: addresses,
      home: i,
      sampleDir,
      paths,
      paceMs: run.o.paceMs ?? 150,
      files: chainToHex(c.files),
      memory: chainToHex(c.memory),
      ...(i === 1 ? { steer_after: STEER_AFTER } : {}),
      ...(i === PLANNER_INDEX && c.agents !== undefined
        ? {
            planner: {
              agents: chainToHex(c.agents),
              researcher: researcher.did!,
              skill: RESEARCH_SKILL,
              delegate_uj: (files.budget_uj / DELEGATED_FRACTION).toString(),
              text: 'Read the sample notes and tell me what they say about grants and energy.',
            },
          }
        : {}),
    });
    say(
      `${w.name} (${dids[i]!.slice(0, 24)}…) on ${nodes[i]!.name}: files grant ${fmt(files.budget_uj)} from shard ${i + 1} (depth ${files.delegate_depth}), memory grant ${fmt(c.memory.at(-1)!.grant.budget_uj)} (depth 0)`,
    );
    if (i === PLANNER_INDEX) plannerTask(run, w, files.budget_uj);
  }
}

/** Shows the planner's A2A task as it starts and as its answer comes back (a failure goes to the problems). */
function plannerTask(run: DemoRun, w: WorkerProc, filesUj: bigint): void {
  run.say(
    `${w.name} plans: it sends the researcher a task over A2A (skill ${RESEARCH_SKILL}) through its bridge's A2A face and ${run.nodes[PLANNER_INDEX]!.name}, delegating ${fmt(filesUj / DELEGATED_FRACTION)} (a quarter of its files grant)`,
  );
  w.delegation(RUN_DEADLINE_MS).then(
    (d) =>
      run.say(
        `${w.name}'s A2A task: ${d.verdict}${d.reason ? ` (${d.reason})` : ''}${d.cost_uj ? `, ${fmt(BigInt(d.cost_uj))} debited` : ''}${d.state ? `, ${d.state}` : ''} in ${d.done_ms - d.sent_ms} ms; the researcher said: ${d.summary.slice(0, 200)}`,
      ),
    (err: unknown) => void run.problems.push(`the planner's A2A task: ${(err as Error).message}`),
  );
}

/** The issuer's actions during the run, as they are started (each resolves once done; failures go to the problems). */
interface RunReactions {
  revokeTask: Promise<void> | undefined;
  steerTask: Promise<void> | undefined;
  revocation: RunFacts['revocation'];
  steering: Steering | undefined;
}

/**
 * Sets `run.react`: shows each refusal and one allowed answer per worker and lane; once worker 3 has
 * {@link REVOKE_AFTER} allowed calls the issuer revokes its grants everywhere (§4.3); once worker 2
 * has {@link STEER_AFTER} allowed files calls it is steered through a checkpoint and amendment (§4.7).
 * `chains` is read when a worker reacts (filled by {@link launchWorkers}).
 */
function reactToCalls(run: DemoRun, issuer: Actor, chains: readonly WorkerChains[]): RunReactions {
  const { say, workers, nodes, problems } = run;
  const r: RunReactions = { revokeTask: undefined, steerTask: undefined, revocation: undefined, steering: undefined };
  // Loaded now, once the nodes are up (not before: the first node's start waits for no more than it needs).
  const actions = import('./actions.ts');
  const sampled = new Set<string>();
  run.react = (w: WorkerProc, e: CallEvent): void => {
    if (e.verdict === 'deny') say(`${w.name} ${e.lane} ${e.action} at ${e.node}: refused ${e.reason}`);
    else if (!sampled.has(`${w.name} ${e.lane}`)) {
      // One real tool answer per worker and lane, to show what went through.
      sampled.add(`${w.name} ${e.lane}`);
      say(
        `${w.name} ${e.lane} ${e.action} at ${e.node}: allowed, ${fmt(BigInt(e.cost_uj))} debited; the tool said: ${e.note ?? '(nothing)'}`,
      );
    }
    if (w === workers[2] && r.revokeTask === undefined && w.allowed >= REVOKE_AFTER) {
      const ids = [leafId(chains[2]!.files), leafId(chains[2]!.memory)];
      // It holds its calls until every node has acknowledged (a fast worker on a loaded machine
      // spent both budgets first once, and no call came after the revocation to check).
      w.send({ type: 'revoking' });
      r.revokeTask = actions
        .then((a) => a.revokeEverywhere(issuer, nodes, ids))
        .then(
          (acked) => {
            const revocation = { worker: w.name, grantIds: ids, acked, atMs: Date.now() };
            r.revocation = revocation;
            // The worker's try at another node waits for this (it may already be refused at home:
            // a node applies a revocation before it acknowledges it), so it falls after atMs.
            w.send({ type: 'revoked-everywhere', at_ms: revocation.atMs });
            say(`the issuer revoked ${w.name}'s grants; every node acknowledged (${acked.join(', ')}): from now on ${w.name} is refused`);
          },
          (err: unknown) => void problems.push(`revocation failed: ${(err as Error).message}`),
        );
    }
    const filesAllowed = w.calls.filter((c) => c.lane === 'files' && c.verdict === 'allow').length;
    if (w === workers[1] && r.steerTask === undefined && filesAllowed >= STEER_AFTER) {
      say(`the issuer asks ${w.name} to checkpoint its files grant (§4.7)`);
      r.steerTask = actions
        .then((a) => a.steer(issuer, nodes, w, chains[1]!.files.at(-1)!))
        .then(
          (s) => {
            r.steering = s;
            say(
              `${w.name} checkpointed; the issuer amended its files budget ${fmt(s.budgetBeforeUj)} → ${fmt(s.amendedUj)} (${fmt(s.remainingUj)} were left), revoked the steered grant, and ${w.name} continues under ${grantId(s.continuation.grant).slice(0, 16)}…`,
            );
          },
          (err: unknown) => void problems.push(`steering failed: ${(err as Error).message}`),
        );
    }
  };
  return r;
}

/**
 * The run: a progress line per changed worker every second, until every worker ends (or
 * {@link RUN_DEADLINE_MS} passes: its failure goes to the problems), then waits for the issuer's
 * revocation and steering to finish.
 */
async function awaitRun(run: DemoRun, r: RunReactions): Promise<RunOutcome> {
  const { workers, say, problems } = run;
  const shown = new Map<WorkerProc, number>();
  const progress = () => {
    for (const w of workers) {
      if (shown.get(w) === w.version) continue;
      shown.set(w, w.version);
      const f = w.lanes.files;
      const m = w.lanes.memory;
      say(
        `${w.name}  files ${fmtN(f.spentUj)} of ${fmtN(f.capUj)} µJ  memory ${fmtN(m.spentUj)} of ${fmtN(m.capUj)} µJ  allowed ${w.allowed}  refused ${w.refused}${w.end ? `  — ended: ${w.end}` : ''}`,
      );
    }
  };
  run.ticker = setInterval(progress, 1_000);
  const ends = await Promise.allSettled(workers.map((w) => w.done(RUN_DEADLINE_MS)));
  clearInterval(run.ticker);
  progress();
  for (const [i, e] of ends.entries()) if (e.status === 'rejected') problems.push(`${workers[i]!.name}: ${(e.reason as Error).message}`);
  await r.revokeTask;
  await r.steerTask;
  return { revocation: r.revocation, steering: r.steering };
}

/**
 * Phase 5, with a team: the issuer grants the team {@link TEAM_ACTION}; one member alone is refused and
 * two together are allowed (§2.2); a call outside the holders' policies is refused by them; the same
 * team calls through the bridge. Without a team everything is undefined or empty.
 */
async function teamPhase(run: DemoRun, roots: Roots): Promise<TeamOutcome> {
  const { team, nodes, say } = run;
  if (team === undefined)
    return {
      approval: undefined,
      teamRefusal: undefined,
      bridgeCall: undefined,
      teamDecisions: [],
      teamPolicies: [],
      team: undefined,
      teamGrant: undefined,
    };
  const { approveAsTeam, askTeamToSign, callTeamViaBridge } = await import('./actions.ts');
  const target = TEAM_TARGET;
  const teamInfo = { group: team.group, members: team.members, min: team.min, max: team.max, dkgMs: team.dkgMs };
  const tg = teamGrant(roots, team.group);
  say(
    `the issuer grants the team (subject = the group key) ${TEAM_ACTION} on memory; target: the entity ${JSON.stringify(target)} on ${nodes[0]!.name}`,
  );
  const approval = await approveAsTeam(nodes[0]!, team, tg, TEAM_ACTION, { entityNames: [target] });
  say(`one member alone signs: ${approval.solo.verdict}${approval.solo.denyReason ? ` (${approval.solo.denyReason})` : ''}`);
  say(
    `two members sign together: ${approval.group.verdict}${approval.group.denyReason ? ` (${approval.group.denyReason})` : ''}${approval.group.result ? ` — ${approval.group.result}` : ''}`,
  );
  const teamRefusal = await askTeamToSign(nodes[0]!, team, tg, TEAM_ACTION, { entityNames: [REFUSED_TARGET] });
  say(
    `the team is asked to ${TEAM_ACTION} ${JSON.stringify([REFUSED_TARGET])}: ${teamRefusal.refused ? `refused (${teamRefusal.code}) by ${teamRefusal.refusals.map((r) => `member ${r.member}: ${r.why}`).join('; ')}` : 'SIGNED (unexpected)'}`,
  );
  // The same team through the bridge: an MCP client's tools/call becomes a signing session.
  const bridgeCall = await callTeamViaBridge(nodes[0]!, team, tg, TEAM_ACTION, { entityNames: [BRIDGE_TARGET] });
  say(
    `an MCP client calls ${TEAM_ACTION} ${JSON.stringify([BRIDGE_TARGET])} through the bridge as the team: ${bridgeCall.verdict ?? `not signed (${bridgeCall.error})`} in ${bridgeCall.ms} ms`,
  );
  return { approval, teamRefusal, bridgeCall, teamDecisions: team.decisions(), teamPolicies: team.policies, team: teamInfo, teamGrant: tg };
}

/**
 * Phase 6: takes each node's metrics, stops the workers, the team and the nodes (each settles its
 * channel once more), audits the channel against its overdraft bound (§4.5), and removes the demo's
 * streams from a NATS of the user's (a failure goes to the problems).
 */
async function stopEverything(
  run: DemoRun,
  broker: DemoBroker,
  roots: Roots,
): Promise<{ metrics: string[]; channel: RunFacts['channel'] }> {
  const { nodes, workers, say } = run;
  const { b, natsUrl, root } = broker;
  const metrics = await Promise.all(nodes.map((n) => metricsText(n)));
  await Promise.all(workers.map((w) => w.stop()));
  await run.researcher?.stop();
  if (run.team) await run.team.close();
  run.team = undefined;
  await run.nc?.close();
  run.nc = undefined;
  say(
    natsUrl !== undefined
      ? 'stopping the nodes (each settles its channel once more and closes its log)'
      : 'stopping the nodes (each closes its log)',
  );
  await Promise.all(nodes.map((n) => stopNode(n)));
  let channel: RunFacts['channel'];
  if (run.bus !== undefined) {
    const a = await auditChannel(run.bus, grantId(roots.memory.grant), roots.memory.grant.budget_uj);
    channel = { audit: a, boundUj: overdraftBound(nodes.map(() => BUDGETS.channelWindowUj)), windowUj: BUDGETS.channelWindowUj };
    await run.bus.close();
    run.bus = undefined;
  }
  if (b.mode === 'external') {
    try {
      const removed = await removeDemoStreams(b.url, root);
      run.streamsRemoved = true;
      say(`removed the demo's streams from ${b.url}: ${removed.join(', ') || 'none were left'}`);
    } catch (e) {
      run.problems.push(`could not remove the demo's streams (${demoStreams(root).join(', ')}) from ${b.url}: ${(e as Error).message}`);
    }
  }
  return { metrics, channel };
}

const fmt = (v: bigint): string => `${v.toLocaleString('en-US')} µJ`;
const fmtN = (v: bigint): string => v.toLocaleString('en-US');

/** Waits until `points` points have a statement on the channel `grant` (each settled once), plus two settle intervals. */
async function waitSettled(bus: JetStreamBus, grant: ContentId, points: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const stored = await bus.readLatest(grant).catch(() => []);
    if (stored.length >= points) break;
    if (Date.now() > deadline)
      throw new Error(`only ${stored.length} of ${points} nodes settled the budget channel within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
  await new Promise((r) => setTimeout(r, 500));
}
