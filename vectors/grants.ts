/**
 * `grants.json`: signed grants (spec §4, C1) with their canonical bytes, ids and signatures;
 * signatures that must not verify; attenuations (§4.1, §4.4, C2, C10) accepted and refused; and
 * signed-grant bytes that a strict decoder must refuse, each with its error code.
 */
import {
  attenuate,
  concat,
  decode,
  ED25519_L,
  encode,
  type Grant,
  grantBytes,
  grantId,
  grantToCbor,
  readSignedGrant,
  sign,
  type SignedGrant,
  signedGrantToCbor,
  verifyGrantSignature,
} from '../core/index.ts';
import type { Checker } from '../conformance/index.ts';
import {
  type ActorName,
  HOUR_S,
  NOW_S,
  actor,
  delegate,
  did,
  fileHeader,
  forged,
  grantFromJson,
  grantJson,
  nameOf,
  nonce,
  rootGrant,
  sgFromHex,
  sgHex,
  VectorCheck,
} from './fixtures.ts';
import { compact, dec, hex, type J, type JsonObj } from './json.ts';
import { RAW_NULL, RAW_TRUE, rawEncode, rawFloat64, rawHead, rawIndefiniteMap, rawKey, rawMap } from './rawcbor.ts';

/** The grants every section builds on. */
function grants() {
  const open = rootGrant('grants/root-no-expiry', { expiry: 0 });
  const bounded = rootGrant('grants/root-expiring-depth-2', { delegate_depth: 2 });
  const child = delegate('grants/child', bounded, 'bob', { subject: 'carol', actions: ['read'], budget_uj: 400n });
  const leafOnly = rootGrant('grants/root-leaf-only', { budget_uj: 0n, delegate_depth: 0, capability: bounded.grant.capability });
  const u64 = rootGrant('grants/root-budget-u64-max', { budget_uj: (1n << 64n) - 1n });
  const big = rootGrant('grants/root-budget-2pow53-plus-1', { budget_uj: (1n << 53n) + 1n });
  const unicode = rootGrant('grants/root-unicode-actions', {
    capability: { resource: bounded.grant.capability.resource, actions: ['lire', 'écrire', 'read'] },
  });
  return { open, bounded, child, leafOnly, u64, big, unicode };
}

function grantVector(name: string, description: string, sg: SignedGrant): JsonObj {
  return {
    name,
    description,
    grant: grantJson(sg.grant),
    signer: nameOf(sg.grant.issuer),
    canonical_cbor: hex(grantBytes(sg.grant)),
    id: grantId(sg.grant),
    signature: hex(sg.signature),
    signed_grant_cbor: sgHex(sg),
  };
}

/** The same signature with S replaced by S + L (not reduced; RFC 8032 §5.1.7 requires S < L). */
function unreducedS(sig: Uint8Array): Uint8Array {
  let s = 0n;
  for (let i = 63; i >= 32; i--) s = (s << 8n) | BigInt(sig[i]!);
  s += ED25519_L;
  const out = new Uint8Array(sig);
  for (let i = 32; i < 64; i++) {
    out[i] = Number(s & 0xffn);
    s >>= 8n;
  }
  return out;
}

interface AttenuationCase {
  readonly name: string;
  readonly description: string;
  readonly parent: SignedGrant;
  readonly holder: ActorName;
  readonly subject: ActorName;
  readonly actions?: string[];
  readonly budget_uj?: bigint;
  readonly expiry?: number;
  readonly delegate_depth?: number;
}

function attenuationVector(c: AttenuationCase): JsonObj {
  const n = nonce(`grants/attenuation/${c.name}`);
  const params = {
    subject: did(c.subject),
    nonce: n,
    ...(c.actions !== undefined ? { actions: c.actions } : {}),
    ...(c.budget_uj !== undefined ? { budget_uj: c.budget_uj } : {}),
    ...(c.expiry !== undefined ? { expiry: c.expiry } : {}),
    ...(c.delegate_depth !== undefined ? { delegate_depth: c.delegate_depth } : {}),
  };
  const r = attenuate(c.parent, params, actor(c.holder));
  return {
    name: c.name,
    description: c.description,
    parent: sgHex(c.parent),
    holder: c.holder,
    params: compact({
      subject: params.subject,
      actions: c.actions,
      budget_uj: c.budget_uj === undefined ? undefined : dec(c.budget_uj),
      expiry: c.expiry,
      delegate_depth: c.delegate_depth,
      nonce: hex(n),
    }),
    expected: r.ok ? { ok: true, child: sgHex(r.value), child_id: grantId(r.value.grant) } : { ok: false, reason: r.error.reason },
  };
}

