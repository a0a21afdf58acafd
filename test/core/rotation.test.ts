import { blake3 as nobleBlake3 } from '@noble/hashes/blake3.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type Actor,
  decode,
  encode,
  inception,
  type KeyEvent,
  keyEventId,
  newActor,
  nextKeyHash,
  parseDid,
  readSignedKeyEvent,
  rotate,
  RotationRefusals,
  seededRng,
  signBody,
  type SignedKeyEvent,
  signedKeyEventToCbor,
  verifyKeyLog,
} from '../../core/index.ts';

const rng = seededRng('test/core/rotation');
const keys: Actor[] = Array.from({ length: 5 }, () => newActor(rng));
const k = (i: number) => keys[i]!;
const thief = newActor(rng);

/** A log of `rotations` rotations: keys[0] is the identity, keys[i] controls after event i. */
function log(rotations = 3): SignedKeyEvent[] {
  const events = [inception(k(0), k(1).did, rng(16))];
  for (let i = 1; i <= rotations; i++) {
    const r = rotate(events.at(-1)!, k(i), k(i + 1).did, rng(16));
    if (!r.ok) throw new Error(r.error.why);
    events.push(r.value);
  }
  return events;
}

/** Re-signs an edited event body with `signer` (so only the edited rule can fail). */
function edit(se: SignedKeyEvent, change: Partial<KeyEvent>, signer: Actor): SignedKeyEvent {
  return signBody({ ...se.body, ...change }, signer);
}

