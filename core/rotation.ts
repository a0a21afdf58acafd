/**
 * Identity continuity by pre-committed key rotation (spec §2.1 OPTIONAL, conformance C12).
 *
 * An identity is its inception did:key, forever; the key that controls it rotates through a
 * verified log of {@link KeyEvent}s, each `{body, signature}` over `canonical_cbor(body)`
 * (docs/design.md "Encodings"). Event 0 (inception) is signed by the identity key and its `current` is
 * the identity. Event N is signed by its new `current` key, whose 32 public bytes must hash
 * (BLAKE3, lowercase hex) to event N−1's `next_hash`: possession of the pre-committed key is the
 * proof of control. A thief holding only the current key cannot rotate the identity away; an
 * owner who lost the current key but holds the pre-committed one can.
 */
import type { Actor } from './actor.ts';
import { toHex } from './bytes.ts';
import { type Did, parseDid } from './didkey.ts';
import { check } from './errors.ts';
import { blake3, type ContentId, contentId } from './hash.ts';
import { type Result, err, ok } from './result.ts';
import { asBytes, asCid, asDid, asObj, asSafeUint, type Obj } from './schema.ts';
import { readSigned, type Signed, signBody, verifyBody } from './signed.ts';

/** One event of an identity's key log (§2.1). */
export interface KeyEvent {
  /** The seq-0 (inception) did:key, stable for life. */
  readonly identity: Did;
  /** 0 = inception, N = the Nth rotation. */
  readonly seq: number;
  /** The controlling key from this event on; the event's signer. */
  readonly current: Did;
  /** blake3 of the NEXT key's 32 public bytes, lowercase hex (the pre-commitment). */
  readonly next_hash: ContentId;
  /** The previous event's id; absent at inception. */
  readonly parent?: ContentId;
  /** 16 bytes. */
  readonly nonce: Uint8Array;
}

/** A key event signed by its `current` key over `canonical_cbor(event)`. */
export type SignedKeyEvent = Signed<KeyEvent>;

/**
 * The pre-commitment of a key: lowercase hex of blake3 over its 32 raw public bytes (not over
 * their CBOR encoding).
 * @throws JcpError `did-invalid` (a bad did:key) / `bad-length` (not 32 bytes)
 */
export function nextKeyHash(key: Did | Uint8Array): ContentId {
  const bytes = typeof key === 'string' ? parseDid(key).bytes : key;
  check(bytes.length === 32, 'next_key', 'expected 32 Ed25519 public-key bytes');
  return toHex(blake3(bytes));
}

/** The plain CBOR map of a key event (parent omitted when absent). */
export function keyEventToCbor(e: KeyEvent): Obj {
  const o: Obj = { identity: e.identity, seq: e.seq, current: e.current, next_hash: e.next_hash, nonce: e.nonce };
  if (e.parent !== undefined) o['parent'] = e.parent;
  return o;
}

/** The plain CBOR map of a signed key event. */
export function signedKeyEventToCbor(se: SignedKeyEvent): Obj {
  return { body: keyEventToCbor(se.body), signature: se.signature };
}

/** A key event's id: the content id of its body (what the next event's `parent` names). */
export function keyEventId(se: SignedKeyEvent): ContentId {
  return contentId(keyEventToCbor(se.body));
}

/**
 * Reads a decoded CBOR map as a KeyEvent.
 * @throws JcpError `schema` / `did-invalid` / `bad-length`, naming the field.
 */
export function readKeyEvent(v: unknown, field = 'key_event'): KeyEvent {
  const o = asObj(v, field, ['identity', 'seq', 'current', 'next_hash', 'nonce'], ['parent']);
  return {
    identity: asDid(o['identity'], `${field}.identity`),
    seq: asSafeUint(o['seq'], `${field}.seq`),
    current: asDid(o['current'], `${field}.current`),
    next_hash: asCid(o['next_hash'], `${field}.next_hash`),
    ...(o['parent'] !== undefined ? { parent: asCid(o['parent'], `${field}.parent`) } : {}),
    nonce: asBytes(o['nonce'], `${field}.nonce`, 16),
  };
}

/** Reads a decoded `{body, signature}` map as a signed key event (signature not checked). */
export function readSignedKeyEvent(v: unknown, field = 'signed_key_event'): SignedKeyEvent {
  const s = readSigned(v, field);
  return { body: readKeyEvent(s.body, `${field}.body`), signature: s.signature };
}

/**
 * The inception event of `identity` (§2.1): seq 0, current = identity, committing to `next`
 * (the next key's did:key or 32 public bytes), signed by the identity key.
 */
export function inception(identity: Actor, next: Did | Uint8Array, nonce: Uint8Array): SignedKeyEvent {
  const body: KeyEvent = { identity: identity.did, seq: 0, current: identity.did, next_hash: nextKeyHash(next), nonce };
  return signBody(body, identity);
}

/**
 * The rotation after `prev` (§2.1): seq + 1, parent = prev's id, current = `newCurrent` (which
 * must be the key `prev` pre-committed to), committing to `next`, signed by `newCurrent`.
 * Refusal: `next-hash-mismatch` (newCurrent is not the pre-committed key).
 */