/** The canonical (key, value) pairs of a grant map, with some values replaced by raw bytes. */
function grantPairs(g: Grant, replace: Record<string, Uint8Array | undefined> = {}): [Uint8Array, Uint8Array][] {
  const o = grantToCbor(g);
  const keys = [...new Set([...Object.keys(o), ...Object.keys(replace)])].sort((a, b) =>
    a.length !== b.length ? a.length - b.length : a < b ? -1 : a > b ? 1 : 0,
  );
  const pairs: [Uint8Array, Uint8Array][] = [];
  for (const k of keys) {
    if (Object.hasOwn(replace, k)) {
      const r = replace[k];
      if (r !== undefined) pairs.push([rawKey(k), r]);
    } else {
      pairs.push([rawKey(k), rawEncode(o[k])]);
    }
  }
  return pairs;
}

function signedRaw(grantMap: Uint8Array, signature: Uint8Array): Uint8Array {
  return rawMap([
    [rawKey('grant'), grantMap],
    [rawKey('signature'), rawEncode(signature)],
  ]);
}

function decodeErrors(sg: SignedGrant): JsonObj[] {
  const g = sg.grant;
  const sig = sg.signature;
  const canonical = encode(signedGrantToCbor(sg));
  const value = signedGrantToCbor(sg);
  const withGrant = (over: Partial<Grant>) => encode(signedGrantToCbor({ grant: { ...g, ...over }, signature: sig }));
  const cases: [string, string, Uint8Array, string][] = [
    ['unsorted-keys', 'grant map keys in field order, not canonical order', rawEncode(value, { unsorted: true }), 'cbor-non-canonical'],
    ['long-form-integer', 'every integer written with an 8-byte argument', rawEncode(value, { intWidth: 8 }), 'cbor-non-canonical'],
    [
      'indefinite-length-map',
      'the outer map with an indefinite length',
      rawIndefiniteMap([
        [rawKey('grant'), rawEncode(value['grant'])],
        [rawKey('signature'), rawEncode(sig)],
      ]),
      'cbor-non-canonical',
    ],
    [
      'duplicate-key',
      'the grant map names expiry twice',
      signedRaw(concat(rawHead(5, grantPairs(g).length + 1), ...grantPairs(g).flat(), rawKey('expiry'), rawEncode(0)), sig),
      'cbor-non-canonical',
    ],
    [
      'float-budget',
      'budget_uj as the float 1000.0',
      signedRaw(rawMap(grantPairs(g, { budget_uj: rawFloat64(1000) })), sig),
      'cbor-forbidden-type',
    ],
    ['null-parent', 'parent present as null', signedRaw(rawMap(grantPairs(g, { parent: RAW_NULL })), sig), 'cbor-forbidden-type'],
    ['bool-depth', 'delegate_depth as true', signedRaw(rawMap(grantPairs(g, { delegate_depth: RAW_TRUE })), sig), 'cbor-forbidden-type'],
    ['trailing-byte', 'one 0x00 byte after the item', concat(canonical, Uint8Array.of(0)), 'cbor-malformed'],
    ['truncated', 'the last byte cut off', canonical.subarray(0, canonical.length - 1), 'cbor-malformed'],
    [
      'duplicate-actions',
      'capability.actions names read twice',
      withGrant({ capability: { resource: g.capability.resource, actions: ['read', 'read'] } }),
      'schema',
    ],
    ['nonce-15-bytes', 'a 15-byte nonce', withGrant({ nonce: g.nonce.subarray(0, 15) }), 'bad-length'],
    ['signature-63-bytes', 'a 63-byte signature', encode({ grant: grantToCbor(g), signature: sig.subarray(0, 63) }), 'bad-length'],
    ['issuer-not-did-key', 'issuer is a did:web', withGrant({ issuer: 'did:web:example.com' }), 'did-invalid'],
    ['unknown-field', 'an extra field memo', signedRaw(rawMap(grantPairs(g, { memo: rawEncode('hi') })), sig), 'schema'],
    [
      'resource-uppercase-hex',
      'capability.resource in uppercase hex',
      withGrant({ capability: { resource: g.capability.resource.toUpperCase(), actions: ['read'] } }),
      'schema',
    ],
    ['missing-nonce', 'no nonce field', signedRaw(rawMap(grantPairs(g, { nonce: undefined })), sig), 'schema'],
    ['negative-budget', 'budget_uj as -1', signedRaw(rawMap(grantPairs(g, { budget_uj: rawEncode(-1) })), sig), 'schema'],
  ];
  return cases.map(([name, description, bytes, code]) => ({ name, description, cbor: hex(bytes), code }));
}