describe('rotation - the pre-committed key log (§2.1, C12)', () => {
  it('allow / a log of three rotations verifies; the identity is the inception DID throughout', () => {
    const events = log(3);
    const r = verifyKeyLog(events);
    expect(r).toMatchObject({ ok: true, value: { identity: k(0).did, current: k(3).did, seq: 3, head: keyEventId(events[3]!) } });
    expect(events.every((e) => e.body.identity === k(0).did)).toBe(true);
  });

  it('next_hash is blake3 over the 32 raw public-key bytes, lowercase hex', () => {
    const raw = parseDid(k(1).did).bytes;
    expect(nextKeyHash(k(1).did)).toBe(Buffer.from(nobleBlake3(raw)).toString('hex'));
    expect(nextKeyHash(raw)).toBe(nextKeyHash(k(1).did));
  });

  it('allow / a log survives a CBOR round trip', () => {
    const events = log(2).map((e) => readSignedKeyEvent(decode(encode(signedKeyEventToCbor(e)))));
    expect(verifyKeyLog(events).ok).toBe(true);
  });

  it('allow / an owner who lost the current key rotates with the pre-committed one', () => {
    const events = log(1); // keys[1] controls; pretend it is lost
    const r = rotate(events[1]!, k(2), k(3).did, rng(16));
    expect(r.ok).toBe(true);
    if (r.ok) expect(verifyKeyLog([...events, r.value])).toMatchObject({ ok: true, value: { current: k(2).did } });
  });

  it('refuse / next-hash-mismatch / a thief with the current key cannot rotate the identity away', () => {
    const events = log(1); // keys[1] controls, keys[2] is pre-committed
    expect(rotate(events[1]!, thief, thief.did, rng(16))).toMatchObject({
      ok: false,
      error: { code: RotationRefusals.NEXT_HASH_MISMATCH },
    });
    // Hand-built: the stolen current key names the thief's key as the new current and signs with it.
    const body: KeyEvent = {
      identity: k(0).did,
      seq: 2,
      current: thief.did,
      next_hash: nextKeyHash(thief.did),
      parent: keyEventId(events[1]!),
      nonce: rng(16),
    };
    expect(verifyKeyLog([...events, signBody(body, thief)])).toMatchObject({
      ok: false,
      error: { code: RotationRefusals.NEXT_HASH_MISMATCH, index: 2 },
    });
    // Or keeps the stolen key as current and signs with it.
    const keep = signBody({ ...body, current: k(1).did }, k(1));
    expect(verifyKeyLog([...events, keep])).toMatchObject({ ok: false, error: { code: RotationRefusals.NEXT_HASH_MISMATCH } });
  });

  it('refuse / empty-log', () => {
    expect(verifyKeyLog([])).toMatchObject({ ok: false, error: { code: RotationRefusals.EMPTY_LOG } });
  });

  it('refuse / inception-not-identity / an inception controlled by another key', () => {
    const bad = edit(log(0)[0]!, { current: k(1).did }, k(1));
    expect(verifyKeyLog([bad])).toMatchObject({ ok: false, error: { code: RotationRefusals.INCEPTION_NOT_IDENTITY, index: 0 } });
  });

  it('refuse / sequence-gap / a rotation that skips seq 2', () => {
    const events = log(2);
    const skipped = edit(events[2]!, { seq: 3 }, k(2));
    expect(verifyKeyLog([events[0]!, events[1]!, skipped])).toMatchObject({
      ok: false,
      error: { code: RotationRefusals.SEQUENCE_GAP, index: 2 },
    });
  });

  it('refuse / sequence-gap / a log that starts at seq 1', () => {
    expect(verifyKeyLog(log(1).slice(1))).toMatchObject({ ok: false, error: { code: RotationRefusals.SEQUENCE_GAP, index: 0 } });
  });

  it('refuse / parent-mismatch / a rotation spliced onto another event', () => {
    const events = log(2);
    const spliced = edit(events[2]!, { parent: keyEventId(events[0]!) }, k(2));
    expect(verifyKeyLog([events[0]!, events[1]!, spliced])).toMatchObject({ ok: false, error: { code: RotationRefusals.PARENT_MISMATCH } });
  });

  it('refuse / parent-mismatch / an inception with a parent', () => {
    const bad = edit(log(0)[0]!, { parent: keyEventId(log(0)[0]!) }, k(0));
    expect(verifyKeyLog([bad])).toMatchObject({ ok: false, error: { code: RotationRefusals.PARENT_MISMATCH, index: 0 } });
  });

  it('refuse / identity-mismatch / a rotation that names another identity', () => {
    const events = log(1);
    const moved = edit(events[1]!, { identity: thief.did }, k(1));
    expect(verifyKeyLog([events[0]!, moved])).toMatchObject({ ok: false, error: { code: RotationRefusals.IDENTITY_MISMATCH } });
  });

  it('refuse / bad-signature / a rotation signed by the previous key instead of the new one', () => {
    const events = log(1);
    const wrongSigner = edit(events[1]!, {}, k(0));
    expect(verifyKeyLog([events[0]!, wrongSigner])).toMatchObject({ ok: false, error: { code: RotationRefusals.BAD_SIGNATURE, index: 1 } });
  });

  it('refuse / bad-signature / an inception whose commitment was altered after signing', () => {
    const [inc] = log(0);
    const altered = { body: { ...inc!.body, next_hash: nextKeyHash(thief.did) }, signature: inc!.signature };
    expect(verifyKeyLog([altered])).toMatchObject({ ok: false, error: { code: RotationRefusals.BAD_SIGNATURE, index: 0 } });
  });

  it('property / altering any field of any event after signing breaks the log', () => {
    const events = log(3);
    const fields = ['identity', 'seq', 'current', 'next_hash', 'parent', 'nonce'] as const;
    fc.assert(
      fc.property(fc.nat(3), fc.constantFrom(...fields), (i, f) => {
        const e = events[i]!;
        const alt: Record<(typeof fields)[number], unknown> = {
          identity: thief.did,
          seq: e.body.seq + 1,
          current: thief.did,
          next_hash: nextKeyHash(thief.did),
          parent: keyEventId(events[(i + 1) % 4]!),
          nonce: new Uint8Array(16).fill(7),
        };
        const tampered = { body: { ...e.body, [f]: alt[f] } as KeyEvent, signature: e.signature };
        const copy = [...events];
        copy[i] = tampered;
        expect(verifyKeyLog(copy).ok).toBe(false);
      }),
      { numRuns: 60 },
    );
  });
});
