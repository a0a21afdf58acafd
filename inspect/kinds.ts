/**
 * What `jcp inspect` says about one decoded item: which JCP object it is (chosen by its CBOR
 * shape and keys), its fields as JSON (bytes as hex, µJ and other big integers as decimal
 * strings), its id, and whether its signature verifies under which did:key. Every decoder used is
 * the core's own strict one, so a refusal here is the refusal a node would give.
 */
import {
  amendmentId,
  asArray,
  asBytes,
  asDid,
  asObj,
  asSafeUint,
  type Grant,
  checkpointId,
  contentId,
  decode,
  decodeJcrSign1,
  decodeWireMessage,
  type Did,
  grantId,
  isJcpError,
  JcpError,
  keyEventId,
  mintPolicyId,
  type Obj,
  openJcr1Receipt,
  parseDid,
  payloadHash,
  readAmendment,
  readCheckpoint,
  readCost,
  readFrame,
  readGrant,
  readJcr1ReceiptCore,
  readKeyEvent,
  readMintPolicy,
  readOverdraftProof,
  readSignedAmendment,
  readSignedCheckpoint,
  readSignedGrant,
  readSignedKeyEvent,
  readSignedMintPolicy,
  readSignedRevocation,
  readSignedStatement,
  readStatement,
  receiptId,
  requestIdOf,
  revocationId,
  revocationToCbor,
  type Signed,
  type SignedGrant,
  statementToCbor,
  verifyBody,
  verifyChain,
  verifyGrantSignature,
  verifyOverdraftProof,
  verifyStatement,
  verifyWireRequestSignature,
  type WireRequest,
  firstForbiddenHead,
  firstNonCanonicalByte,
  majorOf,
} from '../core/index.ts';
import { cborJson, hex, type Json, type JsonObj } from '../vectors/index.ts';
import { fail, FaultError, type InspectFault, InputCodes, type Item } from './input.ts';

/** Every kind `jcp inspect` recognises. */
export const KINDS = {
  'signed-grant': 'signed grant (§4)',
  grant: 'grant, unsigned (§4)',
  revocation: 'signed revocation (§4.3)',
  frame: 'frame (§6)',
  receipt: 'receipt, COSE_Sign1 (§8)',
  'receipt-core': 'receipt core, unsigned (§8)',
  'wire-request': 'jcp/1 WireRequest (§11)',
  'wire-response': 'jcp/1 WireResponse (§11)',
  'wire-error': 'jcp/1 error message (§11)',
  'wire-revoke': 'jcp/1 revoke message (§11)',
  'wire-revoked': 'jcp/1 revoked message (§11)',
  statement: 'signed budget-channel statement (§4.5)',
  'key-event': 'signed key event (§2.1)',
  'mint-policy': 'signed mint policy (§4.6)',
  checkpoint: 'signed checkpoint (§4.7)',
  amendment: 'signed amendment (§4.7)',
  'overdraft-proof': 'overdraft proof (§4.5)',
  'revocation-body': 'revocation body, unsigned (§4.3)',
  'statement-body': 'statement body, unsigned (§4.5)',
  'key-event-body': 'key event body, unsigned (§2.1)',
  'mint-policy-body': 'mint policy body, unsigned (§4.6)',
  'checkpoint-body': 'checkpoint body, unsigned (§4.7)',
  'amendment-body': 'amendment body, unsigned (§4.7)',
} as const;

/** One of {@link KINDS}. */
export type Kind = keyof typeof KINDS;

/** Whether a signature verifies, and under which did:key. `valid: null` = cannot be checked here. */
export interface SignatureReport {
  readonly valid: boolean | null;
  readonly signer?: Did;
  /** Who the signer is to the object (issuer, revoker, caller, steward…). */
  readonly role?: string;
  readonly note?: string;
}

/** What inspect says about one item. */
export interface ObjectReport {
  readonly kind: Kind;
  readonly description: string;
  /** Where the item starts in the input, and its length in bytes. */
  readonly offset: number;
  readonly length: number;
  /** The object's content id (grant id, receipt id, revocation id…), when it has one. */
  readonly id?: string;
  readonly signature?: SignatureReport;
  /** Kind-specific findings: request id, payload hash match, chain verdict, steward, seq/prev… */
  readonly checks?: JsonObj;
  /** The decoded fields. */
  readonly value: Json;
}

