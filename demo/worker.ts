/**
 * One agent worker of the demo, as its own process (`node --import <tsx> demo/worker.ts`,
 * spawned with an IPC channel by demo/workers.ts).
 *
 * It draws its own Ed25519 key (the private key never leaves this process), says `hello` with its
 * did:key, receives (`go`) where the nodes are and two depth-0 grant chains (files: root → its node's shard → its grant; memory:
 * the channel root → its grant), and then works in rounds — one files call and one memory call per
 * round, through its own node — until every lane is refused (the planner first sends its A2A task
 * to the researcher and waits for the answer, demo/planner.ts): `budget-exceeded`
 * ends a lane; `revoked` makes it try once at another node and then ends the lane. Every decided
 * call is reported to the orchestrator.
 *
 * The try elsewhere waits for the orchestrator's `revoked-everywhere` (sent once every node has
 * acknowledged the revocation, at most {@link REVOKED_EVERYWHERE_WAIT_MS}), and is sent strictly
 * after its `at_ms`. A node applies a revocation before it acknowledges it (the acknowledgement
 * waits for the record to be durable), so the home node can refuse this worker before the
 * orchestrator has heard back from every node: without the wait, every call of a fast worker
 * could fall before the acknowledgement, and the report's "calls sent after the revocation were
 * all refused" would have no call to check. For the same reason the orchestrator sends `revoking`
 * as it starts the revocation: the worker then makes no call until `revoked-everywhere`, so it
 * cannot spend both budgets while the nodes acknowledge (it did once, on a loaded machine).
 *
 * Every call is an MCP `tools/call` from the SDK's `Client` to a `jcp bridge` of its own (the
 * bridge library in this process, over the SDK's in-memory transport; one bridge per node it
 * calls, holding its key and both chains, docs/bridge.md): the bridge signs the request, the node
 * decides, seals and logs it, and the worker reads the verdict and receipt from the result's
 * `_meta` (`jcp/receipt_cose`, verified here under the node's did).
 *
 * On `checkpoint` it stops at the next round boundary, commits to its state and signs a checkpoint
 * of its files grant (§4.7), sends it with its last files receipt, and waits for the issuer's
 * amendment and continuation grant; it checks the pair (core `verifyContinuation`) and continues
 * under the continuation.
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  type Actor,
  actorFromSeed,
  contentId,
  decode,
  DenyReasons,
  encode,
  fromHex,
  grantId,
  makeCheckpoint,
  openReceipt,
  readSignedAmendment,
  readSignedGrant,
  receiptId,
  type SignedCheckpoint,
  signedCheckpointToCbor,
  type SignedGrant,
  toHex,
  verifyContinuation,
} from '../core/index.ts';
import { Client, InMemoryTransport } from '@modelcontextprotocol/client';
import { BridgeAgent, bridgeServer, CallJournal } from '../bridge/index.ts';
import { JcpClient } from '../client/index.ts';
import { type CallEvent, chainFromHex, type FromWorker, type Lane, type ToWorker } from './messages.ts';
import { delegateOverA2a } from './planner.ts';

type Go = Extract<ToWorker, { type: 'go' }>;
type Continue = Extract<ToWorker, { type: 'continue' }>;

interface LaneState {
  readonly lane: Lane;
  chain: SignedGrant[];
  /** Calls made on this lane (drives the payloads). */
  n: number;
  /** µJ allowed on this lane, all grants together. */
  spentUj: bigint;
  /** How the lane ended; undefined while it runs. */
  ended: 'budget-exceeded' | 'revoked' | 'stopped' | undefined;
  lastReceipt: Uint8Array | undefined;
  lastNode: string;
}

function send(m: FromWorker): void {
  process.send?.(m);
}

/** Sends `m` and resolves once it has left this process (the last message before disconnecting). */
function sendLast(m: FromWorker): Promise<void> {
  return new Promise<void>((resolve) => {
    if (!process.send) resolve();
    else process.send(m, undefined, {}, () => resolve());
  });
}

let finishing = false;

const inbox: ToWorker[] = [];
let wake: (() => void) | undefined;
process.on('message', (m: ToWorker) => {
  inbox.push(m);
  wake?.();
});
// The orchestrator is gone: nothing to report to.
process.on('disconnect', () => {
  if (!finishing) process.exit(0);
});

/** The next message of `type`, waiting up to `timeoutMs`. */
async function next<T extends ToWorker['type']>(type: T, timeoutMs: number): Promise<Extract<ToWorker, { type: T }>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const i = inbox.findIndex((m) => m.type === type || m.type === 'stop');
    if (i >= 0) {
      const m = inbox.splice(i, 1)[0]!;
      if (m.type === 'stop' && type !== 'stop') throw new Error('stopped');
      return m as Extract<ToWorker, { type: T }>;
    }
    if (Date.now() > deadline) throw new Error(`no '${type}' from the orchestrator within ${timeoutMs} ms`);
    await new Promise<void>((r) => {
      wake = r;
      setTimeout(r, 200);
    });
  }
}

