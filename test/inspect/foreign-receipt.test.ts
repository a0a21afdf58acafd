/**
 * Interoperability (spec §8): a JCR-1 receipt sealed by another implementation carries only §8's
 * fields (no `seq`, `prev`, `request_id`, `at`). It is built here independently of core/receipt.ts
 * (cborg's RFC 8949 deterministic encoder, noble's Ed25519, a fresh key) and must verify under
 * `jcp inspect` and `jcp receipts verify <file>`, while a node's own log still requires the log fields.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ed25519 } from '@noble/curves/ed25519.js';
import { base58 } from '@scure/base';
import { encode, rfc8949EncodeOptions, Tagged } from 'cborg';
import { afterAll, describe, expect, it } from 'vitest';
import { runJcpInProcess } from '../support.ts';
import { openJcr1Receipt, openReceipt } from '../../core/index.ts';
import { JCP_BIN } from '../../testkit/internal.ts';
import { VECTORS_DIR } from '../vectors/load.ts';

const cbor = (v: unknown): Uint8Array => encode(v, { ...rfc8949EncodeOptions, typeEncoders: { Object: undefined } } as never);
const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
const cid = (seed: string): string => hex(new Uint8Array(Buffer.alloc(32, seed)));

/** A fresh Ed25519 steward of "another implementation": its seed and did:key (multicodec 0xed01, base58btc). */
function foreignSteward(): { seed: Uint8Array; did: string } {
  const seed = new Uint8Array(randomBytes(32));
  const pub = ed25519.getPublicKey(seed);
  return { seed, did: `did:key:z${base58.encode(new Uint8Array([0xed, 0x01, ...pub]))}` };
}

/** A COSE_Sign1 (RFC 9052, tag 18, alg EdDSA, kid = the did's UTF-8 in the protected header) over a §8-only core. */
function foreignReceipt(steward: { seed: Uint8Array; did: string }, over: Record<string, unknown> = {}): Uint8Array {
  const other = foreignSteward().did;
  const core: Record<string, unknown> = {
    jcp_receipt: 'jcp/1',
    grant_id: cid('g'),
    issuer: other,
    subject: other,
    resource: cid('r'),
    action: 'read_text_file',
    frame_kind: 'tool-call',
    trust: 'control',
    verdict: 'allow',
    cost_uj: 1500,
    energy_provenance: 'Estimator',
    budget_remaining_uj: 8500,
    budget_uj: 10000,
    steward: steward.did,
    ...over,
  };
  for (const [k, v] of Object.entries(core)) if (v === undefined) delete core[k];
  const protectedBytes = cbor(
    new Map<number, unknown>([
      [1, -8],
      [4, new TextEncoder().encode(steward.did)],
    ]),
  );
  const payload = cbor(new Map(Object.entries(core)));
  const tbs = cbor(['Signature1', protectedBytes, new Uint8Array(0), payload]);
  const signature = ed25519.sign(tbs, steward.seed);
  return cbor(new Tagged(18, [protectedBytes, new Map(), payload, signature]));
}

/** The `jcp` command run in this process (test/support.ts). */
const jcp = (...argv: string[]) => runJcpInProcess(argv);

