/**
 * `receipts.json`: JCR-1 receipts (spec §8; C5) — the core, its canonical payload, the protected
 * header, the Sig_structure and the tagged COSE_Sign1 — for one steward's log of allow and deny
 * decisions; tampered receipts with the refusal code a verifier must give; and receipt streams
 * replayed into a fresh ledger (§8.1; C14, C16): debits, rejections, continuity breaks,
 * attribution.
 */
import {
  concat,
  contentId,
  type ContentId,
  type Cost,
  decide,
  type DecisionRequest,
  ED25519_L,
  encode,
  encodeReceiptCore,
  encodeSign1,
  type Frame,
  jcrProtectedHeader,
  Ledger,
  openReceipt,
  readReceiptCore,
  type ReceiptCore,
  receiptCoreFor,
  receiptCoreToCbor,
  receiptId,
  replayReceipts,
  sealReceipt,
  sign,
  type SignedGrant,
  sigStructure,
  Tagged,
  TrustRoots,
  utf8,
} from '../core/index.ts';
import type { Checker } from '../conformance/index.ts';
import { threeLinks } from './chains.ts';
import { actor, did, fileHeader, idOf, leafFrame, NOW_S, rootGrant, VectorCheck } from './fixtures.ts';
import { compact, dec, hex, type J, type JsonObj } from './json.ts';
import { rawEncode, rawHead } from './rawcbor.ts';

/** A receipt core as JSON: µJ as decimal strings, `seq`/`at` as numbers, absent fields left out. */
export function coreJson(c: ReceiptCore): JsonObj {
  return compact({
    jcp_receipt: c.jcp_receipt,
    grant_id: c.grant_id,
    issuer: c.issuer,
    subject: c.subject,
    resource: c.resource,
    action: c.action,
    frame_kind: c.frame_kind,
    trust: c.trust,
    verdict: c.verdict,
    deny_reason: c.deny_reason,
    cost_uj: dec(c.cost_uj),
    energy_provenance: c.energy_provenance,
    budget_remaining_uj: dec(c.budget_remaining_uj),
    budget_uj: dec(c.budget_uj),
    steward: c.steward,
    chain_ids: c.chain_ids === undefined ? undefined : [...c.chain_ids],
    seq: c.seq,
    prev: c.prev,
    request_id: c.request_id,
    at: c.at,
  });
}

const UJ_FIELDS = new Set(['cost_uj', 'budget_remaining_uj', 'budget_uj']);

/** Reads a receipt core from JSON, validated by `readReceiptCore`. */
export function coreFromJson(j: J): ReceiptCore {
  const o: Record<string, unknown> = {};
  for (const [k, v] of j.entries()) {
    if (UJ_FIELDS.has(k)) o[k] = v.uint();
    else if (k === 'seq' || k === 'at') o[k] = v.num();
    else if (k === 'chain_ids') o[k] = v.strs();
    else o[k] = v.str();
  }
  return readReceiptCore(o, j.path);
}

interface Step {
  readonly name: string;
  readonly description: string;
  readonly chain: readonly SignedGrant[];
  readonly frame?: Partial<Frame>;
  readonly caller?: string;
  readonly cost?: Cost;
  readonly revoked?: readonly ContentId[];
  readonly requestId?: ContentId;
}

interface Sealed {
  readonly step: Step;
  readonly core: ReceiptCore;
  readonly bytes: Uint8Array;
}

