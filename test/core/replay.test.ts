/** Replay of the receipt stream (spec §8.1, C14, C16): the log is the write-ahead log. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  attributionKey,
  BreakCodes,
  decide,
  encode,
  encodeSign1,
  ErrorCodes,
  grantId,
  jcrProtectedHeader,
  type Ledger,
  openReceipt,
  readOwnReceipt,
  REPLAYED_FIELDS,
  readVouchedReceipt,
  receiptCoreFor,
  receiptCoreToCbor,
  receiptId,
  ReceiptRefusals,
  replayReceipts,
  RevocationSet,
  sealReceipt,
  type SignedGrant,
  signRevocation,
  TrustRoots,
} from '../../core/internal.ts';
import { alice, bob, carol, child, mallory, request, root, rootGrant, steward, TestSteward } from './evidence-fixtures.ts';

const ledgerOf = (l: Ledger) => new Map(l.entries());

/** A team under one root: carol holds the root and gives alice and bob sub-grants. */
function team() {
  const top = rootGrant(carol, 10_000n);
  const a = child(top, carol, alice, 6_000n);
  const b = child(top, carol, bob, 6_000n);
  return { top, a, b };
}

/** A mixed log: allows and denies for two workers, chained, with request ids. */
function mixedLog() {
  const { top, a, b } = team();
  const s = new TestSteward();
  const plan: [SignedGrant[], typeof alice, bigint][] = [
    [[top, a], alice, 1_000n],
    [[top, b], bob, 2_000n],
    [[top, a], alice, 3_000n],
    [[top, b], bob, 3_500n], // root has 4_000 left: allow
    [[top, a], alice, 1_000n], // root has 500 left: deny
    [[top, b], alice, 10n], // alice on bob's grant, wrong subject: deny
    [[top, a], alice, 500n], // exactly the root's last 500: allow
  ];
  plan.forEach(([chain, who, uj], i) => {
    s.handle(request(chain, who, uj), (i + 1).toString(16).padStart(64, '0'));
  });
  return { s, top, a, b };
}

describe('replay - a fresh ledger restores spend from the verified stream (C14)', () => {
  const { s, top, a, b } = mixedLog();
  const r = replayReceipts(s.receipts, { steward: steward.did });

  it('the replayed ledger equals the original, leaf and ancestor debits alike', () => {
    expect(ledgerOf(r.ledger)).toEqual(ledgerOf(s.ledger));
    expect(r.ledger.spent(grantId(top.grant))).toBe(10_000n);
    expect(r.ledger.spent(grantId(a.grant))).toBe(4_500n);
    expect(r.ledger.spent(grantId(b.grant))).toBe(5_500n);
  });
  it('counts allows and denies, with no rejections and no breaks', () => {
    expect([r.allowed, r.denied, r.rejected.length, r.breaks.length, r.total]).toEqual([5, 2, 0, 0, 7]);
  });
  it('attribution per (grant_id, subject) matches the original ledger', () => {
    const aa = r.attribution.get(attributionKey(grantId(a.grant), alice.did));
    const bb = r.attribution.get(attributionKey(grantId(b.grant), bob.did));
    expect(aa).toMatchObject({ allowed: 3, refused: 1, uj: s.ledger.spent(grantId(a.grant)) });
    // alice's refused call on bob's grant counts against (bob's grant, bob): the receipt names the grant's subject
    expect(bb).toMatchObject({ allowed: 2, refused: 1, uj: s.ledger.spent(grantId(b.grant)) });
    expect(r.attribution.has(attributionKey(grantId(b.grant), alice.did))).toBe(false);
    const total = [...r.attribution.values()].reduce((n, x) => n + x.allowed + x.refused, 0);
    expect(total).toBe(7);
  });
  it('rebuilds the request index: request_id → the receipt that answered it', () => {
    expect(r.requests.size).toBe(7);
    expect(r.requests.get((3).toString(16).padStart(64, '0'))).toBe(s.receipts[2]);
  });
  it('reports the head: last seq and receipt id', () => {
    expect(r.lastSeq).toBe(6);
    expect(r.lastId).toBe(receiptId(s.receipts[6]!));
  });
  it('the replayed state keeps conserving: the next call on either sibling is denied budget-exceeded', () => {
    const state = { ledger: r.ledger, revoked: new RevocationSet(), trust: new TrustRoots() };
    const d = decide(request([top, b], bob, 1n), state);
    expect(d.verdict === 'deny' && d.deny.reason).toBe('budget-exceeded');
    expect(d.verdict === 'deny' && d.deny.link).toBe(0);
  });
});

