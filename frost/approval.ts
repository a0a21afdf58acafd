/**
 * Threshold approvals (spec §2.2, §11), pure: what a holder is asked to sign, the rules-file
 * policy, and the signed decision record. Effects (terminal, webhook, journal file, NATS) live in
 * `approvers.ts`.
 *
 * A holder decodes the message of a signing session as the §11 signing bytes of a jcp/1 wire
 * request (canonical det-CBOR of the request map without `signature`): the tool (frame action),
 * the resource, the arguments (the payload, checked against `frame.payload_hash`), the cost, the
 * grant chain, the caller and `now`. Anything else is a raw message, refused unless the holder
 * signs raw bytes. docs/frost.md "Approvals" documents the formats.
 */
import {
  type Actor,
  asArray,
  asCid,
  asDid,
  asEnum,
  asObj,
  asSafeUint,
  asText,
  contentId,
  type ContentId,
  contentIdOfBytes,
  decode,
  type Did,
  encode,
  err,
  isContentId,
  MAX_WIRE_CHAIN,
  ok,
  readSigned,
  readSignedGrant,
  readWireRequestFields,
  REQUEST_OPTIONAL,
  type Result,
  signBody,
  toHex,
  type UnsignedWireRequest,
  verifyBody,
  wireRequestSigningBytes,
} from '../core/index.ts';
import { fault, FrostErrorCodes, type FrostFault } from './errors.ts';

/** One link of the grant chain as a holder is shown it. `budget_uj` in µJ (decimal string), `expiry` unix seconds. */
export interface ShownGrant {
  readonly issuer: Did;
  readonly subject: Did;
  readonly resource: ContentId;
  readonly actions: readonly string[];
  readonly budget_uj: string;
  readonly expiry: number;
}

/**
 * A decoded jcp/1 call (§11): what the holder approves. `cost_uj` is a decimal string of µJ (it
 * may pass 2^53); `now` unix seconds as the caller asserts it; `arguments` the payload parsed as
 * UTF-8 JSON when it is that (MCP tool arguments), else undefined with `payload_hex` set.
 */
export interface DecodedCall {
  readonly kind: 'jcp-request';
  /** Content id of the message bytes (BLAKE3-256 of the signing bytes): names the exact call. */
  readonly request: ContentId;
  readonly frame_kind: string;
  readonly trust: string;
  readonly action: string;
  readonly resource: ContentId;
  readonly grant_id: ContentId;
  readonly payload_hash: ContentId;
  readonly caller: Did;
  readonly cost_uj: string;
  readonly provenance: string;
  readonly now: number;
  readonly arguments?: unknown;
  readonly payload_hex?: string;
  readonly chain: readonly ShownGrant[];
}

/** A message that is not a jcp/1 request: only its content id and length are known. */
export interface RawMessage {
  readonly kind: 'raw';
  readonly request: ContentId;
  readonly bytes: number;
  /** Why it is not a wire request (for the refusal's reason). */
  readonly why: string;
}

/** What a holder is asked to sign. */
export type Subject = DecodedCall | RawMessage;

/**
 * Decodes the message of a signing session (§11 signing bytes of a wire request). Never throws:
 * a message that is not exactly the canonical unsigned request map (any field wrong, the payload
 * not matching `frame.payload_hash`, non-canonical bytes) is a {@link RawMessage}.
 */
