/** Conformance class C12 (spec §2.1): identity continuity by pre-committed key rotation. */
import {
  type Actor,
  advanceKeyState,
  decode,
  encode,
  inception,
  type KeyEvent,
  keyEventId,
  newActor,
  nextKeyHash,
  readSignedKeyEvent,
  rotate,
  RotationRefusals,
  seededRng,
  signBody,
  type SignedKeyEvent,
  signedKeyEventToCbor,
  verifyKeyLog,
} from '../../core/index.ts';
import type { Checker } from '../checker.ts';
import type { ConformanceClass } from '../runner.ts';

/** C12: an un-pre-committed key cannot rotate an identity, the pre-committed key can, the DID is stable. */
export const C12: ConformanceClass = {
  id: 'C12',
  title: 'key rotation',
  run(t) {
    const rng = seededRng('conformance/C12');
    const k0 = newActor(rng);
    const k1 = newActor(rng);
    const k2 = newActor(rng);
    const k3 = newActor(rng);
    const thief = newActor(rng);

    const e0 = inception(k0, k1.did, rng(16));
    const r1 = rotate(e0, k1, k2.did, rng(16));
    t.ok(r1.ok, 'the pre-committed key rotates the identity');
    if (!r1.ok) return;
    const e1 = r1.value;
    const log1 = verifyKeyLog([e0, e1]);
    t.eq(log1.ok && log1.value.current, k1.did, 'after one rotation the pre-committed key controls');
    t.eq(log1.ok && log1.value.identity, k0.did, 'the identity is still the inception DID');

    // Nobody but the pre-committed key (k2) rotates after e1: not a stranger, not the stolen
    // current key, not the original key, not a key committed further ahead.
    for (const [who, key] of [
      ['a stranger', thief],
      ['the current key (k1)', k1],
      ['the inception key (k0)', k0],
      ['a key committed further ahead (k3)', k3],
    ] as const) {
      const stolen = rotate(e1, key, thief.did, rng(16));
      t.eq(stolen.ok ? undefined : stolen.error.code, RotationRefusals.NEXT_HASH_MISMATCH, `${who} cannot build a rotation`);
      const body: KeyEvent = {
        identity: k0.did,
        seq: 2,
        current: key.did,
        next_hash: nextKeyHash(thief.did),
        parent: keyEventId(e1),
        nonce: rng(16),
      };
      t.eq(
        logCode([e0, e1, signBody(body, key)]),
        RotationRefusals.NEXT_HASH_MISMATCH,
        `a rotation to ${who}, signed by it, is refused by the verifier`,
      );
    }
    const toK2: KeyEvent = {
      identity: k0.did,
      seq: 2,
      current: k2.did,
      next_hash: nextKeyHash(thief.did),
      parent: keyEventId(e1),
      nonce: rng(16),
    };
    for (const [who, key] of [
      ['a stranger', thief],
      ['the current key (k1)', k1],
      ['the inception key (k0)', k0],
    ] as const) {
      t.eq(logCode([e0, e1, signBody(toK2, key)]), RotationRefusals.BAD_SIGNATURE, `a rotation naming k2 but signed by ${who} is refused`);
    }

    // The owner who lost k1 still rotates with the pre-committed k2.
    const r2 = rotate(e1, k2, k3.did, rng(16));
    t.ok(r2.ok, 'the owner rotates with the pre-committed key after losing the current one');
    if (!r2.ok) return;
    const events: SignedKeyEvent[] = [e0, e1, r2.value].map((e) => readSignedKeyEvent(decode(encode(signedKeyEventToCbor(e)))));
    const log2 = verifyKeyLog(events);
    t.eq(log2.ok && log2.value.current, k2.did, 'the round-tripped log verifies with k2 in control');
    t.eq(log2.ok && log2.value.identity, k0.did, 'the identity DID is stable across two rotations');
    t.ok(
      events.every((e) => e.body.identity === k0.did),
      'every event names the inception DID',
    );

    checkMalformedLogs(t, e0, e1, events, { k0, k1, k2, thief });
    let state: ReturnType<typeof advanceKeyState> | undefined;
    for (const e of events) state = advanceKeyState(state?.ok ? state.value : undefined, e);
    t.eq(state?.ok && state.value.current, k2.did, 'following the log event by event gives the same key in control');
  },
};