/** Decides each step in turn (debiting allows) and seals the steward's log: seq 0, 1, … with prev links. */
function sealLog(steps: readonly Step[]): Sealed[] {
  const steward = actor('steward');
  const ledger = new Ledger();
  const out: Sealed[] = [];
  let prev: ContentId | undefined;
  for (const [seq, s] of steps.entries()) {
    const leaf = s.chain[s.chain.length - 1]!;
    const req: DecisionRequest = {
      frame: leafFrame(s.chain, s.frame),
      chain: s.chain,
      caller: s.caller ?? leaf.grant.subject,
      cost: s.cost ?? { uj: 100n, provenance: 'Estimator' },
      nowS: NOW_S + seq,
    };
    const d = decide(req, { ledger, revoked: new Set(s.revoked ?? []), trust: new TrustRoots() });
    if (d.verdict === 'allow') ledger.debit(d.chainIds, req.cost.uj);
    const core = receiptCoreFor(req, d, {
      steward: steward.did,
      seq,
      ...(prev !== undefined ? { prev } : {}),
      ...(s.requestId !== undefined ? { requestId: s.requestId } : {}),
    });
    const bytes = sealReceipt(core, steward);
    out.push({ step: s, core, bytes });
    prev = receiptId(bytes);
  }
  return out;
}

function receiptVector(r: Sealed): JsonObj {
  const protectedBytes = jcrProtectedHeader(utf8(r.core.steward));
  const payload = encodeReceiptCore(r.core);
  return {
    name: r.step.name,
    description: r.step.description,
    steward: r.core.steward,
    core: coreJson(r.core),
    payload_cbor: hex(payload),
    protected_header: hex(protectedBytes),
    sig_structure: hex(sigStructure(protectedBytes, payload)),
    signature: hex(r.bytes.subarray(r.bytes.length - 64)),
    cose_sign1: hex(r.bytes),
    receipt_id: receiptId(r.bytes),
  };
}

/** Signs a payload under a given protected header as the steward, with an optional unprotected map. */
function signedEnvelope(protectedBytes: Uint8Array, payload: Uint8Array, unprotected = new Map<number, unknown>()): Uint8Array {
  const signature = sign(actor('steward').key, sigStructure(protectedBytes, payload));
  return encodeSign1({ protectedBytes, unprotected, payload, signature });
}

function header(entries: [number, unknown][]): Uint8Array {
  return encode(new Map<number, unknown>(entries));
}

/** One tampered receipt: name, description, the COSE_Sign1 bytes, the expected error code, the expected steward DID. */
type Tamper = [string, string, Uint8Array, string, string?];

/** What every tampered receipt starts from: the sealed receipt, its kid, protected header, payload and 64-byte signature. */
interface TamperBase {
  readonly base: Sealed;
  readonly kid: Uint8Array;
  readonly protectedBytes: Uint8Array;
  readonly payload: Uint8Array;
  readonly sig: Uint8Array;
}

/** Receipts that must be refused (§6): signature, header, and content tampering, each with its error code. */
function tampered(base: Sealed): JsonObj[] {
  const kid = utf8(did('steward'));
  const protectedBytes = jcrProtectedHeader(kid);
  const t: TamperBase = {
    base,
    kid,
    protectedBytes,
    payload: encodeReceiptCore(base.core),
    sig: base.bytes.subarray(base.bytes.length - 64),
  };
  const cases = [...signatureTampers(t), ...headerTampers(t), ...contentTampers(t)];
  return cases.map(([name, description, bytes, code, expected]) =>
    compact({ name, description, cose_sign1: hex(bytes), expected_steward: expected, code }),
  );
}

/** The signature with S replaced by S + L (not reduced; RFC 8032 §5.1.7 requires S < L). */
function unreducedSignature(sig: Uint8Array): Uint8Array {
  let s = 0n;
  for (let i = 63; i >= 32; i--) s = (s << 8n) | BigInt(sig[i]!);
  s += ED25519_L;
  const unreduced = new Uint8Array(sig);
  for (let i = 32; i < 64; i++) {
    unreduced[i] = Number(s & 0xffn);
    s >>= 8n;
  }
  return unreduced;
}

