/** The jcp/1 wire codec (spec §11): framing with a cap, canonical bodies, caller signature, messages. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  concat,
  contentId,
  decode,
  decodeWireMessage,
  decodeWireResponse,
  DEFAULT_FRAME_CAP,
  encode,
  encodeWireMessage,
  encodeWireRequest,
  encodeWireResponse,
  ErrorCodes,
  errorResponseOf,
  frameMessage,
  FrameReader,
  grantId,
  JcpError,
  MAX_DECLARABLE_LENGTH,
  payloadHash,
  requestIdOf,
  seededRng,
  sign,
  signRevocation,
  signWireRequest,
  signWireRequestSync,
  toHex,
  type UnsignedWireRequest,
  verifyWireRequestSignature,
  type WireMessage,
  wireRequestSigningBytes,
  wireRequestToCbor,
} from '../../core/internal.ts';
import { alice, bob, child, mallory, root, rootGrant, TestSteward, frameFor, request } from './evidence-fixtures.ts';
import { codeOf } from '../support.ts';

const ALL_CODES = new Set<string>(Object.values(ErrorCodes));

const g = rootGrant(alice, 1_000n);
const mid = child(g, alice, bob, 500n);

function unsigned(payload?: Uint8Array): UnsignedWireRequest {
  const chain = [g, mid];
  return {
    frame: { ...frameFor(chain), payload_hash: payloadHash(payload) },
    chain,
    caller: bob.did,
    cost: { uj: 25n, provenance: 'ModelBased', measured: 24n },
    now: 1_700_000_000,
    ...(payload !== undefined ? { payload } : {}),
  };
}

const req = signWireRequestSync(unsigned(new Uint8Array([1, 2, 3])), bob);
const steward = new TestSteward();
const receipt = steward.handle(request([g, mid], bob, 25n)).bytes;

describe('wire - framing (§11)', () => {
  it('frames a body as 4-byte big-endian length ‖ body', () => {
    const f = frameMessage(new Uint8Array([0xa0]));
    expect(toHex(f)).toBe('00000001a0');
  });
  it('a FrameReader returns whole bodies from chunks of any size', () => {
    fc.assert(
      fc.property(
        fc.array(fc.uint8Array({ maxLength: 300 }), { maxLength: 8 }),
        fc.array(fc.integer({ min: 1, max: 64 }), { minLength: 1, maxLength: 16 }),
        (bodies, cuts) => {
          const stream = Buffer.concat(bodies.map((b) => frameMessage(b)));
          const r = new FrameReader();
          const got: Uint8Array[] = [];
          let off = 0;
          for (let i = 0; off < stream.length; i++) {
            const n = cuts[i % cuts.length]!;
            got.push(...r.push(stream.subarray(off, off + n)));
            off += n;
          }
          r.end();
          expect(got.map(toHex)).toEqual(bodies.map(toHex));
          expect(r.buffered).toBe(0);
        },
      ),
      { numRuns: 300, seed: 1 },
    );
  });
  it('deny / a body longer than the cap is refused when framing', () => {
    expect(codeOf(() => frameMessage(new Uint8Array(11), 10))).toBe(ErrorCodes.FRAME_TOO_LARGE);
  });
  it('deny / a declared length of cap + 1 is refused from the header alone', () => {
    const r = new FrameReader(10);
    expect(codeOf(() => r.push(new Uint8Array([0, 0, 0, 11])))).toBe(ErrorCodes.FRAME_TOO_LARGE);
    expect(r.push.bind(r, new Uint8Array([0]))).toThrow(JcpError); // stays failed: the stream cannot resync
  });
  it('deny / read() keeps the bodies a chunk completed before an oversized length, then stays failed', () => {
    const r = new FrameReader(10);
    const chunk = concat(frameMessage(Uint8Array.of(1, 2), 10), frameMessage(Uint8Array.of(3), 10), Uint8Array.of(0, 0, 0, 11, 9, 9));
    const first = r.read(chunk);
    expect(first.bodies.map(toHex)).toEqual(['0102', '03']);
    expect(first.error?.code).toBe(ErrorCodes.FRAME_TOO_LARGE);
    const later = r.read(frameMessage(Uint8Array.of(4), 10));
    expect(later.bodies).toEqual([]);
    expect(later.error).toBe(first.error);
  });
  it('an empty frame at the end of a chunk is delivered at once (and the decoder refuses it)', () => {
    const r = new FrameReader();
    const bodies = r.push(new Uint8Array([0, 0, 0, 0]));
    expect(bodies.map(toHex)).toEqual(['']);
    expect(() => r.end()).not.toThrow();
    expect(codeOf(() => decodeWireMessage(bodies[0]!))).toBe(ErrorCodes.CBOR_MALFORMED);
  });
  it('a declared length equal to the cap is accepted', () => {
    const r = new FrameReader(3);
    expect(r.push(new Uint8Array([0, 0, 0, 3, 7, 8, 9])).map(toHex)).toEqual(['070809']);
  });
  it('deny / a declared length of 4 GiB − 1 is refused without allocating the body', () => {
    const before = process.memoryUsage().arrayBuffers;
    for (const cap of [DEFAULT_FRAME_CAP, 2 ** 31]) {
      const r = new FrameReader(cap);
      let err: unknown;
      try {
        r.push(new Uint8Array([0xff, 0xff]));
        expect(r.buffered).toBe(2);
        r.push(new Uint8Array([0xff, 0xff, 0x00]));
      } catch (e) {
        err = e;
      }
      expect(err instanceof JcpError && err.code).toBe(ErrorCodes.FRAME_TOO_LARGE);
      expect(err instanceof JcpError && err.detail).toEqual({ length: MAX_DECLARABLE_LENGTH, cap });
      expect(r.buffered).toBe(0);
    }
    // a 2 GiB or 4 GiB body buffer would show here; the header is all we ever held
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(64 * 1024 * 1024);
  });
  it('deny / a stream that ends inside a message is truncated', () => {
    const r = new FrameReader();
    r.push(frameMessage(new Uint8Array(10)).subarray(0, 7));
    expect(codeOf(() => r.end())).toBe(ErrorCodes.FRAME_TRUNCATED);
    const h = new FrameReader();
    h.push(new Uint8Array([0, 0]));
    expect(codeOf(() => h.end())).toBe(ErrorCodes.FRAME_TRUNCATED);
  });
  it('refuses a cap outside 1..2^32−1 (a programmer error)', () => {
    expect(() => new FrameReader(0)).toThrow(RangeError);
    expect(() => new FrameReader(2 ** 32)).toThrow(RangeError);
  });
});

describe('wire - WireRequest and the caller signature (§11, C13)', () => {
  it('round-trips canonically: decode(encode(req)) = req, re-encoding gives the same bytes', () => {
    const bytes = encodeWireRequest(req);
    const m = decodeWireMessage(bytes);
    expect(m.kind).toBe('request');
    if (m.kind !== 'request') return;
    expect(toHex(encodeWireRequest(m.request))).toBe(toHex(bytes));
    expect(m.request.cost).toEqual(req.cost);
    expect(grantId(m.request.chain[1]!.grant)).toBe(grantId(mid.grant));
    expect(verifyWireRequestSignature(m.request)).toBe(true);
  });
  it('the caller signs canonical_cbor of every field but the signature', () => {
    const o = wireRequestToCbor(req);
    delete o['signature'];
    expect(toHex(wireRequestSigningBytes(req))).toBe(toHex(encode(o)));
  });
  it('a function signer (a remote or threshold actor) gives the same signature, sync or async', async () => {
    const viaFn = await signWireRequest(unsigned(new Uint8Array([1, 2, 3])), (msg) => sign(bob.key, msg));
    const viaAsync = await signWireRequest(unsigned(new Uint8Array([1, 2, 3])), async (msg) => sign(bob.key, msg));
    expect(toHex(viaFn.signature)).toBe(toHex(req.signature));
    expect(toHex(viaAsync.signature)).toBe(toHex(req.signature));
    expect(toHex((await signWireRequest(unsigned(new Uint8Array([1, 2, 3])), bob)).signature)).toBe(toHex(req.signature));
  });
  it('deny / a signer returning other than 64 bytes', async () => {
    await expect(signWireRequest(unsigned(), () => new Uint8Array(10))).rejects.toThrow(JcpError);
  });
  it('deny / an actor that is not the caller cannot sign', () => {
    expect(codeOf(() => signWireRequestSync(unsigned(), mallory))).toBe(ErrorCodes.SCHEMA);
  });
  it('deny / an impersonated caller does not verify', () => {
    const forged = { ...req, signature: sign(mallory.key, wireRequestSigningBytes(req)) };
    expect(verifyWireRequestSignature(forged)).toBe(false);
  });
  it.each([
    ['now', { now: req.now + 1 }],
    ['cost', { cost: { ...req.cost, uj: 1n } }],
    ['payload', { payload: new Uint8Array([9]) }],
    ['caller', { caller: alice.did }],
  ])('deny / a changed %s breaks the caller signature', (_what, patch) => {
    expect(verifyWireRequestSignature({ ...req, ...patch })).toBe(false);
  });
  it('requestIdOf is the content id of the signed map and changes with any field', () => {
    expect(requestIdOf(req)).toBe(contentId(wireRequestToCbor(req)));
    expect(requestIdOf({ ...req, now: req.now + 1 })).not.toBe(requestIdOf(req));
    expect(requestIdOf({ ...req, signature: new Uint8Array(64) })).not.toBe(requestIdOf(req));
  });
  it('nonce / optional, signed like every field, part of the request id; a request without one has the bytes it always had', () => {
    const nonce = new Uint8Array(16).fill(7);
    const withNonce = signWireRequestSync({ ...unsigned(new Uint8Array([1, 2, 3])), nonce }, bob);
    const m = decodeWireMessage(encodeWireRequest(withNonce));
    expect(m.kind === 'request' && toHex(m.request.nonce!)).toBe(toHex(nonce));
    if (m.kind !== 'request') return;
    expect(verifyWireRequestSignature(m.request)).toBe(true);
    expect(verifyWireRequestSignature({ ...withNonce, nonce: new Uint8Array(16).fill(8) })).toBe(false);
    const { nonce: _dropped, ...without } = withNonce;
    expect(verifyWireRequestSignature(without)).toBe(false);
    expect(requestIdOf(withNonce)).not.toBe(requestIdOf(req));
    expect(requestIdOf(signWireRequestSync({ ...unsigned(new Uint8Array([1, 2, 3])), nonce: new Uint8Array(16).fill(8) }, bob))).not.toBe(
      requestIdOf(withNonce),
    );
    // No nonce: the field is absent from the map, so the bytes and the signature are as before it existed.
    expect('nonce' in wireRequestToCbor(req)).toBe(false);
    expect(toHex(wireRequestSigningBytes(req))).toBe(toHex(wireRequestSigningBytes(unsigned(new Uint8Array([1, 2, 3])))));
  });
  it.each([0, 15, 17, 32])('deny / a nonce of %i bytes is refused (schema, request.nonce)', (n) => {
    const bad = signWireRequestSync({ ...unsigned(), nonce: new Uint8Array(n) }, bob);
    expect(codeOf(() => decodeWireMessage(encodeWireRequest(bad)))).toBe(ErrorCodes.BAD_LENGTH);
  });
  it('payload_hash is the content id of the payload byte string; absent = empty bytes', () => {
    expect(payloadHash()).toBe(contentId(new Uint8Array(0)));
    expect(payloadHash(new Uint8Array([1]))).toBe(contentId(new Uint8Array([1])));
    const noPayload = signWireRequestSync(unsigned(), bob);
    const m = decodeWireMessage(encodeWireRequest(noPayload));
    expect(m.kind === 'request' && 'payload' in m.request).toBe(false);
  });
  it('deny / a payload that does not match frame.payload_hash', () => {
    const bad = signWireRequestSync({ ...unsigned(new Uint8Array([1])), payload: new Uint8Array([2]) }, bob);
    expect(codeOf(() => decodeWireMessage(encodeWireRequest(bad)))).toBe(ErrorCodes.SCHEMA);
  });
  it('deny / a non-canonical body (long-form integer, unsorted keys, request with a key moved)', () => {
    const nonCanon = new Uint8Array([0xa1, 0x61, 0x61, 0x18, 0x01]); // {a: 1} with 1 in two-byte form
    expect(codeOf(() => decodeWireMessage(nonCanon))).toBe(ErrorCodes.CBOR_NON_CANONICAL);
    const unsorted = new Uint8Array([0xa2, 0x62, 0x61, 0x61, 0x01, 0x61, 0x62, 0x02]); // {"aa":1,"b":2}
    expect(codeOf(() => decodeWireMessage(unsorted))).toBe(ErrorCodes.CBOR_NON_CANONICAL);
    // the request map's first entry ("now", the shortest key) moved to the end: same value, other bytes
    const bytes = encodeWireRequest(req);
    const nowEntry = encode({ now: req.now }).subarray(1);
    expect(bytes[1]).toBe(nowEntry[0]);
    const moved = new Uint8Array([bytes[0]!, ...bytes.subarray(1 + nowEntry.length), ...nowEntry]);
    expect(codeOf(() => decodeWireMessage(moved))).toBe(ErrorCodes.CBOR_NON_CANONICAL);
  });
  it.each([
    ['an empty chain', { ...wireRequestToCbor(req), chain: [] }, ErrorCodes.SCHEMA],
    [
      'a missing signature',
      (() => {
        const o = wireRequestToCbor(req);
        delete o['signature'];
        return o;
      })(),
      ErrorCodes.SCHEMA,
    ],
    ['a short signature', { ...wireRequestToCbor(req), signature: new Uint8Array(63) }, ErrorCodes.BAD_LENGTH],
    ['an unknown field', { ...wireRequestToCbor(req), extra: 1 }, ErrorCodes.SCHEMA],
    ['a caller that is not a did:key', { ...wireRequestToCbor(req), caller: 'did:web:x' }, ErrorCodes.DID_INVALID],
    ['a negative now', { ...wireRequestToCbor(req), now: -1 }, ErrorCodes.SCHEMA],
    ['HwShunt without measured', { ...wireRequestToCbor(req), cost: { uj: 1, provenance: 'HwShunt' } }, ErrorCodes.SCHEMA],
  ])('deny / %s', (_what, map, code) => {
    expect(codeOf(() => decodeWireMessage(encode(map)))).toBe(code);
  });
});

const messages: [string, WireMessage][] = [
  ['an allow with a result', { kind: 'response', response: { decision: { verdict: 'allow' }, receipt, result: new Uint8Array([7]) } }],
  ['a deny', { kind: 'response', response: { decision: { verdict: 'deny', deny_reason: 'budget-exceeded' }, receipt } }],
  ['an error', { kind: 'error', error: { code: ErrorCodes.FRAME_TOO_LARGE, message: 'too long' } }],
  ['a revoke', { kind: 'revoke', revocation: signRevocation(grantId(g.grant), root, new Uint8Array(16).fill(3)) }],
  ['a revoked ack', { kind: 'revoked', grant_id: grantId(g.grant) }],
];

describe('wire - responses and other messages', () => {
  it.each(messages)('%s round-trips canonically', (_what, m) => {
    const bytes = encodeWireMessage(m);
    const back = decodeWireMessage(bytes);
    expect(back).toEqual(m);
    expect(toHex(encodeWireMessage(back))).toBe(toHex(bytes));
  });
  it('a decided response is assembled exactly as the general encoder writes it (any sizes, any reason text)', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('allow' as const, 'deny' as const),
        fc.option(fc.string({ unit: 'grapheme', maxLength: 40 }), { nil: undefined }),
        fc.uint8Array({ maxLength: 70_000 }),
        fc.option(fc.uint8Array({ maxLength: 300 }), { nil: undefined }),
        (verdict, reason, rcpt, result) => {
          const decision = reason === undefined ? { verdict } : { verdict, deny_reason: reason };
          const r = result === undefined ? { decision, receipt: rcpt } : { decision, receipt: rcpt, result };
          expect(toHex(encodeWireResponse(r as Parameters<typeof encodeWireResponse>[0]))).toBe(toHex(encode(r)));
        },
      ),
      { numRuns: 300, seed: 11 },
    );
  });
  it('decodeWireResponse reads a decided response and an error', () => {
    const r = { decision: { verdict: 'allow' as const }, receipt };
    expect(decodeWireResponse(encodeWireResponse(r))).toEqual(r);
    const e = errorResponseOf(new JcpError(ErrorCodes.CBOR_NON_CANONICAL, 'nope'));
    expect(decodeWireResponse(encodeWireResponse(e))).toEqual({ error: { code: 'cbor-non-canonical', message: 'nope' } });
  });
  it.each([
    ['a deny with a result', { decision: { verdict: 'deny', deny_reason: 'revoked' }, receipt, result: new Uint8Array(1) }],
    ['a deny without a reason', { decision: { verdict: 'deny' }, receipt }],
    ['an allow with a reason', { decision: { verdict: 'allow', deny_reason: 'revoked' }, receipt }],
    ['a reason not in the spec', { decision: { verdict: 'deny', deny_reason: 'nope' }, receipt }],
    ['a receipt as text', { decision: { verdict: 'allow' }, receipt: 'r' }],
    ['an unknown message', { ping: {} }],
    ['a revoke with another key beside it', { revoke: {}, extra: 1 }],
    ['an error without a message', { error: { code: 'x' } }],
  ])('deny / %s', (_what, map) => {
    expect(codeOf(() => decodeWireMessage(encode(map)))).toBe(ErrorCodes.SCHEMA);
  });
  it('deny / a top-level array or integer is not a message', () => {
    expect(codeOf(() => decodeWireMessage(encode([1])))).toBe(ErrorCodes.SCHEMA);
    expect(codeOf(() => decodeWireMessage(encode(1)))).toBe(ErrorCodes.SCHEMA);
  });
  it('deny / a request where a response is expected', () => {
    expect(codeOf(() => decodeWireResponse(encodeWireRequest(req)))).toBe(ErrorCodes.SCHEMA);
  });
  it('deny / an empty body', () => {
    expect(codeOf(() => decodeWireMessage(new Uint8Array(0)))).toBe(ErrorCodes.CBOR_MALFORMED);
  });
});

describe('wire - fuzz: 100,000 generated and mutated byte strings', () => {
  it('FrameReader + decodeWireMessage never throw an untyped error; every failure has a JcpError code', () => {
    const rand = seededRng('test/core/wire/fuzz');
    let pool = 0;
    let buf = rand(4096);
    const byte = () => {
      if (pool >= buf.length) {
        buf = rand(4096);
        pool = 0;
      }
      return buf[pool++]!;
    };
    const int = (n: number) => ((byte() << 16) | (byte() << 8) | byte()) % n;
    const seeds = [
      encodeWireRequest(req),
      encodeWireRequest(signWireRequestSync(unsigned(), bob)),
      ...messages.map(([, m]) => encodeWireMessage(m)),
    ];
    const SPECIAL = [0x00, 0x17, 0x18, 0x1b, 0x40, 0x60, 0x80, 0xa0, 0xc0, 0xd2, 0xf4, 0xf6, 0xf9, 0xfb, 0xff];
    const mutate = (src: Uint8Array): Uint8Array => {
      let b = src;
      const edits = 1 + int(4);
      for (let e = 0; e < edits; e++) {
        const op = int(7);
        const at = int(b.length + 1);
        const i = at % Math.max(1, b.length);
        if (op <= 1 || op === 6) {
          if (b.length === 0) continue;
          if (b === src) b = new Uint8Array(src);
          if (op === 0)
            b[i] = byte(); // overwrite
          else if (op === 1)
            b[i]! ^= 1 << int(8); // bit flip
          else b[i] = SPECIAL[int(SPECIAL.length)]!; // a CBOR head that changes type or width
        } else if (op === 2)
          b = Buffer.concat([b.subarray(0, at), Uint8Array.of(byte()), b.subarray(at)]); // insert
        else if (op === 3)
          b = Buffer.concat([b.subarray(0, i), b.subarray(i + 1 + int(8))]); // delete a run
        else if (op === 4)
          b = b.subarray(0, at); // truncate
        else if (b.length > 8) {
          const from = int(b.length - 4); // duplicate a slice elsewhere
          b = Buffer.concat([b.subarray(0, at), b.subarray(from, from + 1 + int(16)), b.subarray(at)]);
        }
      }
      return b;
    };
    // structure-aware mutation: decode a seed, replace / delete / add one node, re-encode canonically,
    // so the input passes the CBOR layer and reaches the message schemas
    const seedValues = seeds.map((x) => decode(x));
    const randomValue = (depth: number): unknown => {
      switch (int(depth > 2 ? 6 : 8)) {
        case 0:
          return int(1000);
        case 1:
          return -1 - int(1000);
        case 2:
          return 2n ** 64n - 1n - BigInt(int(5));
        case 3:
          return [
            '',
            'allow',
            'deny',
            'revoked',
            'HwShunt',
            'tool-call',
            'control',
            'data',
            bob.did,
            'did:key:z6Mk',
            'a'.repeat(64),
            'f'.repeat(5000),
          ][int(12)];
        case 4:
          return rand([0, 1, 16, 32, 63, 64, 65][int(7)]!);
        case 5:
          return grantId(g.grant);
        case 6:
          return Array.from({ length: int(4) }, () => randomValue(depth + 1));
        default:
          return Object.fromEntries(
            Array.from({ length: int(4) }, () => [['frame', 'chain', 'grant', 'body', 'uj', 'x'][int(6)]!, randomValue(depth + 1)]),
          );
      }
    };
    const structural = (v: unknown): unknown => {
      const copy = structuredClone(v) as Record<string, unknown>;
      const nodes: [Record<string, unknown> | unknown[], string | number][] = [];
      const walk = (x: unknown) => {
        if (Array.isArray(x))
          x.forEach((y, i) => {
            nodes.push([x, i]);
            walk(y);
          });
        else if (x && typeof x === 'object' && !(x instanceof Uint8Array))
          for (const [k, y] of Object.entries(x)) {
            nodes.push([x as Record<string, unknown>, k]);
            walk(y);
          }
      };
      walk(copy);
      const [parent, key] = nodes[int(nodes.length)]!;
      const op = int(3);
      if (op === 0 || Array.isArray(parent)) (parent as Record<string | number, unknown>)[key] = randomValue(0);
      else if (op === 1) delete parent[key as string];
      else parent[`${String(key)}_`] = randomValue(0);
      return copy;
    };
    const generate = (): Uint8Array => {
      const kind = int(10);
      if (kind < 5) return mutate(seeds[int(seeds.length)]!);
      if (kind < 8) return encode(structural(seedValues[int(seedValues.length)]));
      if (kind < 9) return rand(int(200)); // random garbage
      return encode({ [['frame', 'decision', 'error', 'revoke', 'revoked'][int(5)]!]: randomValue(0) });
    };

    const codes = new Map<string, number>();
    const untyped: string[] = [];
    let decoded = 0;
    const N = 100_000;
    for (let i = 0; i < N; i++) {
      const body = generate();
      // frame it, sometimes with a lying length header, and feed it in random chunks
      const framed = frameMessage(body, MAX_DECLARABLE_LENGTH);
      const lie = int(20);
      if (lie === 0)
        framed.set([byte(), byte(), byte(), byte()], 0); // any declared length
      else if (lie === 1) new DataView(framed.buffer).setUint32(0, Math.max(0, body.length + int(17) - 8)); // off by a little
      const reader = new FrameReader(4096);
      try {
        const bodies: Uint8Array[] = [];
        let off = 0;
        while (off < framed.length) {
          const n = 1 + int(framed.length);
          bodies.push(...reader.push(framed.subarray(off, off + n)));
          off += n;
        }
        reader.end();
        for (const b of bodies) {
          decodeWireMessage(b);
          decoded++;
        }
      } catch (e) {
        if (e instanceof JcpError && ALL_CODES.has(e.code)) codes.set(e.code, (codes.get(e.code) ?? 0) + 1);
        else if (untyped.length < 5) untyped.push(`${String(e)} on ${toHex(body).slice(0, 120)}`);
        else untyped.push('…');
      }
    }
    expect(untyped).toEqual([]);
    // the fuzz really exercised the decoder: several distinct codes, and some inputs still decode
    for (const code of [
      ErrorCodes.CBOR_MALFORMED,
      ErrorCodes.CBOR_NON_CANONICAL,
      ErrorCodes.CBOR_FORBIDDEN_TYPE,
      ErrorCodes.SCHEMA,
      ErrorCodes.DID_INVALID,
      ErrorCodes.BAD_LENGTH,
      ErrorCodes.FRAME_TOO_LARGE,
      ErrorCodes.FRAME_TRUNCATED,
    ]) {
      expect(codes.get(code) ?? 0, code).toBeGreaterThan(0);
    }
    expect(decoded).toBeGreaterThan(100);
    expect([...codes.values()].reduce((a, b) => a + b, 0) + decoded).toBeGreaterThanOrEqual(N);
  }, 300_000);
});
