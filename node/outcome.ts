/**
 * Outcome records: what happened after an allow, sealed by the steward beside the
 * receipt in the node's log. A receipt records the decision and the charge made before the call
 * ran (§7, §8). The outcome record says what the node knows once the endpoint answered, or failed
 * to:
 *
 * - `measurement`: the tool was called. The record holds the energy the node's own meter measured
 *   for the call (§5: `metered_uj`, `metered_provenance`, `metered_measured` when the figure is a
 *   hardware reading) and the endpoint's outcome code. It is evidence only: the charge stands
 *   as the receipt says, and replay does not change any budget because of it.
 * - `reversal`: the endpoint could not run the call (`endpoint-unavailable`: the server could
 *   not be started, phase `start`, or it went away before it answered, phase `call`). The debit of
 *   the receipt is reversed: `refund_uj` equals the receipt's `cost_uj`. Replay credits it back to
 *   every grant the receipt debited (`chain_ids`, or `grant_id` alone). A `call`-phase reversal does
 *   not claim that the tool did nothing. It says the node got no answer and charged nothing for it.
 *
 * Receipts stay byte-compatible JCR-1 (§8): an outcome record is a separate COSE_Sign1 with the
 * same envelope as a receipt (protected `{1: -8, 4: kid}`, kid = the steward's did:key, EdDSA).
 * Its payload is a canonical det-CBOR map whose profile key is `jcp_outcome` (never
 * `jcp_receipt`), so no receipt verifier can take it for a receipt:
 *
 * `{jcp_outcome: "jcp-node/1", kind, receipt_seq, receipt_id, outcome, phase?, metered_uj?,
 *   metered_provenance?, metered_measured?, refund_uj?, reply_kind?, reply_trust?, steward, at}`
 *
 * An A2A agent's answer (node/a2a.ts) is tagged in its measurement: `reply_kind: "agent-reply"`,
 * `reply_trust: "data"` (§6), and its `outcome` is the task's end (`ok`, `task-failed`, …).
 *
 * In the log (`receiptlog.ts`): `m` ‖ receipt seq (8 bytes, big-endian) → a measurement record,
 * `u` ‖ receipt seq → a reversal record. A receipt has at most one outcome record.
 */
import {
  type Actor,
  asCid,
  asDid,
  asEnum,
  asObj,
  asSafeUint,
  asText,
  asUint,
  check,
  type ContentId,
  decode,
  decodeJcrSign1,
  type Did,
  encode,
  encodeSign1,
  err,
  ErrorCodes,
  isJcpError,
  jcrProtectedHeader,
  type Obj,
  ok,
  openReceipt,
  parseDid,
  type Provenance,
  provenanceProblem,
  PROVENANCES,
  type ReceiptCore,
  receiptId,
  type Result,
  sign,
  sigStructure,
  uintOut,
  type Uj,
  verify,
} from '../core/index.ts';

/** The profile tag of every outcome record. */
export const OUTCOME_PROFILE = 'jcp-node/1';

/** The two kinds of outcome record. */
export const OUTCOME_KINDS = ['measurement', 'reversal'] as const;
/** One kind of outcome record. */
export type OutcomeKind = (typeof OUTCOME_KINDS)[number];

/** Where an endpoint failed for a reversal: before the call was sent (`start`), or before it was answered (`call`). */
export const OUTCOME_PHASES = ['start', 'call'] as const;
/** One phase. */
export type OutcomePhase = (typeof OUTCOME_PHASES)[number];

