/**
 * COSE_Sign1 (RFC 9052 §4.2, §4.4) for EdDSA over Ed25519 (RFC 9053 §2.2), as the JCR-1 receipt
 * envelope uses it (spec §8, docs/design.md "Encodings").
 *
 * Two layers, as noble splits generic from concrete:
 * - the general Sign1 layer here ({@link decodeSign1}, {@link verifySign1}, {@link signSign1})
 *   accepts any well-formed, canonically encoded tagged COSE_Sign1 whose protected header names
 *   EdDSA, so third-party examples (cose-wg/Examples) can be checked byte for byte;
 * - the JCR-1 profile ({@link decodeJcrSign1}) additionally requires the protected header to be
 *   exactly `{1: -8, 4: kid}` and the unprotected header to be empty. `core/receipt.ts` uses it.
 *
 * Policy (spec §8):
 * - the algorithm is taken ONLY from the protected header; an `alg` that appears only in the
 *   unprotected header does not count, and anything but EdDSA (-8) is `cose-unsupported`;
 * - the structure's own bytes must be canonical det-CBOR (§3), and so must the serialized
 *   protected header: both are checked while decoding, i.e. before any signature check;
 * - only Ed25519 keys: an OKP key on another curve (Ed448) is `cose-unsupported`;
 * - `crit` (label 2) is refused (`cose-unsupported`): we understand no extension parameters.
 */
import { concatItems, decode, encode, headBytes, itemAt, leadingTag, MAJOR, readString, Tagged } from './cbor.ts';
import { type PublicKey, publicKeyFromBytes, type SigningKey, sign, verify } from './ed25519.ts';
import { ErrorCodes, JcpError } from './errors.ts';

/** CBOR tag of a COSE_Sign1 message (RFC 9052 §2). */
export const COSE_SIGN1_TAG = 18;
/** COSE algorithm identifier of EdDSA (RFC 9053 §2.2). */
export const COSE_ALG_EDDSA = -8;
/** Header label `alg` (RFC 9052 §3.1). */
export const COSE_HEADER_ALG = 1;
/** Header label `crit` (RFC 9052 §3.1). */
export const COSE_HEADER_CRIT = 2;
/** Header label `kid` (RFC 9052 §3.1). */
export const COSE_HEADER_KID = 4;

/** A decoded COSE header map; labels are integers or text (RFC 9052 §3). */
export type HeaderMap = ReadonlyMap<number | string, unknown>;

/** A decoded COSE_Sign1 (RFC 9052 §4.2). */
export interface CoseSign1 {
  /** The serialized protected header exactly as carried (the bstr contents; empty = no header). */
  readonly protectedBytes: Uint8Array;
  /** The protected header, decoded from {@link protectedBytes}. */
  readonly protectedHeader: HeaderMap;
  /** The unprotected header map. */
  readonly unprotected: HeaderMap;
  /** The payload bytes (attached; a detached `nil` payload is refused). */
  readonly payload: Uint8Array;
  /** The signature bytes. */
  readonly signature: Uint8Array;
}

/** An OKP COSE key as the cose-wg examples and RFC 9053 §7.2 describe it (public part only). */
export interface CoseOkpKey {
  /** Key type; only `OKP` is supported. */
  readonly kty: string;
  /** Curve name; only `Ed25519` is supported. */
  readonly crv: string;
  /** The public key bytes. */
  readonly x: Uint8Array;
}

/** Who signs a Sig_structure: a local Ed25519 key, or a function (a remote or threshold signer). */
export type Sign1Signer = SigningKey | ((toBeSigned: Uint8Array) => Uint8Array);

const EMPTY = new Uint8Array(0);
const NO_HEADERS: HeaderMap = new Map();
const SIGN1_TAGS = { [COSE_SIGN1_TAG]: Tagged.decoder(COSE_SIGN1_TAG) };

function invalid(why: string): never {
  throw new JcpError(ErrorCodes.COSE_INVALID, `COSE_Sign1: ${why}`);
}

function unsupported(why: string): never {
  throw new JcpError(ErrorCodes.COSE_UNSUPPORTED, `COSE: ${why}`);
}