/** Who may have signed a body that names no signer (mint policy, checkpoint, amendment). */
export interface SignerHints {
  /** did:keys to try, from `--signer`. */
  readonly signers: readonly Did[];
  /** The grant the object is bound to, from `--grant`: gives the expected signer. */
  readonly grant?: SignedGrant;
}

/** The fault for an error thrown while reading `item`. */
export function faultOf(e: unknown, item: Item, index?: number): InspectFault {
  if (e instanceof FaultError) return { ...e.fault, ...(index !== undefined && e.fault.item === undefined ? { item: index } : {}) };
  const at = index !== undefined ? { item: index } : {};
  if (isJcpError(e)) {
    const field = typeof e.detail?.['field'] === 'string' ? (e.detail['field'] as string) : undefined;
    let rel = typeof e.detail?.['offset'] === 'number' ? (e.detail['offset'] as number) : undefined;
    if (rel === undefined && e.code === 'cbor-non-canonical') rel = firstNonCanonicalByte(item.bytes);
    if (rel === undefined && e.code === 'cbor-forbidden-type')
      rel = firstForbiddenHead(item.bytes, item.bytes[0] === 0xd2 ? 18 : undefined);
    return {
      code: e.code,
      message: e.message,
      ...(field !== undefined ? { field } : {}),
      ...(rel !== undefined ? { offset: item.offset + rel } : {}),
      ...at,
    };
  }
  return { code: 'cbor-malformed', message: `unreadable: ${(e as Error)?.message ?? String(e)}`, offset: item.offset, ...at };
}

const MAJOR_NAMES = ['unsigned integer', 'negative integer', 'byte string', 'text string', 'array', 'map', 'tag', 'simple value or float'];

/**
 * Describes one item. @throws FaultError with the code, field and byte offset of the refusal.
 */
export function describe(item: Item, hints: SignerHints): ObjectReport {
  const b = item.bytes;
  if (b.length === 0) fail({ code: 'cbor-malformed', message: 'an empty item (a zero-length jcp/1 body?)', offset: item.offset });
  const major = majorOf(b[0]!);
  const base = { offset: item.offset, length: b.length };
  try {
    if (major === 6 || (major === 4 && b[0] === 0x84)) return { ...base, ...receipt(b) };
    if (major !== 5) {
      decode(b); // a byte-level fault gets the code a node would give (forbidden type, malformed…)
      fail({
        code: InputCodes.UNKNOWN_SHAPE,
        message: `a CBOR ${MAJOR_NAMES[major]} is not a JCP object (JCP objects are maps, receipts are tag 18)`,
        offset: item.offset,
      });
    }
    const v = decode(b) as Obj;
    return { ...base, ...ofMap(v, b, hints) };
  } catch (e) {
    throw new FaultError(faultOf(e, item));
  }
}

type Described = Omit<ObjectReport, 'offset' | 'length'>;

function report(kind: Kind, value: Json, rest: Partial<Omit<Described, 'kind' | 'value' | 'description'>> = {}): Described {
  return { kind, description: KINDS[kind], ...rest, value };
}

function has(o: Obj, ...keys: string[]): boolean {
  return keys.every((k) => Object.hasOwn(o, k));
}

function keysOf(o: Obj): string {
  return Object.keys(o).join(', ') || '(none)';
}

/** Classifies a decoded map by its keys and reads it with the core's reader for that kind. */
function ofMap(o: Obj, bytes: Uint8Array, hints: SignerHints): Described {
  if (has(o, 'frame')) return wireRequest(o);
  if (has(o, 'decision')) return wireResponse(bytes);
  if (has(o, 'error') || has(o, 'revoke') || has(o, 'revoked')) return wireOther(bytes);
  if (has(o, 'grant', 'signature')) return signedGrant(o);
  if (has(o, 'body', 'signature')) return signedBody(o, hints);
  if (has(o, 'jcp_receipt')) {
    const core = readJcr1ReceiptCore(o);
    return report('receipt-core', cborJson(core), {
      checks: { verdict: core.verdict, ...(core.deny_reason ? { deny_reason: core.deny_reason } : {}) },
    });
  }
  if (has(o, 'issuer', 'capability')) {
    const g = readGrant(o);
    return report('grant', cborJson(g), {
      id: grantId(g),
      signature: { valid: null, signer: g.issuer, role: 'issuer', note: 'a bare grant carries no signature' },
    });
  }
  if (has(o, 'kind', 'trust', 'payload_hash')) return report('frame', cborJson(readFrame(o)));
  if (has(o, 'statements', 'overdraft')) {
    const p = readOverdraftProof(o);
    const r = verifyOverdraftProof(p);
    return report('overdraft-proof', cborJson(p), {
      checks: r.ok ? { proven: true, overdraft_uj: r.value.toString() } : { proven: false, code: r.error.code, why: r.error.why },
    });
  }
  const body = bodyKind(o);
  if (body !== undefined) return unsignedBody(body, o);
  fail({ code: InputCodes.UNKNOWN_SHAPE, message: `a map with keys {${keysOf(o)}} is no JCP object inspect knows` });
}

