/**
 * `wire.json`: the jcp/1 binding (spec §11; C8 codec part, C13 caller signature). Requests with
 * the caller's signing bytes, signature, canonical body, length-prefixed frame and request id;
 * impersonations whose caller signature must not verify; responses and the other messages; and
 * byte streams a receiver must refuse, each with its error code.
 */
import {
  concat,
  type Cost,
  decide,
  decode,
  decodeWireMessage,
  decodeWireResponse,
  DEFAULT_FRAME_CAP,
  encode,
  encodeWireMessage,
  encodeWireRequest,
  encodeWireResponse,
  type Frame,
  frameMessage,
  FrameReader,
  Ledger,
  payloadHash,
  readSignedRevocation,
  receiptCoreFor,
  requestIdOf,
  sealReceipt,
  sign,
  type SignedGrant,
  signedRevocationToCbor,
  signRevocation,
  signWireRequestSync,
  TrustRoots,
  type UnsignedWireRequest,
  utf8,
  verifyWireRequestSignature,
  type WireMessage,
  type WireRequest,
  wireRequestSigningBytes,
  wireRequestToCbor,
  type WireResponse,
} from '../core/index.ts';
import type { Checker } from '../conformance/index.ts';
import { threeLinks } from './chains.ts';
import {
  actor,
  costFromJson,
  costJson,
  did,
  fileHeader,
  frameFromJson,
  frameJson,
  idOf,
  leafFrame,
  nameOf,
  nonce,
  NOW_S,
  rootGrant,
  sgFromHex,
  sgHex,
  VectorCheck,
} from './fixtures.ts';
import { compact, hex, type J, type JsonObj } from './json.ts';
import { rawEncode, rawFloat64, rawKey, rawMap } from './rawcbor.ts';

function unsigned(
  chain: readonly SignedGrant[],
  over: { frame?: Partial<Frame>; cost?: Cost; payload?: Uint8Array } = {},
): UnsignedWireRequest {
  const leaf = chain[chain.length - 1]!;
  return {
    frame: leafFrame(chain, { payload_hash: payloadHash(over.payload), ...over.frame }),
    chain,
    caller: leaf.grant.subject,
    cost: over.cost ?? { uj: 100n, provenance: 'Estimator' },
    now: NOW_S,
    ...(over.payload !== undefined ? { payload: over.payload } : {}),
  };
}

function requestJson(r: UnsignedWireRequest): JsonObj {
  return compact({
    frame: frameJson(r.frame),
    chain: r.chain.map(sgHex),
    caller: r.caller,
    cost: costJson(r.cost),
    now: r.now,
    payload: r.payload === undefined ? undefined : hex(r.payload),
  });
}

function requestFromJson(j: J): UnsignedWireRequest {
  return {
    frame: frameFromJson(j.get('frame')),
    chain: j.get('chain').items().map(sgFromHex),
    caller: j.get('caller').str(),
    cost: costFromJson(j.get('cost')),
    now: j.get('now').num(),
    ...(j.has('payload') ? { payload: j.get('payload').bytes() } : {}),
  };
}

function requestVector(name: string, description: string, u: UnsignedWireRequest): JsonObj {
  const req = signWireRequestSync(u, actor(nameOf(u.caller)));
  const body = encodeWireRequest(req);
  return {
    name,
    description,
    request: requestJson(u),
    payload_hash: payloadHash(u.payload),
    signing_bytes: hex(wireRequestSigningBytes(u)),
    signature: hex(req.signature),
    body: hex(body),
    framed: hex(frameMessage(body)),
    request_id: requestIdOf(req),
  };
}

function impersonation(name: string, description: string, req: WireRequest): JsonObj {
  return {
    name,
    description,
    body: hex(encodeWireRequest(req)),
    caller_signature_valid: verifyWireRequestSignature(req),
    decision: { verdict: 'deny', deny_reason: 'bad-signature' },
  };
}

function responseJson(r: WireResponse): JsonObj {
  if ('error' in r) return { error: { code: r.error.code, message: r.error.message } };
  return compact({
    decision: compact({ verdict: r.decision.verdict, deny_reason: r.decision.deny_reason }),
    receipt: hex(r.receipt),
    result: r.result === undefined ? undefined : hex(r.result),
  });
}

function responseFromJson(j: J): WireResponse {
  if (j.has('error')) return { error: { code: j.get('error').get('code').str(), message: j.get('error').get('message').str() } };
  const d = j.get('decision');
  const verdict = d.get('verdict').str();
  if (verdict !== 'allow' && verdict !== 'deny') throw new Error(`${d.path}.verdict: allow or deny`);
  return {
    decision: {
      verdict,
      ...(d.has('deny_reason') ? { deny_reason: d.get('deny_reason').str() as 'revoked' } : {}),
    },
    receipt: j.get('receipt').bytes(),
    ...(j.has('result') ? { result: j.get('result').bytes() } : {}),
  };
}