/**
 * The bytes to be signed: `Sig_structure = ["Signature1", body_protected, external_aad, payload]`
 * encoded as canonical CBOR (RFC 9052 §4.4). JCR-1 uses an empty `external_aad`.
 */
export function sigStructure(protectedBytes: Uint8Array, payload: Uint8Array, externalAad: Uint8Array = EMPTY): Uint8Array {
  // Assembled by hand (it is on the sealing hot path); equal to encode([...]) — tested against it
  // and against the cose-wg ToBeSign bytes.
  return concatItems([SIG1_PREFIX, { bstr: protectedBytes }, { bstr: externalAad }, { bstr: payload }]);
}

/** `0x84` (array of 4) ‖ `"Signature1"` as a CBOR text string. */
const SIG1_PREFIX = concatItems([headBytes(MAJOR.array, 4), encode('Signature1')]);

/**
 * Serializes a protected header (RFC 9052 §3): canonical det-CBOR of the map, or the empty byte
 * string when there are no parameters.
 * @throws JcpError `cbor-forbidden-type` for values a det-CBOR map may not hold.
 */
export function encodeProtectedHeader(header: HeaderMap): Uint8Array {
  return header.size === 0 ? EMPTY : encode(header);
}

/** The JCR-1 protected header `{1: -8, 4: kid}` serialized (spec §8, docs/design.md "Encodings"). */
export function jcrProtectedHeader(kid: Uint8Array): Uint8Array {
  return encode(
    new Map<number, unknown>([
      [COSE_HEADER_ALG, COSE_ALG_EDDSA],
      [COSE_HEADER_KID, kid],
    ]),
  );
}

/** Encodes a COSE_Sign1 as tagged canonical CBOR `18([protected, unprotected, payload, signature])`. */
export function encodeSign1(m: Omit<CoseSign1, 'protectedHeader'>): Uint8Array {
  if (m.unprotected.size > 0) {
    return encode(new Tagged(COSE_SIGN1_TAG, [m.protectedBytes, m.unprotected, m.payload, m.signature]));
  }
  // The JCR-1 shape (empty unprotected map), assembled by hand for the sealing hot path.
  return concatItems([SIGN1_HEAD, { bstr: m.protectedBytes }, EMPTY_MAP, { bstr: m.payload }, { bstr: m.signature }]);
}

/** `0xd2` (tag 18) ‖ `0x84` (array of 4). */
const SIGN1_HEAD = concatItems([headBytes(MAJOR.tag, COSE_SIGN1_TAG), headBytes(MAJOR.array, 4)]);
/** `0xa0`, the empty map. */
const EMPTY_MAP = headBytes(MAJOR.map, 0);

/**
 * Signs `payload` as a tagged COSE_Sign1 (RFC 9052 §4.4) with EdDSA/Ed25519.
 * The protected header must name EdDSA (so we never produce what {@link verifySign1} refuses).
 * @throws JcpError `cose-unsupported` when the protected header's alg is not EdDSA;
 *   `cbor-*` when the header is not canonical det-CBOR.
 */
export function signSign1(
  parts: { protectedBytes: Uint8Array; unprotected?: HeaderMap; payload: Uint8Array },
  signer: Sign1Signer,
): Uint8Array {
  const header = decodeProtectedHeader(parts.protectedBytes);
  requireEdDsa(header);
  const tbs = sigStructure(parts.protectedBytes, parts.payload);
  const signature = typeof signer === 'function' ? signer(tbs) : sign(signer, tbs);
  return encodeSign1({ ...parts, unprotected: parts.unprotected ?? NO_HEADERS, signature });
}

/**
 * Decodes a serialized protected header strictly: empty bytes = no parameters; otherwise a
 * canonical det-CBOR map (RFC 9052 §3: an empty map must be sent as the empty byte string).
 * @throws JcpError `cbor-*` (not canonical det-CBOR), `cose-invalid` (not a map, or `a0`).
 */
export function decodeProtectedHeader(bytes: Uint8Array): HeaderMap {
  if (bytes.length === 0) return NO_HEADERS;
  const v = decode(bytes, { useMaps: true });
  if (!(v instanceof Map)) invalid('protected header is not a map');
  if (v.size === 0) invalid('an empty protected header must be the empty byte string, not a0');
  return v as HeaderMap;
}