/** The signed core of an outcome record. µJ as bigint; `at` in unix seconds (node clock). */
export interface OutcomeCore {
  readonly jcp_outcome: typeof OUTCOME_PROFILE;
  readonly kind: OutcomeKind;
  /** The seq of the allow receipt this record is about. */
  readonly receipt_seq: number;
  /** The receipt id (BLAKE3-256 of its COSE_Sign1 bytes) of that receipt. */
  readonly receipt_id: ContentId;
  /** The endpoint's outcome: `ok`, `tool-error`, `input-required` (an MCP call that asked for input, docs/node.md "Multi round-trip calls"), or an endpoint error code (`endpoint-timeout`, `endpoint-failed`, `endpoint-unavailable`). */
  readonly outcome: string;
  /** Reversals only: where the endpoint failed. */
  readonly phase?: OutcomePhase;
  /** What the node's meter measured for the call (µJ), when the meter ran. */
  readonly metered_uj?: Uj;
  /** The provenance of `metered_uj` (§5); present exactly with it. */
  readonly metered_provenance?: Provenance;
  /** The raw hardware reading (µJ), when the figure has one (required for `HwShunt`). */
  readonly metered_measured?: Uj;
  /** Reversals only: the µJ handed back, equal to the receipt's `cost_uj`. */
  readonly refund_uj?: Uj;
  /**
   * Measurements of an A2A agent's answer only (docs/a2a.md): the frame kind of the reply,
   * `agent-reply`, and its trust tag, `data` (§6: agent outputs are data); present together.
   */
  readonly reply_kind?: 'agent-reply';
  readonly reply_trust?: 'data';
  /** The signer's did:key, which must equal the COSE kid. */
  readonly steward: Did;
  /** When the outcome was known, unix seconds. */
  readonly at: number;
}

/** Why an outcome record was refused (stable codes: the decoder's, or the ones below). */
export const OutcomeRefusals = {
  /** Signed by another steward than the log's. */
  WRONG_STEWARD: 'wrong-steward',
  /** The core's `steward` is not the COSE kid. */
  STEWARD_MISMATCH: 'steward-mismatch',
  /** The record's key does not match its kind or receipt seq. */
  KEY_MISMATCH: 'outcome-key-mismatch',
  /** No verifiable receipt at `receipt_seq`, or a receipt whose id is not `receipt_id`. */
  RECEIPT_MISMATCH: 'outcome-receipt-mismatch',
  /** The receipt is a deny: nothing ran, nothing was charged. */
  NOT_AN_ALLOW: 'outcome-not-an-allow',
  /** A reversal whose `refund_uj` is not the receipt's `cost_uj`, or that would take a grant below zero. */
  BAD_REFUND: 'outcome-bad-refund',
  /** Both a measurement and a reversal for one receipt. */
  DUPLICATE: 'outcome-duplicate',
} as const;

/** A refusal as a value. */
export interface OutcomeRefusal {
  readonly code: string;
  readonly why: string;
}

const REQUIRED = ['jcp_outcome', 'kind', 'receipt_seq', 'receipt_id', 'outcome', 'steward', 'at'] as const;
const OPTIONAL = ['phase', 'metered_uj', 'metered_provenance', 'metered_measured', 'refund_uj', 'reply_kind', 'reply_trust'] as const;

/** The plain CBOR map of an outcome core (absent optional fields left out). */
export function outcomeToCbor(c: OutcomeCore): Obj {
  const o: Obj = {
    jcp_outcome: c.jcp_outcome,
    kind: c.kind,
    receipt_seq: c.receipt_seq,
    receipt_id: c.receipt_id,
    outcome: c.outcome,
    steward: c.steward,
    at: c.at,
  };
  if (c.phase !== undefined) o['phase'] = c.phase;
  if (c.metered_uj !== undefined) o['metered_uj'] = uintOut(c.metered_uj);
  if (c.metered_provenance !== undefined) o['metered_provenance'] = c.metered_provenance;
  if (c.metered_measured !== undefined) o['metered_measured'] = uintOut(c.metered_measured);
  if (c.refund_uj !== undefined) o['refund_uj'] = uintOut(c.refund_uj);
  if (c.reply_kind !== undefined) o['reply_kind'] = c.reply_kind;
  if (c.reply_trust !== undefined) o['reply_trust'] = c.reply_trust;
  return o;
}

/**
 * Reads a decoded CBOR value as an outcome core and checks its invariants: `refund_uj` and `phase`
 * present exactly on a reversal; `metered_uj` and `metered_provenance` together; the metered
 * figure's provenance consistent (§5: `HwShunt` carries `metered_measured`, `Estimator` never).
 * @throws JcpError `schema` / `did-invalid` naming the field.
 */
