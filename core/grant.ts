/**
 * The Grant (spec §4): a signed, content-addressed capability with a joule budget, and
 * attenuation (§4.1) with delegation depth (§4.4).
 *
 * Wire shape (docs/design.md "Encodings"): `SignedGrant = {grant, signature}`, the signature Ed25519 by
 * `grant.issuer` over `canonical_cbor(grant)`; the grant id is the content id of `grant` alone.
 * Absent optional fields (`parent`, `delegate_depth`) are left out of the map, never null.
 */
import type { Actor } from './actor.ts';
import { encode } from './cbor.ts';
import type { Did } from './didkey.ts';
import { parseDid } from './didkey.ts';
import { verify, sign } from './ed25519.ts';
import { check } from './errors.ts';
import { type ContentId, contentIdOfBytes } from './hash.ts';
import { type Result, err, ok } from './result.ts';
import { asArray, asBytes, asCid, asDid, asObj, asSafeUint, asText, asUint, type Obj, uintOut } from './schema.ts';

/** What a grant authorizes: one content-addressed resource and a set of action names (§4). */
export interface Capability {
  readonly resource: ContentId;
  readonly actions: readonly string[];
}

/** A grant (§4). µJ as bigint; `expiry` in unix seconds (0 = never). */
export interface Grant {
  readonly issuer: Did;
  readonly subject: Did;
  readonly capability: Capability;
  /** The joule ceiling this grant may ever spend, in microjoules. */
  readonly budget_uj: bigint;
  /** Unix seconds; 0 = no expiry. */
  readonly expiry: number;
  /** Content id of the grant this was attenuated from; absent on a root. */
  readonly parent?: ContentId;
  /** Further hops permitted; absent = unlimited, 0 = leaf-only (§4.4). */
  readonly delegate_depth?: number;
  /** 16 random bytes. */
  readonly nonce: Uint8Array;
}

/** A grant with its issuer's Ed25519 signature over `canonical_cbor(grant)`. */
export interface SignedGrant {
  readonly grant: Grant;
  readonly signature: Uint8Array;
}

/** The plain CBOR map of a grant (optional fields omitted when absent). */
export function grantToCbor(g: Grant): Obj {
  const o: Obj = {
    issuer: g.issuer,
    subject: g.subject,
    capability: { resource: g.capability.resource, actions: [...g.capability.actions] },
    budget_uj: uintOut(g.budget_uj),
    expiry: g.expiry,
    nonce: g.nonce,
  };
  if (g.parent !== undefined) o['parent'] = g.parent;
  if (g.delegate_depth !== undefined) o['delegate_depth'] = g.delegate_depth;
  return o;
}

/** The plain CBOR map of a signed grant. */
export function signedGrantToCbor(sg: SignedGrant): Obj {
  return { grant: grantToCbor(sg.grant), signature: sg.signature };
}

const bytesCache = new WeakMap<Grant, { bytes: Uint8Array; id: ContentId }>();

/** Canonical det-CBOR bytes of a grant (§3), memoized per object. */
export function grantBytes(g: Grant): Uint8Array {
  return memo(g).bytes;
}

/** The grant id: `blake3(canonical_cbor(grant))` as lowercase hex (§4), memoized per object. */
export function grantId(g: Grant): ContentId {
  return memo(g).id;
}

function memo(g: Grant): { bytes: Uint8Array; id: ContentId } {
  let m = bytesCache.get(g);
  if (!m) {
    const bytes = encode(grantToCbor(g));
    m = { bytes, id: contentIdOfBytes(bytes) };
    bytesCache.set(g, m);
  }
  return m;
}

/**
 * Reads a decoded CBOR value as a Grant, checking every field (§4).
 * @throws JcpError `schema` / `did-invalid` / `bad-length`, naming the field.
 */