export function decodeCall(message: Uint8Array): Subject {
  const request = contentIdOfBytes(message);
  try {
    // `notify` and `nonce` (docs/wire.md) are part of the signed bytes: the bridge asks for notices
    // on every call and gives each call its nonce.
    const o = asObj(decode(message), 'request', ['frame', 'chain', 'caller', 'cost', 'now'], REQUEST_OPTIONAL);
    const chain = asArray(o['chain'], 'request.chain', MAX_WIRE_CHAIN).map((g, i) => readSignedGrant(g, `request.chain[${i}]`));
    if (chain.length === 0) throw new Error('request.chain: at least one grant');
    const r = readWireRequestFields({ ...o, signature: new Uint8Array(64) }, chain);
    const { signature: _s, ...unsigned } = r;
    // The signature will be over these exact bytes: they must be what was decoded, nothing more.
    const again = wireRequestSigningBytes(unsigned as UnsignedWireRequest);
    if (again.length !== message.length || toHex(again) !== toHex(message)) throw new Error('not the canonical form of the request');
    return {
      kind: 'jcp-request',
      request,
      frame_kind: r.frame.kind,
      trust: r.frame.trust,
      action: r.frame.action,
      resource: r.frame.resource,
      grant_id: r.frame.grant_id,
      payload_hash: r.frame.payload_hash,
      caller: r.caller,
      cost_uj: r.cost.uj.toString(),
      provenance: r.cost.provenance,
      now: r.now,
      ...payloadView(r.payload),
      chain: chain.map((s) => ({
        issuer: s.grant.issuer,
        subject: s.grant.subject,
        resource: s.grant.capability.resource,
        actions: s.grant.capability.actions,
        budget_uj: s.grant.budget_uj.toString(),
        expiry: s.grant.expiry,
      })),
    };
  } catch (e) {
    return { kind: 'raw', request, bytes: message.length, why: (e as Error).message };
  }
}

function payloadView(payload: Uint8Array | undefined): { arguments?: unknown; payload_hex?: string } {
  if (payload === undefined) return {};
  try {
    return { arguments: JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(payload)) };
  } catch {
    return { payload_hex: toHex(payload) };
  }
}

/** A holder's verdict on one message, with the reason shown to the coordinator and the auditor. */
export interface Verdict {
  readonly approve: boolean;
  readonly reason: string;
}

/** A constraint on one argument (a top-level key of the JSON arguments). */
export interface ArgRule {
  /** The value (or every element of a list of strings) starts with this prefix; `..` path segments are refused. */
  readonly prefix?: string;
  /** The value is a number ≤ max / ≥ min. */
  readonly max?: number;
  readonly min?: number;
  /** The value equals one of these. */
  readonly one_of?: readonly (string | number)[];
}

/** One allow entry of a rules file. Times are unix seconds; `hours_utc` is `[from, to)` in 0..24. */
export interface AllowRule {
  /** A resource name (its id is `contentId({jcp_resource: name})`, as node/config.ts names them) or a 64-hex id. */
  readonly resource: string;
  readonly actions: readonly string[];
  /** Largest cost approved, µJ. */
  readonly max_cost_uj?: bigint;
  readonly args?: Readonly<Record<string, ArgRule>>;
  /** Only these callers (did:key). */
  readonly callers?: readonly Did[];
  readonly not_before?: number;
  readonly not_after?: number;
  readonly hours_utc?: readonly [number, number];
}

/** A parsed rules file, with its content id (BLAKE3 of the canonical CBOR of the parsed rules). */
export interface Rules {
  readonly id: ContentId;
  readonly allow: readonly AllowRule[];
  /** Largest |holder clock − request `now|` accepted, seconds (default 300). */
  readonly max_skew_s: number;
}

/** Default bound on a request's `now` against the holder's clock (seconds). */
export const DEFAULT_MAX_SKEW_S = 300;

function num(v: unknown, field: string): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v)) throw new Error(`${field}: expected an integer`);
  return v;
}

/**
 * Parses a rules file (JSON text): `{"allow": [{"resource", "actions", "max_cost_uj"?, "args"?,
 * "callers"?, "not_before"?, "not_after"?, "hours_utc"?}], "max_skew_s"?}`. Integers only.
 * Returns `frost-policy-invalid` naming the field for anything else (unknown keys included).
 */
