/**
 * The messages between the demo's orchestrator and its agent workers (Node IPC, JSON). Grants,
 * checkpoints and amendments travel as hex of their canonical det-CBOR (docs/design.md "Encodings"), µJ
 * as decimal strings, times as milliseconds of the shared wall clock.
 *
 * Orchestrator → worker: `go` (who it is, where the nodes are, its two grant chains), `checkpoint`
 * (commit to your state now, §4.7), `continue` (the signed amendment and the continuation grant),
 * `stop`.
 * Worker → orchestrator: `hello` (its own did:key; its key never leaves the worker), `call` (one
 * decided call), `checkpoint` (the signed checkpoint and its last receipt), `resumed`, `done`,
 * `failed`.
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
    }
  | { readonly type: 'checkpoint' }
  | { readonly type: 'continue'; readonly amendment: string; readonly continuation: string }
  /**
   * Every node has acknowledged the revocation of this worker's grants; `at_ms` is when the
   * orchestrator recorded that (its clock, ms), the instant after which the report requires
   * every call of the worker to be refused `revoked`.
   */
  | { readonly type: 'revoked-everywhere'; readonly at_ms: number }
  | { readonly type: 'stop' };

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