/** Tampering with the payload, the signature bytes or their encoding. */
function signatureTampers({ base, protectedBytes, payload, sig }: TamperBase): Tamper[] {
  const bstr = (b: Uint8Array) => concat(rawHead(2, b.length), b);
  const unreduced = unreducedSignature(sig);
  const flippedSig = new Uint8Array(sig);
  flippedSig[63] = flippedSig[63]! ^ 0x01;
  const envelope = (sigBytes: Uint8Array, p = payload) =>
    encodeSign1({ protectedBytes, unprotected: new Map(), payload: p, signature: sigBytes });
  return [
    [
      'payload-changed',
      'action read → reae in the payload, signature kept',
      envelope(sig, encodeReceiptCore({ ...base.core, action: 'reae' })),
      'signature-invalid',
    ],
    ['signature-bit-flipped', 'the last signature bit flipped', envelope(flippedSig), 'signature-invalid'],
    ['s-not-reduced', 'the signature with S + L (S ≥ L must be refused)', envelope(unreduced), 'signature-invalid'],
    ['wrong-steward', 'a valid receipt, but the verifier expects mallory', base.bytes, 'wrong-steward', did('mallory')],
    [
      'long-form-length',
      'the signature’s byte-string length written in two bytes (0x59 0x00 0x40)',
      concat(Uint8Array.of(0xd2, 0x84), bstr(protectedBytes), Uint8Array.of(0xa0), bstr(payload), Uint8Array.of(0x59, 0x00, 0x40), sig),
      'cbor-non-canonical',
    ],
    [
      'payload-not-canonical',
      'the core map with unsorted keys, correctly signed',
      signedEnvelope(protectedBytes, rawEncode(receiptCoreToCbor(base.core), { unsorted: true })),
      'cbor-non-canonical',
    ],
  ];
}

/** Tampering with the COSE headers or tag: algorithm, crit, extra parameters, kid. */
function headerTampers({ base, kid, protectedBytes, payload, sig }: TamperBase): Tamper[] {
  return [
    [
      'alg-es256',
      'protected alg -7 (ES256), signed with the Ed25519 key',
      signedEnvelope(
        header([
          [1, -7],
          [4, kid],
        ]),
        payload,
      ),
      'cose-unsupported',
    ],
    [
      'crit-header',
      'a crit parameter in the protected header',
      signedEnvelope(
        header([
          [1, -8],
          [2, [3]],
          [4, kid],
        ]),
        payload,
      ),
      'cose-unsupported',
    ],
    [
      'alg-only-unprotected',
      'alg EdDSA only in the unprotected header (must come from the protected one)',
      signedEnvelope(header([[4, kid]]), payload, new Map([[1, -8]])),
      'cose-invalid',
    ],
    [
      'extra-protected-parameter',
      'protected {1: -8, 3: "application/cbor", 4: kid}',
      signedEnvelope(
        header([
          [1, -8],
          [3, 'application/cbor'],
          [4, kid],
        ]),
        payload,
      ),
      'cose-invalid',
    ],
    ['untagged', 'the COSE_Sign1 array without tag 18', base.bytes.subarray(1), 'cose-invalid'],
    ['wrong-tag', 'tag 98 (COSE_Sign) instead of 18', encode(new Tagged(98, [protectedBytes, new Map(), payload, sig])), 'cose-invalid'],
    [
      'kid-not-did',
      'kid = UTF-8 "steward"',
      signedEnvelope(
        header([
          [1, -8],
          [4, utf8('steward')],
        ]),
        payload,
      ),
      'did-invalid',
    ],
  ];
}

/** Correctly signed receipts whose content is wrong, and byte-level damage to the whole item. */
function contentTampers({ base, protectedBytes }: TamperBase): Tamper[] {
  return [
    [
      'steward-mismatch',
      'the core names mallory as steward; the kid and signature are the steward’s',
      signedEnvelope(protectedBytes, encodeReceiptCore({ ...base.core, steward: did('mallory') })),
      'steward-mismatch',
    ],
    [
      'deny-without-reason',
      'verdict deny with no deny_reason, correctly signed',
      signedEnvelope(protectedBytes, encode({ ...receiptCoreToCbor(base.core), verdict: 'deny' })),
      'schema',
    ],
    ['truncated', 'the last byte cut off', base.bytes.subarray(0, base.bytes.length - 1), 'cbor-malformed'],
    ['trailing-byte', 'a 0x00 byte after the item', concat(base.bytes, Uint8Array.of(0)), 'cbor-malformed'],
  ];
}

