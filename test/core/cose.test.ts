/**
 * COSE_Sign1 (RFC 9052) against the cose-wg/Examples EdDSA files, read at test time from
 * test/vectors/third-party/cose-wg-examples (its SOURCE file), plus targeted refusals.
 *
 * How the Ed25519 example differs from a JCR-1 receipt (so it goes through the general layer,
 * not decodeJcrSign1): its protected header is `{1: -8, 3: 0}` (alg plus content type, no kid)
 * and its unprotected header carries `{4: h'3131'}` (kid "11"). Its bytes ARE canonical
 * det-CBOR, so the strict decoder accepts them; the JCR-1 profile refuses them (`cose-invalid`).
 */
import { fileURLToPath } from 'node:url';
import { VECTORS_DIR } from '../vectors/load.ts';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  actorFromSeed,
  COSE_ALG_EDDSA,
  decode,
  decodeJcrSign1,
  decodeSign1,
  ed25519KeyFromCose,
  encode,
  encodeProtectedHeader,
  encodeSign1,
  ErrorCodes,
  jcrProtectedHeader,
  publicKeyFromBytes,
  sign,
  signingKeyFromSeed,
  signSign1,
  sigStructure,
  Tagged,
  toHex,
  verifySign1,
} from '../../core/internal.ts';
import { codeOf } from '../support.ts';

const DIR = fileURLToPath(new URL('cose-wg-examples/', VECTORS_DIR));
const hex = (h: string) => new Uint8Array(Buffer.from(h, 'hex'));
const load = (name: string) => JSON.parse(readFileSync(join(DIR, name), 'utf8'));

const sig01 = load('eddsa-sig-01.json');
const sig02 = load('eddsa-sig-02.json');
const multi01 = load('eddsa-01.json');
const multi02 = load('eddsa-02.json');

describe('cose - cose-wg eddsa-sig-01 (Ed25519 Sign1)', () => {
  const bytes = hex(sig01.output.cbor);
  const key = sig01.input.sign0.key;
  const okp = { kty: key.kty, crv: key.crv, x: hex(key.x_hex) };

  it('decodes strictly: the example bytes are canonical det-CBOR', () => {
    const m = decodeSign1(bytes);
    expect(toHex(m.payload)).toBe(Buffer.from(sig01.input.plaintext).toString('hex'));
    expect(m.protectedHeader.get(1)).toBe(COSE_ALG_EDDSA);
    expect(m.unprotected.get(4)).toEqual(new Uint8Array(Buffer.from(key.kid)));
  });
  it('our Sig_structure equals the example ToBeSign bytes', () => {
    const m = decodeSign1(bytes);
    expect(toHex(sigStructure(m.protectedBytes, m.payload))).toBe(sig01.intermediates.ToBeSign_hex.toLowerCase());
  });
  it('verifies under the example key (as a COSE key and as a raw public key)', () => {
    const m = decodeSign1(bytes);
    expect(verifySign1(m, okp)).toBe(true);
    expect(verifySign1(m, publicKeyFromBytes(okp.x))).toBe(true);
  });
  it('re-signing with the example key reproduces the example bytes', () => {
    const m = decodeSign1(bytes);
    const again = signSign1(
      { protectedBytes: m.protectedBytes, unprotected: m.unprotected, payload: m.payload },
      signingKeyFromSeed(hex(key.d_hex)),
    );
    expect(toHex(again)).toBe(sig01.output.cbor.toLowerCase());
  });
  it('deny / the JCR-1 profile refuses it: no kid in the protected header, unprotected not empty', () => {
    expect(codeOf(() => decodeJcrSign1(bytes))).toBe(ErrorCodes.COSE_INVALID);
  });
  it('deny / one flipped payload bit no longer verifies', () => {
    const m = decodeSign1(bytes);
    const payload = new Uint8Array(m.payload);
    payload[0]! ^= 1;
    expect(verifySign1({ ...m, payload }, okp)).toBe(false);
  });
});

