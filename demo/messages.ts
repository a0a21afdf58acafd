/**
 * The messages between the demo's orchestrator and its agent workers (Node IPC, JSON). Grants,
 * checkpoints and amendments travel as hex of their canonical det-CBOR (docs/design.md "Encodings"), µJ
 * as decimal strings, times as milliseconds of the shared wall clock.
 *
 * Orchestrator → worker: `go` (who it is, where the nodes are, its two grant chains), `checkpoint`
 * (commit to your state now, §4.7), `continue` (the signed amendment and the continuation grant),
 * `stop`.
 * Worker → orchestrator: `hello` (its own did:key; its key never leaves the worker), `call` (one
 * decided call), `delegated` (the planner's A2A task and its answer), `checkpoint` (the signed
 * checkpoint and its last receipt), `resumed`, `done`, `failed`.
 *
 * Orchestrator → researcher: `go` (the node its bridge talks to, the planner it accepts chains
 * from), `stop`. Researcher → orchestrator: `hello` (its did:key and A2A base url), `ready` (its
 * bridge is up), `call` (one tool call it made under a delegated chain), `task` (a task it
 * finished: the chain it was handed and what it did), `failed`.
 */
import {
  type ContentId,
  decode,
  type Did,
  encode,
  fromHex,
  readSignedGrant,
  type SignedGrant,
  signedGrantToCbor,
  toHex,
} from '../core/index.ts';

/** A lane of a worker's work: files (sharded budget) or memory (the budget channel). */
export type Lane = 'files' | 'memory';

/** Where a worker finds a node. */
export interface NodeAddress {
  readonly name: string;
  readonly host: string;
  readonly port: number;
  readonly did: Did;
}

/** Orchestrator → worker. */
export type ToWorker =
  | {
      readonly type: 'go';
      readonly name: string;
      readonly nodes: readonly NodeAddress[];
      /** Index in `nodes` of the worker's own node. */
      readonly home: number;
      readonly sampleDir: string;
      /** The sample files (absolute paths). */
      readonly paths: readonly string[];
      /** Pause between rounds (ms). */
      readonly paceMs: number;
      /** The files chain and the memory chain ({@link chainToHex}). */
      readonly files: string;
      readonly memory: string;
      /** For the planner only: the A2A task it sends the researcher before its rounds. */
      readonly planner?: PlannerJob;
      /**
       * For the worker the issuer steers (§4.7): after this many allowed files calls it waits for
       * the `checkpoint` request (the orchestrator sends it on seeing that many), so a fast run
       * (`--pace 0`) cannot spend the grant before the request arrives.
       */
      readonly steer_after?: number;
    }
  | { readonly type: 'checkpoint' }
  | { readonly type: 'continue'; readonly amendment: string; readonly continuation: string }
  /**
   * The issuer is revoking this worker's grants: it makes no call until `revoked-everywhere` (so
   * that a fast worker on a loaded machine cannot spend its budgets before the revocation is
   * acknowledged, and leave no call after it for the report to check).
   */
  | { readonly type: 'revoking' }
  /**
   * Every node has acknowledged the revocation of this worker's grants; `at_ms` is when the
   * orchestrator recorded that (its clock, ms), the instant after which the report requires
   * every call of the worker to be refused `revoked`.
   */
  | { readonly type: 'revoked-everywhere'; readonly at_ms: number }
  | { readonly type: 'stop' };

/** The planner's A2A task: sent through its bridge's A2A face to the researcher behind its home node. */
export interface PlannerJob {
  /** The agents chain naming the researcher's skill ({@link chainToHex}). */
  readonly agents: string;
  /** The researcher's did:key: the subject of the delegated grant. */
  readonly researcher: Did;
  /** The skill the message names (`metadata.skill`). */
  readonly skill: string;
  /** The delegated budget (µJ, decimal): a quarter of the planner's files grant. */
  readonly delegate_uj: string;
  /** What the planner asks for (the message's text). */
  readonly text: string;
}

