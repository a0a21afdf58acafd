/**
 * The fixed world every vector file is generated from: named actors whose Ed25519 seeds come
 * from `seededRng` (core/actor.ts), nonces drawn from labelled seeds, two resources, one decision
 * time. Nothing here reads the clock or ambient randomness, so generation is byte-for-byte
 * repeatable. Also the JSON forms shared by several files (grants, signed grants, frames,
 * costs) and the per-vector check context used by `jcp vectors verify`.
 */
import {
  type Actor,
  actorFromSeed,
  attenuate,
  type AttenuationParams,
  contentId,
  type ContentId,
  type Cost,
  decode,
  encode,
  type Frame,
  frameToCbor,
  type Grant,
  grantBytes,
  grantId,
  readCost,
  readFrame,
  readGrant,
  readSignedGrant,
  seededRng,
  sign,
  type SignedGrant,
  signedGrantToCbor,
} from '../core/index.ts';
import type { Checker } from '../conformance/index.ts';
import { compact, dec, hex, type J, type Json, type JsonObj, VectorFormatError } from './json.ts';

/** The format tag every vector file carries. */
export const VECTOR_FORMAT = 'jcp-conformance-vectors/1';
/** The decision time of every vector (unix seconds): 2025-06-15T15:06:40Z. */
export const NOW_S = 1_750_000_000;
/** One hour, in seconds. */
export const HOUR_S = 3600;

/**
 * The named actors. Each seed is the first 32 bytes of `seededRng("jcp/conformance/v1/actor/<name>")`,
 * i.e. SHA-256 of the UTF-8 string `jcp/conformance/v1/actor/<name>/0`.
 */
export const ACTOR_NAMES = [
  'alice',
  'bob',
  'carol',
  'dave',
  'erin',
  'mallory',
  'steward',
  'point-a',
  'point-b',
  'point-c',
  'identity',
  'key-1',
  'key-2',
  'key-3',
  'thief',
] as const;
/** One of {@link ACTOR_NAMES}. */
export type ActorName = (typeof ACTOR_NAMES)[number];

const actorCache = new Map<string, Actor>();

/** The actor `name` (deterministic). */
export function actor(name: ActorName): Actor {
  let a = actorCache.get(name);
  if (a === undefined) {
    a = actorFromSeed(seededRng(`jcp/conformance/v1/actor/${name}`)(32));
    actorCache.set(name, a);
  }
  return a;
}

/** The did:key of actor `name`. */
export function did(name: ActorName): string {
  return actor(name).did;
}

/** The name of the actor whose did:key is `d` (for signer fields). @throws Error when unknown */
export function nameOf(d: string): ActorName {
  const n = ACTOR_NAMES.find((x) => did(x) === d);
  if (n === undefined) throw new Error(`vectors: no named actor has ${d}`);
  return n;
}

/** The `actors` table written at the top of every file: name → {seed, public_key, did}. */
export function actorsJson(): JsonObj {
  const out: JsonObj = {};
  for (const n of ACTOR_NAMES) {
    const a = actor(n);
    out[n] = { seed: hex(seededRng(`jcp/conformance/v1/actor/${n}`)(32)), public_key: hex(a.key.publicKey.bytes), did: a.did };
  }
  return out;
}

/** 16 nonce bytes for `label`: the first 16 bytes of `seededRng("jcp/conformance/v1/nonce/<label>")`. */
export function nonce(label: string): Uint8Array {
  return seededRng(`jcp/conformance/v1/nonce/${label}`)(16);
}

/** The guarded resource of most vectors: content id of `{tool: "fs", root: "/srv/data"}`. */
export const RESOURCE: ContentId = contentId({ tool: 'fs', root: '/srv/data' });
/** A second resource: content id of `{tool: "fs", root: "/etc"}`. */
export const OTHER_RESOURCE: ContentId = contentId({ tool: 'fs', root: '/etc' });
/** The payload hash of an absent payload (content id of the empty byte string). */
export const EMPTY_PAYLOAD_HASH: ContentId = contentId(new Uint8Array(0));

/** A root grant alice → bob on RESOURCE (read, write), 1,000 µJ, expiring in an hour; `over` replaces fields. */
export function rootGrant(label: string, over: Partial<Grant> = {}, issuer: ActorName = 'alice'): SignedGrant {
  const g: Grant = {
    issuer: did(issuer),
    subject: did('bob'),
    capability: { resource: RESOURCE, actions: ['read', 'write'] },
    budget_uj: 1_000n,
    expiry: NOW_S + HOUR_S,
    nonce: nonce(label),
    ...over,
  };
  return { grant: g, signature: sign(actor(issuer).key, grantBytes(g)) };
}

