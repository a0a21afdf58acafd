/**
 * The jcp/1 messages the node and an MCP bridge share (docs/wire.md "MCP tools behind a node"): `list_tools`,
 * `tool_list`, `notice`, and the request's optional `notify: 1` (part of the signed bytes).
 */
import { describe, expect, it } from 'vitest';
import {
  decode,
  decodeWireMessage,
  encode,
  encodeWireMessage,
  encodeWireRequest,
  ErrorCodes,
  payloadHash,
  requestIdOf,
  signWireRequestSync,
  toHex,
  type UnsignedWireRequest,
  verifyWireRequestSignature,
  type WireMessage,
  wireRequestSigningBytes,
  wireRequestSigningBytesOf,
  wireRequestToCbor,
} from '../../core/index.ts';
import { ChainCache } from '../../node/index.ts';
import { codeOf } from '../support.ts';
import { alice, bob, child, frameFor, rootGrant } from './evidence-fixtures.ts';

const g = rootGrant(alice, 1_000n);
const mid = child(g, alice, bob, 500n);
const RID = 'ab'.repeat(32);
const RES = 'cd'.repeat(32);

function unsigned(notify: boolean, payload?: Uint8Array): UnsignedWireRequest {
  const chain = [g, mid];
  return {
    frame: { ...frameFor(chain), payload_hash: payloadHash(payload) },
    chain,
    caller: bob.did,
    cost: { uj: 25n, provenance: 'Estimator' },
    now: 1_700_000_000,
    ...(payload !== undefined ? { payload } : {}),
    ...(notify ? { notify: 1 as const } : {}),
  };
}

const roundTrip = (m: WireMessage) => decodeWireMessage(encodeWireMessage(m));

describe('wire - list_tools / tool_list', () => {
  it('list_tools is the map {list_tools: {}} and round-trips', () => {
    expect(toHex(encodeWireMessage({ kind: 'list_tools' }))).toBe(toHex(encode({ list_tools: {} })));
    expect(roundTrip({ kind: 'list_tools' })).toEqual({ kind: 'list_tools' });
  });

  it('tool_list round-trips its resources in order, tools as JSON text with floats, bools and null', () => {
    const tools = JSON.stringify([
      {
        name: 'echo',
        inputSchema: { type: 'object', properties: { x: { minimum: 0.5 } } },
        annotations: { readOnlyHint: true, title: null },
      },
    ]);
    const m: WireMessage = {
      kind: 'tool_list',
      resources: [
        { name: 'everything', resource: RES, tools },
        { name: 'empty', resource: RID, tools: '[]' },
      ],
    };
    expect(roundTrip(m)).toEqual(m);
  });

  it('refuses / list_tools with a field in it', () => {
    expect(codeOf(() => decodeWireMessage(encode({ list_tools: { x: 1 } })))).toBe(ErrorCodes.SCHEMA);
    expect(codeOf(() => decodeWireMessage(encode({ list_tools: 1 })))).toBe(ErrorCodes.SCHEMA);
  });

  it('refuses / a second top-level key beside list_tools', () => {
    expect(codeOf(() => decodeWireMessage(encode({ list_tools: {}, extra: 1 })))).toBe(ErrorCodes.SCHEMA);
  });

  it('refuses / tool_list whose tools text is not a JSON array', () => {
    for (const tools of ['{"name":"echo"}', 'not json', '', '1']) {
      const body = encode({ tool_list: { resources: [{ name: 'x', resource: RES, tools }] } });
      expect(codeOf(() => decodeWireMessage(body))).toBe(ErrorCodes.SCHEMA);
    }
  });

  it('refuses / tool_list entries with a missing, unknown or mistyped field', () => {
    const bad = [
      { name: 'x', resource: RES },
      { name: 'x', resource: RES, tools: '[]', extra: 1 },
      { name: 'x', resource: 'not-a-cid', tools: '[]' },
      { name: new Uint8Array(1), resource: RES, tools: '[]' },
      { name: 'x'.repeat(257), resource: RES, tools: '[]' },
    ];
    for (const e of bad) expect(codeOf(() => decodeWireMessage(encode({ tool_list: { resources: [e] } })))).toBe(ErrorCodes.SCHEMA);
    expect(codeOf(() => decodeWireMessage(encode({ tool_list: {} })))).toBe(ErrorCodes.SCHEMA);
  });
});

