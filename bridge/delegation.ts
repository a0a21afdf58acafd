/**
 * Budgets that follow delegation (spec §4.1, §4.2, §4.3; docs/a2a.md "Budgets that follow delegation"): the bridge
 * mints a child grant from its agent's own grant when the agent asks (`jcp/delegate`), carries the
 * signed chain as `jcp/delegation` (base64url, no padding, of the det-CBOR array of SignedGrant,
 * root first, leaf last), and on the receiving side accepts such a chain for one call, only from
 * the delegators it was told to accept.
 *
 * Minting never amplifies (core `attenuate`: a smaller or equal budget, a subset of the actions,
 * an expiry no later than the parent's, `delegate_depth` narrowed), and accepting checks the whole
 * chain hop by hop and its signatures (core `verifyChain`), the leaf's subject, its delegator and
 * its resource. The node still decides every call (§7): what is spent under an accepted chain is
 * debited from every link (§4.2), and a revoked link makes the call a sealed `revoked` deny (§4.3).
 */
import { randomBytes } from 'node:crypto';
import {
  type Actor,
  attenuate,
  type ContentId,
  checkHop,
  decode,
  type Did,
  encode,
  grantId,
  parseDid,
  readSignedGrant,
  type SignedGrant,
  signedGrantToCbor,
  verifyChain,
} from '../core/index.ts';

/** The metadata key (A2A `message.metadata`, MCP `_meta`) of a signed delegation chain. */
export const DELEGATION_KEY = 'jcp/delegation';
/** The metadata key of a request to delegate (agent → its own bridge). */
export const DELEGATE_KEY = 'jcp/delegate';

/** Stable codes of refused delegations (minting and accepting). */
export const DelegationErrorCodes = {
  /** `jcp/delegate` is not `{to: did:key, resource: text, budget_uj: "<decimal>", actions?: [text], expiry?: s, delegate_depth?: n}`. */
  REQUEST_INVALID: 'delegate-invalid',
  /** The agent holds no grant (own or accepted) for the resource named in `jcp/delegate`. */
  NO_GRANT: 'delegate-no-grant',
  /** The child asked for would not be narrower than the agent's grant (budget, actions, expiry, depth). */
  NOT_NARROWER: 'delegate-not-narrower',
  /** The agent's grant is leaf-only (`delegate_depth` 0): it may not delegate. */
  FORBIDDEN: 'delegate-forbidden',
  /**
   * `to` is not a delegate this bridge may mint for: not in `--delegate-to`, or, without that
   * list, asked on a face with no token (anyone who reaches it), where a minted grant would be a
   * lasting capability for whatever key the sender names.
   */
  TARGET_REFUSED: 'delegate-target-refused',
  /** The agent's key is a threshold group (`--nats`): the bridge holds no key that could sign a grant. */
  UNSUPPORTED: 'delegate-unsupported',
  /** `jcp/delegation` is not base64url of a det-CBOR array of 1..32 signed grants, or is over the size cap. */
  INVALID: 'delegation-invalid',
  /** The chain's leaf grant names another subject than this agent. */
  NOT_FOR_ME: 'delegation-not-for-me',
  /** The chain does not verify: a broken link (`chain-broken`) or a signature (`bad-signature`). */
  CHAIN_INVALID: 'delegation-chain-invalid',
  /** A link is wider than its parent (another resource, an action, a budget, a depth). */
  NOT_ATTENUATING: 'delegation-not-attenuating',
  /** A link expires after its parent (or never, under a parent that expires). */
  OUTLIVES_PARENT: 'delegation-outlives-parent',
  /** The chain grants another resource than the tool or skill called. */
  RESOURCE_MISMATCH: 'delegation-resource-mismatch',
  /** The leaf's issuer (the delegator) is not one this bridge accepts (`--accept-delegation-from`). */
  DELEGATOR_NOT_ACCEPTED: 'delegation-delegator-not-accepted',
} as const;

/** A refused delegation: `code` is one of {@link DelegationErrorCodes}. */
export class DelegationError extends Error {
  override readonly name = 'DelegationError';
  readonly code: string;
  constructor(code: string, message: string) {
    super(`${code}: ${message}`);
    this.code = code;
  }
}

/** The most links a handed chain may have (core/chain.ts `MAX_CHAIN_LENGTH`). */
const MAX_CHAIN_LENGTH = 32;

/** The largest `jcp/delegation` text read, characters (a 32-link chain of grants is about 20 KB). */
export const MAX_DELEGATION_CHARS = 65_536;

/** base64url (no padding) of the det-CBOR array of `chain`'s signed grants, root first. */
export function encodeDelegation(chain: readonly SignedGrant[]): string {
  return Buffer.from(encode(chain.map((sg) => signedGrantToCbor(sg)))).toString('base64url');
}

/**
 * Reads a `jcp/delegation` value: the chain, root first.
 * @throws DelegationError `delegation-invalid` (not text, over {@link MAX_DELEGATION_CHARS}, not
 *   base64url, not det-CBOR, not an array of 1..{@link MAX_CHAIN_LENGTH} signed grants).
 */
