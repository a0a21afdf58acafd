/**
 * `jcp inspect`: every kind it recognises, fed from the published vectors, and bad inputs with
 * precise faults (code, field, item, byte offset).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { decode, encode, frameToCbor, readFrame, readSignedGrant } from '../../core/index.ts';
import {
  inspectBytes,
  inspectContents,
  inspectHex,
  type InspectOutcome,
  type InspectReport,
  renderFault,
  renderHuman,
} from '../../inspect/internal.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
type Vec = Record<string, unknown> & { name: string };
type Doc = Record<string, unknown>;
const load = (f: string) => JSON.parse(readFileSync(path.join(ROOT, 'conformance/v1', f), 'utf8')) as Doc;
const vec = (doc: Doc, sec: string, name: string): Vec => {
  const v = (doc[sec] as Vec[]).find((x) => x.name === name);
  if (!v) throw new Error(`no vector ${sec}/${name}`);
  return v;
};
const bytes = (h: string) => new Uint8Array(Buffer.from(h, 'hex'));

const grants = load('grants.json');
const receipts = load('receipts.json');
const wire = load('wire.json');
const statements = load('statements.json');
const rotation = load('rotation.json');
const standing = load('standing.json');
const revocations = load('revocations.json');
const decisions = load('decisions.json');

function report(out: InspectOutcome): InspectReport {
  if (!out.ok) throw new Error(`expected a report, got ${renderFault(out.fault)}`);
  return out.report;
}

function one(out: InspectOutcome) {
  const r = report(out);
  expect(r.items).toHaveLength(1);
  return r.items[0]!;
}

function fault(out: InspectOutcome) {
  if (out.ok) throw new Error(`expected a fault, got a ${out.report.kind}`);
  return out.fault;
}

describe('inspect / every kind', () => {
  it('signed grant: kind, id, signature valid under the issuer', () => {
    const v = vec(grants, 'grants', 'child-attenuated');
    const item = one(inspectHex(v['signed_grant_cbor'] as string));
    expect(item.kind).toBe('signed-grant');
    expect(item.id).toBe(v['id']);
    expect(item.signature).toMatchObject({ valid: true, signer: (v['grant'] as Vec)['issuer'], role: 'issuer' });
    expect((item.value as { grant: Vec }).grant['budget_uj']).toBe('400');
  });

  it('signed grant forged by mallory: decodes, signature does not verify', () => {
    const item = one(inspectHex(vec(grants, 'signature_checks', 'forged-by-mallory')['signed_grant_cbor'] as string));
    expect(item.kind).toBe('signed-grant');
    expect(item.signature?.valid).toBe(false);
  });

  it('bare grant: kind grant, id, no signature to check; a 2^64 − 1 budget stays exact', () => {
    const v = vec(grants, 'grants', 'root-budget-u64-max');
    const item = one(inspectHex(v['canonical_cbor'] as string));
    expect(item.kind).toBe('grant');
    expect(item.id).toBe(v['id']);
    expect(item.signature?.valid).toBeNull();
    expect((item.value as Vec)['budget_uj']).toBe('18446744073709551615');
  });

  it('revocation: valid under revoked_by; a forged one does not verify', () => {
    const good = vec(revocations, 'revocations', 'issuer-revokes-root')['revocation'] as Vec;
    const item = one(inspectHex(good['signed_cbor'] as string));
    expect(item.kind).toBe('revocation');
    expect(item.id).toBe(good['id']);
    expect(item.signature).toMatchObject({ valid: true, role: 'revoked_by' });
    const forged = vec(revocations, 'revocations', 'forged')['revocation'] as Vec;
    expect(one(inspectHex(forged['signed_cbor'] as string)).signature?.valid).toBe(false);
  });

  it('frame: kind frame with its six fields', () => {
    const f = (vec(decisions, 'decisions', 'direct/allow')['request'] as Vec)['frame'];
    const item = one(inspectBytes(encode(frameToCbor(readFrame(f)))));
    expect(item.kind).toBe('frame');
    expect(item.value).toEqual(f);
  });

  it('receipt: steward, seq and prev, signature valid', () => {
    const v = vec(receipts, 'receipts', 'seq2-allow-chained');
    const item = one(inspectHex(v['cose_sign1'] as string));
    const core = v['core'] as Vec;
    expect(item.kind).toBe('receipt');
    expect(item.id).toBe(v['receipt_id']);
    expect(item.signature).toMatchObject({ valid: true, signer: v['steward'] });
    expect(item.checks).toMatchObject({ steward: v['steward'], seq: 2, prev: core['prev'], verdict: 'allow' });
  });

  it('receipt with a changed payload: shown, signature does not verify', () => {
    const item = one(inspectHex(vec(receipts, 'tampered', 'payload-changed')['cose_sign1'] as string));
    expect(item.kind).toBe('receipt');
    expect(item.signature?.valid).toBe(false);
    expect(item.signature?.note).toContain('signature-invalid');
  });

  it('a CBOR sequence of receipts: five items, seq 0…4, each prev the id of the one before', () => {
    const all = (receipts['receipts'] as Vec[]).map((v) => v['cose_sign1'] as string).join('');
    const r = report(inspectHex(all));
    expect(r.kind).toBe('sequence');
    expect(r.items.map((i) => i.checks?.['seq'])).toEqual([0, 1, 2, 3, 4]);
    for (let i = 1; i < r.items.length; i++) expect(r.items[i]!.checks?.['prev']).toBe(r.items[i - 1]!.id);
    expect(r.items[1]!.offset).toBe(r.items[0]!.length);
  });

  it('wire request, framed or not: the same request id, caller signature and payload hash match', () => {
    const v = vec(wire, 'requests', 'direct-with-payload');
    const framed = report(inspectHex(v['framed'] as string));
    const bare = report(inspectHex(v['body'] as string));
    expect(framed.input.framed).toBe(true);
    expect(bare.input.framed).toBe(false);
    for (const r of [framed, bare]) {
      const item = r.items[0]!;
      expect(item.kind).toBe('wire-request');
      expect(item.checks).toMatchObject({ request_id: v['request_id'], payload_hash: { match: true } });
      expect(item.signature).toMatchObject({ valid: true, role: 'caller' });
    }
    expect(framed.items[0]!.offset).toBe(4);
  });

  it('wire request by an impersonator: the caller signature does not verify', () => {
    const item = one(inspectHex(vec(wire, 'impersonations', 'signed-by-mallory')['body'] as string));
    expect(item.kind).toBe('wire-request');
    expect(item.signature?.valid).toBe(false);
  });

  it('wire request whose payload changed: reported as a payload hash mismatch, not a crash', () => {
    const item = one(inspectHex(vec(wire, 'bad_frames', 'payload-hash-mismatch')['stream'] as string));
    expect(item.kind).toBe('wire-request');
    expect(item.checks).toMatchObject({ payload_hash: { match: false } });
  });

  it('wire response: the decision matches the receipt it carries', () => {
    const item = one(inspectHex(vec(wire, 'responses', 'deny-wrong-subject')['framed'] as string));
    expect(item.kind).toBe('wire-response');
    expect(item.checks).toMatchObject({
      receipt_signature: true,
      decision_matches_receipt: true,
      receipt: { verdict: 'deny', deny_reason: 'wrong-subject' },
    });
  });

  it('wire error, revoke and revoked messages', () => {
    expect(one(inspectHex(vec(wire, 'responses', 'error')['body'] as string)).kind).toBe('wire-error');
    const revoke = one(inspectHex(vec(wire, 'messages', 'revoke')['framed'] as string));
    expect(revoke.kind).toBe('wire-revoke');
    expect(revoke.signature?.valid).toBe(true);
    expect(one(inspectHex(vec(wire, 'messages', 'revoked')['body'] as string)).kind).toBe('wire-revoked');
  });

  it('two frames back to back: a framed sequence of a request and a response', () => {
    const s =
      (vec(wire, 'requests', 'direct-no-payload')['framed'] as string) + (vec(wire, 'responses', 'allow-with-result')['framed'] as string);
    const r = report(inspectHex(s));
    expect(r.input.framed).toBe(true);
    expect(r.items.map((i) => i.kind)).toEqual(['wire-request', 'wire-response']);
  });

  it('statement: valid under its point; forged: does not verify', () => {
    const steps = vec(statements, 'sequences', 'forged')['steps'] as Vec[];
    const good = one(inspectHex(steps[0]!['signed_cbor'] as string));
    expect(good.kind).toBe('statement');
    expect(good.signature).toMatchObject({ valid: true, role: 'point' });
    expect(one(inspectHex(steps[1]!['signed_cbor'] as string)).signature?.valid).toBe(false);
  });

  it('overdraft proof: proven overdraft in µJ', () => {
    const item = one(inspectHex(vec(statements, 'overdraft_proofs', 'overdraft-500')['proof_cbor'] as string));
    expect(item.kind).toBe('overdraft-proof');
    expect(item.checks).toMatchObject({ proven: true, overdraft_uj: '500' });
  });

  it('key event: valid under current, with its id and seq', () => {
    const ev = (vec(rotation, 'logs', 'two-rotations')['events'] as Vec[])[1]!;
    const item = one(inspectHex(ev['signed_cbor'] as string));
    expect(item.kind).toBe('key-event');
    expect(item.id).toBe(ev['id']);
    expect(item.signature).toMatchObject({ valid: true, role: 'current' });
    expect(item.checks).toMatchObject({ seq: 1, inception: false });
  });

  it('mint policy: unchecked without a signer; valid with its grant; not valid under another did:key', () => {
    const p = vec(standing, 'policies', 'authored');
    const policy = (p['expected'] as Vec)['policy'] as string;
    expect(one(inspectHex(policy)).signature?.valid).toBeNull();
    const grant = readSignedGrant(decode(bytes(p['grant'] as string)));
    const withGrant = one(inspectHex(policy, { grant }));
    expect(withGrant.kind).toBe('mint-policy');
    expect(withGrant.signature).toMatchObject({ valid: true, signer: grant.grant.issuer });
    expect(withGrant.checks).toMatchObject({ bound_to_the_grant: true });
    expect(one(inspectHex(policy, { signers: [grant.grant.subject] })).signature?.valid).toBe(false);
  });

  it('checkpoint and amendment: signed by the grant subject and issuer respectively', () => {
    const s = standing['steering'] as Vec;
    const grant = readSignedGrant(decode(bytes(s['grant'] as string)));
    const cp = one(inspectHex((s['checkpoint'] as Vec)['signed_cbor'] as string, { grant }));
    expect(cp.kind).toBe('checkpoint');
    expect(cp.id).toBe((s['checkpoint'] as Vec)['id']);
    expect(cp.signature).toMatchObject({ valid: true, signer: grant.grant.subject });
    const am = one(inspectHex((s['amendment'] as Vec)['signed_cbor'] as string, { grant }));
    expect(am.kind).toBe('amendment');
    expect(am.id).toBe((s['amendment'] as Vec)['id']);
    expect(am.signature).toMatchObject({ valid: true, signer: grant.grant.issuer });
  });

  it('every object hex string in the published vectors decodes as the kind its field names', () => {
    /** file → JSON key holding object hex → the kind inspect must report. */
    const KIND_BY_KEY: Record<string, Record<string, string[]>> = {
      'grants.json': { signed_grant_cbor: ['signed-grant'], canonical_cbor: ['grant'], parent: ['signed-grant'], child: ['signed-grant'] },
      'chains.json': { chain: ['signed-grant'] },
      'decisions.json': { chain: ['signed-grant'] },
      'receipts.json': { cose_sign1: ['receipt'], receipts: ['receipt'] },
      'wire.json': {
        body: ['wire-request', 'wire-response', 'wire-error', 'wire-revoke', 'wire-revoked'],
        framed: ['wire-request', 'wire-response', 'wire-error', 'wire-revoke', 'wire-revoked'],
        chain: ['signed-grant'],
        revocation_cbor: ['revocation'],
      },
      'rotation.json': { signed_cbor: ['key-event'] },
      'statements.json': { signed_cbor: ['statement'], proof_cbor: ['overdraft-proof'] },
      'standing.json': {
        standing: ['signed-grant'],
        grant: ['signed-grant'],
        child: ['signed-grant'],
        policy: ['mint-policy'],
        checkpoint: ['checkpoint'],
        amendment: ['amendment'],
        continuation: ['signed-grant'],
        chain: ['signed-grant'],
      },
      'shards.json': { parent: ['signed-grant'], signed_grant_cbor: ['signed-grant'] },
      'revocations.json': { grant: ['signed-grant'], signed_cbor: ['revocation'] },
    };
    const seen = new Map<string, number>();
    const walk = (file: string, v: unknown, key: string, where: string): void => {
      if (typeof v === 'string') {
        const kinds = KIND_BY_KEY[file]?.[key];
        // 64 hex characters are a content id (e.g. an amendment's `checkpoint`), not an object.
        if (kinds === undefined || v.length === 64 || !/^(?:[0-9a-f]{2})+$/.test(v)) return;
        const out = inspectHex(v);
        expect(out.ok ? out.report.items.map((i) => i.kind) : [renderFault(out.fault)], where).toEqual([expect.toBeOneOf(kinds)]);
        seen.set(kinds[0]!, (seen.get(kinds[0]!) ?? 0) + 1);
      } else if (Array.isArray(v)) {
        for (const [i, x] of v.entries()) walk(file, x, key, `${where}[${i}]`);
      } else if (typeof v === 'object' && v !== null) {
        // Refusal sections hold bytes that must not decode; they have their own tests below.
        for (const [k, x] of Object.entries(v))
          if (!['actors', 'tampered', 'bad_frames', 'decode_errors'].includes(k)) walk(file, x, k, `${where}.${k}`);
      }
    };
    for (const file of Object.keys(KIND_BY_KEY)) walk(file, load(file), '', file);
    expect([...seen.keys()].sort()).toEqual(
      [
        'amendment',
        'checkpoint',
        'grant',
        'key-event',
        'mint-policy',
        'overdraft-proof',
        'receipt',
        'revocation',
        'signed-grant',
        'statement',
        'wire-request',
      ].sort(),
    );
  });

  it('hex text and raw bytes from a file give the same report', () => {
    const h = vec(grants, 'grants', 'root-no-expiry')['signed_grant_cbor'] as string;
    const fromHex = report(inspectContents(new Uint8Array(Buffer.from(`0x${h}\n`))));
    const fromRaw = report(inspectContents(bytes(h)));
    expect(fromHex).toEqual(fromRaw);
    expect(renderHuman(fromRaw)).toContain('kind: signed-grant');
  });
});