describe('replay - bad evidence is counted, never applied (C14)', () => {
  it('deny / a tampered receipt contributes nothing and is counted with its index', () => {
    const { s, a } = mixedLog();
    const log = s.receipts.map((x) => new Uint8Array(x));
    log[2]![log[2]!.length - 5]! ^= 0x40; // alice's 3_000 µJ allow
    const r = replayReceipts(log);
    expect(r.rejected).toEqual([{ index: 2, code: ErrorCodes.SIGNATURE_INVALID, why: expect.any(String) }]);
    expect(r.ledger.spent(grantId(a.grant))).toBe(s.ledger.spent(grantId(a.grant)) - 3_000n);
    expect(r.allowed + r.denied + r.rejected.length).toBe(7);
    // the next receipt's prev names bytes the replay never accepted: a gap is reported too
    expect(r.breaks).toEqual([expect.objectContaining({ index: 3, code: BreakCodes.SEQ_GAP, expectedSeq: 2, seq: 3 })]);
  });
  it('vouched / signatures unchecked: the changed receipt is read, but its id no longer matches the next prev (the caller must check)', () => {
    const { s } = mixedLog();
    const log = s.receipts.map((x) => new Uint8Array(x));
    log[2]![log[2]!.length - 5]! ^= 0x40; // in the signature
    const r = replayReceipts(log, { vouched: true });
    expect(r.rejected).toEqual([]);
    expect(r.breaks).toEqual([expect.objectContaining({ index: 3, code: BreakCodes.PREV_MISMATCH, expectedSeq: 3, seq: 3 })]);
    // untouched, the same state as a verified replay
    const clean = replayReceipts(s.receipts, { vouched: true });
    expect(ledgerOf(clean.ledger)).toEqual(ledgerOf(s.ledger));
    expect(clean.breaks).toEqual([]);
    // every other check still runs: garbage and another steward are refused
    const odd = replayReceipts([new Uint8Array([1, 2, 3]), ...s.receipts], { vouched: true, steward: mallory.did });
    expect(odd.rejected[0]).toMatchObject({ index: 0, code: ErrorCodes.CBOR_MALFORMED });
    expect(odd.rejected.slice(1).every((x) => x.code === ReceiptRefusals.WRONG_STEWARD)).toBe(true);
    expect(odd.rejected.length).toBe(1 + s.receipts.length);
  });
  it('vouched with the steward: the lean read gives the same state as a verified replay, and the same fields', () => {
    const { s } = mixedLog();
    const full = replayReceipts(s.receipts, { steward: steward.did });
    expect(full.denied).toBeGreaterThan(0);
    expect(replayReceipts(s.receipts, { steward: steward.did, vouched: true })).toEqual(full);
    for (const bytes of s.receipts) {
      const { value: core } = openReceipt(bytes, steward.did) as unknown as { value: Record<string, unknown> };
      const lean = readOwnReceipt(bytes, steward.did);
      expect(lean.ok).toBe(true);
      const fields = Object.keys((lean as { value: object }).value);
      expect(fields.length).toBeGreaterThanOrEqual(7);
      expect((lean as { value: object }).value).toEqual(Object.fromEntries(fields.map((k) => [k, core[k]])));
      // every field a replay reads is there when the receipt has it
      for (const k of REPLAYED_FIELDS) expect(fields.includes(k)).toBe(core[k] !== undefined);
      expect(REPLAYED_FIELDS).toContain('chain_ids');
    }
  });
  it('vouched with the steward: bytes not in the sealed shape get the full read and its refusal', () => {
    const { s } = mixedLog();
    const sealed = s.receipts[0]!;
    const core = openReceipt(sealed, steward.did);
    if (!core.ok) throw new Error('setup');
    /** A receipt of `steward`'s with the core changed (signature zeroed: neither read checks it). */
    const forged = (patch: Record<string, unknown>) =>
      encodeSign1({
        protectedBytes: jcrProtectedHeader(new TextEncoder().encode(steward.did)),
        unprotected: new Map(),
        payload: encode(
          Object.fromEntries(Object.entries({ ...receiptCoreToCbor(core.value), ...patch }).filter(([, v]) => v !== undefined)),
        ),
        signature: new Uint8Array(64),
      });
    const other = new TestSteward(mallory);
    other.handle(request([rootGrant(alice, 100n)], alice, 50n));
    expect(readOwnReceipt(other.receipts[0]!, steward.did)).toMatchObject({ ok: false, error: { code: ReceiptRefusals.WRONG_STEWARD } });
    expect(readOwnReceipt(new Uint8Array([1, 2, 3]), steward.did)).toMatchObject({ ok: false, error: { code: ErrorCodes.CBOR_MALFORMED } });
    const patches: Record<string, unknown>[] = [
      { verdict: 'maybe' },
      { deny_reason: 'revoked' },
      { verdict: 'deny' },
      { seq: 'one' },
      { at: 'later' },
      { cost_uj: 'x' },
      { steward: alice.did },
      { grant_id: 7 },
      { subject: 7 },
      { prev: 7 },
      { request_id: 7 },
      { chain_ids: 'x' },
      // Read fields with the right type but a value the full read refuses (helper-31).
      { grant_id: 'x' },
      { grant_id: 'x', chain_ids: undefined },
      { grant_id: core.value.grant_id.toUpperCase(), chain_ids: undefined },
      { subject: 'bob' },
      { prev: 'x' },
      { request_id: 'x' },
      { chain_ids: [] },
      { chain_ids: [core.value.grant_id] },
      { chain_ids: [core.value.grant_id, core.value.grant_id] },
      { chain_ids: ['ab'.repeat(32), 'cd'.repeat(32)] },
      { chain_ids: ['x', core.value.grant_id] },
      { chain_ids: [...Array.from({ length: 1024 }, (_, i) => i.toString(16).padStart(64, '0')), core.value.grant_id] },
    ];
    for (const patch of patches) {
      const bytes = forged(patch);
      const want = readVouchedReceipt(bytes, steward.did);
      expect(want.ok).toBe(false);
      expect(readOwnReceipt(bytes, steward.did)).toEqual(want);
    }
    // A field the replay does not read is stepped over unchecked (the caller vouches for the bytes):
    // the lean read accepts what the full read refuses for it, which shows it was the one that read.
    const odd = forged({ issuer: 'not a did' });
    expect(readVouchedReceipt(odd, steward.did)).toMatchObject({ ok: false, error: { code: ErrorCodes.DID_INVALID } });
    expect(readOwnReceipt(odd, steward.did)).toMatchObject({ ok: true, value: { grant_id: core.value.grant_id, seq: core.value.seq } });
    // A deny may name a grant twice (it debits nothing): still the lean read.
    const twice = [core.value.grant_id, core.value.grant_id];
    const deny = forged({ issuer: 'not a did', verdict: 'deny', deny_reason: 'revoked', chain_ids: twice });
    expect(readOwnReceipt(deny, steward.did)).toMatchObject({ ok: true, value: { verdict: 'deny', chain_ids: twice } });
    // A steward argument that is no did:key is refused as the full read refuses it.
    const fake = 'did:key:z6MkNOTAKEY' as typeof steward.did;
    const fakeSealed = encodeSign1({
      protectedBytes: jcrProtectedHeader(new TextEncoder().encode(fake)),
      unprotected: new Map(),
      payload: encode({ ...receiptCoreToCbor(core.value), steward: fake }),
      signature: new Uint8Array(64),
    });
    expect(readVouchedReceipt(fakeSealed, fake)).toMatchObject({ ok: false, error: { code: ErrorCodes.DID_INVALID } });
    expect(readOwnReceipt(fakeSealed, fake)).toEqual(readVouchedReceipt(fakeSealed, fake));
  });
  it('deny / garbage bytes are rejected with a decoder code', () => {
    const { s } = mixedLog();
    const r = replayReceipts([new Uint8Array([1, 2, 3]), ...s.receipts]);
    expect(r.rejected).toEqual([{ index: 0, code: ErrorCodes.CBOR_MALFORMED, why: expect.any(String) }]);
    expect(ledgerOf(r.ledger)).toEqual(ledgerOf(s.ledger));
  });
  it('deny / a receipt from another steward is rejected when the steward is pinned', () => {
    const { s } = mixedLog();
    const other = new TestSteward(mallory);
    other.handle(request([rootGrant(alice, 100n)], alice, 50n));
    const r = replayReceipts([...s.receipts, ...other.receipts], { steward: steward.did });
    expect(r.rejected).toEqual([{ index: 7, code: ReceiptRefusals.WRONG_STEWARD, why: expect.any(String) }]);
  });
  it('two stewards in one stream are tracked separately when not pinned', () => {
    const { s } = mixedLog();
    const other = new TestSteward(mallory);
    other.handle(request([rootGrant(alice, 100n)], alice, 50n));
    other.handle(request([rootGrant(alice, 100n)], alice, 50n));
    const r = replayReceipts([s.receipts[0]!, other.receipts[0]!, s.receipts[1]!, other.receipts[1]!]);
    expect(r.breaks).toEqual([]);
    expect(r.heads.get(mallory.did)?.seq).toBe(1);
    expect(r.heads.get(steward.did)?.seq).toBe(1);
  });
});