export function rotate(
  prev: SignedKeyEvent,
  newCurrent: Actor,
  next: Did | Uint8Array,
  nonce: Uint8Array,
): Result<SignedKeyEvent, RotationRefusal> {
  if (nextKeyHash(newCurrent.key.publicKey.bytes) !== prev.body.next_hash) {
    return err({ code: RotationRefusals.NEXT_HASH_MISMATCH, index: prev.body.seq + 1, why: 'the new key is not the pre-committed one' });
  }
  const body: KeyEvent = {
    identity: prev.body.identity,
    seq: prev.body.seq + 1,
    current: newCurrent.did,
    next_hash: nextKeyHash(next),
    parent: keyEventId(prev),
    nonce,
  };
  return ok(signBody(body, newCurrent));
}

/** Refusal codes of key-log verification, one per distinct fault (§2.1, C12). */
export const RotationRefusals = {
  /** The log has no events. */
  EMPTY_LOG: 'empty-log',
  /** The inception's `current` is not its `identity`. */
  INCEPTION_NOT_IDENTITY: 'inception-not-identity',
  /** An event names another identity than the inception's. */
  IDENTITY_MISMATCH: 'identity-mismatch',
  /** `seq` is not 0 at inception, or not the previous seq + 1. */
  SEQUENCE_GAP: 'sequence-gap',
  /** `parent` is not the previous event's id (or is present at inception). */
  PARENT_MISMATCH: 'parent-mismatch',
  /** The new `current` key does not hash to the previous event's `next_hash`. */
  NEXT_HASH_MISMATCH: 'next-hash-mismatch',
  /** The event's signature does not verify under its `current` key. */
  BAD_SIGNATURE: 'bad-signature',
} as const;

/** One of {@link RotationRefusals}. */
export type RotationRefusalCode = (typeof RotationRefusals)[keyof typeof RotationRefusals];

/** Why a key log does not verify: the code, the index of the failing event, and a note for people. */
export interface RotationRefusal {
  readonly code: RotationRefusalCode;
  readonly index: number;
  readonly why: string;
}

/** The verified state of an identity after a key log. */
export interface KeyState {
  /** The stable identity DID (the inception DID). */
  readonly identity: Did;
  /** The key in control now. */
  readonly current: Did;
  /** The last event's seq. */
  readonly seq: number;
  /** The pre-commitment the next rotation must meet. */
  readonly next_hash: ContentId;
  /** The last event's id (the next event's parent). */
  readonly head: ContentId;
}

function hashOfDid(did: Did): ContentId | undefined {
  try {
    return nextKeyHash(did);
  } catch {
    return undefined;
  }
}

/**
 * Verifies one more event on top of `state` (undefined = the event must be an inception), for a
 * verifier following a log incrementally (§2.1). `index` is only used in the refusal.
 * Refusals: `inception-not-identity`, `identity-mismatch`, `sequence-gap`, `parent-mismatch`,
 * `next-hash-mismatch`, `bad-signature`.
 */
export function advanceKeyState(
  state: KeyState | undefined,
  se: SignedKeyEvent,
  index = state === undefined ? 0 : state.seq + 1,
): Result<KeyState, RotationRefusal> {
  const e = se.body;
  const refuse = (code: RotationRefusalCode, why: string) => err({ code, index, why });
  if (state === undefined) {
    if (e.seq !== 0) return refuse(RotationRefusals.SEQUENCE_GAP, `inception has seq ${e.seq}, not 0`);
    if (e.parent !== undefined) return refuse(RotationRefusals.PARENT_MISMATCH, 'inception has a parent');
    if (e.current !== e.identity) return refuse(RotationRefusals.INCEPTION_NOT_IDENTITY, 'inception current is not the identity');
  } else {
    if (e.identity !== state.identity) return refuse(RotationRefusals.IDENTITY_MISMATCH, 'event names another identity');
    if (e.seq !== state.seq + 1) return refuse(RotationRefusals.SEQUENCE_GAP, `seq ${e.seq} does not follow ${state.seq}`);
    if (e.parent !== state.head) return refuse(RotationRefusals.PARENT_MISMATCH, 'parent is not the previous event id');
    if (hashOfDid(e.current) !== state.next_hash) {
      return refuse(RotationRefusals.NEXT_HASH_MISMATCH, 'current key is not the one the previous event pre-committed');
    }
  }
  if (!verifyBody(se, e.current)) return refuse(RotationRefusals.BAD_SIGNATURE, 'signature does not verify under current');
  return ok({ identity: e.identity, current: e.current, seq: e.seq, next_hash: e.next_hash, head: keyEventId(se) });
}

/**
 * Verifies a whole key log, inception first (§2.1, C12), and returns the identity's current key.
 * Refusals: `empty-log` and those of {@link advanceKeyState}, each with the failing index.
 */
export function verifyKeyLog(events: readonly SignedKeyEvent[]): Result<KeyState, RotationRefusal> {
  if (events.length === 0) return err({ code: RotationRefusals.EMPTY_LOG, index: 0, why: 'no events' });
  let state: KeyState | undefined;
  for (const [i, se] of events.entries()) {
    const next = advanceKeyState(state, se, i);
    if (!next.ok) return next;
    state = next.value;
  }
  return ok(state as KeyState);
}
