/**
 * Payloads of the DKG messages (docs/frost.md, "DKG messages") and the complaint that proves a
 * participant sent an inconsistent share. Readers throw JcpError `schema`/`bad-length` naming the
 * field; callers turn that into `frost-bad-message` blaming the sender.
 */
import { createPrivateKey, createPublicKey } from 'node:crypto';
import { asArray, asBytes, asDid, asObj, asSafeUint, asText, bytesEqual, type Did, err, type Obj, ok, type Result } from '../core/index.ts';
import { type BoxContext, open, pairKey } from './box.ts';
import { checkRound2Share, type Round1Package } from './dkg.ts';
import { fault, type FrostErrorCode, FrostErrorCodes, type FrostFault } from './errors.ts';
import { MAX_PARTICIPANTS, type Threshold } from './group.ts';
import { expectMessage, type Opened, openMessage } from './message.ts';

/** One roster entry of a DKG session: identifier `i` is `roster[i − 1]`, sorted by did. */
export interface RosterEntry {
  readonly did: Did;
  /** The participant's X25519 key for this session, signed in its hello. */
  readonly encKey: Uint8Array;
  /** The exact hello bytes (evidence). */
  readonly hello: Uint8Array;
}

/** The session as the initiator fixed it in `dkg-start`. */
export interface StartInfo extends Threshold {
  readonly initiator: Did;
  readonly timeoutMs: number;
  readonly roster: readonly RosterEntry[];
}

/** Reads a `dkg-hello` payload. */
export function readHello(p: Obj): { encKey: Uint8Array } {
  const o = asObj(p, 'hello', ['enc_key']);
  return { encKey: asBytes(o['enc_key'], 'hello.enc_key', 32) };
}

/**
 * Reads and checks a `dkg-start`: threshold, and a roster of `max` hellos, each signed by its
 * participant for this session and addressed to the initiator, distinct and sorted by did.
 */
export function readStart(m: Opened): Result<StartInfo, FrostFault> {
  const bad = (why: string) => err(fault(FrostErrorCodes.BAD_MESSAGE, `dkg-start: ${why}`, [{ did: m.body.from }]));
  try {
    const o = asObj(m.body.payload, 'start', ['min', 'max', 'timeout_ms', 'roster']);
    const min = asSafeUint(o['min'], 'start.min');
    const max = asSafeUint(o['max'], 'start.max');
    const timeoutMs = asSafeUint(o['timeout_ms'], 'start.timeout_ms');
    const raws = asArray(o['roster'], 'start.roster', MAX_PARTICIPANTS).map((r, i) => asBytes(r, `start.roster[${i}]`));
    if (raws.length !== max || min < 2 || min > max) return bad(`roster of ${raws.length} for ${min}-of-${max}`);
    const roster: RosterEntry[] = [];
    for (const raw of raws) {
      const h = openMessage(raw);
      if (!h.ok) return bad(`a hello does not verify (${h.error.why})`);
      const e = expectMessage(h.value, { kind: 'dkg-hello', session: m.body.session, round: 0, to: m.body.from });
      if (!e.ok) return bad(`a hello is not for this session: ${e.error.why}`);
      roster.push({ did: h.value.body.from, encKey: readHello(h.value.body.payload).encKey, hello: raw });
    }
    for (let i = 1; i < roster.length; i++)
      if (!(roster[i - 1]!.did < roster[i]!.did)) return bad('roster is not sorted by did without duplicates');
    return ok({ min, max, timeoutMs, initiator: m.body.from, roster });
  } catch (e) {
    return bad((e as Error).message);
  }
}

/** Reads a `dkg-round1` payload. */
export function readRound1(p: Obj): Round1Package {
  const o = asObj(p, 'round1', ['identifier', 'commitment', 'proof']);
  return {
    identifier: asSafeUint(o['identifier'], 'round1.identifier'),
    commitment: asArray(o['commitment'], 'round1.commitment', MAX_PARTICIPANTS).map((c, i) => asBytes(c, `round1.commitment[${i}]`, 32)),
    proof: asBytes(o['proof'], 'round1.proof', 64),
  };
}

/** Reads a `dkg-round2` payload. */
export function readRound2(p: Obj): { identifier: number; nonce: Uint8Array; ciphertext: Uint8Array } {
  const o = asObj(p, 'round2', ['identifier', 'nonce', 'ciphertext']);
  return {
    identifier: asSafeUint(o['identifier'], 'round2.identifier'),
    nonce: asBytes(o['nonce'], 'round2.nonce', 12),
    ciphertext: asBytes(o['ciphertext'], 'round2.ciphertext'),
  };
}