type BodyKind = 'revocation' | 'statement' | 'key-event' | 'mint-policy' | 'checkpoint' | 'amendment';

/** Which signed-body kind a body map is, by its keys (docs/design.md "Encodings": `{body, signature}`). */
function bodyKind(o: Obj): BodyKind | undefined {
  if (has(o, 'revoked_by')) return 'revocation';
  if (has(o, 'point', 'spent_uj')) return 'statement';
  if (has(o, 'identity', 'next_hash')) return 'key-event';
  if (has(o, 'event_class', 'per_firing_uj')) return 'mint-policy';
  if (has(o, 'checkpoint', 'budget_uj')) return 'amendment';
  if (has(o, 'grant_id', 'state')) return 'checkpoint';
  return undefined;
}

function unsignedBody(kind: BodyKind, o: Obj): Described {
  const note = { valid: null, note: 'an unsigned body: nothing to verify' } as const;
  switch (kind) {
    case 'revocation': {
      const sr = readSignedRevocation({ body: o, signature: new Uint8Array(64) });
      return report('revocation-body', cborJson(sr.body), { id: revocationId(sr.body), signature: note });
    }
    case 'statement':
      return report('statement-body', cborJson(readStatement(o)), { id: contentId(o), signature: note });
    case 'key-event':
      return report('key-event-body', cborJson(readKeyEvent(o)), { id: contentId(o), signature: note });
    case 'mint-policy':
      return report('mint-policy-body', cborJson(readMintPolicy(o)), { id: contentId(o), signature: note });
    case 'checkpoint':
      return report('checkpoint-body', cborJson(readCheckpoint(o)), { id: contentId(o), signature: note });
    case 'amendment':
      return report('amendment-body', cborJson(readAmendment(o)), { id: contentId(o), signature: note });
  }
}

function signedGrant(o: Obj): Described {
  const sg = readSignedGrant(o);
  const g = sg.grant;
  return report(
    'signed-grant',
    { grant: cborJson(g), signature: hex(sg.signature) },
    {
      id: grantId(g),
      signature: { valid: verifyGrantSignature(sg), signer: g.issuer, role: 'issuer' },
      checks: { root: g.parent === undefined, ...(g.parent !== undefined ? { parent: g.parent } : {}) },
    },
  );
}

/** Tries each candidate signer; reports the first that verifies, else that none does. */
function trySigners(signed: Signed<unknown>, candidates: readonly { did: Did; role: string }[], hint: string): SignatureReport {
  if (candidates.length === 0) return { valid: null, note: `the body names no signer: ${hint}` };
  for (const c of candidates) if (verifyBody(signed, c.did)) return { valid: true, signer: c.did, role: c.role };
  return {
    valid: false,
    note: `verifies under none of: ${candidates.map((c) => `${c.did} (${c.role})`).join(', ')}`,
  };
}

/** A signed revocation: its id, the signature under `revoked_by`, and with `--grant` whether it names that grant and its issuer revokes. */
function describeRevocation(o: Obj, g: Grant | undefined): Described {
  const sr = readSignedRevocation(o);
  return report(
    'revocation',
    { body: cborJson(sr.body), signature: hex(sr.signature) },
    {
      id: revocationId(sr.body),
      signature: {
        valid: verifyBody({ body: revocationToCbor(sr.body), signature: sr.signature }, sr.body.revoked_by),
        signer: sr.body.revoked_by,
        role: 'revoked_by',
      },
      checks: g ? { names_the_grant: sr.body.grant_id === grantId(g), revoker_is_issuer: sr.body.revoked_by === g.issuer } : {},
    },
  );
}