/**
 * Decodes a tagged COSE_Sign1 strictly (RFC 9052 §4.2). The bytes must be the canonical det-CBOR
 * encoding (§3) of `18([bstr, map, bstr, bstr])`; the protected header must be canonical too, and
 * no label may appear in both headers (RFC 9052 §3). No signature is checked here.
 * @throws JcpError `cbor-malformed` / `cbor-non-canonical` / `cbor-forbidden-type` (bytes),
 *   `cose-invalid` (untagged, a tag other than 18, wrong shape or types, duplicated label).
 */
export function decodeSign1(bytes: Uint8Array): CoseSign1 {
  if (!(bytes instanceof Uint8Array) || bytes.length === 0) {
    throw new JcpError(ErrorCodes.CBOR_MALFORMED, 'COSE_Sign1: empty input');
  }
  // Decode strictly first (so a byte-level fault is always reported as such), preserving
  // whatever tag leads the item so that a wrong tag is then reported as a COSE fault.
  const tag = leadingTag(bytes);
  const tags = tag === undefined || tag === COSE_SIGN1_TAG || tag > 0xffff_ffff ? SIGN1_TAGS : { [tag]: Tagged.decoder(tag) };
  const v = decode(bytes, { tags, useMaps: true });
  if (!(v instanceof Tagged)) invalid('not tagged (JCR-1 requires tag 18, COSE_Sign1)');
  if (v.tag !== COSE_SIGN1_TAG) invalid(`tag ${v.tag} is not 18 (COSE_Sign1)`);
  const a = v.value as unknown;
  if (!Array.isArray(a) || a.length !== 4) invalid('expected an array of 4 items');
  const [p, u, payload, signature] = a as [unknown, unknown, unknown, unknown];
  if (!(p instanceof Uint8Array)) invalid('protected header is not a byte string');
  if (!(u instanceof Map)) invalid('unprotected header is not a map');
  if (!(payload instanceof Uint8Array)) invalid('payload is not a byte string');
  if (!(signature instanceof Uint8Array)) invalid('signature is not a byte string');
  const protectedHeader = decodeProtectedHeader(p);
  for (const k of u.keys()) if (protectedHeader.has(k)) invalid(`header label ${String(k)} is in both headers`);
  return { protectedBytes: p, protectedHeader, unprotected: u as HeaderMap, payload, signature };
}

/**
 * Decodes a COSE_Sign1 under the JCR-1 profile (spec §8): {@link decodeSign1}, then the protected
 * header must be exactly `{1: -8, 4: kid}` with a byte-string kid and the unprotected header empty.
 * @returns the message and its kid bytes.
 * @throws JcpError as {@link decodeSign1}; `cose-unsupported` (alg not EdDSA, crit present);
 *   `cose-invalid` (alg missing, other parameters, unprotected parameters, kid not bytes).
 */
export function decodeJcrSign1(bytes: Uint8Array): { msg: CoseSign1; kid: Uint8Array } {
  const msg = fastJcrSign1(bytes) ?? decodeSign1(bytes);
  requireEdDsa(msg.protectedHeader);
  const kid = msg.protectedHeader.get(COSE_HEADER_KID);
  if (!(kid instanceof Uint8Array)) invalid('JCR-1 protected header must carry kid (label 4) as a byte string');
  if (msg.protectedHeader.size !== 2) invalid('JCR-1 protected header must be exactly {1: -8, 4: kid}');
  if (msg.unprotected.size !== 0) invalid('JCR-1 unprotected header must be empty');
  return { msg, kid };
}

const headerCache = new Map<string, HeaderMap>();

/**
 * The JCR-1 fast path: `d2 84 <bstr protected> a0 <bstr payload> <bstr signature>` with
 * shortest-form heads and nothing after. Such bytes are exactly the canonical encoding of their
 * value, so this accepts nothing {@link decodeSign1} would refuse; anything else returns
 * undefined and goes through {@link decodeSign1} for the precise refusal. Protected headers are
 * decoded strictly once and cached by their bytes.
 */
