/**
 * did:key vectors (w3c-ccg/did-method-key `test-vectors/ed25519-x25519.json`): each seed gives its
 * DID through `actorFromSeed`, `parseDid` yields the published key and round-trips; then targeted
 * refusals, all with code `did-invalid` (spec §2).
 */
import { base58, base64urlnopad } from '@scure/base';
import { describe, expect, it } from 'vitest';
import { actorFromSeed, didFromPublicKey, ErrorCodes, isDid, parseDid } from '../../core/index.ts';
import { hex, vectorJson } from './load.ts';

interface DidVector {
  seed: string;
  verificationKeyPair: { publicKeyBase58?: string; publicKeyJwk?: { x: string } };
  keyAgreementKeyPair: { id: string };
}
const vectors = Object.entries(vectorJson<Record<string, DidVector>>('did-method-key/ed25519-x25519.json'));
const toHex = (b: Uint8Array) => Buffer.from(b).toString('hex');

describe('did:key - published vectors', () => {
  it('has the five published seeds', () => {
    expect(vectors.map(([, v]) => v.seed.slice(-1))).toEqual(['0', '1', '2', '3', '5']);
  });
  it.each(vectors.map(([did, v]) => ({ did, v })))('seed …$v.seed gives $did', ({ did, v }) => {
    const actor = actorFromSeed(hex(v.seed));
    expect(actor.did).toBe(did);
    const pub = parseDid(did);
    const published = v.verificationKeyPair.publicKeyBase58
      ? base58.decode(v.verificationKeyPair.publicKeyBase58)
      : base64urlnopad.decode(v.verificationKeyPair.publicKeyJwk!.x);
    expect(toHex(pub.bytes)).toBe(toHex(published));
    expect(toHex(pub.bytes)).toBe(toHex(actor.key.publicKey.bytes));
    expect(didFromPublicKey(pub)).toBe(did);
    expect(isDid(did)).toBe(true);
  });
});

describe('did:key - refusals', () => {
  const [firstDid, first] = vectors[0]!;
  const key = parseDid(firstDid).bytes;
  const P = 2n ** 255n - 19n;
  const le32 = (v: bigint) => Uint8Array.from({ length: 32 }, (_, i) => Number((v >> BigInt(8 * i)) & 0xffn));
  const didOf = (bytes: Uint8Array) => `did:key:z${base58.encode(bytes)}`;
  const withCodec = (c0: number, c1: number, k: Uint8Array) => didOf(Uint8Array.from([c0, c1, ...k]));
  const x25519Did = `did:key:${first.keyAgreementKeyPair.id.replace(/^#/, '')}`;

  it.each([
    ['the X25519 multicodec 0xec01 (the vector’s own key-agreement DID)', x25519Did],
    ['multicodec 0xed00', withCodec(0xed, 0x00, key)],
    ['multicodec 0xee01', withCodec(0xee, 0x01, key)],
    ['no multicodec at all', didOf(key)],
    ['a 31-byte key', withCodec(0xed, 0x01, key.subarray(0, 31))],
    ['a 33-byte key', withCodec(0xed, 0x01, Uint8Array.from([...key, 0]))],
    ['the identity point (small order)', withCodec(0xed, 0x01, le32(1n))],
    ['a point of order 4 (small order)', withCodec(0xed, 0x01, le32(0n))],
    ['a non-canonical y (p + 3, a mixed-order point when reduced)', withCodec(0xed, 0x01, le32(P + 3n))],
    ['y = p (non-canonical, reduces to small order)', withCodec(0xed, 0x01, le32(P))],
    ['a y with no point on the curve', withCodec(0xed, 0x01, le32(2n))],
    ['a 0 in the base58 text', `${firstDid.slice(0, -1)}0`],
    ['an l in the base58 text', `${firstDid.slice(0, -1)}l`],
    ['a non-canonical base58 (leading 1 = extra zero byte)', `did:key:z1${firstDid.slice('did:key:z'.length)}`],
    ['base64url multibase (u)', `did:key:u${base64urlnopad.encode(Uint8Array.from([0xed, 0x01, ...key]))}`],
    ['base16 multibase (f)', `did:key:f${toHex(Uint8Array.from([0xed, 0x01, ...key]))}`],
    ['no multibase prefix', `did:key:${firstDid.slice('did:key:z'.length)}`],
    ['another DID method', firstDid.replace('did:key:', 'did:web:')],
    ['upper-case scheme', firstDid.replace('did:key:', 'DID:KEY:')],
    ['an empty string', ''],
    ['a number', 42],
    ['trailing whitespace', `${firstDid} `],
  ] as const)('refuses %s', (_what, did) => {
    expect(() => parseDid(did)).toThrow(expect.objectContaining({ code: ErrorCodes.DID_INVALID }));
    expect(isDid(did)).toBe(false);
  });

  it('accepts a mixed-order key (y = 3): canonical and not of small order', () => {
    const did = withCodec(0xed, 0x01, le32(3n));
    expect(toHex(parseDid(did).bytes)).toBe(toHex(le32(3n)));
  });
});