/** A signed spend statement: its content id and the signature under its `point`. */
function describeStatement(o: Obj): Described {
  const ss = readSignedStatement(o);
  return report(
    'statement',
    { body: cborJson(ss.body), signature: hex(ss.signature) },
    {
      id: contentId(statementToCbor(ss.body)),
      signature: { valid: verifyStatement(ss), signer: ss.body.point, role: 'point' },
    },
  );
}

/** A signed key event: its id, the signature under `current`, its seq and parent. */
function describeKeyEvent(o: Obj): Described {
  const se = readSignedKeyEvent(o);
  return report(
    'key-event',
    { body: cborJson(se.body), signature: hex(se.signature) },
    {
      id: keyEventId(se),
      signature: { valid: verifyBody(o as unknown as Signed<unknown>, se.body.current), signer: se.body.current, role: 'current' },
      checks: { seq: se.body.seq, inception: se.body.seq === 0, ...(se.body.parent ? { parent: se.body.parent } : {}) },
    },
  );
}

/** A signed mint policy: its id, the signature tried under the grant issuer and `--signer`s, and with `--grant` whether it is bound to it and within its budget (µJ). */
function describeMintPolicy(o: Obj, g: Grant | undefined, given: readonly { did: Did; role: string }[]): Described {
  const sp = readSignedMintPolicy(o);
  const cands = [...(g ? [{ did: g.issuer, role: 'grant issuer' }] : []), ...given];
  return report(
    'mint-policy',
    { body: cborJson(sp.body), signature: hex(sp.signature) },
    {
      id: mintPolicyId(sp),
      signature: trySigners(
        o as unknown as Signed<unknown>,
        cands,
        'pass --grant <the standing grant> (its issuer signs) or --signer <did:key>',
      ),
      checks: g ? { bound_to_the_grant: sp.body.grant_id === grantId(g), within_budget: sp.body.per_firing_uj <= g.budget_uj } : {},
    },
  );
}

/** A signed checkpoint: its id, the signature tried under the grant subject and `--signer`s, and with `--grant` whether it names it. */
function describeCheckpoint(o: Obj, g: Grant | undefined, given: readonly { did: Did; role: string }[]): Described {
  const sc = readSignedCheckpoint(o);
  const cands = [...(g ? [{ did: g.subject, role: 'grant subject (the agent)' }] : []), ...given];
  return report(
    'checkpoint',
    { body: cborJson(sc.body), signature: hex(sc.signature) },
    {
      id: checkpointId(sc),
      signature: trySigners(
        o as unknown as Signed<unknown>,
        cands,
        'pass --grant <the checkpoint grant> (its subject signs) or --signer <did:key>',
      ),
      checks: g ? { names_the_grant: sc.body.grant_id === grantId(g) } : {},
    },
  );
}

/** A signed amendment: its id, the signature tried under the grant issuer and `--signer`s, and with `--grant` whether its budget (µJ) is within the grant's. */
function describeAmendment(o: Obj, g: Grant | undefined, given: readonly { did: Did; role: string }[]): Described {
  const sa = readSignedAmendment(o);
  const cands = [...(g ? [{ did: g.issuer, role: 'grant issuer' }] : []), ...given];
  return report(
    'amendment',
    { body: cborJson(sa.body), signature: hex(sa.signature) },
    {
      id: amendmentId(sa),
      signature: trySigners(
        o as unknown as Signed<unknown>,
        cands,
        'pass --grant <the steered grant> (its issuer signs) or --signer <did:key>',
      ),
      checks: g ? { within_budget: sa.body.budget_uj <= g.budget_uj } : {},
    },
  );
}

/** How each kind of signed body is described (see {@link signedBody}). */
const SIGNED_BODIES: Record<BodyKind, (o: Obj, g: Grant | undefined, given: readonly { did: Did; role: string }[]) => Described> = {
  revocation: describeRevocation,
  statement: describeStatement,
  'key-event': describeKeyEvent,
  'mint-policy': describeMintPolicy,
  checkpoint: describeCheckpoint,
  amendment: describeAmendment,
};