function streamVector(name: string, description: string, items: readonly Uint8Array[], steward?: string): JsonObj {
  const r = replayReceipts(items, steward !== undefined ? { steward } : {});
  const ledger: JsonObj = {};
  for (const [id, uj] of r.ledger.entries()) ledger[id] = dec(uj);
  return compact({
    name,
    description,
    steward,
    receipts: items.map(hex),
    expected: compact({
      total: r.total,
      allowed: r.allowed,
      denied: r.denied,
      rejected: r.rejected.map((x) => ({ index: x.index, code: x.code })),
      breaks: r.breaks.map((b) => ({ index: b.index, code: b.code, expected_seq: b.expectedSeq, seq: b.seq })),
      ledger,
      attribution: [...r.attribution.values()].map((a) => ({
        grant_id: a.grant_id,
        subject: a.subject,
        allowed: a.allowed,
        refused: a.refused,
        uj: dec(a.uj),
      })),
      last_seq: r.lastSeq,
      last_id: r.lastId,
    }),
  });
}

/** Builds `receipts.json`. */
export function generate(): JsonObj {
  const root = rootGrant('receipts/root');
  const chain = threeLinks('receipts/chain');
  const log = sealLog([
    { name: 'seq0-allow-direct', description: 'direct allow, 100 µJ', chain: [root] },
    {
      name: 'seq1-deny-wrong-subject',
      description: 'mallory calls with bob’s grant; carries a request_id',
      chain: [root],
      caller: did('mallory'),
      requestId: contentId({ vectors: 'receipts/seq1' }),
    },
    {
      name: 'seq2-allow-chained',
      description: 'three-link allow: chain_ids root first, HwShunt cost',
      chain,
      cost: { uj: 250n, provenance: 'HwShunt', measured: 247n },
    },
    { name: 'seq3-deny-revoked-ancestor', description: 'the root of the chain is revoked', chain, revoked: [idOf(chain[0]!)] },
    {
      name: 'seq4-deny-budget',
      description: 'a 5,000 µJ call on the direct grant',
      chain: [root],
      cost: { uj: 5000n, provenance: 'ModelBased' },
    },
  ]);
  const bytes = log.map((r) => r.bytes);
  const [r0, r1, r2, r3, r4] = bytes as [Uint8Array, Uint8Array, Uint8Array, Uint8Array, Uint8Array];
  const forgedR2 = encodeSign1({
    protectedBytes: jcrProtectedHeader(utf8(did('steward'))),
    unprotected: new Map(),
    payload: encodeReceiptCore({ ...log[2]!.core, cost_uj: 1n }),
    signature: r2.subarray(r2.length - 64),
  });
  return {
    ...fileHeader('receipts.json', 'JCR-1 receipts: sealing, refusals and replay', '§8, §8.1; C5, C14, C16'),
    receipts: log.map(receiptVector),
    tampered: tampered(log[0]!),
    streams: [
      streamVector('whole-log', 'the five receipts in order', bytes),
      streamVector('tampered-receipt-counted', 'receipt 2 with its cost changed: rejected, counted, never applied', [
        r0,
        r1,
        forgedR2,
        r3,
        r4,
      ]),
      streamVector('deletion', 'receipt 1 removed: a seq gap', [r0, r2, r3, r4]),
      streamVector('duplicate', 'receipt 1 twice: applied once', [r0, r1, r1, r2]),
      streamVector('reordered', 'receipts 1 and 2 swapped', [r0, r2, r1, r3]),
      streamVector('pinned-to-another-steward', 'replay accepting only mallory’s receipts', [r0, r1], did('mallory')),
    ],
  };
}