export function decodeDelegation(text: unknown): SignedGrant[] {
  const bad = (why: string): never => {
    throw new DelegationError(DelegationErrorCodes.INVALID, `${DELEGATION_KEY}: ${why}`);
  };
  if (typeof text !== 'string') return bad('expected base64url text');
  if (text.length > MAX_DELEGATION_CHARS) return bad(`longer than ${MAX_DELEGATION_CHARS} characters`);
  if (!/^[A-Za-z0-9_-]+$/.test(text)) return bad('not base64url (no padding)');
  const bytes = Buffer.from(text, 'base64url');
  if (bytes.toString('base64url') !== text) return bad('not canonical base64url');
  let v: unknown;
  try {
    v = decode(new Uint8Array(bytes));
  } catch (e) {
    return bad(`not det-CBOR (${(e as Error).message})`);
  }
  if (!Array.isArray(v) || v.length === 0 || v.length > MAX_CHAIN_LENGTH)
    return bad(`expected an array of 1 to ${MAX_CHAIN_LENGTH} signed grants`);
  try {
    return v.map((x, i) => readSignedGrant(x, `${DELEGATION_KEY}[${i}]`));
  } catch (e) {
    return bad((e as Error).message);
  }
}

/** What an agent asks its bridge to delegate (`jcp/delegate`, read by {@link readDelegateRequest}). */
export interface DelegateRequest {
  /** The receiving agent's did:key: the child grant's subject. */
  readonly to: Did;
  /** The resource: its name in the node's config or its content id. */
  readonly resource: string;
  /** The child's budget, µJ. */
  readonly budgetUj: bigint;
  /** The child's actions (tools or skills); absent: the parent's. */
  readonly actions?: readonly string[];
  /** The child's expiry, unix seconds; absent: the parent's. */
  readonly expiry?: number;
  /** The child's `delegate_depth`; absent: the parent's − 1 (unbounded under an unbounded parent). */
  readonly delegateDepth?: number;
}

/** Reads a `jcp/delegate` value. @throws DelegationError `delegate-invalid` naming the field. */
export function readDelegateRequest(v: unknown): DelegateRequest {
  const bad = (why: string): never => {
    throw new DelegationError(DelegationErrorCodes.REQUEST_INVALID, `${DELEGATE_KEY}: ${why}`);
  };
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    return bad('expected an object {to, resource, budget_uj, actions?, expiry?}');
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o))
    if (!['to', 'resource', 'budget_uj', 'actions', 'expiry', 'delegate_depth'].includes(k)) bad(`unknown field ${JSON.stringify(k)}`);
  if (typeof o['to'] !== 'string') return bad('to: expected a did:key');
  try {
    parseDid(o['to']);
  } catch (e) {
    bad(`to: ${(e as Error).message}`);
  }
  if (typeof o['resource'] !== 'string' || o['resource'].length === 0) return bad('resource: expected a resource name or content id');
  const b = o['budget_uj'];
  if (typeof b !== 'string' || !/^(0|[1-9]\d{0,19})$/.test(b)) return bad('budget_uj: expected µJ as a decimal string');
  const actions = o['actions'];
  if (actions !== undefined && (!Array.isArray(actions) || actions.some((a) => typeof a !== 'string') || actions.length > 256))
    bad('actions: expected an array of action names');
  if (actions !== undefined && new Set(actions as string[]).size !== (actions as string[]).length) bad('actions: names must be unique');
  const expiry = o['expiry'];
  if (expiry !== undefined && (!Number.isSafeInteger(expiry) || (expiry as number) < 1)) bad('expiry: expected unix seconds ≥ 1');
  const depth = o['delegate_depth'];
  if (depth !== undefined && (!Number.isSafeInteger(depth) || (depth as number) < 0)) bad('delegate_depth: expected a whole number ≥ 0');
  return {
    to: o['to'] as Did,
    resource: o['resource'],
    budgetUj: BigInt(b),
    ...(actions !== undefined ? { actions: actions as string[] } : {}),
    ...(expiry !== undefined ? { expiry: expiry as number } : {}),
    ...(depth !== undefined ? { delegateDepth: depth as number } : {}),
  };
}

/**
 * Mints the child grant `req` asks for under `parent` (the agent's chain for that resource, root
 * first), signed with `holder` (the parent leaf's subject), and returns the chain to hand on:
 * `parent` + the child. The child never amplifies (§4.1): budget ≤ the parent's, actions ⊆,
 * expiry ≤ (the parent's when absent), `delegate_depth` the parent's − 1 when bounded. `nonce` (16
 * bytes, default random): a fixed one mints the same signed grant again (Ed25519 is deterministic).
 * @throws DelegationError `delegate-forbidden` (a leaf-only parent), `delegate-not-narrower`
 *   (an amplification: the message says which field).
 */