function signedBody(o: Obj, hints: SignerHints): Described {
  const raw = asObj(o, 'signed', ['body', 'signature']);
  const body = raw['body'];
  const kind =
    typeof body === 'object' && body !== null && !Array.isArray(body) && !(body instanceof Uint8Array) ? bodyKind(body as Obj) : undefined;
  if (kind === undefined) {
    fail({
      code: InputCodes.UNKNOWN_SHAPE,
      message: `a signed body with keys {${typeof body === 'object' && body !== null ? keysOf(body as Obj) : typeof body}} is no JCP object inspect knows`,
      field: 'body',
    });
  }
  const given = hints.signers.map((d) => ({ did: d, role: 'signer given by --signer' }));
  const g = hints.grant?.grant;
  return SIGNED_BODIES[kind](o, g, given);
}

/**
 * Reads a WireRequest field by field (the core reader refuses a payload-hash mismatch outright;
 * inspect reports it instead), then checks the caller signature, the payload hash and the chain.
 */
function wireRequest(v: Obj): Described {
  const o = asObj(v, 'request', ['frame', 'chain', 'caller', 'cost', 'now', 'signature'], ['payload']);
  const chain = asArray(o['chain'], 'request.chain', 256).map((g, i) => readSignedGrant(g, `request.chain[${i}]`));
  const payload = o['payload'] === undefined ? undefined : asBytes(o['payload'], 'request.payload');
  const req: WireRequest = {
    frame: readFrame(o['frame'], 'request.frame'),
    chain,
    caller: asDid(o['caller'], 'request.caller'),
    cost: readCost(o['cost'], 'request.cost'),
    now: asSafeUint(o['now'], 'request.now'),
    ...(payload !== undefined ? { payload } : {}),
    signature: asBytes(o['signature'], 'request.signature', 64),
  };
  const computed = payloadHash(payload);
  const verdict = chain.length > 0 ? verifyChain(chain) : undefined;
  return report(
    'wire-request',
    {
      frame: cborJson(req.frame),
      chain: chain.map((sg) => ({
        id: grantId(sg.grant),
        grant: cborJson(sg.grant),
        signature: hex(sg.signature),
        signature_valid: verifyGrantSignature(sg),
      })),
      caller: req.caller,
      cost: cborJson(req.cost),
      now: req.now,
      ...(payload !== undefined ? { payload: hex(payload) } : {}),
      signature: hex(req.signature),
    },
    {
      id: requestIdOf(req),
      signature: { valid: verifyWireRequestSignature(req), signer: req.caller, role: 'caller' },
      checks: {
        request_id: requestIdOf(req),
        payload_hash: { frame: req.frame.payload_hash, computed, match: req.frame.payload_hash === computed },
        chain:
          verdict === undefined
            ? { ok: false, reason: 'chain-broken', why: 'empty chain' }
            : verdict.ok
              ? { ok: true, links: chain.length, ids: verdict.value }
              : {
                  ok: false,
                  reason: verdict.error.reason,
                  ...(verdict.error.link !== undefined ? { link: verdict.error.link } : {}),
                  why: verdict.error.why ?? '',
                },
        caller_is_leaf_subject: chain.length > 0 && chain[chain.length - 1]!.grant.subject === req.caller,
      },
    },
  );
}

function wireResponse(bytes: Uint8Array): Described {
  const m = decodeWireMessage(bytes);
  if (m.kind !== 'response') throw new Error('unreachable: not a response');
  const r = m.response;
  let checks: JsonObj;
  let decoded: Json | undefined;
  try {
    const d = receipt(r.receipt);
    const c = (d.checks ?? {}) as { verdict?: string; deny_reason?: string };
    checks = {
      receipt_id: d.id ?? null,
      receipt_signature: d.signature?.valid ?? null,
      receipt: d.checks ?? {},
      decision_matches_receipt: c.verdict === r.decision.verdict && c.deny_reason === r.decision.deny_reason,
    };
    decoded = d.value;
  } catch (e) {
    const f = faultOf(e, { bytes: r.receipt, offset: 0 });
    checks = { receipt_error: { code: f.code, message: f.message, ...(f.offset !== undefined ? { offset_in_receipt: f.offset } : {}) } };
  }
  return report(
    'wire-response',
    {
      decision: cborJson(r.decision),
      receipt: hex(r.receipt),
      ...(decoded !== undefined ? { receipt_decoded: decoded } : {}),
      ...(r.result !== undefined ? { result: hex(r.result) } : {}),
    },
    { checks },
  );
}