/** The code `verifyKeyLog` refuses `log` with, or `verified`. */
function logCode(log: SignedKeyEvent[]): string {
  const r = verifyKeyLog(log);
  return r.ok ? 'verified' : r.error.code;
}

/**
 * Malformed key logs built from the honest `e0`, `e1` and the round-tripped `events` (e0, e1, a
 * rotation to k2): empty, gapped, mis-parented, wrong-identity, mis-signed and tampered logs are each
 * refused with their own `RotationRefusals` code.
 */
function checkMalformedLogs(
  t: Checker,
  e0: SignedKeyEvent,
  e1: SignedKeyEvent,
  events: SignedKeyEvent[],
  keys: { k0: Actor; k1: Actor; k2: Actor; thief: Actor },
): void {
  const { k0, k1, k2, thief } = keys;
  t.eq(logCode([]), RotationRefusals.EMPTY_LOG, 'an empty log is refused');
  t.eq(
    logCode([signBody({ ...e0.body, current: k1.did }, k1)]),
    RotationRefusals.INCEPTION_NOT_IDENTITY,
    'an inception not controlled by the identity is refused',
  );
  t.eq(logCode([e0, signBody({ ...e1.body, seq: 2 }, k1)]), RotationRefusals.SEQUENCE_GAP, 'a sequence gap is refused');
  t.eq(logCode([e1]), RotationRefusals.SEQUENCE_GAP, 'a log without its inception is refused');
  t.eq(
    logCode([e0, signBody({ ...e1.body, parent: keyEventId(e1) }, k1)]),
    RotationRefusals.PARENT_MISMATCH,
    'a parent-link mismatch is refused',
  );
  t.eq(
    logCode([e0, signBody({ ...e1.body, identity: thief.did }, k1)]),
    RotationRefusals.IDENTITY_MISMATCH,
    'an event for another identity is refused',
  );
  t.eq(logCode([e0, signBody(e1.body, k0)]), RotationRefusals.BAD_SIGNATURE, 'a rotation signed by the old key is refused');
  t.eq(
    logCode([{ body: { ...e0.body, next_hash: nextKeyHash(thief.did) }, signature: e0.signature }]),
    RotationRefusals.BAD_SIGNATURE,
    'a tampered inception is refused',
  );
  t.eq(logCode([signBody({ ...e0.body, seq: 1 }, k0)]), RotationRefusals.SEQUENCE_GAP, 'an inception with seq 1 is refused');
  t.eq(
    logCode([signBody({ ...e0.body, parent: keyEventId(e1) }, k0)]),
    RotationRefusals.PARENT_MISMATCH,
    'an inception with a parent is refused',
  );
  t.eq(logCode([e0, signBody({ ...e1.body, seq: 5 }, k1)]), RotationRefusals.SEQUENCE_GAP, 'a sequence gap by many is refused');
  t.eq(logCode([e0, e1, e1]), RotationRefusals.SEQUENCE_GAP, 'a repeated rotation is refused');
  t.eq(logCode([e0, signBody({ ...e1.body, seq: 0 }, k1)]), RotationRefusals.SEQUENCE_GAP, 'a rotation that goes back to seq 0 is refused');
  const { parent: _dropped, ...orphan } = e1.body;
  t.eq(logCode([e0, signBody(orphan, k1)]), RotationRefusals.PARENT_MISMATCH, 'a rotation without a parent is refused');
  t.eq(
    logCode([e0, events[1]!, signBody({ ...events[2]!.body, parent: keyEventId(e0) }, k2)]),
    RotationRefusals.PARENT_MISMATCH,
    'a rotation naming its grandparent is refused',
  );
  t.eq(
    logCode([e0, signBody({ ...e1.body, identity: k1.did }, k1)]),
    RotationRefusals.IDENTITY_MISMATCH,
    'a rotation naming its new key as the identity is refused',
  );
}