describe('cose - cose-wg eddsa-01 (Ed25519 COSE_Sign, one signer)', () => {
  it('its signer signature verifies over the RFC 9052 Signature structure', () => {
    const v = decode(hex(multi01.output.cbor), { tags: { 98: Tagged.decoder(98) }, useMaps: true }) as Tagged;
    const [bodyProt, , payload, signers] = v.value as [Uint8Array, unknown, Uint8Array, [Uint8Array, unknown, Uint8Array][]];
    const [signProt, , signature] = signers[0]!;
    const tbs = encode(['Signature', bodyProt, signProt, new Uint8Array(0), payload]);
    expect(toHex(tbs)).toBe(multi01.intermediates.signers[0].ToBeSign_hex.toLowerCase());
    const key = multi01.input.sign.signers[0].key;
    expect(toHex(sign(signingKeyFromSeed(hex(key.d_hex)), tbs))).toBe(toHex(signature));
  });
  it('deny / decodeSign1 refuses a COSE_Sign (tag 98) as cose-invalid', () => {
    expect(codeOf(() => decodeSign1(hex(multi01.output.cbor)))).toBe(ErrorCodes.COSE_INVALID);
  });
});

describe('cose - Ed448 examples are unsupported', () => {
  it('deny / eddsa-sig-02: the Ed448 key is refused cose-unsupported', () => {
    const key = sig02.input.sign0.key;
    const m = decodeSign1(hex(sig02.output.cbor));
    expect(codeOf(() => verifySign1(m, { kty: key.kty, crv: key.crv, x: hex(key.x_hex) }))).toBe(ErrorCodes.COSE_UNSUPPORTED);
  });
  it('deny / eddsa-sig-02: its 114-byte signature never verifies as Ed25519 under any key', () => {
    const m = decodeSign1(hex(sig02.output.cbor));
    expect(m.signature.length).toBe(114);
    expect(verifySign1(m, actorFromSeed(new Uint8Array(32).fill(7)).key.publicKey)).toBe(false);
  });
  it('deny / eddsa-02: the Ed448 signer key is refused cose-unsupported', () => {
    const key = multi02.input.sign.signers[0].key;
    expect(codeOf(() => ed25519KeyFromCose({ kty: key.kty, crv: key.crv, x: hex(key.x_hex) }))).toBe(ErrorCodes.COSE_UNSUPPORTED);
  });
});