/** The planner's A2A task as it saw it: the answer's decision (`jcp/…` metadata, docs/a2a.md) and the task. */
export interface DelegatedEvent {
  readonly type: 'delegated';
  /** The node's verdict on the `agent-task` frame, or `error` when no decision came back. */
  readonly verdict: 'allow' | 'deny' | 'error';
  readonly reason?: string;
  readonly receipt?: string;
  readonly request_id?: string;
  readonly grant_id?: ContentId;
  readonly cost_uj?: string;
  /** The task's final state (A2A `TaskState` name), when a task came back. */
  readonly state?: string;
  /** The researcher's summary (the task's artifact text, or the error). */
  readonly summary: string;
  readonly sent_ms: number;
  readonly done_ms: number;
}

/** Orchestrator → researcher. */
export type ToResearcher =
  | {
      readonly type: 'go';
      /** The node the researcher's bridge sends its tool calls to. */
      readonly node: NodeAddress;
      /** The planner: the delegator whose chains its bridge accepts (`--accept-delegation-from`). */
      readonly planner: Did;
      /** The sample files it reads (absolute paths). */
      readonly paths: readonly string[];
      readonly sampleDir: string;
    }
  | { readonly type: 'stop' };

/** One tool call the researcher made under a delegated chain, as it saw it (µJ as decimal strings). */
export interface ResearcherCall {
  readonly type: 'call';
  readonly action: string;
  readonly verdict: 'allow' | 'deny';
  readonly reason?: string;
  readonly grant_id: ContentId;
  readonly request_id: string;
  readonly cost_uj: string;
  readonly remaining_uj: string;
  readonly budget_uj: string;
}

/** Researcher → orchestrator. */
export type FromResearcher =
  | { readonly type: 'hello'; readonly did: Did; readonly url: string }
  | { readonly type: 'ready' }
  | ResearcherCall
  | {
      readonly type: 'task';
      readonly task_id: string;
      /** The chain handed to it in `metadata["jcp/delegation"]` ({@link chainToHex}), or '' when there was none. */
      readonly chain: string;
      /** The caller the node named (`metadata["jcp/caller"]`), or ''. */
      readonly caller: string;
      readonly allowed: number;
      readonly spent_uj: string;
      /** The deny that ended its work, or '' when it stopped on its own. */
      readonly denied: string;
      readonly summary: string;
    }
  | { readonly type: 'failed'; readonly message: string };

/** One decided call, as the worker saw it (µJ as decimal strings). */
export interface CallEvent {
  readonly type: 'call';
  readonly lane: Lane;
  readonly node: string;
  readonly action: string;
  readonly verdict: 'allow' | 'deny';
  readonly reason?: string;
  readonly grant_id: ContentId;
  readonly request_id: ContentId;
  readonly cost_uj: string;
  readonly remaining_uj: string;
  readonly budget_uj: string;
  /** When the request left the worker, and when the answer came back (ms). */
  readonly sent_ms: number;
  readonly done_ms: number;
  /** A short note on the tool's answer (first line of its text, or the endpoint error). */
  readonly note?: string;
}

/** Worker → orchestrator. */
export type FromWorker =
  | { readonly type: 'hello'; readonly did: Did }
  | CallEvent
  | DelegatedEvent
  | { readonly type: 'checkpoint'; readonly checkpoint: string; readonly receipt: string; readonly node: string }
  | { readonly type: 'resumed'; readonly grant_id: ContentId; readonly budget_uj: string }
  | { readonly type: 'done'; readonly status: 'budget-exceeded' | 'revoked' | 'stopped' }
  | { readonly type: 'failed'; readonly message: string };

/** Hex of the det-CBOR array of a chain (root first). */
export function chainToHex(chain: readonly SignedGrant[]): string {
  return toHex(encode(chain.map(signedGrantToCbor)));
}

/** Reads {@link chainToHex}. @throws JcpError on malformed input. */
export function chainFromHex(hex: string): SignedGrant[] {
  const v = decode(fromHex(hex));
  if (!Array.isArray(v)) throw new TypeError('chain: expected an array');
  return v.map((x, i) => readSignedGrant(x, `chain[${i}]`));
}

/** Reads a chain as A2A metadata carries it (`jcp/delegation`, docs/a2a.md): base64url of the det-CBOR array, root first. @throws JcpError on malformed input. */
export function chainFromBase64url(text: string): SignedGrant[] {
  const v = decode(new Uint8Array(Buffer.from(text, 'base64url')));
  if (!Array.isArray(v)) throw new TypeError('jcp/delegation: expected an array');
  return v.map((x, i) => readSignedGrant(x, `jcp/delegation[${i}]`));
}