function responseVector(name: string, description: string, r: WireResponse): JsonObj {
  const body = encodeWireResponse(r);
  return { name, description, response: responseJson(r), body: hex(body), framed: hex(frameMessage(body)) };
}

/** The response a node would send for `req`: decided against a fresh state, sealed by the steward at seq 0. */
function respond(req: WireRequest, result?: Uint8Array): WireResponse {
  const dreq = { frame: req.frame, chain: req.chain, caller: req.caller, cost: req.cost, nowS: req.now };
  const d = decide(dreq, { ledger: new Ledger(), revoked: new Set(), trust: new TrustRoots() });
  const core = receiptCoreFor(dreq, d, { steward: did('steward'), seq: 0, requestId: requestIdOf(req) });
  const receipt = sealReceipt(core, actor('steward'));
  if (d.verdict === 'allow') return { decision: { verdict: 'allow' }, receipt, ...(result !== undefined ? { result } : {}) };
  return { decision: { verdict: 'deny', deny_reason: d.deny.reason }, receipt };
}

/** One bad stream: name, description, the bytes on the wire, the receiver’s frame cap in bytes, the expected error code. */
type BadFrame = [string, string, Uint8Array, number, string];

/** A 4-byte big-endian length prefix declaring `n` bytes (§5 framing). */
function lengthHeader(n: number): Uint8Array {
  const h = new Uint8Array(4);
  new DataView(h.buffer).setUint32(0, n, false);
  return h;
}

/** `b` with its correct length prefix. */
function framed(b: Uint8Array): Uint8Array {
  return concat(lengthHeader(b.length), b);
}

/** The map `m` in canonical key order, with the raw CBOR values in `replace` put in for their keys. */
function withRawKeys(m: Record<string, unknown>, replace: Record<string, Uint8Array>): Uint8Array {
  return rawMap(
    Object.keys({ ...m, ...replace })
      .sort((a, b) => (a.length !== b.length ? a.length - b.length : a < b ? -1 : a > b ? 1 : 0))
      .map((k) => [rawKey(k), replace[k] ?? rawEncode(m[k])] as const),
  );
}

/** Streams a receiver must refuse (§5), built from the good request `good`: framing, encoding and message errors. */
function badFrames(good: WireRequest): JsonObj[] {
  const o = wireRequestToCbor(good);
  const body = encodeWireRequest(good);
  const otherPayload = utf8('not the hashed payload');
  const mismatched = signWireRequestSync({ ...good, payload: otherPayload }, actor(nameOf(good.caller)));
  const response = respond(good);
  const cases = [...framingErrors(body), ...encodingErrors(o), ...messageErrors(o, good, body, mismatched, response)];
  return cases.map(([name, description, stream, cap, code]) => ({ name, description, stream: hex(stream), cap, code }));
}

/** Length-prefix errors: over the cap, truncated header or body, empty body, a trailing byte. */
function framingErrors(body: Uint8Array): BadFrame[] {
  const header = lengthHeader;
  return [
    [
      'declared-over-cap',
      'declares 1,025 bytes to a receiver capped at 1,024',
      concat(header(1025), body.subarray(0, 8)),
      1024,
      'frame-too-large',
    ],
    [
      'declared-4-gib',
      'declares 4 GiB − 1: refused after 4 bytes, nothing allocated',
      header(0xffff_ffff),
      DEFAULT_FRAME_CAP,
      'frame-too-large',
    ],
    [
      'truncated-body',
      'declares the whole body, carries half of it',
      concat(header(body.length), body.subarray(0, body.length >> 1)),
      DEFAULT_FRAME_CAP,
      'frame-truncated',
    ],
    ['truncated-header', 'two bytes of a length prefix', Uint8Array.of(0, 0), DEFAULT_FRAME_CAP, 'frame-truncated'],
    ['empty-body', 'a zero-length message', header(0), DEFAULT_FRAME_CAP, 'cbor-malformed'],
    [
      'trailing-byte',
      'the body followed by 0x00 inside the frame',
      framed(concat(body, Uint8Array.of(0))),
      DEFAULT_FRAME_CAP,
      'cbor-malformed',
    ],
  ];
}

/** Well-framed bodies that are not canonical CBOR (unsorted keys, long-form integers) or carry a float. */
function encodingErrors(o: Record<string, unknown>): BadFrame[] {
  const keys = withRawKeys;
  return [
    [
      'non-canonical-body',
      'the request map with unsorted keys',
      framed(rawEncode(o, { unsorted: true })),
      DEFAULT_FRAME_CAP,
      'cbor-non-canonical',
    ],
    [
      'long-form-now',
      'now written with an 8-byte argument',
      framed(keys(o, { now: rawEncode(NOW_S, { intWidth: 8 }) })),
      DEFAULT_FRAME_CAP,
      'cbor-non-canonical',
    ],
    ['float-in-body', 'now as a float', framed(keys(o, { now: rawFloat64(NOW_S) })), DEFAULT_FRAME_CAP, 'cbor-forbidden-type'],
  ];
}