describe('inspect / bad input is refused precisely', () => {
  it('a JSON file (e.g. a chain file) is named as JSON text, not read as a jcp/1 frame', () => {
    const f = fault(inspectBytes(new Uint8Array(Buffer.from('{"type": "jcp-chain", "chain": []}\n'))));
    expect(f.code).toBe('not-cbor');
    expect(f.message).toMatch(/JSON/);
  });

  it('refuse / non-canonical: unsorted keys, with the first non-canonical byte', () => {
    const f = fault(inspectHex(vec(grants, 'decode_errors', 'unsorted-keys')['cbor'] as string));
    expect(f.code).toBe('cbor-non-canonical');
    expect(f.offset).toBeGreaterThan(0);
  });

  it('refuse / non-canonical: a long-form integer, at its byte', () => {
    const h = vec(grants, 'decode_errors', 'long-form-integer')['cbor'] as string;
    const f = fault(inspectHex(h));
    expect(f.code).toBe('cbor-non-canonical');
    expect(bytes(h)[f.offset!]).toBe(0x1b);
  });

  it('refuse / non-canonical inside a framed body: the offset counts the 4-byte prefix', () => {
    const h = vec(wire, 'bad_frames', 'long-form-now')['stream'] as string;
    const f = fault(inspectHex(h));
    expect(f.code).toBe('cbor-non-canonical');
    expect(bytes(h)[f.offset!]).toBe(0x1b);
  });

  it('refuse / a float, with the offset of its head', () => {
    const h = vec(grants, 'decode_errors', 'float-budget')['cbor'] as string;
    const f = fault(inspectHex(h));
    expect(f.code).toBe('cbor-forbidden-type');
    expect(bytes(h)[f.offset!]).toBe(0xfb);
  });

  it('refuse / truncated: cbor-malformed at the item that runs past the end', () => {
    const h = vec(receipts, 'tampered', 'truncated')['cose_sign1'] as string;
    const f = fault(inspectHex(h));
    expect(f.code).toBe('cbor-malformed');
    expect(f.offset).toBeGreaterThan(0);
    expect(f.offset).toBeLessThan(h.length / 2);
  });

  it('refuse / trailing bytes after one object', () => {
    const h = `${vec(grants, 'grants', 'root-no-expiry')['signed_grant_cbor'] as string}00`;
    const f = fault(inspectHex(h));
    expect(f.code).toBe('cbor-malformed');
    expect(f.offset).toBe(h.length / 2 - 1);
    expect(f.item).toBe(1);
  });

  it('refuse / a schema fault names the field', () => {
    const f = fault(inspectHex(vec(grants, 'decode_errors', 'nonce-15-bytes')['cbor'] as string));
    expect(f).toMatchObject({ code: 'bad-length', field: 'signed_grant.grant.nonce' });
    const g = fault(inspectHex(vec(grants, 'decode_errors', 'issuer-not-did-key')['cbor'] as string));
    expect(g).toMatchObject({ code: 'did-invalid', field: 'signed_grant.grant.issuer' });
  });

  it('refuse / a receipt whose kid is no did:key names the protected kid', () => {
    const f = fault(inspectHex(vec(receipts, 'tampered', 'kid-not-did')['cose_sign1'] as string));
    expect(f).toMatchObject({ code: 'did-invalid', field: 'protected.kid' });
  });

  it('refuse / COSE faults keep their codes', () => {
    expect(fault(inspectHex(vec(receipts, 'tampered', 'alg-es256')['cose_sign1'] as string)).code).toBe('cose-unsupported');
    expect(fault(inspectHex(vec(receipts, 'tampered', 'untagged')['cose_sign1'] as string)).code).toBe('cose-invalid');
  });

  it('refuse / unknown shape: a map no JCP object has, and a bare integer', () => {
    expect(fault(inspectBytes(encode({ hello: 'world' })))).toMatchObject({
      code: 'unknown-shape',
      message: expect.stringContaining('{hello}'),
    });
    expect(fault(inspectHex('1864')).code).toBe('unknown-shape');
  });

  it('refuse / bad hex: a bad character names its position; an odd length says so', () => {
    expect(fault(inspectHex('a2zz'))).toMatchObject({ code: 'bad-hex', message: expect.stringContaining('position 2') });
    expect(fault(inspectHex('a26'))).toMatchObject({ code: 'bad-hex', message: expect.stringContaining('odd number') });
  });

  it('refuse / empty input', () => {
    expect(fault(inspectBytes(new Uint8Array(0))).code).toBe('empty-input');
    expect(fault(inspectContents(new Uint8Array(0))).code).toBe('empty-input');
  });

  it('refuse / a frame that declares more bytes than follow', () => {
    const f = fault(inspectHex(vec(wire, 'bad_frames', 'truncated-body')['stream'] as string));
    expect(f).toMatchObject({ code: 'frame-truncated', offset: 0 });
  });

  it('refuse / a frame declaring 4 GiB − 1 is frame-too-large, as a node would say', () => {
    expect(fault(inspectHex(vec(wire, 'bad_frames', 'declared-4-gib')['stream'] as string))).toMatchObject({
      code: 'frame-too-large',
      offset: 0,
    });
  });

  it('refuse / a float in the second frame: the node’s code, the item and the offset', () => {
    const h = vec(wire, 'bad_frames', 'second-message-bad')['stream'] as string;
    const f = fault(inspectHex(h));
    expect(f).toMatchObject({ code: 'cbor-forbidden-type', item: 1 });
    expect(bytes(h)[f.offset!]).toBe(0xfb);
  });

  it('refuse / the fault line reads `error [code]: message (where)`', () => {
    const line = renderFault(fault(inspectHex(vec(grants, 'decode_errors', 'float-budget')['cbor'] as string)));
    expect(line).toMatch(/^error \[cbor-forbidden-type\]: .* \(at byte \d+ of the input\)$/);
  });
});