describe('replay - log continuity (seq, prev)', () => {
  const { s } = mixedLog();
  it('deny / a deleted receipt is a seq gap', () => {
    const r = replayReceipts([...s.receipts.slice(0, 3), ...s.receipts.slice(4)]);
    expect(r.breaks).toEqual([expect.objectContaining({ index: 3, code: BreakCodes.SEQ_GAP, expectedSeq: 3, seq: 4 })]);
  });
  it('deny / a reorder is reported, and each receipt is still applied once', () => {
    const log = [...s.receipts];
    [log[1], log[2]] = [log[2]!, log[1]!];
    const r = replayReceipts(log);
    // 0, 2, 1, 3…: 2 jumps ahead (gap), 1 steps back (reorder), 3 follows 2 and links to it (no break)
    expect(r.breaks.map((x) => [x.index, x.code])).toEqual([
      [1, BreakCodes.SEQ_GAP],
      [2, BreakCodes.SEQ_REORDER],
    ]);
    expect(ledgerOf(r.ledger)).toEqual(ledgerOf(s.ledger));
  });
  it('deny / a duplicated entry is reported and not applied twice', () => {
    const r = replayReceipts([...s.receipts, s.receipts[0]!]);
    expect(r.breaks).toEqual([expect.objectContaining({ index: 7, code: BreakCodes.DUPLICATE })]);
    expect(ledgerOf(r.ledger)).toEqual(ledgerOf(s.ledger));
    expect(r.allowed).toBe(5);
  });
  it('deny / a receipt whose prev names another receipt is a broken link', () => {
    const { top, a } = team();
    const req = request([top, a], alice, 1n);
    const d = decide(req, { ledger: s.ledger, revoked: new RevocationSet(), trust: new TrustRoots() });
    const forkPrev = sealReceipt(receiptCoreFor(req, d, { steward: steward.did, seq: 7, prev: receiptId(s.receipts[5]!) }), steward);
    const r = replayReceipts([...s.receipts, forkPrev]);
    expect(r.breaks).toEqual([expect.objectContaining({ index: 7, code: BreakCodes.PREV_MISMATCH })]);
  });
  it('deny / a log that does not start at seq 0', () => {
    const r = replayReceipts(s.receipts.slice(2));
    expect(r.breaks).toEqual([expect.objectContaining({ index: 0, code: BreakCodes.SEQ_GAP, expectedSeq: 0, seq: 2 })]);
  });
  it('a suffix replays cleanly from a declared start (seq and prev)', () => {
    const r = replayReceipts(s.receipts.slice(2), { start: { seq: 2, prev: receiptId(s.receipts[1]!) } });
    expect(r.breaks).toEqual([]);
  });
  it('replays into a given ledger (a snapshot plus the log after it)', () => {
    const first = replayReceipts(s.receipts.slice(0, 4));
    const rest = replayReceipts(s.receipts.slice(4), { ledger: first.ledger, start: { seq: 4, prev: first.lastId! } });
    expect(rest.breaks).toEqual([]);
    expect(ledgerOf(rest.ledger)).toEqual(ledgerOf(s.ledger));
  });
});