export function parseRules(text: string): Result<Rules, FrostFault> {
  try {
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch (e) {
      throw new Error(`not JSON: ${(e as Error).message}`);
    }
    const o = asObj(v, 'rules', ['allow'], ['max_skew_s']);
    const allow = asArray(o['allow'], 'rules.allow', 4096).map((x, i): AllowRule => {
      const f = `rules.allow[${i}]`;
      const e = asObj(x, f, ['resource', 'actions'], ['max_cost_uj', 'args', 'callers', 'not_before', 'not_after', 'hours_utc']);
      const resource = asText(e['resource'], `${f}.resource`, 256);
      const actions = asArray(e['actions'], `${f}.actions`, 256).map((a, j) => asText(a, `${f}.actions[${j}]`, 256));
      const rule: { -readonly [K in keyof AllowRule]: AllowRule[K] } = { resource, actions };
      if (e['max_cost_uj'] !== undefined) {
        const c = e['max_cost_uj'];
        if (!(typeof c === 'number' && Number.isSafeInteger(c) && c >= 0) && !(typeof c === 'string' && /^\d{1,20}$/.test(c))) {
          throw new Error(`${f}.max_cost_uj: expected a non-negative integer (µJ; a decimal string above 2^53)`);
        }
        rule.max_cost_uj = BigInt(c);
      }
      if (e['args'] !== undefined) {
        const raw = e['args'];
        const a = asObj(raw, `${f}.args`, [], typeof raw === 'object' && raw !== null ? Object.keys(raw) : []);
        // No prototype: an argument named `__proto__` (an own key after JSON.parse) stays a constraint.
        const args: Record<string, ArgRule> = Object.create(null) as Record<string, ArgRule>;
        for (const [k, r] of Object.entries(a)) {
          const rf = `${f}.args.${k}`;
          const ro = asObj(r, rf, [], ['prefix', 'max', 'min', 'one_of']);
          if (Object.keys(ro).length === 0) throw new Error(`${rf}: give prefix, max, min or one_of`);
          const ar: { -readonly [K in keyof ArgRule]: ArgRule[K] } = {};
          if (ro['prefix'] !== undefined) ar.prefix = asText(ro['prefix'], `${rf}.prefix`, 1024);
          if (ro['max'] !== undefined) ar.max = num(ro['max'], `${rf}.max`);
          if (ro['min'] !== undefined) ar.min = num(ro['min'], `${rf}.min`);
          if (ro['one_of'] !== undefined) {
            ar.one_of = asArray(ro['one_of'], `${rf}.one_of`, 1024).map((x2, j) =>
              typeof x2 === 'number' ? num(x2, `${rf}.one_of[${j}]`) : asText(x2, `${rf}.one_of[${j}]`, 1024),
            );
          }
          args[k] = ar;
        }
        rule.args = args;
      }
      if (e['callers'] !== undefined)
        rule.callers = asArray(e['callers'], `${f}.callers`, 1024).map((d, j) => asDid(d, `${f}.callers[${j}]`));
      if (e['not_before'] !== undefined) rule.not_before = asSafeUint(e['not_before'], `${f}.not_before`);
      if (e['not_after'] !== undefined) rule.not_after = asSafeUint(e['not_after'], `${f}.not_after`);
      if (e['hours_utc'] !== undefined) {
        const h = asArray(e['hours_utc'], `${f}.hours_utc`, 2).map((x2, j) => num(x2, `${f}.hours_utc[${j}]`));
        if (h.length !== 2 || h.some((x2) => x2 < 0 || x2 > 24)) throw new Error(`${f}.hours_utc: expected [from, to] hours in 0..24`);
        rule.hours_utc = [h[0]!, h[1]!];
      }
      return rule;
    });
    const maxSkew = o['max_skew_s'] === undefined ? DEFAULT_MAX_SKEW_S : asSafeUint(o['max_skew_s'], 'rules.max_skew_s');
    return ok({ id: contentId(v === null ? {} : canonicalJson(v)), allow, max_skew_s: maxSkew });
  } catch (e) {
    return err(fault(FrostErrorCodes.POLICY_INVALID, `rules file: ${(e as Error).message}`));
  }
}

/** The JSON value in a form det-CBOR accepts (integers as is; booleans/null/floats refused above). */
function canonicalJson(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canonicalJson);
  if (typeof v === 'object' && v !== null) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, canonicalJson(x)]));
  return v;
}

