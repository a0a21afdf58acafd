/**
 * `jcp receipts checkpoint|prove|verify-proof` (cli/tlog.ts) on a real node's data folder: the
 * checkpoint's root is recomputed here from the log's receipts with a naive RFC 9162 MTH over
 * node:crypto; proofs round-trip through verify-proof; bad input gets its stable code.
 */
import { createHash } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { ClassicLevel } from 'classic-level';
import path from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import {
  addSignatureLines,
  cosign,
  openCheckpoint,
  parseDid,
  parseNote,
  signCheckpoint,
  toHex,
  verifyCosignature,
} from '../../core/internal.ts';
import { ReceiptLog, readDataMeta, readKeyFile } from '../../node/index.ts';
import { JcpClient } from '../../client/index.ts';
import { receiptKey, writeKeyFile } from '../../node/index.ts';
import { cast, liveNode, mint, tempDir } from './fixtures.ts';
import { runJcpInProcess } from '../support.ts';

const { rng, alice, bob, mallory } = cast('tlog-cli');
const dirs: Array<() => void> = [];
afterAll(() => {
  for (const d of dirs) d();
});

/** `jcp` in this process (test/support.ts). */
const cli = (argv: string[]) => runJcpInProcess(argv);

const H = (...p: Buffer[]) => createHash('sha256').update(Buffer.concat(p)).digest();
function MTH(D: Buffer[]): Buffer {
  if (D.length === 0) return H();
  if (D.length === 1) return H(Buffer.from([0]), D[0]!);
  let k = 1;
  while (k * 2 < D.length) k *= 2;
  return H(Buffer.from([1]), MTH(D.slice(0, k)), MTH(D.slice(k)));
}

async function receiptsOf(dir: string): Promise<Buffer[]> {
  const meta = readDataMeta(dir)!;
  const log = await ReceiptLog.open(dir, { steward: meta.steward, mustExist: true, nowS: 0 });
  const out: Buffer[] = [];
  for await (const c of log.receiptChunks()) for (const [, b] of c) out.push(Buffer.from(b));
  await log.close();
  return out;
}

async function addReceipts(dir: string, n: number, tag: string): Promise<void> {
  const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
  const node = await liveNode({}, {}, dir);
  const c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
  for (let i = 0; i < n; i++) await c.call({ chain: [g], action: 'read', payload: { tag, i }, cost: { uj: 10n, provenance: 'Estimator' } });
  await c.close();
  await node.close();
}

