/**
 * web5-js Ed25519 sign/verify vectors (TBD54566975/web5-js `test-vectors/crypto_ed25519/`):
 * keys come as RFC 8037 JWKs, read by `signingKeyFromJwk`/`publicKeyFromJwk` (base64url to raw
 * bytes), signing goes through `signingKeyFromSeed` + `sign`, verification through `verify`.
 */
import { base64urlnopad } from '@scure/base';
import { describe, expect, it } from 'vitest';
import { JcpError, publicKeyFromJwk, sign, signingKeyFromJwk, signingKeyFromSeed, verify } from '../../core/internal.ts';
import { hex, vectorJson } from './load.ts';

interface Jwk {
  kty: string;
  crv: string;
  x: string;
  d?: string;
}
interface SignVector {
  description: string;
  input: { data: string; key: Jwk };
  output?: string;
  errors: boolean;
}
interface VerifyVector {
  description: string;
  input: { data: string; key: Jwk; signature: string };
  output?: boolean;
  errors: boolean;
}

const signVectors = vectorJson<{ vectors: SignVector[] }>('web5-js-ed25519/sign.json').vectors;
const verifyVectors = vectorJson<{ vectors: VerifyVector[] }>('web5-js-ed25519/verify.json').vectors;
const toHex = (b: Uint8Array) => Buffer.from(b).toString('hex');

describe('web5 ed25519 - sign', () => {
  it.each(signVectors.filter((v) => !v.errors))('$description', (v) => {
    const viaJwk = signingKeyFromJwk(v.input.key);
    const viaSeed = signingKeyFromSeed(base64urlnopad.decode(v.input.key.d!));
    expect(toHex(viaSeed.publicKey.bytes)).toBe(toHex(base64urlnopad.decode(v.input.key.x)));
    expect(toHex(sign(viaSeed, hex(v.input.data)))).toBe(v.output);
    expect(toHex(sign(viaJwk, hex(v.input.data)))).toBe(v.output);
  });
  it.each(signVectors.filter((v) => v.errors))('errors: $description', (v) => {
    expect(() => signingKeyFromJwk(v.input.key)).toThrow(JcpError);
  });
});

describe('web5 ed25519 - verify', () => {
  it.each(verifyVectors.filter((v) => !v.errors))('$description → $output', (v) => {
    const pub = publicKeyFromJwk(v.input.key);
    expect(verify(pub, hex(v.input.data), hex(v.input.signature))).toBe(v.output);
  });
  it.each(verifyVectors.filter((v) => v.errors))('errors: $description', (v) => {
    expect(() => publicKeyFromJwk(v.input.key)).toThrow(JcpError);
  });
  it('has good and bad verdicts and error cases in the file', () => {
    expect(verifyVectors.filter((v) => v.output === true).length).toBe(4);
    expect(verifyVectors.filter((v) => v.output === false).length).toBe(3);
    expect(verifyVectors.filter((v) => v.errors).length + signVectors.filter((v) => v.errors).length).toBe(2);
  });
});

describe('web5 ed25519 - JWK refusals', () => {
  const good = signVectors[0]!.input.key;
  it.each([
    ['not an object', 'x', 'schema'],
    ['wrong curve', { ...good, crv: 'Ed448' }, 'schema'],
    ['wrong key type', { ...good, kty: 'EC' }, 'schema'],
    ['x missing', { kty: 'OKP', crv: 'Ed25519' }, 'schema'],
    ['x padded base64url', { kty: 'OKP', crv: 'Ed25519', x: `${good.x}=` }, 'bad-length'],
    ['x of 31 bytes', { kty: 'OKP', crv: 'Ed25519', x: base64urlnopad.encode(new Uint8Array(31)) }, 'bad-length'],
    ['x a small-order point', { kty: 'OKP', crv: 'Ed25519', x: base64urlnopad.encode(new Uint8Array(32)) }, 'did-invalid'],
  ] as const)('public key refused: %s (%s)', (_what, jwk, code) => {
    expect(() => publicKeyFromJwk(jwk)).toThrow(expect.objectContaining({ code }));
  });
  it('signing key refused when x does not match d', () => {
    const other = signVectors[1]!.input.key;
    expect(() => signingKeyFromJwk({ ...good, x: other.x })).toThrow(expect.objectContaining({ code: 'schema' }));
  });
});