export function mintDelegation(
  parent: readonly SignedGrant[],
  req: DelegateRequest,
  holder: Actor,
  nowS: number,
  nonce: Uint8Array = new Uint8Array(randomBytes(16)),
): SignedGrant[] {
  const leaf = parent[parent.length - 1]!;
  const p = leaf.grant;
  if (p.delegate_depth === 0)
    throw new DelegationError(DelegationErrorCodes.FORBIDDEN, 'the grant for this resource is leaf-only (delegate_depth 0)');
  if (req.expiry !== undefined && req.expiry <= nowS)
    throw new DelegationError(DelegationErrorCodes.REQUEST_INVALID, `${DELEGATE_KEY}: expiry ${req.expiry} is not in the future`);
  const depth = req.delegateDepth ?? (p.delegate_depth === undefined ? undefined : p.delegate_depth - 1);
  const r = attenuate(
    leaf,
    {
      subject: req.to,
      ...(req.actions !== undefined ? { actions: req.actions } : {}),
      budget_uj: req.budgetUj,
      ...(req.expiry !== undefined ? { expiry: req.expiry } : {}),
      ...(depth !== undefined ? { delegate_depth: depth } : {}),
      nonce,
    },
    holder,
  );
  if (!r.ok) {
    const code = r.error.reason === 'delegation-forbidden' ? DelegationErrorCodes.FORBIDDEN : DelegationErrorCodes.NOT_NARROWER;
    throw new DelegationError(code, `the child grant would not be narrower than ${grantId(p)}: ${r.error.why}`);
  }
  return [...parent, r.value];
}

/** Options of {@link DelegationGate}. */
export interface GateOptions {
  /** This agent's did: every accepted chain's leaf names it as subject. */
  readonly self: Did;
  /** The delegators (leaf issuers) whose chains are accepted. */
  readonly acceptFrom: readonly Did[];
  /** Accepted chains remembered (default 256); the oldest is dropped past it. */
  readonly cacheSize?: number;
}

/**
 * The receiving side: accepts a `jcp/delegation` chain for a call on `resource` or refuses it with
 * a stable code. Verified chains are remembered by their text (bounded, oldest dropped first).
 */
export class DelegationGate {
  readonly #o: GateOptions;
  readonly #accepted = new Map<string, SignedGrant[]>();

  constructor(o: GateOptions) {
    this.#o = o;
  }

  /** Whether any delegator is accepted (a bridge without `--accept-delegation-from` refuses every chain). */
  get enabled(): boolean {
    return this.#o.acceptFrom.length > 0;
  }

  /** Chains held in the cache. */
  get cached(): number {
    return this.#accepted.size;
  }

  /**
   * The chain `text` carries, checked for a call by this agent on `resource` (a content id; absent:
   * any resource, which the caller then checks against the chain's leaf).
   * @throws DelegationError `delegation-invalid`, `delegation-not-for-me`,
   *   `delegation-delegator-not-accepted`, `delegation-outlives-parent`,
   *   `delegation-not-attenuating`, `delegation-chain-invalid`, `delegation-resource-mismatch`.
   */
  accept(text: unknown, resource?: ContentId): SignedGrant[] {
    let chain = typeof text === 'string' ? this.#accepted.get(text) : undefined;
    if (chain === undefined) {
      chain = this.#check(decodeDelegation(text));
      const key = text as string;
      this.#accepted.set(key, chain);
      const cap = this.#o.cacheSize ?? 256;
      for (const k of this.#accepted.keys()) {
        if (this.#accepted.size <= cap) break;
        this.#accepted.delete(k);
      }
    }
    const leaf = chain[chain.length - 1]!.grant;
    if (resource !== undefined && leaf.capability.resource !== resource) {
      throw new DelegationError(
        DelegationErrorCodes.RESOURCE_MISMATCH,
        `the delegated grant ${grantId(leaf)} is for resource ${leaf.capability.resource}, not ${resource} (the one called)`,
      );
    }
    return chain;
  }

  #check(chain: SignedGrant[]): SignedGrant[] {
    const leaf = chain[chain.length - 1]!.grant;
    if (leaf.subject !== this.#o.self)
      throw new DelegationError(
        DelegationErrorCodes.NOT_FOR_ME,
        `the delegated grant's subject is ${leaf.subject}, not this agent (${this.#o.self})`,
      );
    if (!this.#o.acceptFrom.includes(leaf.issuer))
      throw new DelegationError(
        DelegationErrorCodes.DELEGATOR_NOT_ACCEPTED,
        `delegations from ${leaf.issuer} are not accepted here (--accept-delegation-from)`,
      );
    for (let i = 1; i < chain.length; i++) {
      const parent = chain[i - 1]!.grant;
      const hop = checkHop(parent, grantId(parent), chain[i]!.grant);
      if (!hop.ok && hop.error.why === 'child outlives parent')
        throw new DelegationError(DelegationErrorCodes.OUTLIVES_PARENT, `link ${i} expires after its parent (${hop.error.why})`);
    }
    const v = verifyChain(chain);
    if (!v.ok) {
      const code = v.error.reason === 'attenuation-violation' ? DelegationErrorCodes.NOT_ATTENUATING : DelegationErrorCodes.CHAIN_INVALID;
      throw new DelegationError(code, `${v.error.reason} at link ${v.error.link ?? 0}: ${v.error.why}`);
    }
    return chain;
  }
}