describe('cose - strict decoding and the JCR-1 profile', () => {
  const actor = actorFromSeed(new Uint8Array(32).fill(1));
  const kid = new TextEncoder().encode(actor.did);
  const payload = encode({ a: 1 });
  const good = signSign1({ protectedBytes: jcrProtectedHeader(kid), payload }, actor.key);

  it('a JCR-1 message round-trips and verifies', () => {
    const { msg, kid: k } = decodeJcrSign1(good);
    expect(toHex(k)).toBe(toHex(kid));
    expect(verifySign1(msg, actor.key.publicKey)).toBe(true);
    expect(encodeSign1(msg)).toEqual(good);
  });
  it('a function signer (remote / threshold) produces the same bytes', () => {
    const viaFn = signSign1({ protectedBytes: jcrProtectedHeader(kid), payload }, (tbs) => sign(actor.key, tbs));
    expect(viaFn).toEqual(good);
  });
  it('deny / non-canonical outer bytes (tag 18 in long form) are refused before any signature check', () => {
    const long = new Uint8Array([0xd8, 0x12, ...good.subarray(1)]);
    expect(codeOf(() => decodeSign1(long))).toBe(ErrorCodes.CBOR_NON_CANONICAL);
  });
  it('deny / a non-canonical protected header is refused', () => {
    const prot = new Uint8Array([0xa2, 0x04, 0x41, 0x00, 0x01, 0x27]); // {4: h'00', 1: -8}: unsorted
    const bytes = encodeSign1({ protectedBytes: prot, unprotected: new Map(), payload, signature: new Uint8Array(64) });
    expect(codeOf(() => decodeSign1(bytes))).toBe(ErrorCodes.CBOR_NON_CANONICAL);
  });
  it.each([
    ['untagged array', encode([new Uint8Array(0), new Map(), payload, new Uint8Array(64)]), ErrorCodes.COSE_INVALID],
    ['tag 17 (COSE_Mac0)', encode(new Tagged(17, [new Uint8Array(0), new Map(), payload, new Uint8Array(64)])), ErrorCodes.COSE_INVALID],
    ['three items', encode(new Tagged(18, [new Uint8Array(0), new Map(), payload])), ErrorCodes.COSE_INVALID],
    ['protected as a map', encode(new Tagged(18, [new Map([[1, -8]]), new Map(), payload, new Uint8Array(64)])), ErrorCodes.COSE_INVALID],
    ['payload as text', encode(new Tagged(18, [new Uint8Array(0), new Map(), 'x', new Uint8Array(64)])), ErrorCodes.COSE_INVALID],
    [
      'empty protected map as a0',
      encodeSign1({ protectedBytes: hex('a0'), unprotected: new Map(), payload, signature: new Uint8Array(64) }),
      ErrorCodes.COSE_INVALID,
    ],
    ['empty input', new Uint8Array(0), ErrorCodes.CBOR_MALFORMED],
    ['truncated', good.subarray(0, good.length - 1), ErrorCodes.CBOR_MALFORMED],
  ])('deny / %s', (_what, bytes, code) => {
    expect(codeOf(() => decodeSign1(bytes))).toBe(code);
  });
  it('deny / alg only in the unprotected header does not count', () => {
    const bytes = encodeSign1({
      protectedBytes: encodeProtectedHeader(new Map([[4, kid]])),
      unprotected: new Map([[1, -8]]),
      payload,
      signature: new Uint8Array(64),
    });
    expect(codeOf(() => verifySign1(decodeSign1(bytes), actor.key.publicKey))).toBe(ErrorCodes.COSE_INVALID);
  });
  it.each([
    ['ES256 (-7)', -7],
    ['Ed25519 fully specified (-19)', -19],
    ['alg as text', 'EdDSA'],
  ])('deny / protected alg %s is unsupported', (_what, alg) => {
    const prot = encodeProtectedHeader(
      new Map<number, unknown>([
        [1, alg],
        [4, kid],
      ]),
    );
    const bytes = encodeSign1({ protectedBytes: prot, unprotected: new Map(), payload, signature: new Uint8Array(64) });
    expect(codeOf(() => decodeJcrSign1(bytes))).toBe(ErrorCodes.COSE_UNSUPPORTED);
    expect(codeOf(() => signSign1({ protectedBytes: prot, payload }, actor.key))).toBe(ErrorCodes.COSE_UNSUPPORTED);
  });
  it('deny / a crit parameter is unsupported', () => {
    const prot = encodeProtectedHeader(
      new Map<number, unknown>([
        [1, -8],
        [2, [99]],
        [4, kid],
      ]),
    );
    const bytes = encodeSign1({ protectedBytes: prot, unprotected: new Map(), payload, signature: new Uint8Array(64) });
    expect(codeOf(() => decodeJcrSign1(bytes))).toBe(ErrorCodes.COSE_UNSUPPORTED);
  });
  it('deny / JCR-1 refuses a non-empty unprotected header and extra protected parameters', () => {
    const withUnprot = signSign1({ protectedBytes: jcrProtectedHeader(kid), unprotected: new Map([[3, 0]]), payload }, actor.key);
    expect(codeOf(() => decodeJcrSign1(withUnprot))).toBe(ErrorCodes.COSE_INVALID);
    const extra = encodeProtectedHeader(
      new Map<number, unknown>([
        [1, -8],
        [3, 0],
        [4, kid],
      ]),
    );
    expect(codeOf(() => decodeJcrSign1(signSign1({ protectedBytes: extra, payload }, actor.key)))).toBe(ErrorCodes.COSE_INVALID);
  });
  it('deny / a label in both headers is refused', () => {
    const bytes = signSign1({ protectedBytes: jcrProtectedHeader(kid), unprotected: new Map([[4, kid]]), payload }, actor.key);
    expect(codeOf(() => decodeSign1(bytes))).toBe(ErrorCodes.COSE_INVALID);
  });
  it('deny / a signature from another key does not verify', () => {
    const other = actorFromSeed(new Uint8Array(32).fill(2));
    const forged = signSign1({ protectedBytes: jcrProtectedHeader(kid), payload }, other.key);
    expect(verifySign1(decodeSign1(forged), actor.key.publicKey)).toBe(false);
  });
});