describe('inspect / the jcp inspect command', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'jcp-inspect-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const jcp = (args: string[], input?: Buffer) =>
    spawnSync(process.execPath, [path.join(ROOT, 'bin/jcp.mjs'), 'inspect', ...args], { encoding: 'utf8', ...(input ? { input } : {}) });

  it('reads hex, a raw file and stdin; exit 0 with the kind; exit 1 with a precise error', () => {
    const h = vec(receipts, 'receipts', 'seq0-allow-direct')['cose_sign1'] as string;
    const file = path.join(dir, 'receipt.cbor');
    writeFileSync(file, bytes(h));
    const fromArg = jcp([h]);
    expect(fromArg.status).toBe(0);
    expect(fromArg.stdout).toContain('kind: receipt');
    const fromFile = jcp([file, '--json']);
    expect(fromFile.status).toBe(0);
    expect((JSON.parse(fromFile.stdout) as InspectReport).items[0]!.kind).toBe('receipt');
    const fromStdin = jcp(['-'], Buffer.from(h));
    expect(fromStdin.status).toBe(0);
    expect(fromStdin.stdout).toBe(fromArg.stdout);
    const bad = jcp([vec(grants, 'decode_errors', 'long-form-integer')['cbor'] as string]);
    expect(bad.status).toBe(1);
    expect(bad.stderr).toMatch(/error \[cbor-non-canonical\]: .*at byte \d+/);
    expect(jcp([]).status).toBe(2);
  });
});