/** Builds `grants.json`. */
export function generate(): JsonObj {
  const set = grants();
  const bad = forged(set.open);
  return {
    ...fileHeader('grants.json', 'Signed grants, signatures, attenuation and strict decoding', '§3, §4, §4.1, §4.4; C1, C2, C10, C-neg'),
    grants: grantVectors(set),
    signature_checks: signatureChecks(set, bad),
    attenuations: attenuationCases(set).map(attenuationVector),
    decode_errors: decodeErrors(set.bounded),
  };
}

/** The fixed grants of {@link grants} as `grants.json` vectors: CBOR, id and signature of each (§3, §4). */
function grantVectors({ open, bounded, child, leafOnly, u64, big, unicode }: ReturnType<typeof grants>): JsonObj[] {
  return [
    grantVector('root-no-expiry', 'alice → bob, read+write, 1,000 µJ, expiry 0 (never), depth absent (unlimited)', open),
    grantVector('root-expiring-depth-2', 'expires an hour after now_s, delegate_depth 2', bounded),
    grantVector('child-attenuated', 'bob → carol from root-expiring-depth-2: read, 400 µJ, parent set, depth 1', child),
    grantVector('root-leaf-only-zero-budget', 'budget 0, delegate_depth 0', leafOnly),
    grantVector('root-budget-u64-max', 'budget_uj = 2^64 − 1 (a decimal string in JSON)', u64),
    grantVector('root-budget-2pow53-plus-1', 'budget_uj = 2^53 + 1: must not pass through a float', big),
    grantVector('root-unicode-actions', 'actions keep their order; écrire is UTF-8', unicode),
  ];
}

/** Signature checks (§4.1): the issuer signature verifies; `bad` (signed by mallory) and the other forgeries do not. */
function signatureChecks({ open, bounded }: ReturnType<typeof grants>, bad: SignedGrant): JsonObj[] {
  return [
    { name: 'issuer-signature', description: 'signed by the issuer', signed_grant_cbor: sgHex(open), valid: true },
    {
      name: 'forged-by-mallory',
      description: 'the grant signed by mallory, not its issuer',
      signed_grant_cbor: sgHex(bad),
      valid: false,
    },
    {
      name: 'signature-of-another-grant',
      description: 'a valid signature by alice over a different grant',
      signed_grant_cbor: sgHex({ grant: open.grant, signature: bounded.signature }),
      valid: false,
    },
    {
      name: 's-not-reduced',
      description: 'the issuer signature with S replaced by S + L: must be refused (S ≥ L)',
      signed_grant_cbor: sgHex({ grant: open.grant, signature: unreducedS(open.signature) }),
      valid: false,
    },
    {
      name: 'signature-by-subject',
      description: 'signed by the subject bob',
      signed_grant_cbor: sgHex({ grant: open.grant, signature: sign(actor('bob').key, grantBytes(open.grant)) }),
      valid: false,
    },
  ];
}

/** Attenuation cases (§4.4) under the fixed parents: accepted narrowings and each refused widening. */
function attenuationCases({ open, bounded, leafOnly }: ReturnType<typeof grants>): AttenuationCase[] {
  const later = NOW_S + HOUR_S;
  return [
    {
      name: 'narrow-actions-and-budget',
      description: 'read only, 400 µJ',
      parent: bounded,
      holder: 'bob',
      subject: 'carol',
      actions: ['read'],
      budget_uj: 400n,
    },
    {
      name: 'inherit-everything',
      description: 'omitted fields inherit; depth becomes parent − 1',
      parent: bounded,
      holder: 'bob',
      subject: 'carol',
    },
    {
      name: 'equal-is-allowed',
      description: 'same budget and expiry as the parent',
      parent: bounded,
      holder: 'bob',
      subject: 'carol',
      budget_uj: 1000n,
      expiry: later,
    },
    {
      name: 'bounded-under-unbounded',
      description: 'depth 3 and an expiry under a parent with neither',
      parent: open,
      holder: 'bob',
      subject: 'carol',
      delegate_depth: 3,
      expiry: NOW_S + 60,
    },
    { name: 'not-holder', description: 'mallory is not the parent subject', parent: bounded, holder: 'mallory', subject: 'mallory' },
    { name: 'leaf-only-parent', description: 'the parent has delegate_depth 0', parent: leafOnly, holder: 'bob', subject: 'carol' },
    {
      name: 'extra-action',
      description: 'delete is not in the parent',
      parent: bounded,
      holder: 'bob',
      subject: 'carol',
      actions: ['read', 'delete'],
    },
    {
      name: 'budget-over-by-1',
      description: '1,001 µJ under a 1,000 µJ parent',
      parent: bounded,
      holder: 'bob',
      subject: 'carol',
      budget_uj: 1001n,
    },
    {
      name: 'outlives-parent',
      description: 'expiry one second after the parent',
      parent: bounded,
      holder: 'bob',
      subject: 'carol',
      expiry: later + 1,
    },
    {
      name: 'no-expiry-under-expiring',
      description: 'expiry 0 (never) under an expiring parent',
      parent: bounded,
      holder: 'bob',
      subject: 'carol',
      expiry: 0,
    },
    {
      name: 'deeper-delegation',
      description: 'delegate_depth 2 under a depth-2 parent (at most 1)',
      parent: bounded,
      holder: 'bob',
      subject: 'carol',
      delegate_depth: 2,
    },
    {
      name: 'duplicate-actions',
      description: 'actions [read, read]',
      parent: bounded,
      holder: 'bob',
      subject: 'carol',
      actions: ['read', 'read'],
    },
  ];
}