/** Attenuates through `attenuate` (§4.1) as `holder`. @throws Error when refused (a generator bug). */
export function delegate(
  label: string,
  parent: SignedGrant,
  holder: ActorName,
  params: Omit<AttenuationParams, 'nonce' | 'subject'> & { subject: ActorName },
): SignedGrant {
  const r = attenuate(parent, { ...params, subject: did(params.subject), nonce: nonce(label) }, actor(holder));
  if (!r.ok) throw new Error(`vectors: attenuation ${label} refused: ${r.error.reason} (${r.error.why})`);
  return r.value;
}

/** A child of `parent` built by hand (no refusal) and signed by `signer`, for chains that must fail. */
export function handChild(label: string, parent: SignedGrant, over: Partial<Grant>, signer: ActorName): SignedGrant {
  const p = parent.grant;
  const g: Grant = {
    issuer: p.subject,
    subject: did('dave'),
    capability: p.capability,
    budget_uj: p.budget_uj,
    expiry: p.expiry,
    parent: grantId(p),
    ...(p.delegate_depth !== undefined && p.delegate_depth > 0 ? { delegate_depth: p.delegate_depth - 1 } : {}),
    nonce: nonce(label),
    ...over,
  };
  return { grant: g, signature: sign(actor(signer).key, grantBytes(g)) };
}

/** The same grant with its signature made by `forger` instead of its issuer. */
export function forged(sg: SignedGrant, forger: ActorName = 'mallory'): SignedGrant {
  return { grant: sg.grant, signature: sign(actor(forger).key, grantBytes(sg.grant)) };
}

/** The id of a signed grant. */
export function idOf(sg: SignedGrant): ContentId {
  return grantId(sg.grant);
}

/**
 * A control tool-call frame exercising the leaf of `chain` with action `read` and the empty
 * payload (§6); `over` replaces any field.
 */
export function leafFrame(chain: readonly SignedGrant[], over: Partial<Frame> = {}): Frame {
  const leaf = chain[chain.length - 1]!;
  return {
    kind: 'tool-call',
    trust: 'control',
    grant_id: idOf(leaf),
    action: 'read',
    resource: leaf.grant.capability.resource,
    payload_hash: EMPTY_PAYLOAD_HASH,
    ...over,
  };
}

/** A grant as JSON (§4 field names; `budget_uj` decimal, `nonce` hex). */
export function grantJson(g: Grant): JsonObj {
  return compact({
    issuer: g.issuer,
    subject: g.subject,
    capability: { resource: g.capability.resource, actions: [...g.capability.actions] },
    budget_uj: dec(g.budget_uj),
    expiry: g.expiry,
    parent: g.parent,
    delegate_depth: g.delegate_depth,
    nonce: hex(g.nonce),
  });
}

/** Reads a grant from its JSON form, validated by `readGrant`. */
export function grantFromJson(j: J): Grant {
  const cap = j.get('capability');
  return readGrant(
    {
      issuer: j.get('issuer').str(),
      subject: j.get('subject').str(),
      capability: { resource: cap.get('resource').str(), actions: cap.get('actions').strs() },
      budget_uj: j.get('budget_uj').uint(),
      expiry: j.get('expiry').num(),
      ...(j.has('parent') ? { parent: j.get('parent').str() } : {}),
      ...(j.has('delegate_depth') ? { delegate_depth: j.get('delegate_depth').num() } : {}),
      nonce: j.get('nonce').bytes(),
    },
    j.path,
  );
}

/** Canonical bytes of a signed grant `{grant, signature}`, as hex. */
export function sgHex(sg: SignedGrant): string {
  return hex(encode(signedGrantToCbor(sg)));
}

/** Reads a signed grant from its canonical hex (strict decode, then the schema). */
export function sgFromHex(j: J): SignedGrant {
  return readSignedGrant(decode(j.bytes()), j.path);
}

/** A frame as JSON (every field is text). */
export function frameJson(f: Frame): JsonObj {
  return frameToCbor(f) as JsonObj;
}

/** Reads a frame from JSON, validated by `readFrame`. */
export function frameFromJson(j: J): Frame {
  const o: Record<string, string> = {};
  for (const [k, v] of j.entries()) o[k] = v.str();
  return readFrame(o, j.path);
}

/** A cost as JSON (`uj`, `measured` decimal). */
export function costJson(c: Cost): JsonObj {
  return compact({ uj: dec(c.uj), provenance: c.provenance, measured: c.measured === undefined ? undefined : dec(c.measured) });
}

