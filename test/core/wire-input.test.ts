/**
 * The request's optional `input` (docs/wire.md: MCP multi round-trip material, the JSON text of an
 * object): signed like every field, read by the core decoder and by the node's chain cache (a
 * 10-entry request map: every optional field present), refused `schema` when it is not the JSON
 * text of an object or is longer than REQUEST_INPUT_MAX_CHARS.
 */
import { describe, expect, it } from 'vitest';
import {
  decodeWireMessage,
  encode,
  encodeWireRequest,
  ErrorCodes,
  payloadHash,
  REQUEST_INPUT_MAX_CHARS,
  signWireRequestSync,
  toHex,
  type UnsignedWireRequest,
  verifyWireRequestSignature,
  wireRequestSigningBytes,
  wireRequestSigningBytesOf,
  wireRequestToCbor,
} from '../../core/index.ts';
import { ChainCache } from '../../node/index.ts';
import { codeOf } from '../support.ts';
import { alice, bob, frameFor, rootGrant } from './evidence-fixtures.ts';

const g = rootGrant(alice, 1_000n);
const payload = new TextEncoder().encode('{}');
const input = JSON.stringify({ capabilities: { elicitation: {} }, responses: { a: { action: 'accept' } }, state: 'jcp1.x.y' });

function unsigned(withInput: string | undefined): UnsignedWireRequest {
  return {
    frame: { ...frameFor([g]), payload_hash: payloadHash(payload) },
    chain: [g],
    caller: bob.did,
    cost: { uj: 25n, provenance: 'Estimator' },
    now: 1_700_000_000,
    payload,
    notify: 1,
    nonce: new Uint8Array(16).fill(7),
    ...(withInput !== undefined ? { input: withInput } : {}),
  };
}

describe('request.input', () => {
  const full = signWireRequestSync(unsigned(input), bob);

  it('is signed: the core decoder and the chain cache read a 10-entry request with it; the signature covers it', () => {
    const body = encodeWireRequest(full);
    expect(body[0]).toBe(0xaa);
    const m = decodeWireMessage(body);
    expect(m.kind === 'request' ? m.request.input : undefined).toBe(input);
    expect(verifyWireRequestSignature(full)).toBe(true);
    expect(verifyWireRequestSignature({ ...full, input: input.replace('accept', 'decline') })).toBe(false);
    expect(toHex(wireRequestSigningBytesOf(body, full))).toBe(toHex(wireRequestSigningBytes(full)));
    const cache = new ChainCache();
    expect(cache.decode(body)).toEqual(m);
    expect(cache.decode(body)).toEqual(m);
    expect(cache.hits).toBe(1);
  });

  it('a request without it is the request it was before the field (9 entries here)', () => {
    const body = encodeWireRequest(signWireRequestSync(unsigned(undefined), bob));
    expect(body[0]).toBe(0xa9);
    const m = decodeWireMessage(body);
    expect(m.kind === 'request' && !('input' in m.request)).toBe(true);
  });

  it('not the JSON text of an object, or too long: schema', () => {
    for (const bad of ['[1]', 'not json', '"text"', 7, `{"state":"${'x'.repeat(REQUEST_INPUT_MAX_CHARS)}"}`]) {
      const body = encode({ ...wireRequestToCbor(full), input: bad });
      expect(codeOf(() => decodeWireMessage(body))).toBe(ErrorCodes.SCHEMA);
    }
  });
});