/** The content id of a resource named `name` (as node/config.ts `resourceIdOf`), or the id itself. */
export function resourceIdFor(nameOrId: string): ContentId {
  return isContentId(nameOrId) ? nameOrId : contentId({ jcp_resource: nameOrId });
}

/**
 * The common checks before any policy: a raw message is refused unless `allowRaw`; a call whose
 * `now` is more than `maxSkewS` from the holder's clock `nowS` (seconds) is refused (it is dead
 * at the node too, §11), so an approval expires with its request. Undefined = go on to the policy.
 */
export function precheck(s: Subject, opts: { allowRaw: boolean; nowS: number; maxSkewS: number }): Verdict | undefined {
  if (s.kind === 'raw')
    return opts.allowRaw
      ? undefined
      : { approve: false, reason: `not a jcp/1 wire request (${s.why}); this holder does not sign raw bytes` };
  if (Math.abs(opts.nowS - s.now) > opts.maxSkewS)
    return { approve: false, reason: `request now ${s.now} is more than ${opts.maxSkewS} s from the holder's clock (${opts.nowS})` };
  return undefined;
}

/**
 * Judges a call by a rules file: approved when one allow entry matches everything (resource,
 * action, cost, callers, time window against the request's `now`, every argument constraint);
 * refused otherwise, the reason naming the closest entry's first failed condition.
 */
export function judgeByRules(rules: Rules, s: Subject): Verdict {
  if (s.kind === 'raw') return { approve: false, reason: 'a rules file approves jcp/1 calls only' };
  const misses: string[] = [];
  for (const [i, r] of rules.allow.entries()) {
    const miss = ruleMiss(r, s);
    if (miss === undefined) return { approve: true, reason: `rules entry ${i} allows ${s.action} on ${r.resource}` };
    misses.push(`entry ${i}: ${miss}`);
  }
  return { approve: false, reason: misses.length ? `no rules entry allows this call (${misses.join('; ')})` : 'the rules allow nothing' };
}

function ruleMiss(r: AllowRule, s: DecodedCall): string | undefined {
  if (resourceIdFor(r.resource) !== s.resource) return `resource is not ${r.resource}`;
  if (!r.actions.includes(s.action)) return `action ${s.action} is not in [${r.actions.join(', ')}]`;
  if (r.max_cost_uj !== undefined && BigInt(s.cost_uj) > r.max_cost_uj) return `cost ${s.cost_uj} µJ is over ${r.max_cost_uj} µJ`;
  if (r.callers && !r.callers.includes(s.caller)) return `caller ${s.caller} is not listed`;
  if (r.not_before !== undefined && s.now < r.not_before) return `now ${s.now} is before ${r.not_before}`;
  if (r.not_after !== undefined && s.now > r.not_after) return `now ${s.now} is after ${r.not_after}`;
  if (r.hours_utc) {
    const h = Math.floor((s.now % 86_400) / 3600);
    const [from, to] = r.hours_utc;
    const inside = from <= to ? h >= from && h < to : h >= from || h < to;
    if (!inside) return `hour ${h} UTC is outside [${from}, ${to})`;
  }
  if (r.args) {
    const args = s.arguments;
    if (typeof args !== 'object' || args === null || Array.isArray(args)) return 'the arguments are not a JSON object';
    for (const [k, c] of Object.entries(r.args)) {
      // Own keys only: `constructor`, `__proto__`… of a call without them are missing, not Object's.
      const v = Object.hasOwn(args, k) ? (args as Record<string, unknown>)[k] : undefined;
      if (v === undefined) return `argument ${k} is missing`;
      if (c.prefix !== undefined) {
        // A list of strings (several paths or names) is judged element by element.
        for (const x of Array.isArray(v) ? v : [v]) {
          if (typeof x !== 'string' || !x.startsWith(c.prefix)) return `argument ${k} is not under ${c.prefix}`;
          if (x.split(/[\\/]/).includes('..')) return `argument ${k} contains '..'`;
        }
        if (Array.isArray(v) && v.length === 0) return `argument ${k} is an empty list`;
      }
      if (c.max !== undefined || c.min !== undefined) {
        if (typeof v !== 'number') return `argument ${k} is not a number`;
        if (c.max !== undefined && v > c.max) return `argument ${k} = ${v} is over ${c.max}`;
        if (c.min !== undefined && v < c.min) return `argument ${k} = ${v} is under ${c.min}`;
      }
      if (c.one_of !== undefined && !c.one_of.includes(v as string | number)) return `argument ${k} is not one of the listed values`;
    }
  }
  return undefined;
}

