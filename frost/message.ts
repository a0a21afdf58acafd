/**
 * The jcp-frost/1 round message: every message of a DKG or signing session is the signed-body
 * pattern of docs/design.md "Encodings", `{body, signature}` in canonical det-CBOR, where the body binds
 * the protocol, the message kind, the session id and the round, names its sender (`from`, whose
 * own Ed25519 key signs it) and, for directed messages, its recipient (`to`).
 *
 * A receiver opens a message ({@link openMessage}: canonical decode, schema, signature by
 * `from`) and then states what it expects ({@link expectMessage}): a message for another
 * session, round, kind or recipient is refused as `frost-misrouted`, which is how replayed and
 * misrouted messages are turned away. docs/frost.md lists every kind and its payload.
 */
import {
  type Actor,
  asDid,
  asEnum,
  asObj,
  asSafeUint,
  asText,
  bytesEqual,
  check,
  decode,
  type Did,
  encode,
  err,
  type Obj,
  ok,
  parseDid,
  readSigned,
  type Result,
  signBody,
  verify,
} from '../core/index.ts';
import { fault, FrostErrorCodes, type FrostFault } from './errors.ts';

/** The protocol tag carried in every body. */
export const PROTOCOL = 'jcp-frost/1';

/** Every message kind, DKG then signing. */
export const KINDS = [
  'dkg-invite',
  'dkg-hello',
  'dkg-start',
  'dkg-round1',
  'dkg-round2',
  'dkg-confirm',
  'dkg-complaint',
  'dkg-abort',
  'sign-request',
  'sign-commitment',
  'sign-package',
  'sign-share',
  'sign-refusal',
  'sign-done',
] as const;

/** A message kind. */
export type Kind = (typeof KINDS)[number];

/** The signed body of a round message. */
export interface Envelope {
  readonly proto: typeof PROTOCOL;
  readonly kind: Kind;
  /** Session id: 32 lowercase hex chars (16 random bytes drawn by the session's initiator). */
  readonly session: string;
  /** Round number within the session (0 = setup). */
  readonly round: number;
  readonly from: Did;
  /** Recipient of a directed message; absent on broadcasts. */
  readonly to?: Did;
  readonly payload: Obj;
}

/** A message whose signature has been checked. `raw` is the exact bytes received (kept as evidence). */
export interface Opened {
  readonly body: Envelope;
  readonly signature: Uint8Array;
  readonly raw: Uint8Array;
}

const SESSION_RE = /^[0-9a-f]{32}$/;

/** True when `s` is a well-formed session id. */
export function isSessionId(s: unknown): s is string {
  return typeof s === 'string' && SESSION_RE.test(s);
}

/** Signs and encodes a round message as `actor` (`from` is the actor's did). */
export function sealMessage(m: { kind: Kind; session: string; round: number; to?: Did; payload: Obj }, actor: Actor): Uint8Array {
  const body: Record<string, unknown> = {
    proto: PROTOCOL,
    kind: m.kind,
    session: m.session,
    round: m.round,
    from: actor.did,
    payload: m.payload,
  };
  if (m.to !== undefined) body['to'] = m.to;
  return encode(signBody(body, actor));
}

/**
 * Decodes a round message and checks its signature by `body.from`. Refuses anything that is
 * not canonical CBOR, not the envelope schema, or not signed by its sender (`frost-bad-message`).
 */
export function openMessage(raw: Uint8Array): Result<Opened, FrostFault> {
  try {
    const s = readSigned(decode(raw), 'message');
    const o = asObj(s.body, 'message.body', ['proto', 'kind', 'session', 'round', 'from', 'payload'], ['to']);
    asEnum(o['proto'], 'message.body.proto', [PROTOCOL]);
    const kind = asEnum(o['kind'], 'message.body.kind', KINDS);
    const session = asText(o['session'], 'message.body.session', 32);
    if (!isSessionId(session)) return err(fault(FrostErrorCodes.BAD_MESSAGE, 'message: session id is not 32 hex chars'));
    const round = asSafeUint(o['round'], 'message.body.round');
    const from = asDid(o['from'], 'message.body.from');
    const to = o['to'] === undefined ? undefined : asDid(o['to'], 'message.body.to');
    const payload = o['payload'] as Obj;
    check(
      typeof payload === 'object' && payload !== null && !Array.isArray(payload) && !(payload instanceof Uint8Array),
      'message.body.payload',
      'expected a map',
    );
    const body: Envelope = { proto: PROTOCOL, kind, session, round, from, payload, ...(to !== undefined ? { to } : {}) };
    if (!verify(parseDid(from), bodyBytes(raw) ?? encode(s.body), s.signature)) {
      return err(fault(FrostErrorCodes.BAD_MESSAGE, `message: signature does not verify under its sender ${from}`, [{ did: from }]));
    }
    return ok({ body, signature: s.signature, raw });
  } catch (e) {
    return err(fault(FrostErrorCodes.BAD_MESSAGE, `message: ${(e as Error).message}`));
  }
}

const HEAD = Uint8Array.from([0xa2, 0x64, 0x62, 0x6f, 0x64, 0x79]); // {2 entries, "body"
const TAIL = Uint8Array.from([0x69, ...new TextEncoder().encode('signature'), 0x58, 0x40]); // "signature": bytes(64)

/**
 * The canonical bytes of the body inside an already canonical `{body, signature}` envelope:
 * keys sort "body" before "signature", so the body is everything between the two key headers.
 * Saves re-encoding the body to check its signature. Undefined if the layout is not that.
 */
function bodyBytes(raw: Uint8Array): Uint8Array | undefined {
  const end = raw.length - 64 - TAIL.length;
  if (end <= HEAD.length || !bytesEqual(raw.subarray(0, HEAD.length), HEAD) || !bytesEqual(raw.subarray(end, end + TAIL.length), TAIL))
    return undefined;
  return raw.subarray(HEAD.length, end);
}

/** What a receiver expects of the next message. */
export interface Expect {
  readonly kind: Kind | readonly Kind[];
  readonly session: string;
  readonly round: number;
  /** The receiver's did for directed messages: a message to anyone else is misrouted. */
  readonly to?: Did;
  /** Allowed senders (the session roster); anyone else is refused. */
  readonly from?: readonly Did[];
}

/**
 * Checks an opened message against what the receiver expects: kind, session, round, recipient
 * and sender. Returns `frost-misrouted` naming the sender otherwise (replayed from another
 * session or round, or sent to someone else).
 */
export function expectMessage(m: Opened, want: Expect): Result<void, FrostFault> {
  const b = m.body;
  const refuse = (why: string) => err(fault(FrostErrorCodes.MISROUTED, `${b.kind} from ${b.from}: ${why}`, [{ did: b.from }]));
  const kinds: readonly Kind[] = typeof want.kind === 'string' ? [want.kind] : want.kind;
  if (b.session !== want.session) return refuse(`for session ${b.session}, not ${want.session}`);
  if (!kinds.includes(b.kind)) return refuse(`unexpected kind (want ${kinds.join('|')})`);
  if (b.round !== want.round) return refuse(`for round ${b.round}, not ${want.round}`);
  if (want.to !== undefined && b.to !== want.to) return refuse(`addressed to ${b.to ?? 'everyone'}, not to ${want.to}`);
  if (want.from !== undefined && !want.from.includes(b.from)) return refuse('sender is not in the session roster');
  return ok(undefined);
}