/**
 * Canonical messages that break the schema: unknown messages or fields, a payload hash that does
 * not match (`mismatched`), a bad caller or signature, a deny `response` with a result, a bad second message.
 */
function messageErrors(
  o: Record<string, unknown>,
  good: WireRequest,
  body: Uint8Array,
  mismatched: WireRequest,
  response: WireResponse,
): BadFrame[] {
  const keys = withRawKeys;
  return [
    ['unknown-message', '{hello: "world"} is no jcp/1 message', framed(encode({ hello: 'world' })), DEFAULT_FRAME_CAP, 'schema'],
    ['request-unknown-field', 'a request with an extra field', framed(keys(o, { memo: rawEncode('x') })), DEFAULT_FRAME_CAP, 'schema'],
    [
      'payload-hash-mismatch',
      'the payload changed after frame.payload_hash was computed (re-signed)',
      framed(encodeWireRequest(mismatched)),
      DEFAULT_FRAME_CAP,
      'schema',
    ],
    [
      'caller-not-did-key',
      'caller "did:key:zBad"',
      framed(keys(o, { caller: rawEncode('did:key:zBad') })),
      DEFAULT_FRAME_CAP,
      'did-invalid',
    ],
    [
      'signature-63-bytes',
      'a 63-byte caller signature',
      framed(keys(o, { signature: rawEncode(good.signature.subarray(0, 63)) })),
      DEFAULT_FRAME_CAP,
      'bad-length',
    ],
    [
      'result-on-deny',
      'a deny response that carries a result',
      framed(
        encode({
          decision: { verdict: 'deny', deny_reason: 'revoked' },
          receipt: 'error' in response ? new Uint8Array(0) : response.receipt,
          result: utf8('x'),
        }),
      ),
      DEFAULT_FRAME_CAP,
      'schema',
    ],
    [
      'second-message-bad',
      'a good request then a body with a float',
      concat(framed(body), framed(rawFloat64(1))),
      DEFAULT_FRAME_CAP,
      'cbor-forbidden-type',
    ],
  ];
}

/** Builds `wire.json`. */
export function generate(): JsonObj {
  const root = rootGrant('wire/root');
  const chain = threeLinks('wire/chain');
  const payload = encode({ path: '/srv/data/report.txt' });
  const direct = unsigned([root]);
  const withPayload = unsigned([root], { payload });
  const chained = unsigned(chain, { cost: { uj: 250n, provenance: 'HwShunt', measured: 247n }, payload: utf8('hello') });
  const agent = unsigned([root], {
    frame: { kind: 'agent-task', action: 'write' },
    cost: { uj: 90n, provenance: 'ModelBased', measured: 88n },
  });
  const good = signWireRequestSync(withPayload, actor('bob'));
  const bytes = wireRequestSigningBytes(direct);
  const revocation = signRevocation(idOf(root), actor('alice'), nonce('wire/revocation'));
  const messages: [string, string, WireMessage][] = [
    ['revoke', 'alice revokes the direct grant', { kind: 'revoke', revocation }],
    ['revoked', 'the node confirms', { kind: 'revoked', grant_id: idOf(root) }],
  ];
  return {
    ...fileHeader('wire.json', 'jcp/1 framing, requests, caller signatures and responses', '§11; C8, C13'),
    requests: [
      requestVector('direct-no-payload', 'one link, no payload (payload_hash of the empty byte string)', direct),
      requestVector('direct-with-payload', 'payload = CBOR of {path}; frame.payload_hash binds it', withPayload),
      requestVector('chained-hwshunt', 'three links, HwShunt cost with measured, text payload', chained),
      requestVector('agent-task-model-based', 'an agent-task frame with a ModelBased cost', agent),
    ],
    impersonations: [
      impersonation('signed-by-mallory', 'caller bob, signature by mallory over the same bytes', {
        ...direct,
        signature: sign(actor('mallory').key, bytes),
      }),
      impersonation('cost-changed-after-signing', 'signed for 100 µJ, sent with 1 µJ', {
        ...direct,
        cost: { uj: 1n, provenance: 'Estimator' },
        signature: sign(actor('bob').key, bytes),
      }),
      impersonation('caller-swapped', 'bob’s signature with caller dave', {
        ...direct,
        caller: did('dave'),
        signature: sign(actor('bob').key, bytes),
      }),
    ],
    responses: [
      responseVector('allow-with-result', 'allow, the receipt, and the endpoint output as data', respond(good, utf8('quarterly numbers'))),
      responseVector(
        'deny-wrong-subject',
        'deny: mallory signs a request with bob’s grant',
        respond(signWireRequestSync({ ...direct, caller: did('mallory') }, actor('mallory'))),
      ),
      responseVector('error', 'a message that never reached a decision', {
        error: { code: 'cbor-non-canonical', message: 'det-CBOR: bytes are not the canonical encoding of their value' },
      }),
    ],
    messages: messages.map(([name, description, m]) => {
      const body = encodeWireMessage(m);
      return compact({
        name,
        description,
        kind: m.kind,
        revocation_cbor: m.kind === 'revoke' ? hex(encode(signedRevocationToCbor(m.revocation))) : undefined,
        grant_id: m.kind === 'revoked' ? m.grant_id : undefined,
        body: hex(body),
        framed: hex(frameMessage(body)),
      });
    }),
    bad_frames: badFrames(good),
  };
}