export function readGrant(v: unknown, field = 'grant'): Grant {
  const o = asObj(v, field, ['issuer', 'subject', 'capability', 'budget_uj', 'expiry', 'nonce'], ['parent', 'delegate_depth']);
  const cap = asObj(o['capability'], `${field}.capability`, ['resource', 'actions']);
  const actions = asArray(cap['actions'], `${field}.capability.actions`, 256).map((a, i) =>
    asText(a, `${field}.capability.actions[${i}]`, 256),
  );
  check(new Set(actions).size === actions.length, `${field}.capability.actions`, 'actions must be unique');
  const g: Grant = {
    issuer: asDid(o['issuer'], `${field}.issuer`),
    subject: asDid(o['subject'], `${field}.subject`),
    capability: { resource: asCid(cap['resource'], `${field}.capability.resource`), actions },
    budget_uj: asUint(o['budget_uj'], `${field}.budget_uj`),
    expiry: asSafeUint(o['expiry'], `${field}.expiry`),
    nonce: asBytes(o['nonce'], `${field}.nonce`, 16),
    ...(o['parent'] !== undefined ? { parent: asCid(o['parent'], `${field}.parent`) } : {}),
    ...(o['delegate_depth'] !== undefined ? { delegate_depth: asSafeUint(o['delegate_depth'], `${field}.delegate_depth`) } : {}),
  };
  return g;
}

/** Reads a decoded `{grant, signature}` map. @throws JcpError as {@link readGrant} */
export function readSignedGrant(v: unknown, field = 'signed_grant'): SignedGrant {
  const o = asObj(v, field, ['grant', 'signature']);
  return { grant: readGrant(o['grant'], `${field}.grant`), signature: asBytes(o['signature'], `${field}.signature`, 64) };
}

/**
 * Signs a grant as its issuer (§4). The caller is responsible for `g.issuer === issuer.did`.
 * @throws JcpError `refused` if the issuer's did does not match `g.issuer`.
 */
export function signGrant(g: Grant, issuer: Actor): SignedGrant {
  check(issuer.did === g.issuer, 'grant.issuer', 'the signing actor is not the grant issuer');
  return { grant: g, signature: sign(issuer.key, grantBytes(g)) };
}

const sigOk = new Map<string, boolean>();
/** Per-object fast path in front of `sigOk`: the hot decision path re-presents the same objects. */
const sigOkByObject = new WeakMap<SignedGrant, { grant: Grant; signature: Uint8Array; good: boolean }>();

/**
 * True when the signature verifies under `grant.issuer` (§4, C1). Results are cached by
 * (grant id, signature), and per signed-grant object, so a cached grant costs no signature work.
 * Never throws.
 */
export function verifyGrantSignature(sg: SignedGrant): boolean {
  const seen = sigOkByObject.get(sg);
  if (seen !== undefined && seen.grant === sg.grant && seen.signature === sg.signature) return seen.good;
  const good = verifyGrantSignatureByKey(sg);
  if (typeof sg === 'object' && sg !== null) sigOkByObject.set(sg, { grant: sg.grant, signature: sg.signature, good });
  return good;
}

function verifyGrantSignatureByKey(sg: SignedGrant): boolean {
  let key: string;
  try {
    key = grantId(sg.grant) + Buffer.from(sg.signature).toString('hex');
  } catch {
    return false;
  }
  const hit = sigOk.get(key);
  if (hit !== undefined) return hit;
  let good = false;
  try {
    good = verify(parseDid(sg.grant.issuer), grantBytes(sg.grant), sg.signature);
  } catch {
    good = false;
  }
  if (sigOk.size > 200_000) sigOk.clear();
  sigOk.set(key, good);
  return good;
}

/** Why a hop is not a valid attenuation (§4.1, §4.2, §4.4). */
export interface HopRefusal {
  /** `chain-broken`: structure (parent link, issuer ≠ previous subject, leaf-only parent). `attenuation-violation`: amplification. */
  readonly reason: 'chain-broken' | 'attenuation-violation';
  readonly why: string;
}