/** Reads a `dkg-abort` payload. */
export function readAbort(p: Obj): { code: string; why: string; culprits: Did[] } {
  const o = asObj(p, 'abort', ['code', 'why', 'culprits']);
  return {
    code: asText(o['code'], 'abort.code', 64),
    why: asText(o['why'], 'abort.why', 2048),
    culprits: asArray(o['culprits'], 'abort.culprits', MAX_PARTICIPANTS).map((d, i) => asDid(d, `abort.culprits[${i}]`)),
  };
}

/** The context of the share `from` encrypted to `to` in session `session`. */
export function boxContext(session: string, from: RosterEntry, to: RosterEntry): BoxContext {
  return { session, from: from.did, to: to.did, fromKey: from.encKey, toKey: to.encKey };
}

/** The X25519 public key of a raw secret (to check a revealed session key). */
function x25519Public(secret: Uint8Array): Uint8Array {
  const der = Buffer.concat([Buffer.from('302e020100300506032b656e04220420', 'hex'), secret]);
  const spki = createPublicKey(createPrivateKey({ key: der, format: 'der', type: 'pkcs8' })).export({ format: 'der', type: 'spki' });
  return new Uint8Array(spki.subarray(spki.length - 32));
}

/** A complaint payload: everything a third party needs to re-check the accusation. */
export function complaintPayload(
  accused: Did,
  code: FrostErrorCode,
  start: Uint8Array,
  round1: Uint8Array,
  round2: Uint8Array,
  boxSecret: Uint8Array,
): Obj {
  return { accused, code, start, round1, round2, box_secret: boxSecret };
}

/**
 * Re-checks a complaint made by `accuser`: the start message, the accused's signed round-1
 * package and its signed round-2 message to the accuser, and the accuser's revealed session key.
 * Ok(accused) when the accused provably sent a share that does not decrypt or does not match its
 * own commitment; otherwise a fault blaming the accuser (a false or unprovable complaint).
 */
export function verifyComplaint(payload: Obj, accuser: Did, session: string): Result<{ accused: Did; code: FrostErrorCode }, FrostFault> {
  const blameAccuser = (why: string) =>
    err(fault(FrostErrorCodes.BAD_MESSAGE, `complaint by ${accuser} does not hold: ${why}`, [{ did: accuser }]));
  try {
    const o = asObj(payload, 'complaint', ['accused', 'code', 'start', 'round1', 'round2', 'box_secret']);
    const accused = asDid(o['accused'], 'complaint.accused');
    const s = openMessage(asBytes(o['start'], 'complaint.start'));
    if (!s.ok || s.value.body.kind !== 'dkg-start' || s.value.body.session !== session) return blameAccuser('start message invalid');
    const start = readStart(s.value);
    if (!start.ok) return blameAccuser(start.error.why);
    const ri = start.value.roster.findIndex((r) => r.did === accuser);
    const ai = start.value.roster.findIndex((r) => r.did === accused);
    if (ri < 0 || ai < 0 || ri === ai) return blameAccuser('accuser or accused not in the roster');
    const me = start.value.roster[ri]!;
    const them = start.value.roster[ai]!;
    const secret = asBytes(o['box_secret'], 'complaint.box_secret', 32);
    if (!bytesEqual(x25519Public(secret), me.encKey)) return blameAccuser('revealed session key is not the accuser’s');
    const r1 = openMessage(asBytes(o['round1'], 'complaint.round1'));
    const r2 = openMessage(asBytes(o['round2'], 'complaint.round2'));
    if (!r1.ok || !r2.ok) return blameAccuser('accused’s messages do not verify');
    if (!expectMessage(r1.value, { kind: 'dkg-round1', session, round: 1, from: [accused] }).ok)
      return blameAccuser('round-1 message is not the accused’s for this session');
    if (!expectMessage(r2.value, { kind: 'dkg-round2', session, round: 2, from: [accused], to: accuser }).ok)
      return blameAccuser('round-2 message is not the accused’s to the accuser');
    const pkg = readRound1(r1.value.body.payload);
    const sh = readRound2(r2.value.body.payload);
    const ctx = boxContext(session, them, me);
    const share = open(pairKey(secret, them.encKey, ctx), sh.nonce, ctx, sh.ciphertext);
    if (!share) return ok({ accused, code: FrostErrorCodes.UNDECRYPTABLE_SHARE });
    if (share.length !== 32 || !checkRound2Share(ri + 1, start.value, pkg, share))
      return ok({ accused, code: FrostErrorCodes.INCONSISTENT_SHARE });
    return blameAccuser('the share matches the accused’s commitment');
  } catch (e) {
    return blameAccuser((e as Error).message);
  }
}