export function readOutcomeCore(v: unknown, field = 'outcome'): OutcomeCore {
  const o = asObj(v, field, REQUIRED, OPTIONAL);
  const kind = asEnum(o['kind'], `${field}.kind`, OUTCOME_KINDS);
  const reversal = kind === 'reversal';
  check((o['refund_uj'] !== undefined) === reversal, `${field}.refund_uj`, 'present exactly on a reversal');
  check((o['phase'] !== undefined) === reversal, `${field}.phase`, 'present exactly on a reversal');
  check(
    (o['metered_uj'] !== undefined) === (o['metered_provenance'] !== undefined),
    `${field}.metered_provenance`,
    'present exactly with metered_uj',
  );
  const core: OutcomeCore = {
    jcp_outcome: asEnum(o['jcp_outcome'], `${field}.jcp_outcome`, [OUTCOME_PROFILE]),
    kind,
    receipt_seq: asSafeUint(o['receipt_seq'], `${field}.receipt_seq`),
    receipt_id: asCid(o['receipt_id'], `${field}.receipt_id`),
    outcome: asText(o['outcome'], `${field}.outcome`, 64),
    ...(o['phase'] !== undefined ? { phase: asEnum(o['phase'], `${field}.phase`, OUTCOME_PHASES) } : {}),
    ...(o['metered_uj'] !== undefined ? { metered_uj: asUint(o['metered_uj'], `${field}.metered_uj`) } : {}),
    ...(o['metered_provenance'] !== undefined
      ? { metered_provenance: asEnum(o['metered_provenance'], `${field}.metered_provenance`, PROVENANCES) }
      : {}),
    ...(o['metered_measured'] !== undefined ? { metered_measured: asUint(o['metered_measured'], `${field}.metered_measured`) } : {}),
    ...(o['refund_uj'] !== undefined ? { refund_uj: asUint(o['refund_uj'], `${field}.refund_uj`) } : {}),
    steward: asDid(o['steward'], `${field}.steward`),
    at: asSafeUint(o['at'], `${field}.at`),
    ...(o['reply_kind'] !== undefined ? { reply_kind: asEnum(o['reply_kind'], `${field}.reply_kind`, ['agent-reply'] as const) } : {}),
    ...(o['reply_trust'] !== undefined ? { reply_trust: asEnum(o['reply_trust'], `${field}.reply_trust`, ['data'] as const) } : {}),
  };
  check((core.reply_kind !== undefined) === (core.reply_trust !== undefined), `${field}.reply_trust`, 'present exactly with reply_kind');
  check(core.reply_kind === undefined || kind === 'measurement', `${field}.reply_kind`, 'only on a measurement');
  if (core.metered_uj !== undefined) {
    const problem = provenanceProblem({
      uj: core.metered_uj,
      provenance: core.metered_provenance!,
      ...(core.metered_measured !== undefined ? { measured: core.metered_measured } : {}),
    });
    check(problem === undefined, `${field}.metered_provenance`, problem ?? '');
  } else check(core.metered_measured === undefined, `${field}.metered_measured`, 'present only with metered_uj');
  return core;
}

/**
 * Seals an outcome core as a tagged COSE_Sign1 signed by the steward (the receipt's envelope).
 * @throws JcpError `schema` when `core.steward` is not `steward.did` or the core breaks an invariant.
 */
export function sealOutcome(core: OutcomeCore, steward: Actor): Uint8Array {
  check(core.steward === steward.did, 'outcome.steward', 'the sealing actor is not the steward named in the core');
  const payload = encode(outcomeToCbor(core));
  readOutcomeCore(decode(payload));
  const protectedBytes = jcrProtectedHeader(new TextEncoder().encode(steward.did));
  const signature = sign(steward.key, sigStructure(protectedBytes, payload));
  return encodeSign1({ protectedBytes, unprotected: new Map(), payload, signature });
}

const utf8Strict = new TextDecoder('utf-8', { fatal: true });