describe('tlog cli - checkpoint, prove, verify-proof on a node log', () => {
  test('checkpoint root equals a naive MTH over the receipts; inclusion and consistency proofs verify; bad input is refused with its code', async () => {
    const t = tempDir('tlog');
    dirs.push(t.cleanup);
    const dir = t.dir;
    const files = tempDir('tlog-files');
    dirs.push(files.cleanup);
    const f = (name: string, body: string) => {
      const p = path.join(files.dir, name);
      writeFileSync(p, body);
      return p;
    };
    await addReceipts(dir, 7, 'a');
    const steward = readDataMeta(dir)!.steward;
    const origin = `jcp/${steward}`;

    const c7 = await cli(['receipts', 'checkpoint', dir]);
    expect(c7.code, c7.err).toBe(0);
    const cp7 = openCheckpoint(c7.out, parseDid(steward), origin);
    const r7 = await receiptsOf(dir);
    expect(r7.length).toBe(7);
    expect([cp7.size, toHex(cp7.root)]).toEqual([7, MTH(r7).toString('hex')]);
    const cp7File = f('cp7.txt', c7.out);

    // inclusion of seq 3, verified with the receipt's bytes (hex)
    const p3 = await cli(['receipts', 'prove', dir, '--inclusion', '3', '--json']);
    expect(p3.code, p3.err).toBe(0);
    const proof3 = JSON.parse(p3.out) as { proof: string[]; size: number; index: number };
    expect([proof3.index, proof3.size, proof3.proof.length]).toEqual([3, 7, 3]);
    const p3File = f('p3.json', p3.out);
    const rc3 = f('r3.hex', `${r7[3]!.toString('hex')}\n`);
    const ok = await cli(['receipts', 'verify-proof', '--proof', p3File, '--checkpoint', cp7File, '--receipt', rc3, '--steward', steward]);
    expect(ok.code, ok.err).toBe(0);
    expect(JSON.parse(ok.out)).toMatchObject({ ok: true, type: 'inclusion', seq: 3, size: 7 });

    // a seq past the tree
    const past = await cli(['receipts', 'prove', dir, '--inclusion', '7']);
    expect([past.code, past.err]).toEqual([1, expect.stringContaining('[tlog-range]')]);
    // another receipt than the proof's
    const rc2 = f('r2.hex', r7[2]!.toString('hex'));
    const other = await cli([
      'receipts',
      'verify-proof',
      '--proof',
      p3File,
      '--checkpoint',
      cp7File,
      '--receipt',
      rc2,
      '--steward',
      steward,
    ]);
    expect([other.code, other.err]).toEqual([1, expect.stringContaining('[proof-mismatch]')]);
    // a proof with one hash changed
    const bent = JSON.parse(p3.out) as { proof: string[] };
    bent.proof[1] = `${bent.proof[1]!.slice(0, -1)}${bent.proof[1]!.endsWith('0') ? '1' : '0'}`;
    const bad = await cli([
      'receipts',
      'verify-proof',
      '--proof',
      f('bent.json', JSON.stringify(bent)),
      '--checkpoint',
      cp7File,
      '--receipt',
      rc3,
      '--steward',
      steward,
    ]);
    expect([bad.code, bad.err]).toEqual([1, expect.stringContaining('[proof-invalid]')]);
    // a checkpoint signed by another key
    const forged = signCheckpoint({ origin, size: 7, root: cp7.root, extensions: [] }, mallory.key);
    const byOther = await cli([
      'receipts',
      'verify-proof',
      '--proof',
      p3File,
      '--checkpoint',
      f('forged.txt', forged),
      '--receipt',
      rc3,
      '--steward',
      steward,
    ]);
    expect([byOther.code, byOther.err]).toEqual([1, expect.stringContaining('[note-unverified]')]);

    // the log grows; consistency 7 → 10
    await addReceipts(dir, 3, 'b');
    const c10 = await cli(['receipts', 'checkpoint', dir, '--json']);
    expect(c10.code, c10.err).toBe(0);
    const j10 = JSON.parse(c10.out) as { note: string; size: number; root: string };
    expect([j10.size, j10.root]).toEqual([10, MTH(await receiptsOf(dir)).toString('hex')]);
    const pc = await cli(['receipts', 'prove', dir, '--consistency', '7', '--json']);
    expect(pc.code, pc.err).toBe(0);
    const pcFile = f('pc.json', pc.out);
    // cosigned by a witness (mallory's key as the witness here)
    const witnessed = addSignatureLines(j10.note, [cosign(parseNote(j10.note).text, 'jcp/w', mallory.key, 1_800_000_000)]);
    const cp10File = f('cp10.txt', witnessed);
    const cons = await cli([
      'receipts',
      'verify-proof',
      '--proof',
      pcFile,
      '--old-checkpoint',
      cp7File,
      '--checkpoint',
      cp10File,
      '--steward',
      steward,
      '--cosigner',
      `jcp/w=${mallory.did}`,
    ]);
    expect(cons.code, cons.err).toBe(0);
    expect(JSON.parse(cons.out)).toMatchObject({ ok: true, old_size: 7, new_size: 10, cosigned_by: ['jcp/w'] });
    // a cosignature over a different checkpoint (the 7 one) pasted onto the 10 one
    const moved = addSignatureLines(j10.note, [cosign(parseNote(c7.out).text, 'jcp/w', mallory.key, 1_800_000_000)]);
    const cosBad = await cli([
      'receipts',
      'verify-proof',
      '--proof',
      pcFile,
      '--old-checkpoint',
      cp7File,
      '--checkpoint',
      f('moved.txt', moved),
      '--steward',
      steward,
      '--cosigner',
      `jcp/w=${mallory.did}`,
    ]);
    expect([cosBad.code, cosBad.err]).toEqual([1, expect.stringContaining('[cosignature-invalid]')]);
    // a rewritten log: an old checkpoint of 7 with another root, signed by the steward itself
    const stewardKey = readKeyFile(path.join(dir, 'steward.key'));
    const rewritten = signCheckpoint({ origin, size: 7, root: MTH([...r7.slice(0, 6), Buffer.from('x')]), extensions: [] }, stewardKey.key);
    const split = await cli([
      'receipts',
      'verify-proof',
      '--proof',
      pcFile,
      '--old-checkpoint',
      f('rw.txt', rewritten),
      '--checkpoint',
      cp10File,
      '--steward',
      steward,
    ]);
    expect([split.code, split.err]).toEqual([1, expect.stringContaining('[proof-invalid]')]);
    const k = path.join(files.dir, 'other.key');
    writeKeyFile(k, mallory);
    // cosign by hand: first sight (trust on first use), then 7 → 10 with the proof, then a rewritten previous
    const first = await cli(['receipts', 'cosign', '--checkpoint', cp7File, '--steward', steward, '--key', k, '--name', 'jcp/w']);
    expect(first.code, first.err).toBe(0);
    expect(verifyCosignature(first.out, 'jcp/w', mallory.key.publicKey).name).toBe('jcp/w');
    const cp10Plain = f('cp10plain.txt', j10.note);
    const grown = await cli([
      'receipts',
      'cosign',
      '--checkpoint',
      cp10Plain,
      '--previous',
      cp7File,
      '--proof',
      pcFile,
      '--steward',
      steward,
      '--key',
      k,
      '--name',
      'jcp/w',
    ]);
    expect(grown.code, grown.err).toBe(0);
    expect(openCheckpoint(grown.out, parseDid(steward), origin).size).toBe(10);
    expect(verifyCosignature(grown.out, 'jcp/w', mallory.key.publicKey).name).toBe('jcp/w');
    const rwFile = f('rw-prev.txt', rewritten);
    const fork = await cli([
      'receipts',
      'cosign',
      '--checkpoint',
      cp10Plain,
      '--previous',
      rwFile,
      '--proof',
      pcFile,
      '--steward',
      steward,
      '--key',
      k,
      '--name',
      'jcp/w',
    ]);
    expect([fork.code, fork.err]).toEqual([1, expect.stringContaining('[log-inconsistent]')]);
    expect(JSON.parse(fork.out)).toMatchObject({ ok: false, code: 'log-inconsistent', previous: rewritten, next: j10.note });
    const wrongProof = await cli([
      'receipts',
      'cosign',
      '--checkpoint',
      cp10Plain,
      '--previous',
      cp7File,
      '--proof',
      p3File,
      '--steward',
      steward,
      '--key',
      k,
      '--name',
      'jcp/w',
    ]);
    expect([wrongProof.code, wrongProof.err]).toEqual([1, expect.stringContaining('[proof-mismatch]')]);
    const notTheLog = await cli([
      'receipts',
      'cosign',
      '--checkpoint',
      f('forged2.txt', forged),
      '--steward',
      steward,
      '--key',
      k,
      '--name',
      'jcp/w',
    ]);
    expect([notTheLog.code, notTheLog.err]).toEqual([1, expect.stringContaining('[note-unverified]')]);
    // the checkpoint key is the log's own: another steward key is refused
    const wrongKey = await cli(['receipts', 'checkpoint', dir, '--key', k]);
    expect([wrongKey.code, wrongKey.err]).toEqual([1, expect.stringContaining('[log-steward-mismatch]')]);

    // check-witnessed: the log holds what the cosigned checkpoint of 10 vouches for…
    const witnessedFile = f('witnessed.txt', grown.out);
    const held = await cli(['receipts', 'check-witnessed', dir, '--checkpoint', witnessedFile, '--cosigner', `jcp/w=${mallory.did}`]);
    expect(held.code, held.err).toBe(0);
    expect(JSON.parse(held.out)).toMatchObject({ ok: true, size: 10, checkpoint_size: 10, cosigned_by: ['jcp/w'] });
    // …not a checkpoint it was rewritten against…
    const rw = await cli(['receipts', 'check-witnessed', dir, '--checkpoint', rwFile]);
    expect([rw.code, rw.err]).toEqual([1, expect.stringMatching(/\[log-damaged\].*rewritten/)]);
    // …and, cut after the witnessed checkpoint (the head mark with it), it is short and says by which checkpoint
    const db = new ClassicLevel<Uint8Array, Uint8Array>(path.join(dir, 'receipts'), { keyEncoding: 'view', valueEncoding: 'view' });
    await db.open();
    await db.batch([
      { type: 'del', key: receiptKey(9) },
      { type: 'del', key: receiptKey(8) },
    ]);
    await db.close();
    rmSync(path.join(dir, 'head'), { force: true });
    const cut = await cli(['receipts', 'check-witnessed', dir, '--checkpoint', witnessedFile, '--cosigner', `jcp/w=${mallory.did}`]);
    expect([cut.code, cut.err]).toEqual([
      1,
      expect.stringMatching(/\[log-damaged\].*holds 8 receipts.*size 10 .*cosigned by jcp\/w.*8\.\.9 are lost/),
    ]);
  }, 60_000);
});