describe('replay - chained streams (C16)', () => {
  it('a depth-3 chain: replay restores leaf and every ancestor exactly', () => {
    const top = rootGrant(carol, 1_000n);
    const mid = child(top, carol, bob, 800n);
    const leaf = child(mid, bob, alice, 300n);
    const s = new TestSteward();
    s.handle(request([top, mid, leaf], alice, 120n));
    s.handle(request([top, mid], bob, 200n));
    s.handle(request([top, mid, leaf], alice, 200n)); // leaf has 180 left: deny
    const r = replayReceipts(s.receipts);
    expect([grantId(top.grant), grantId(mid.grant), grantId(leaf.grant)].map((id) => r.ledger.spent(id))).toEqual([320n, 320n, 120n]);
    expect(ledgerOf(r.ledger)).toEqual(ledgerOf(s.ledger));
  });
  it('deny-only receipts leave the ledger empty', () => {
    const s = new TestSteward();
    s.handle(request([rootGrant(alice, 10n)], alice, 11n));
    s.handle(request([rootGrant(alice, 10n)], alice, 1n, { trust: 'data' }));
    const r = replayReceipts(s.receipts);
    expect([r.allowed, r.denied, r.ledger.size]).toEqual([0, 2, 0]);
  });
  it('a revoked deny is collected as a hint', () => {
    const g = rootGrant(alice, 10n);
    const s = new TestSteward();
    const adm = s.revoked.admit(signRevocation(grantId(g.grant), root, new Uint8Array(16)), g.grant);
    expect(adm.ok).toBe(true);
    s.handle(request([g], alice, 1n));
    expect([...replayReceipts(s.receipts).revokedSeen]).toEqual([grantId(g.grant)]);
  });
  it('property: for any schedule of calls by two workers, replay equals the original ledger', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.boolean(), fc.bigInt({ min: 0n, max: 4_000n })), { maxLength: 25 }), (calls) => {
        const { top, a, b } = team();
        const s = new TestSteward();
        for (const [useA, uj] of calls) s.handle(useA ? request([top, a], alice, uj) : request([top, b], bob, uj));
        const r = replayReceipts(s.receipts, { steward: steward.did });
        expect(ledgerOf(r.ledger)).toEqual(ledgerOf(s.ledger));
        expect(r.ledger.spent(grantId(top.grant)) <= 10_000n).toBe(true);
        expect(r.allowed + r.denied).toBe(calls.length);
      }),
      { numRuns: 60, seed: 3 },
    );
  });
});