/** How long a worker refused `revoked` waits for `revoked-everywhere` before trying elsewhere anyway (ms). */
const REVOKED_EVERYWHERE_WAIT_MS = 60_000;
/** How long the steered worker waits for the checkpoint request once it is due (ms). */
const STEER_WAIT_MS = 60_000;

/**
 * The orchestrator's `revoked-everywhere`, waited for once (later calls reuse it); resolves once
 * this process's clock is past its `at_ms`. Undefined when it did not come in time (the try
 * elsewhere goes ahead, and the report says whether it was refused).
 */
let revokedEverywhere: Promise<number | undefined> | undefined;
function awaitRevokedEverywhere(): Promise<number | undefined> {
  revokedEverywhere ??= next('revoked-everywhere', REVOKED_EVERYWHERE_WAIT_MS).then(
    async (m) => {
      while (Date.now() <= m.at_ms) await sleep(1);
      return m.at_ms;
    },
    (e: unknown) => {
      // `next` took the orchestrator's stop while waiting: put it back for the main loop.
      if ((e as Error).message === 'stopped') inbox.push({ type: 'stop' });
      return undefined;
    },
  );
  return revokedEverywhere;
}

function take(type: ToWorker['type']): boolean {
  const i = inbox.findIndex((m) => m.type === type);
  if (i < 0) return false;
  inbox.splice(i, 1);
  return true;
}

/** The tool and its arguments for call `n` of a lane. Arguments vary per call: two equal requests in one second are one request (§11). */
function callOf(job: Go, lane: Lane, n: number): { action: string; args: Record<string, unknown> } {
  const me = job.name;
  const files = job.paths;
  if (lane === 'files') {
    switch (n % 4) {
      case 0:
        return { action: 'read_text_file', args: { path: files[(n / 4) % files.length]!, head: 20 + n } };
      case 1:
        return { action: 'search_files', args: { path: job.sampleDir, pattern: '**/*.txt', excludePatterns: [`skip-${me}-${n}`] } };
      case 2:
        return { action: 'directory_tree', args: { path: job.sampleDir, excludePatterns: [`skip-${me}-${n}`] } };
      default:
        return { action: 'get_file_info', args: { path: files[((n - 3) / 4) % files.length]! } };
    }
  }
  const findings = `${me}-findings`;
  if (n === 0)
    return { action: 'create_entities', args: { entities: [{ name: findings, entityType: 'report', observations: [`${me} started`] }] } };
  switch (n % 4) {
    case 1:
      return {
        action: 'create_entities',
        args: { entities: [{ name: `${me}-note-${n}`, entityType: 'note', observations: [`read pass ${n}`] }] },
      };
    case 2:
      return { action: 'add_observations', args: { observations: [{ entityName: findings, contents: [`observation ${n} by ${me}`] }] } };
    case 3:
      return { action: 'search_nodes', args: { query: `${me}-note-${n - 2}` } };
    default:
      return { action: 'open_nodes', args: { names: [findings, `${me}-note-${n - 3}`] } };
  }
}

/** An MCP `CallToolResult` as the bridge returns it (loose: the upstream's fields are kept). */
type ToolResult = { content?: { text?: string }[]; jcp_error?: { code?: string }; _meta?: Record<string, unknown> };

/** The start of an allowed call's tool result text (whitespace collapsed), for the progress log. */
function noteOf(v: ToolResult): string | undefined {
  if (v.jcp_error?.code) return `endpoint error: ${v.jcp_error.code}`;
  const text = v.content?.[0]?.text;
  return typeof text === 'string' ? text.replace(/\s+/g, ' ').trim().slice(0, 100) : undefined;
}

/** A bridge to one node: the jcp/1 connection, the MCP client in front of it, the listed name of each (resource, action). */
interface Bridge {
  readonly node: JcpClient;
  readonly mcp: Client;
  /** Listed tool name by `<resource> <action>`. */
  readonly names: ReadonlyMap<string, string>;
}

/** One worker's session: its key, its job, a bridge per node index (started on first use), its two lanes. */
interface Session {
  readonly me: Actor;
  readonly job: Go;
  readonly bridges: Map<number, Bridge>;
  /** Files first, then memory. */
  readonly lanes: LaneState[];
  /** When each exact request (node, action, arguments) was last sent (ms since the epoch). */
  readonly lastSent: Map<string, number>;
}

/**
 * The bridge to node `i` of the job, started on first use: a `BridgeAgent` with the worker's key
 * and the lanes' current chains, its MCP `Server` linked in memory to an SDK `Client`, which
 * lists the tools once. @throws Error when the node does not answer.
 */