/** Deframes a whole stream with a receiver cap and decodes every message (throws on the first fault). */
function receive(stream: Uint8Array, cap: number): WireMessage[] {
  const reader = new FrameReader(cap);
  const bodies = reader.push(stream);
  reader.end();
  return bodies.map(decodeWireMessage);
}

/** Re-checks `wire.json` against our implementation. */
export function verify(doc: J, t: Checker): void {
  const c = new VectorCheck(t, 'wire.json', doc);
  c.each(doc, 'requests', (v) => {
    const u = requestFromJson(v.get('request'));
    c.eq(payloadHash(u.payload), v.get('payload_hash').str(), 'payload hash = content id of the payload byte string');
    c.eq(u.frame.payload_hash, v.get('payload_hash').str(), 'the frame carries the payload hash');
    c.eq(hex(wireRequestSigningBytes(u)), v.get('signing_bytes').str(), 'signing bytes = det-CBOR of the request without signature');
    const caller = c.actorByDid(u.caller, `${v.path}.request.caller`);
    const req = signWireRequestSync(u, caller);
    c.eq(hex(req.signature), v.get('signature').str(), 'caller signature');
    const body = encodeWireRequest(req);
    c.eq(hex(body), v.get('body').str(), 'body = det-CBOR of the signed request');
    c.eq(hex(frameMessage(body)), v.get('framed').str(), 'framed = 4-byte big-endian length ‖ body');
    c.eq(requestIdOf(req), v.get('request_id').str(), 'request id = content id of the signed request map');
    const [m, ...rest] = receive(v.get('framed').bytes(), DEFAULT_FRAME_CAP);
    c.eq(rest.length, 0, 'one message in the frame');
    c.eq(m?.kind, 'request', 'decodes as a request');
    if (m?.kind === 'request') {
      c.ok(verifyWireRequestSignature(m.request), 'the decoded request’s caller signature verifies');
      c.eq(requestIdOf(m.request), v.get('request_id').str(), 'the decoded request has the same id');
    }
  });
  c.each(doc, 'impersonations', (v) => {
    const m = decodeWireMessage(v.get('body').bytes());
    c.eq(m.kind, 'request', 'decodes as a request');
    if (m.kind === 'request') {
      const valid = verifyWireRequestSignature(m.request);
      c.eq(valid, v.get('caller_signature_valid').bool(), 'caller signature verdict');
      c.eq(
        valid ? 'decide' : 'bad-signature',
        v.get('decision').get('deny_reason').str(),
        'a failed caller signature is denied bad-signature',
      );
    }
  });
  c.each(doc, 'responses', (v) => {
    const r = responseFromJson(v.get('response'));
    const body = encodeWireResponse(r);
    c.eq(hex(body), v.get('body').str(), 'body = det-CBOR of the response');
    c.eq(hex(frameMessage(body)), v.get('framed').str(), 'framed');
    c.eq(responseJson(decodeWireResponse(v.get('body').bytes())), v.get('response').raw(), 'decodes to the stated response');
  });
  c.each(doc, 'messages', (v) => {
    const [m] = receive(v.get('framed').bytes(), DEFAULT_FRAME_CAP);
    c.eq(m?.kind, v.get('kind').str(), 'message kind');
    if (m?.kind === 'revoke') {
      const rev = readSignedRevocation(decode(v.get('revocation_cbor').bytes()));
      c.eq(hex(encodeWireMessage({ kind: 'revoke', revocation: rev })), v.get('body').str(), 'revoke body');
    } else if (m?.kind === 'revoked') {
      c.eq(m.grant_id, v.get('grant_id').str(), 'revoked grant id');
      c.eq(hex(encodeWireMessage(m)), v.get('body').str(), 'revoked body');
    }
  });
  c.each(doc, 'bad_frames', (v) => {
    c.throws(() => receive(v.get('stream').bytes(), v.get('cap').num()), v.get('code').str(), 'refused with the expected code');
  });
}