/** The signed body of an approval decision (docs/frost.md "Approvals"). `at_s` unix seconds. */
export interface DecisionBody {
  readonly proto: 'jcp-frost-approval/1';
  /** The holder's did (its roster identity for the group). */
  readonly holder: Did;
  readonly group: Did;
  readonly identifier: number;
  readonly session: string;
  /** Content id of the message bytes (the exact call). */
  readonly request: ContentId;
  /** Content id of the policy that decided. */
  readonly policy: ContentId;
  /** `rules`, `prompt`, `webhook`, `allow-all` (`none` in records of earlier holders without a policy). */
  readonly policy_kind: string;
  readonly decision: 'approve' | 'refuse';
  readonly reason: string;
  readonly at_s: number;
  /** The call's action and resource, when it decoded as one ('' for raw). */
  readonly action: string;
  readonly resource: string;
}

/** The longest `reason` a decision record keeps (characters; {@link sealDecision} cuts longer ones). */
export const MAX_REASON_CHARS = 2000;

/** Signs a decision as the holder (Ed25519 over canonical CBOR of the body); returns the record bytes `{body, signature}`. */
export function sealDecision(body: DecisionBody, holder: Actor): Uint8Array {
  return encode(signBody({ ...body, reason: body.reason.slice(0, MAX_REASON_CHARS) }, holder));
}

/** A decision record read back, with whether its signature verifies under `body.holder`. */
export interface ReadDecision {
  readonly body: DecisionBody;
  readonly valid: boolean;
  /** Content id of the record bytes. */
  readonly id: ContentId;
}

/**
 * Reads a decision record and verifies its signature by the holder it names.
 * @throws JcpError `schema` / `did-invalid` / `cbor-*` for bytes that are not a decision record.
 */
export function openDecision(bytes: Uint8Array): ReadDecision {
  const s = readSigned(decode(bytes), 'decision');
  const o = asObj(s.body, 'decision.body', [
    'proto',
    'holder',
    'group',
    'identifier',
    'session',
    'request',
    'policy',
    'policy_kind',
    'decision',
    'reason',
    'at_s',
    'action',
    'resource',
  ]);
  const body: DecisionBody = {
    proto: asEnum(o['proto'], 'decision.body.proto', ['jcp-frost-approval/1'] as const),
    holder: asDid(o['holder'], 'decision.body.holder'),
    group: asDid(o['group'], 'decision.body.group'),
    identifier: asSafeUint(o['identifier'], 'decision.body.identifier'),
    session: asText(o['session'], 'decision.body.session', 64),
    request: asCid(o['request'], 'decision.body.request'),
    policy: asCid(o['policy'], 'decision.body.policy'),
    policy_kind: asText(o['policy_kind'], 'decision.body.policy_kind', 32),
    decision: asEnum(o['decision'], 'decision.body.decision', ['approve', 'refuse'] as const),
    reason: asText(o['reason'], 'decision.body.reason', 4096),
    at_s: asSafeUint(o['at_s'], 'decision.body.at_s'),
    action: asText(o['action'], 'decision.body.action', 256),
    resource: asText(o['resource'], 'decision.body.resource', 256),
  };
  return { body, valid: verifyBody({ body: s.body, signature: s.signature }, body.holder), id: contentIdOfBytes(bytes) };
}