async function bridgeFor(s: Session, i: number): Promise<Bridge> {
  const have = s.bridges.get(i);
  if (have !== undefined) return have;
  const n = s.job.nodes[i]!;
  const node = await JcpClient.connect({ host: n.host, port: n.port, signer: s.me });
  const agent = new BridgeAgent({
    name: s.job.name,
    signer: s.me,
    chains: s.lanes.map((l) => l.chain),
    client: node,
    journal: new CallJournal(),
  });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await bridgeServer(agent).connect(serverSide);
  const mcp = new Client({ name: `jcp-demo-${s.job.name}`, version: '0.1.0' });
  await mcp.connect(clientSide);
  const listed = new Set((await mcp.listTools()).tools.map((t) => t.name));
  const names = new Map<string, string>();
  for (const t of await agent.tools()) if (listed.has(t.name)) names.set(`${t.resource} ${t.action}`, t.name);
  const b: Bridge = { node, mcp, names };
  s.bridges.set(i, b);
  return b;
}

/** Closes every bridge of the session (the MCP client, then the node connection). */
async function closeBridges(s: Session): Promise<void> {
  for (const b of s.bridges.values()) {
    await b.mcp.close().catch(() => undefined);
    await b.node.close().catch(() => undefined);
  }
  s.bridges.clear();
}

/**
 * Makes one call on lane `l` at node `at`, reports it to the orchestrator and returns the deny
 * reason, or undefined on allow. Two requests equal in every field within one second are one
 * request (§11 idempotent replay); the payloads vary per call, and an exact repeat waits it out.
 * @throws Error when the node's receipt does not verify under its did (§8).
 */
async function callAt(s: Session, l: LaneState, at: number, action: string, args: Record<string, unknown>): Promise<string | undefined> {
  const key = `${at} ${action} ${JSON.stringify(args)}`;
  const wait = (s.lastSent.get(key) ?? 0) + 1_100 - Date.now();
  if (wait > 0) await sleep(wait);
  const sent = Date.now();
  s.lastSent.set(key, sent);
  const b = await bridgeFor(s, at);
  const leaf = l.chain[l.chain.length - 1]!;
  const name = b.names.get(`${leaf.grant.capability.resource} ${action}`);
  if (name === undefined) throw new Error(`the bridge lists no tool for ${action} on the ${l.lane} grant`);
  const r = (await b.mcp.callTool({ name, arguments: args })) as ToolResult;
  const meta = r._meta ?? {};
  const node = s.job.nodes[at]!;
  const cose = meta['jcp/receipt_cose'];
  if (typeof cose !== 'string') throw new Error(`the bridge's result for ${action} carries no receipt`);
  const receipt = fromHex(cose);
  const opened = openReceipt(receipt, node.did);
  if (!opened.ok) throw new Error(`the receipt from ${node.name} does not verify: ${opened.error.why}`);
  const core = opened.value;
  if (meta['jcp/verdict'] !== core.verdict) throw new Error(`the bridge says ${String(meta['jcp/verdict'])}, the receipt ${core.verdict}`);
  if (core.verdict === 'allow') l.spentUj += core.cost_uj;
  if (l.lane === 'files') {
    l.lastReceipt = receipt;
    l.lastNode = node.name;
  }
  const note = core.verdict === 'allow' ? noteOf(r) : undefined;
  const ev: CallEvent = {
    type: 'call',
    lane: l.lane,
    node: node.name,
    action,
    verdict: core.verdict,
    ...(core.deny_reason !== undefined ? { reason: core.deny_reason } : {}),
    grant_id: core.grant_id,
    request_id: String(meta['jcp/request_id']),
    cost_uj: core.cost_uj.toString(),
    remaining_uj: core.budget_remaining_uj.toString(),
    budget_uj: core.budget_uj.toString(),
    sent_ms: sent,
    done_ms: Date.now(),
    ...(note !== undefined ? { note } : {}),
  };
  send(ev);
  return core.verdict === 'allow' ? undefined : (core.deny_reason ?? 'deny');
}

/**
 * Checkpoints the files grant (§4.7): commits to the worker's state, signs and sends the checkpoint
 * with its last files receipt, waits (30 s) for the amendment and continuation, checks the pair and
 * continues under the continuation. @throws Error when the checkpoint is refused or the continuation does not verify.
 */