/** Reads a cost from JSON, validated by `readCost` (provenance rules included). */
export function costFromJson(j: J): Cost {
  return readCost(
    {
      uj: j.get('uj').uint(),
      provenance: j.get('provenance').str(),
      ...(j.has('measured') ? { measured: j.get('measured').uint() } : {}),
    },
    j.path,
  );
}

/** Round-trips an object's CBOR form through JSON for writing: bigints → decimal strings, bytes → hex. */
export function cborJson(v: unknown): Json {
  if (typeof v === 'bigint') return dec(v);
  if (v instanceof Uint8Array) return hex(v);
  if (Array.isArray(v)) return v.map(cborJson);
  if (typeof v === 'object' && v !== null) {
    const o: JsonObj = {};
    for (const [k, x] of Object.entries(v)) if (x !== undefined) o[k] = cborJson(x);
    return o;
  }
  if (typeof v === 'string' || typeof v === 'number') return v;
  throw new Error(`vectors: cannot write ${typeof v} as JSON`);
}

/** The common header of a vector file. */
export function fileHeader(file: string, title: string, spec: string): JsonObj {
  return { format: VECTOR_FORMAT, file, title, spec, now_s: NOW_S, actors: actorsJson() };
}

/** The outcome shape used for refusals everywhere: `{ok: true, …}` or `{ok: false, code}`. */
export function refusal(code: string): JsonObj {
  return { ok: false, code };
}

/**
 * What `verify` runs each vector with: the checker (prefixing every label with `file/vector`)
 * and the actors as read from the file (each seed re-derived to its did:key).
 */
export class VectorCheck {
  readonly t: Checker;
  readonly file: string;
  readonly actors = new Map<string, Actor>();
  #label = '';

  constructor(t: Checker, file: string, doc: J) {
    this.t = t;
    this.file = file;
    this.run('header', () => {
      this.eq(doc.get('format').str(), VECTOR_FORMAT, 'format');
      this.eq(doc.get('file').str(), file, 'file');
      this.eq(doc.get('now_s').num(), NOW_S, 'now_s');
      for (const [name, a] of doc.get('actors').entries()) {
        const act = actorFromSeed(a.get('seed').bytes(32));
        this.eq(act.did, a.get('did').str(), `actor ${name}: seed → did:key`);
        this.eq(hex(act.key.publicKey.bytes), a.get('public_key').str(), `actor ${name}: seed → public key`);
        this.actors.set(name, act);
      }
    });
  }

  /** The actor named `name` in the file's table. @throws VectorFormatError when absent */
  actor(j: J): Actor {
    const a = this.actors.get(j.str());
    if (a === undefined) throw new VectorFormatError(j.path, `no actor named ${j.str()}`);
    return a;
  }

  /** The actor whose did:key is `d`, from the file's table. @throws VectorFormatError when absent */
  actorByDid(d: string, path: string): Actor {
    for (const a of this.actors.values()) if (a.did === d) return a;
    throw new VectorFormatError(path, `no actor has ${d}`);
  }

  /** Runs the checks of one vector; anything it throws is recorded as a failure of that vector. */
  run(name: string, fn: () => void): void {
    const before = this.#label;
    this.#label = `${this.file}/${name}`;
    try {
      fn();
    } catch (e) {
      const code = (e as { code?: string }).code;
      this.t.ok(false, `${this.#label}: ${code ? `[${code}] ` : ''}${(e as Error).message}`);
    } finally {
      this.#label = before;
    }
  }

  /** Runs every vector of `section` (an array of objects with a `name`). */
  each(doc: J, section: string, fn: (v: J) => void): void {
    const items = doc.get(section).items();
    this.ok(items.length > 0, `section ${section} is not empty`);
    for (const v of items) this.run(`${section}/${v.get('name').str()}`, () => fn(v));
  }

  /** Records one check of the current vector: passes when `cond` is truthy. */
  ok(cond: unknown, what: string): void {
    this.t.ok(cond, `${this.#label}: ${what}`);
  }

  /** Records one check of the current vector: our value `actual` deep-equals the file's `expected`. */
  eq(actual: unknown, expected: unknown, what: string): void {
    this.t.eq(actual, expected, `${this.#label}: ${what}`);
  }

  /** Checks that `fn` throws a JcpError with `code`. */
  throws(fn: () => unknown, code: string, what: string): void {
    let got: string | undefined;
    try {
      fn();
      got = 'no error';
    } catch (e) {
      got = (e as { code?: string }).code ?? `untyped ${(e as Error).name}`;
    }
    this.eq(got, code, what);
  }
}
