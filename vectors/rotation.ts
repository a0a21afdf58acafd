/**
 * `rotation.json`: key-event logs (spec §2.1; C12), valid and invalid. Each event carries its
 * body, the actor that signed it, its canonical signed bytes and its id; each log the verified
 * key state, or the refusal code and the index of the failing event.
 */
import {
  decode,
  encode,
  inception,
  type KeyEvent,
  keyEventId,
  keyEventToCbor,
  nextKeyHash,
  readKeyEvent,
  readSignedKeyEvent,
  rotate,
  signBody,
  type SignedKeyEvent,
  signedKeyEventToCbor,
  verifyKeyLog,
} from '../core/index.ts';
import type { Checker } from '../conformance/index.ts';
import { type ActorName, actor, did, fileHeader, nonce, VectorCheck } from './fixtures.ts';
import { compact, hex, type J, type JsonObj } from './json.ts';

interface Ev {
  readonly se: SignedKeyEvent;
  readonly signer: ActorName;
}

function eventJson(e: KeyEvent): JsonObj {
  return compact({
    identity: e.identity,
    seq: e.seq,
    current: e.current,
    next_hash: e.next_hash,
    parent: e.parent,
    nonce: hex(e.nonce),
  });
}

function eventFromJson(j: J): KeyEvent {
  return readKeyEvent(
    {
      identity: j.get('identity').str(),
      seq: j.get('seq').num(),
      current: j.get('current').str(),
      next_hash: j.get('next_hash').str(),
      ...(j.has('parent') ? { parent: j.get('parent').str() } : {}),
      nonce: j.get('nonce').bytes(),
    },
    j.path,
  );
}

/** An event body signed by `signer` (no checks: for logs that must fail). */
function signed(body: KeyEvent, signer: ActorName): Ev {
  const s = signBody(keyEventToCbor(body), actor(signer));
  return { se: { body, signature: s.signature }, signer };
}

function ok<T>(r: { ok: true; value: T } | { ok: false; error: { why: string } }): T {
  if (!r.ok) throw new Error(`vectors: rotation refused: ${r.error.why}`);
  return r.value;
}

function logVector(name: string, description: string, events: readonly Ev[]): JsonObj {
  const r = verifyKeyLog(events.map((e) => e.se));
  return {
    name,
    description,
    events: events.map((e) => ({
      body: eventJson(e.se.body),
      signer: e.signer,
      signed_cbor: hex(encode(signedKeyEventToCbor(e.se))),
      id: keyEventId(e.se),
    })),
    expected: r.ok
      ? {
          ok: true,
          identity: r.value.identity,
          current: r.value.current,
          seq: r.value.seq,
          next_hash: r.value.next_hash,
          head: r.value.head,
        }
      : { ok: false, code: r.error.code, index: r.error.index },
  };
}

/** Builds `rotation.json`. */
export function generate(): JsonObj {
  const e0: Ev = { se: inception(actor('identity'), did('key-1'), nonce('rotation/e0')), signer: 'identity' };
  const e1: Ev = { se: ok(rotate(e0.se, actor('key-1'), did('key-2'), nonce('rotation/e1'))), signer: 'key-1' };
  const e2: Ev = { se: ok(rotate(e1.se, actor('key-2'), did('key-3'), nonce('rotation/e2'))), signer: 'key-2' };
  const b1 = e1.se.body;
  const thiefNext = {
    ...b1,
    seq: 2,
    current: did('thief'),
    next_hash: nextKeyHash(did('thief')),
    parent: keyEventId(e1.se),
    nonce: nonce('rotation/thief'),
  };
  return {
    ...fileHeader('rotation.json', 'Pre-committed key rotation logs', '§2.1; C12'),
    hash_rule: 'next_hash = lowercase hex of BLAKE3-256 over the next key’s 32 raw public-key bytes',
    logs: [
      logVector('inception-only', 'seq 0: current = identity, committing to key-1', [e0]),
      logVector('two-rotations', 'identity → key-1 → key-2; the identity did:key is stable', [e0, e1, e2]),
      logVector('thief-with-current-key', 'the thief holds key-1 (current) and rotates to its own key, signing with it', [
        e0,
        e1,
        signed(thiefNext, 'thief'),
      ]),
      logVector('thief-signs-with-current-key', 'the thief signs event 2 with the stolen key-1 naming key-1 again', [
        e0,
        e1,
        signed({ ...thiefNext, current: did('key-1'), next_hash: nextKeyHash(did('thief')) }, 'key-1'),
      ]),
      logVector('sequence-gap', 'event seq 2 right after the inception', [e0, signed({ ...b1, seq: 2 }, 'key-1')]),
      logVector('parent-mismatch', 'event 1 names a parent other than event 0', [
        e0,
        signed({ ...b1, parent: e2.se.body.next_hash }, 'key-1'),
      ]),
      logVector('bad-signature', 'event 1 is signed by the thief', [e0, signed(b1, 'thief')]),
      logVector('identity-mismatch', 'event 1 names another identity', [e0, signed({ ...b1, identity: did('mallory') }, 'key-1')]),
      logVector('inception-not-identity', 'inception whose current is not the identity', [
        signed({ ...e0.se.body, current: did('key-1') }, 'key-1'),
      ]),
      logVector('inception-seq-1', 'the first event has seq 1', [signed({ ...e0.se.body, seq: 1 }, 'identity')]),
      logVector('inception-with-parent', 'the first event names a parent', [
        signed({ ...e0.se.body, parent: keyEventId(e0.se) }, 'identity'),
      ]),
      logVector('empty', 'no events', []),
    ],
  };
}

/** Re-checks `rotation.json` against our implementation. */
export function verify(doc: J, t: Checker): void {
  const c = new VectorCheck(t, 'rotation.json', doc);
  c.each(doc, 'logs', (v) => {
    const events: SignedKeyEvent[] = [];
    for (const e of v.get('events').items()) {
      const body = eventFromJson(e.get('body'));
      const s = signBody(keyEventToCbor(body), c.actor(e.get('signer')));
      const se: SignedKeyEvent = { body, signature: s.signature };
      c.eq(hex(encode(signedKeyEventToCbor(se))), e.get('signed_cbor').str(), `event ${body.seq}: signed bytes`);
      c.eq(keyEventId(se), e.get('id').str(), `event ${body.seq}: id = content id of the body`);
      const decoded = readSignedKeyEvent(decode(e.get('signed_cbor').bytes()));
      c.eq(eventJson(decoded.body), eventJson(body), `event ${body.seq}: decodes to the stated body`);
      events.push(decoded);
    }
    const r = verifyKeyLog(events);
    const x = v.get('expected');
    c.eq(r.ok, x.get('ok').bool(), 'valid or refused');
    if (r.ok) {
      if (x.get('ok').bool()) {
        c.eq(
          { identity: r.value.identity, current: r.value.current, seq: r.value.seq, next_hash: r.value.next_hash, head: r.value.head },
          {
            identity: x.get('identity').str(),
            current: x.get('current').str(),
            seq: x.get('seq').num(),
            next_hash: x.get('next_hash').str(),
            head: x.get('head').str(),
          },
          'key state',
        );
      }
    } else {
      c.eq({ code: r.error.code, index: r.error.index }, { code: x.get('code').str(), index: x.get('index').num() }, 'refusal');
    }
  });
}