async function checkpoint(s: Session): Promise<void> {
  const { job, lanes, me } = s;
  const files = lanes[0]!;
  const steered = files.chain[files.chain.length - 1]!;
  const state = contentId({
    worker: job.name,
    files_calls: files.n,
    memory_calls: lanes[1]!.n,
    files_spent_uj: files.spentUj,
    memory_spent_uj: lanes[1]!.spentUj,
    last_receipt: files.lastReceipt ? receiptId(files.lastReceipt) : '',
  });
  const cp = makeCheckpoint(steered, state, me, new Uint8Array(randomBytes(16)));
  if (!cp.ok) throw new Error(`checkpoint refused: ${cp.error.why}`);
  const sc: SignedCheckpoint = cp.value;
  send({
    type: 'checkpoint',
    checkpoint: toHex(encode(signedCheckpointToCbor(sc))),
    receipt: toHex(files.lastReceipt ?? new Uint8Array()),
    node: files.lastNode,
  });
  const c: Continue = await next('continue', 30_000);
  const amendment = readSignedAmendment(decode(fromHex(c.amendment)));
  const continuation = readSignedGrant(decode(fromHex(c.continuation)));
  const ok = verifyContinuation(steered, sc, amendment, continuation);
  if (!ok.ok) throw new Error(`the continuation does not verify (${ok.error.code}): ${ok.error.why}`);
  files.chain = [...files.chain.slice(0, -1), continuation];
  // A bridge holds the chains it was started with: the next calls go through bridges holding the continuation.
  await closeBridges(s);
  send({ type: 'resumed', grant_id: grantId(continuation.grant), budget_uj: continuation.grant.budget_uj.toString() });
}

/**
 * Works in rounds (one call per open lane, then `paceMs`) until every lane has ended or the
 * orchestrator says stop; a checkpoint request is served at a round boundary. `budget-exceeded`
 * ends a lane; `revoked` tries the same call once at the next node (after every node acknowledged
 * the revocation, §4.3) and ends it. Resolves true when stopped.
 */
async function workRounds(s: Session): Promise<boolean> {
  const { job, lanes } = s;
  let filesAllowed = 0;
  let steered = false;
  while (lanes.some((l) => l.ended === undefined)) {
    if (take('stop')) return true;
    // The steered worker waits for the checkpoint request at the point the orchestrator asks
    // for it (job.steer_after allowed files calls): no race with a fast run spending the grant.
    if (!steered && job.steer_after !== undefined && filesAllowed >= job.steer_after && lanes[0]!.ended === undefined) {
      await next('checkpoint', STEER_WAIT_MS);
      steered = true;
      await checkpoint(s);
    } else if (take('checkpoint') && lanes[0]!.ended === undefined) await checkpoint(s);
    for (const l of lanes) {
      if (l.ended !== undefined) continue;
      if (take('revoking')) await awaitRevokedEverywhere();
      const { action, args } = callOf(job, l.lane, l.n);
      l.n++;
      const reason = await callAt(s, l, job.home, action, args);
      if (reason === undefined) {
        if (l.lane === 'files') filesAllowed++;
        continue;
      }
      if (reason === DenyReasons.REVOKED) {
        // The revocation went to every node: once all have acknowledged it, the same call elsewhere is refused too.
        await awaitRevokedEverywhere();
        await callAt(s, l, (job.home + 1) % job.nodes.length, action, args);
        l.ended = 'revoked';
      } else if (reason === DenyReasons.BUDGET_EXCEEDED) l.ended = 'budget-exceeded';
      else l.ended = 'stopped';
    }
    await sleep(job.paceMs);
  }
  return false;
}

/** The worker: hello with a fresh did:key, wait (120 s) for `go`, work the lanes, close the clients, send `done` with how it ended. */
async function main(): Promise<void> {
  const me: Actor = actorFromSeed(new Uint8Array(randomBytes(32)));
  send({ type: 'hello', did: me.did });
  const job = await next('go', 120_000);
  const lanes: LaneState[] = [
    { lane: 'files', chain: chainFromHex(job.files), n: 0, spentUj: 0n, ended: undefined, lastReceipt: undefined, lastNode: '' },
    { lane: 'memory', chain: chainFromHex(job.memory), n: 0, spentUj: 0n, ended: undefined, lastReceipt: undefined, lastNode: '' },
  ];
  const s: Session = { me, job, bridges: new Map(), lanes, lastSent: new Map() };
  // The planner first hands the researcher its sub-task over A2A, with a quarter of its files budget (demo/planner.ts).
  if (job.planner !== undefined)
    send(await delegateOverA2a(me, job.nodes[job.home]!, lanes[0]!.chain, chainFromHex(job.planner.agents), job.planner, job.name));
  const stopped = await workRounds(s);
  await closeBridges(s);
  const status = stopped
    ? 'stopped'
    : lanes.some((l) => l.ended === 'revoked')
      ? 'revoked'
      : lanes.every((l) => l.ended === 'budget-exceeded')
        ? 'budget-exceeded'
        : 'stopped';
  finishing = true;
  await sendLast({ type: 'done', status });
}

main().then(
  () => process.disconnect?.(),
  async (e: unknown) => {
    finishing = true;
    process.exitCode = 1;
    await sendLast({ type: 'failed', message: (e as Error)?.message ?? String(e) });
    process.disconnect?.();
  },
);