function fastJcrSign1(bytes: Uint8Array): CoseSign1 | undefined {
  const parts = jcrSign1Parts(bytes);
  if (parts === undefined) return undefined;
  const { protectedBytes, payload, signature } = parts;
  const key = Buffer.from(protectedBytes.buffer, protectedBytes.byteOffset, protectedBytes.length).toString('latin1');
  let protectedHeader = headerCache.get(key);
  if (protectedHeader === undefined) {
    protectedHeader = decodeProtectedHeader(protectedBytes);
    if (headerCache.size > 10_000) headerCache.clear();
    headerCache.set(key, protectedHeader);
  }
  return { protectedBytes, protectedHeader, unprotected: NO_HEADERS, payload, signature };
}

/**
 * The three byte strings of a COSE_Sign1 in the JCR-1 shape `d2 84 <bstr protected> a0
 * <bstr payload> <bstr signature>` (shortest-form heads, nothing after), as views of `bytes`;
 * undefined for any other bytes. The protected header is not decoded: a caller that knows the
 * header it expects compares its bytes (core/receipt.ts `readOwnReceipt`). Never throws.
 */
export function jcrSign1Parts(
  bytes: Uint8Array,
): { readonly protectedBytes: Uint8Array; readonly payload: Uint8Array; readonly signature: Uint8Array } | undefined {
  if (!(bytes instanceof Uint8Array) || bytes.length < 4 || !itemAt(bytes, 0, SIGN1_HEAD)) return undefined;
  const p = readString(bytes, SIGN1_HEAD.length, MAJOR.bytes);
  if (!p || !itemAt(bytes, p.end, EMPTY_MAP)) return undefined;
  const payload = readString(bytes, p.end + 1, MAJOR.bytes);
  if (!payload) return undefined;
  const sig = readString(bytes, payload.end, MAJOR.bytes);
  if (!sig || sig.end !== bytes.length) return undefined;
  return {
    protectedBytes: bytes.subarray(p.start, p.end),
    payload: bytes.subarray(payload.start, payload.end),
    signature: bytes.subarray(sig.start, sig.end),
  };
}

/**
 * The algorithm from the protected header only (RFC 9052 §3.1), which must be EdDSA (-8).
 * @throws JcpError `cose-invalid` (no alg in the protected header), `cose-unsupported` (another
 *   alg, or a `crit` parameter we cannot honour).
 */
export function requireEdDsa(protectedHeader: HeaderMap): void {
  if (protectedHeader.has(COSE_HEADER_CRIT)) unsupported('crit parameters are not supported');
  if (!protectedHeader.has(COSE_HEADER_ALG)) invalid('alg must be in the protected header');
  const alg = protectedHeader.get(COSE_HEADER_ALG);
  if (alg !== COSE_ALG_EDDSA) unsupported(`alg ${String(alg)} is not EdDSA (-8)`);
}

/**
 * Imports an OKP COSE key as an Ed25519 public key (RFC 9053 §7.2).
 * @throws JcpError `cose-unsupported` (kty not OKP, or a curve other than Ed25519, e.g. Ed448);
 *   `bad-length` / `did-invalid` (not a valid Ed25519 point under our key policy).
 */
export function ed25519KeyFromCose(key: CoseOkpKey): PublicKey {
  if (key.kty !== 'OKP') unsupported(`key type ${key.kty} is not OKP`);
  if (key.crv !== 'Ed25519') unsupported(`curve ${key.crv} is not supported (Ed25519 only)`);
  return publicKeyFromBytes(key.x);
}

/**
 * Verifies a decoded COSE_Sign1 (RFC 9052 §4.4) under an Ed25519 key. The algorithm is read
 * from the protected header only and must be EdDSA. Returns false when the signature does not
 * verify (wrong key, tampered bytes, S ≥ L, wrong length).
 * @throws JcpError `cose-unsupported` (alg not EdDSA, crit present, key not Ed25519),
 *   `cose-invalid` (no alg in the protected header).
 */
export function verifySign1(msg: CoseSign1, key: PublicKey | CoseOkpKey, externalAad: Uint8Array = EMPTY): boolean {
  requireEdDsa(msg.protectedHeader);
  const pub = 'keyObject' in key ? key : ed25519KeyFromCose(key);
  return verify(pub, sigStructure(msg.protectedBytes, msg.payload, externalAad), msg.signature);
}