/**
 * Verifies and reads an outcome record: COSE_Sign1 shape and EdDSA (`cose-*`), kid a did:key
 * (`did-invalid`), `wrong-steward` when `expectedSteward` is given and differs, canonical payload
 * (`cbor-*`), signature (`signature-invalid`), the core's schema (`schema`), and
 * `steward-mismatch`. Never throws.
 */
export function openOutcome(bytes: Uint8Array, expectedSteward?: Did): Result<OutcomeCore, OutcomeRefusal> {
  try {
    const { msg, kid } = decodeJcrSign1(bytes);
    let did: string;
    try {
      did = utf8Strict.decode(kid);
    } catch {
      return err({ code: ErrorCodes.DID_INVALID, why: 'kid is not UTF-8' });
    }
    const pub = parseDid(did);
    if (expectedSteward !== undefined && did !== expectedSteward) {
      return err({ code: OutcomeRefusals.WRONG_STEWARD, why: 'signed by another steward than expected' });
    }
    const payload = decode(msg.payload);
    if (!verify(pub, sigStructure(msg.protectedBytes, msg.payload), msg.signature)) {
      return err({ code: ErrorCodes.SIGNATURE_INVALID, why: 'the steward signature does not verify' });
    }
    const core = readOutcomeCore(payload);
    if (core.steward !== did) return err({ code: OutcomeRefusals.STEWARD_MISMATCH, why: 'core steward is not the COSE kid' });
    return ok(core);
  } catch (e) {
    if (isJcpError(e)) return err({ code: e.code, why: e.message });
    return err({ code: ErrorCodes.CBOR_MALFORMED, why: `unreadable outcome record: ${String(e)}` });
  }
}

/** An outcome record checked against the receipt it names, with what replay needs from that receipt. */
export interface CheckedOutcome {
  readonly core: OutcomeCore;
  readonly receipt: ReceiptCore;
  /** The grant ids the receipt debited (root first), which a reversal credits. */
  readonly debited: readonly ContentId[];
}

/**
 * Checks an outcome record found under key (`kind`, `seq`) against the receipt bytes at that seq
 * (undefined when the log has none): it opens under `steward`, the key matches its kind and
 * `receipt_seq`, the receipt verifies under `steward` and has id `receipt_id`, is an allow, and a
 * reversal's `refund_uj` equals the receipt's `cost_uj`. Never throws.
 */
export function checkOutcome(
  bytes: Uint8Array,
  key: { readonly kind: OutcomeKind; readonly seq: number },
  receiptBytes: Uint8Array | undefined,
  steward: Did,
): Result<CheckedOutcome, OutcomeRefusal> {
  const opened = openOutcome(bytes, steward);
  if (!opened.ok) return opened;
  const core = opened.value;
  if (core.kind !== key.kind || core.receipt_seq !== key.seq) {
    return err({
      code: OutcomeRefusals.KEY_MISMATCH,
      why: `a ${core.kind} of seq ${core.receipt_seq} stored as a ${key.kind} of seq ${key.seq}`,
    });
  }
  if (receiptBytes === undefined) return err({ code: OutcomeRefusals.RECEIPT_MISMATCH, why: `no receipt at seq ${key.seq}` });
  if (receiptId(receiptBytes) !== core.receipt_id) {
    return err({ code: OutcomeRefusals.RECEIPT_MISMATCH, why: `the receipt at seq ${key.seq} is not the one the record names` });
  }
  const r = openReceipt(receiptBytes, steward);
  if (!r.ok) return err({ code: OutcomeRefusals.RECEIPT_MISMATCH, why: `the receipt at seq ${key.seq} does not verify: ${r.error.code}` });
  if (r.value.verdict !== 'allow') return err({ code: OutcomeRefusals.NOT_AN_ALLOW, why: `the receipt at seq ${key.seq} is a deny` });
  if (core.kind === 'reversal' && core.refund_uj !== r.value.cost_uj) {
    return err({ code: OutcomeRefusals.BAD_REFUND, why: `refund_uj ${core.refund_uj} is not the receipt's cost_uj ${r.value.cost_uj}` });
  }
  return ok({ core, receipt: r.value, debited: r.value.chain_ids ?? [r.value.grant_id] });
}