/** Re-checks `grants.json` against our implementation. */
export function verify(doc: J, t: Checker): void {
  const c = new VectorCheck(t, 'grants.json', doc);
  c.each(doc, 'grants', (v) => {
    const g = grantFromJson(v.get('grant'));
    const bytes = encode(grantToCbor(g));
    c.eq(hex(bytes), v.get('canonical_cbor').str(), 'canonical_cbor = det-CBOR of the grant');
    c.eq(grantId(g), v.get('id').str(), 'id = blake3(canonical_cbor)');
    const signer = c.actor(v.get('signer'));
    c.eq(signer.did, g.issuer, 'the signer is the issuer');
    const sig = sign(signer.key, bytes);
    c.eq(hex(sig), v.get('signature').str(), 'signature = Ed25519(issuer, canonical_cbor)');
    const decoded = readSignedGrant(decode(v.get('signed_grant_cbor').bytes()));
    c.eq(hex(encode(grantToCbor(decoded.grant))), hex(bytes), 'signed_grant_cbor carries the same grant');
    c.eq(hex(decoded.signature), hex(sig), 'signed_grant_cbor carries the signature');
    c.eq(
      hex(encode(signedGrantToCbor({ grant: g, signature: sig }))),
      v.get('signed_grant_cbor').str(),
      '{grant, signature} encodes canonically',
    );
    c.ok(verifyGrantSignature({ grant: decoded.grant, signature: decoded.signature }), 'the signature verifies under the issuer');
  });
  c.each(doc, 'signature_checks', (v) => {
    const sg = sgFromHex(v.get('signed_grant_cbor'));
    c.eq(verifyGrantSignature({ grant: sg.grant, signature: sg.signature }), v.get('valid').bool(), 'signature verdict');
  });
  c.each(doc, 'attenuations', (v) => {
    const parent = sgFromHex(v.get('parent'));
    const p = v.get('params');
    const params = {
      subject: p.get('subject').str(),
      nonce: p.get('nonce').bytes(16),
      ...(p.has('actions') ? { actions: p.get('actions').strs() } : {}),
      ...(p.has('budget_uj') ? { budget_uj: p.get('budget_uj').uint() } : {}),
      ...(p.has('expiry') ? { expiry: p.get('expiry').num() } : {}),
      ...(p.has('delegate_depth') ? { delegate_depth: p.get('delegate_depth').num() } : {}),
    };
    const r = attenuate(parent, params, c.actor(v.get('holder')));
    const e = v.get('expected');
    c.eq(r.ok, e.get('ok').bool(), 'accepted or refused');
    if (r.ok && e.get('ok').bool()) {
      c.eq(sgHex(r.value), e.get('child').str(), 'the minted child, byte for byte');
      c.eq(grantId(r.value.grant), e.get('child_id').str(), 'child id');
      c.eq(r.value.grant.parent, grantId(parent.grant), 'the child names its parent');
    } else if (!r.ok) {
      c.eq(r.error.reason, e.get('reason').str(), 'refusal reason');
    }
  });
  c.each(doc, 'decode_errors', (v) => {
    const bytes = v.get('cbor').bytes();
    c.throws(() => readSignedGrant(decode(bytes)), v.get('code').str(), 'refused with the expected code');
  });
}