function wireOther(bytes: Uint8Array): Described {
  const m = decodeWireMessage(bytes);
  switch (m.kind) {
    case 'error':
      return report('wire-error', cborJson(m.error));
    case 'revoke':
      return report(
        'wire-revoke',
        { revoke: { body: cborJson(m.revocation.body), signature: hex(m.revocation.signature) } },
        {
          id: revocationId(m.revocation.body),
          signature: {
            valid: verifyBody(
              { body: revocationToCbor(m.revocation.body), signature: m.revocation.signature },
              m.revocation.body.revoked_by,
            ),
            signer: m.revocation.body.revoked_by,
            role: 'revoked_by',
          },
        },
      );
    case 'revoked':
      return report('wire-revoked', { revoked: { grant_id: m.grant_id } });
    default:
      throw new Error(`unreachable: ${m.kind}`);
  }
}

/**
 * A receipt (§8): verified with `openJcr1Receipt`, so a receipt from another implementation that
 * carries only §8's fields (no `seq`, `prev`, `request_id`, `at`) verifies like one of ours;
 * `checks.log_fields` says whether it carries our log position. A receipt whose signature does
 * not verify (or whose core names another steward than its kid) is still shown, decoded, with the
 * verdict; any other refusal is a fault.
 */
function receipt(bytes: Uint8Array): Described {
  const opened = openJcr1Receipt(bytes);
  // Decode the envelope again (its errors carry byte offsets) to show the content.
  const { msg, kid } = decodeJcrSign1(bytes);
  const steward = new TextDecoder().decode(kid);
  if (!opened.ok && opened.error.code !== 'signature-invalid' && opened.error.code !== 'steward-mismatch') {
    // Re-run the failing step for its thrown error (field, offset), not only its code.
    try {
      parseDid(steward);
    } catch (e) {
      if (isJcpError(e)) throw new JcpError(e.code, `kid: ${e.message}`, { field: 'protected.kid' });
      throw e;
    }
    readJcr1ReceiptCore(payloadOf(msg.payload, bytes));
    throw new FaultError({ code: opened.error.code, message: opened.error.why });
  }
  const core = opened.ok ? opened.value : readJcr1ReceiptCore(payloadOf(msg.payload, bytes));
  const valid = opened.ok || opened.error.code === 'steward-mismatch';
  return report(
    'receipt',
    { protected: { alg: -8, kid: steward }, core: cborJson(core) },
    {
      id: receiptId(bytes),
      signature: {
        valid,
        signer: steward,
        role: 'steward (COSE kid)',
        ...(opened.ok ? {} : { note: `${opened.error.code}: ${opened.error.why}` }),
      },
      checks: {
        steward,
        steward_matches_kid: core.steward === steward,
        log_fields: core.seq !== undefined && core.at !== undefined,
        seq: core.seq ?? null,
        prev: core.prev ?? null,
        verdict: core.verdict,
        ...(core.deny_reason !== undefined ? { deny_reason: core.deny_reason } : {}),
        ...(core.request_id !== undefined ? { request_id: core.request_id } : {}),
      },
    },
  );
}

/**
 * Strictly decodes a receipt payload; a refusal's byte offset is made relative to the whole
 * COSE_Sign1 item when the payload is a view into it.
 */
function payloadOf(payload: Uint8Array, envelope: Uint8Array): unknown {
  try {
    return decode(payload);
  } catch (e) {
    if (!isJcpError(e) || payload.buffer !== envelope.buffer) throw e;
    const start = payload.byteOffset - envelope.byteOffset;
    let rel = typeof e.detail?.['offset'] === 'number' ? (e.detail['offset'] as number) : undefined;
    if (rel === undefined && e.code === 'cbor-non-canonical') rel = firstNonCanonicalByte(payload);
    if (rel === undefined && e.code === 'cbor-forbidden-type') rel = firstForbiddenHead(payload);
    throw new JcpError(e.code, `receipt payload: ${e.message}`, { ...e.detail, ...(rel !== undefined ? { offset: start + rel } : {}) });
  }
}