describe('wire - notice', () => {
  const notification = JSON.stringify({
    jsonrpc: '2.0',
    method: 'notifications/progress',
    params: { progressToken: 3, progress: 0.5, total: 1 },
  });

  it('round-trips {notice: {request_id, notification}}', () => {
    const m: WireMessage = { kind: 'notice', request_id: RID, notification };
    expect(decode(encodeWireMessage(m))).toEqual({ notice: { request_id: RID, notification } });
    expect(roundTrip(m)).toEqual(m);
  });

  it('refuses / a notification that is not the JSON text of an object with a string method', () => {
    for (const n of ['[]', '{"params":{}}', '{"method":3}', 'null', 'nope']) {
      expect(codeOf(() => decodeWireMessage(encode({ notice: { request_id: RID, notification: n } })))).toBe(ErrorCodes.SCHEMA);
    }
  });

  it('refuses / a notice whose request_id is not a content id, or with an unknown field', () => {
    expect(codeOf(() => decodeWireMessage(encode({ notice: { request_id: 'x', notification } })))).toBe(ErrorCodes.SCHEMA);
    expect(codeOf(() => decodeWireMessage(encode({ notice: { request_id: RID, notification, more: 1 } })))).toBe(ErrorCodes.SCHEMA);
  });
});

describe('wire - request notify: 1', () => {
  const plain = signWireRequestSync(unsigned(false, new Uint8Array([7])), bob);
  const noisy = signWireRequestSync(unsigned(true, new Uint8Array([7])), bob);

  it('round-trips, and a request without it decodes without it', () => {
    const back = decodeWireMessage(encodeWireRequest(noisy));
    expect(back).toEqual({ kind: 'request', request: noisy });
    expect(wireRequestToCbor(noisy)['notify']).toBe(1);
    const old = decodeWireMessage(encodeWireRequest(plain));
    expect(old.kind === 'request' && 'notify' in old.request).toBe(false);
  });

  it('is part of the signed bytes: dropping it breaks the signature and changes the request id', () => {
    expect(toHex(wireRequestSigningBytes(noisy))).not.toBe(toHex(wireRequestSigningBytes(plain)));
    expect(verifyWireRequestSignature(noisy)).toBe(true);
    const { notify: _n, ...stripped } = noisy;
    expect(verifyWireRequestSignature(stripped)).toBe(false);
    expect(requestIdOf(noisy)).not.toBe(requestIdOf(plain));
  });

  it('refuses / notify other than the unsigned integer 1', () => {
    for (const v of [0, 2, 'yes', new Uint8Array([1])]) {
      const body = encode({ ...wireRequestToCbor(noisy), notify: v });
      expect(codeOf(() => decodeWireMessage(body))).toBe(ErrorCodes.SCHEMA);
    }
  });

  it('the node splices the signed bytes from an 8-entry body (payload and notify) like it re-encodes them', () => {
    const body = encodeWireRequest(noisy);
    expect(body[0]).toBe(0xa8);
    expect(toHex(wireRequestSigningBytesOf(body, noisy))).toBe(toHex(wireRequestSigningBytes(noisy)));
  });

  it('the chain cache decodes a request with notify as the core decoder does, hit or miss', () => {
    const cache = new ChainCache();
    const body = encodeWireRequest(noisy);
    expect(cache.decode(body)).toEqual(decodeWireMessage(body));
    expect(cache.decode(body)).toEqual(decodeWireMessage(body));
    expect(cache.hits).toBe(1);
    const bad = encode({ ...wireRequestToCbor(noisy), notify: 2 });
    expect(codeOf(() => cache.decode(bad))).toBe(ErrorCodes.SCHEMA);
  });
});