const dir = mkdtempSync(path.join(tmpdir(), 'jcp-foreign-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const steward = foreignSteward();
const allow = foreignReceipt(steward);
const deny = foreignReceipt(steward, { verdict: 'deny', deny_reason: 'budget-exceeded', cost_uj: 99999, budget_remaining_uj: 8500 });

describe('foreign receipt - a §8-only JCR-1 receipt from another implementation', () => {
  it('verifies as JCR-1, while a node log (openReceipt) still requires seq and at', () => {
    const opened = openJcr1Receipt(allow);
    expect(opened.ok && opened.value).toMatchObject({ steward: steward.did, verdict: 'allow', cost_uj: 1500n });
    expect(opened.ok && opened.value.seq).toBeUndefined();
    const log = openReceipt(allow);
    expect(!log.ok && log.error).toEqual({ code: 'schema', why: 'receipt.seq: missing' });
  });

  it('refused / signature-invalid / one payload byte changed; schema / an unknown field', () => {
    const tampered = new Uint8Array(allow);
    const at = Buffer.from(tampered).indexOf(Buffer.from('read_text_file'));
    tampered[at] = 'R'.charCodeAt(0);
    expect(!openJcr1Receipt(tampered).ok && (openJcr1Receipt(tampered) as { error: { code: string } }).error.code).toBe(
      'signature-invalid',
    );
    const extra = openJcr1Receipt(foreignReceipt(steward, { note: 'x' }));
    expect(!extra.ok && extra.error.code).toBe('schema');
    const badSeq = openJcr1Receipt(foreignReceipt(steward, { seq: 'one' }));
    expect(!badSeq.ok && badSeq.error.why).toMatch(/receipt\.seq/);
  });

  it('jcp inspect <hex> reports it verified, without log fields', async () => {
    const human = await jcp('inspect', hex(allow));
    expect(human.code, human.err).toBe(0);
    expect(human.out).toContain(`signature: valid`);
    const r = await jcp('inspect', '--json', hex(deny));
    const item = (
      JSON.parse(r.out) as { items: { kind: string; signature: { valid: boolean; signer: string }; checks: Record<string, unknown> }[] }
    ).items[0]!;
    expect(item.kind).toBe('receipt');
    expect(item.signature).toMatchObject({ valid: true, signer: steward.did });
    expect(item.checks).toMatchObject({ log_fields: false, seq: null, verdict: 'deny', deny_reason: 'budget-exceeded' });
  });

  it('jcp receipts verify <file>: a CBOR sequence and a hex-lines file both verify', async () => {
    const seqFile = path.join(dir, 'foreign.cbor');
    writeFileSync(seqFile, Buffer.concat([allow, deny]));
    const a = await jcp('receipts', 'verify', seqFile);
    expect(a.code, a.err).toBe(0);
    const ra = JSON.parse(a.out) as {
      form: string;
      receipts: number;
      good: number;
      bad: number;
      stewards: string[];
      without_log_fields: number;
    };
    expect(ra).toMatchObject({ form: 'cbor-sequence', receipts: 2, good: 2, bad: 0, stewards: [steward.did], without_log_fields: 2 });

    const linesFile = path.join(dir, 'foreign.hex');
    writeFileSync(linesFile, `# receipts from elsewhere\n${hex(allow)}\n\n0x${hex(deny)}\n`);
    const b = await jcp('receipts', 'verify', linesFile);
    expect(b.code, b.err).toBe(0);
    const rb = JSON.parse(b.out) as { form: string; good: number; items: { line: number; verified: boolean; verdict: string }[] };
    expect(rb.form).toBe('hex-lines');
    expect(rb.items.map((i) => [i.line, i.verified, i.verdict])).toEqual([
      [2, true, 'allow'],
      [4, true, 'deny'],
    ]);
  });

  it('jcp receipts verify <file>: a bad receipt among good ones is counted and named, exit 1', async () => {
    const forged = foreignReceipt({ seed: foreignSteward().seed, did: steward.did });
    const file = path.join(dir, 'mixed.cbor');
    writeFileSync(file, Buffer.concat([allow, forged]));
    const r = await jcp('receipts', 'verify', file);
    expect(r.code).toBe(1);
    const rep = JSON.parse(r.out) as { good: number; bad: number; items: { item: number; verified: boolean; error?: { code: string } }[] };
    expect([rep.good, rep.bad]).toEqual([1, 1]);
    expect(rep.items[1]).toMatchObject({ item: 1, verified: false, error: { code: 'signature-invalid' } });
    const empty = path.join(dir, 'empty.hex');
    writeFileSync(empty, '\n');
    expect((await jcp('receipts', 'verify', empty)).err).toMatch(/^jcp receipts: error \[empty-input\]/);
  });

  it('the cose-wg eddsa-sig-01 COSE_Sign1 (kid in the unprotected header, no receipt core) is counted bad: cose-invalid', async () => {
    const vector = JSON.parse(readFileSync(new URL('cose-wg-examples/eddsa-sig-01.json', VECTORS_DIR), 'utf8')) as {
      output: { cbor: string };
    };
    const file = path.join(dir, 'cose-wg.hex');
    writeFileSync(file, `${hex(allow)}\n${vector.output.cbor}\n`);
    const r = await jcp('receipts', 'verify', file);
    expect(r.code).toBe(1);
    const rep = JSON.parse(r.out) as { good: number; items: { verified: boolean; error?: { code: string } }[] };
    expect(rep.good).toBe(1);
    expect(rep.items[1]).toMatchObject({ verified: false, error: { code: 'cose-invalid' } });
  });

  it('jcp receipts verify - reads the receipts from standard input', () => {
    const r = spawnSync(process.execPath, [JCP_BIN, 'receipts', 'verify', '-'], {
      input: `${hex(allow)}\n`,
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ form: 'hex-lines', good: 1, bad: 0 });
  });
});