/** Re-checks `receipts.json` against our implementation. */
export function verify(doc: J, t: Checker): void {
  const c = new VectorCheck(t, 'receipts.json', doc);
  c.each(doc, 'receipts', (v) => {
    const core = coreFromJson(v.get('core'));
    const steward = c.actorByDid(v.get('steward').str(), `${v.path}.steward`);
    c.eq(core.steward, steward.did, 'the core names the steward');
    const payload = encodeReceiptCore(core);
    c.eq(hex(payload), v.get('payload_cbor').str(), 'payload = det-CBOR of the core');
    c.eq(hex(encode(receiptCoreToCbor(core))), hex(payload), 'the hand-written and the general encoder agree');
    const protectedBytes = jcrProtectedHeader(utf8(steward.did));
    c.eq(hex(protectedBytes), v.get('protected_header').str(), 'protected header {1: -8, 4: kid}');
    const tbs = sigStructure(protectedBytes, payload);
    c.eq(hex(tbs), v.get('sig_structure').str(), 'Sig_structure ["Signature1", protected, h\'\', payload]');
    c.eq(hex(sign(steward.key, tbs)), v.get('signature').str(), 'signature = Ed25519(steward, Sig_structure)');
    c.eq(hex(sealReceipt(core, steward)), v.get('cose_sign1').str(), 'the sealed COSE_Sign1, byte for byte');
    const bytes = v.get('cose_sign1').bytes();
    const opened = openReceipt(bytes, steward.did);
    c.ok(opened.ok, `opens under its steward${opened.ok ? '' : ` (${opened.error.code}: ${opened.error.why})`}`);
    if (opened.ok) c.eq(coreJson(opened.value), coreJson(core), 'the opened core is the stated core');
    c.eq(receiptId(bytes), v.get('receipt_id').str(), 'receipt id = blake3(COSE_Sign1 bytes)');
  });
  c.each(doc, 'tampered', (v) => {
    const r = openReceipt(v.get('cose_sign1').bytes(), v.opt('expected_steward')?.str());
    c.eq(r.ok ? 'opened' : r.error.code, v.get('code').str(), 'refusal code');
  });
  c.each(doc, 'streams', (v) => {
    const steward = v.opt('steward')?.str();
    const r = replayReceipts(
      v
        .get('receipts')
        .items()
        .map((x) => x.bytes()),
      steward !== undefined ? { steward } : {},
    );
    const e = v.get('expected');
    c.eq(r.total, e.get('total').num(), 'receipts read');
    c.eq(r.allowed, e.get('allowed').num(), 'allow receipts applied');
    c.eq(r.denied, e.get('denied').num(), 'deny receipts');
    c.eq(
      r.rejected.map((x) => ({ index: x.index, code: x.code })),
      e.get('rejected').raw(),
      'rejected receipts (counted, not applied)',
    );
    c.eq(
      r.breaks.map((b) => ({ index: b.index, code: b.code, expected_seq: b.expectedSeq, seq: b.seq })),
      e.get('breaks').raw(),
      'continuity breaks',
    );
    const ledger: Record<string, bigint> = {};
    for (const [id, uj] of r.ledger.entries()) ledger[id] = uj;
    const want: Record<string, bigint> = {};
    for (const [id, uj] of e.get('ledger').entries()) want[id] = uj.uint();
    c.eq(ledger, want, 'replayed ledger (leaf and ancestor debits)');
    // The published attribution is the five fields of §8.1 (chain_ids, used by the delegation
    // tree, is the implementation's own addition and not part of the vector).
    const attribution = [...r.attribution.values()].map((a) => ({
      grant_id: a.grant_id,
      subject: a.subject,
      allowed: a.allowed,
      refused: a.refused,
      uj: dec(a.uj),
    }));
    c.eq(attribution, e.get('attribution').raw(), 'per-(grant_id, subject) attribution');
    c.eq(r.lastSeq, e.opt('last_seq')?.num(), 'last seq');
    c.eq(r.lastId, e.opt('last_id')?.str(), 'last receipt id');
  });
}