/**
 * Checks that `child` is a valid attenuation of `parent` (whose id is `parentId`): §4.1 and §4.4.
 * Structural faults → `chain-broken` (wrong parent link, issued by someone other than the parent's
 * subject, delegation under a leaf-only parent); amplification → `attenuation-violation`
 * (other resource, extra action, larger budget, later or no expiry, deeper delegation).
 */
export function checkHop(parent: Grant, parentId: ContentId, child: Grant): Result<void, HopRefusal> {
  if (child.parent !== parentId) return err({ reason: 'chain-broken', why: 'child.parent is not the parent id' });
  if (child.issuer !== parent.subject) {
    return err({ reason: 'chain-broken', why: 'child is not issued by the parent grant subject' });
  }
  if (parent.delegate_depth === 0) return err({ reason: 'chain-broken', why: 'parent is leaf-only (delegate_depth 0)' });
  if (child.capability.resource !== parent.capability.resource) {
    return err({ reason: 'attenuation-violation', why: 'child resource differs from parent' });
  }
  for (const a of child.capability.actions) {
    if (!parent.capability.actions.includes(a)) {
      return err({ reason: 'attenuation-violation', why: `action ${a} not in parent` });
    }
  }
  if (child.budget_uj > parent.budget_uj) return err({ reason: 'attenuation-violation', why: 'child budget exceeds parent' });
  if (parent.expiry !== 0 && (child.expiry === 0 || child.expiry > parent.expiry)) {
    return err({ reason: 'attenuation-violation', why: 'child outlives parent' });
  }
  if (parent.delegate_depth !== undefined) {
    if (child.delegate_depth === undefined || child.delegate_depth > parent.delegate_depth - 1) {
      return err({ reason: 'attenuation-violation', why: 'child delegate_depth exceeds parent depth - 1' });
    }
  }
  return ok(undefined);
}

/** The fields a holder chooses when attenuating; the rest are fixed by the parent. */
export interface AttenuationParams {
  readonly subject: Did;
  readonly actions?: readonly string[];
  readonly budget_uj?: bigint;
  readonly expiry?: number;
  readonly delegate_depth?: number;
  readonly nonce: Uint8Array;
}

/** Why a mint-time attenuation was refused. `not-holder`: the delegator is not the parent's subject. */
export interface MintRefusal {
  readonly reason: 'not-holder' | 'delegation-forbidden' | 'attenuation-violation';
  readonly why: string;
}

/**
 * Mints a child grant from `parent` as its holder (§4.1, §4.4). Omitted params inherit the
 * parent's value (for `delegate_depth`, parent − 1 when the parent is bounded).
 * Refusals: `not-holder` (holder ≠ parent.subject), `delegation-forbidden` (parent is leaf-only),
 * `attenuation-violation` (any amplification).
 */
export function attenuate(parent: SignedGrant, params: AttenuationParams, holder: Actor): Result<SignedGrant, MintRefusal> {
  const p = parent.grant;
  if (holder.did !== p.subject) return err({ reason: 'not-holder', why: 'only the parent grant subject may delegate' });
  if (p.delegate_depth === 0) return err({ reason: 'delegation-forbidden', why: 'parent is leaf-only' });
  if (params.actions !== undefined && new Set(params.actions).size !== params.actions.length) {
    return err({ reason: 'attenuation-violation', why: 'actions must be unique' });
  }
  const depth = params.delegate_depth ?? (p.delegate_depth === undefined ? undefined : p.delegate_depth - 1);
  const child: Grant = {
    issuer: holder.did,
    subject: params.subject,
    capability: { resource: p.capability.resource, actions: [...(params.actions ?? p.capability.actions)] },
    budget_uj: params.budget_uj ?? p.budget_uj,
    expiry: params.expiry ?? p.expiry,
    parent: grantId(p),
    ...(depth !== undefined ? { delegate_depth: depth } : {}),
    nonce: params.nonce,
  };
  const hop = checkHop(p, grantId(p), child);
  if (!hop.ok) return err({ reason: 'attenuation-violation', why: hop.error.why });
  return ok(signGrant(child, holder));
}
