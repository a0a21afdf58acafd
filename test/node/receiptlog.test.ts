/**
 * The receipt log as the write-ahead log (spec §8.1, C14, C16): group-committed durable batches,
 * boot replay that restores budgets, the request index and revocations exactly, bad receipts
 * counted and never applied, and a corrupt or missing log that stops the node with a typed error.
 */
import { readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { describe, expect, test } from 'vitest';
import { attenuate, grantId, openReceipt, signRevocation } from '../../core/index.ts';
import { HeadMarkFile, NodeErrorCodes, NodeFault, ReceiptLog, receiptKey } from '../../node/index.ts';
import { outcomeKey } from '../../node/internal.ts';
import { JcpClient, WireErrorReply } from '../../client/index.ts';
import { cast, liveNode, mint, request, tempFolders } from './fixtures.ts';
import { runJcpInProcess } from '../support.ts';

const { rng, alice, bob, carol, mallory } = cast('receiptlog');
const folder = tempFolders('log');

/** `jcp` in this process (test/support.ts). */
const cli = (argv: string[]) => runJcpInProcess(argv);

describe('receipt log: durability and group commit', () => {
  test('concurrent decisions share fsync-ed batches, and every reply follows its durable receipt', async () => {
    const node = await liveNode({}, {}, folder());
    const c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const replies = await Promise.all(Array.from({ length: 200 }, (_, i) => c.call({ chain: [g], action: 'read', payload: { i } })));
    for (const r of replies) {
      const core = openReceipt(r.receipt, node.did);
      expect(core.ok).toBe(true);
      if (core.ok) expect(new Uint8Array((await node.log.getReceipt(core.value.seq))!)).toEqual(r.receipt);
    }
    const batches = await node.metrics.batchSize.get();
    const count = batches.values.find((v) => v.metricName === 'jcp_log_batch_receipts_count')!.value;
    const sum = batches.values.find((v) => v.metricName === 'jcp_log_batch_receipts_sum')!.value;
    expect(sum).toBe(200);
    expect(count).toBeLessThan(200);
    await c.close();
    await node.cleanup();
  });
});

describe('receipt log: boot replay', () => {
  test('a restarted node restores budgets (leaf and ancestors), the request index and its seq chain exactly', async () => {
    const dir = folder();
    const root = mint(alice, bob, 'tools', ['read', 'write'], 10_000n, rng);
    const child = attenuate(root, { subject: carol.did, budget_uj: 5_000n, nonce: rng(16) }, bob);
    if (!child.ok) throw new Error('attenuate');
    const chain = [root, child.value];
    const a = await liveNode({}, {}, dir);
    const cb = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: bob });
    const cc = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: carol });
    for (let i = 0; i < 5; i++)
      await cb.call({ chain: [root], action: 'read', payload: { i }, cost: { uj: 100n, provenance: 'Estimator' } });
    const chained = await cc.call({ chain, action: 'write', payload: { x: 1 }, cost: { uj: 700n, provenance: 'ModelBased' } });
    const denied = await cc.call({ chain, action: 'write', payload: { x: 2 }, cost: { uj: 9_000n, provenance: 'Estimator' } });
    expect(denied.decision.deny_reason).toBe('budget-exceeded');
    const before = new Map(a.ledger.entries());
    const seqBefore = a.enforcer.nextSeq;
    await cb.close();
    await cc.close();
    await a.close();

    const onWorkers = await liveNode({ replay_workers: 2 }, { replayWorkersFrom: 1 }, dir);
    expect(new Map(onWorkers.ledger.entries())).toEqual(before);
    expect(onWorkers.boot).toMatchObject({ receipts: 7, good: 7, bad: 0, breaks: 0 });
    await onWorkers.close();
    const b = await liveNode({}, {}, dir);
    expect(new Map(b.ledger.entries())).toEqual(before);
    expect(b.ledger.spent(grantId(root.grant))).toBe(1_200n);
    expect(b.ledger.spent(grantId(child.value.grant))).toBe(700n);
    expect(b.enforcer.nextSeq).toBe(seqBefore);
    expect(b.boot).toMatchObject({ receipts: 7, good: 7, bad: 0, breaks: 0, allowed: 6, denied: 1 });
    const c2 = await JcpClient.connect({ host: '127.0.0.1', port: b.port, signer: carol });
    const again = await c2.callRequest(chained.request);
    expect(again.receipt).toEqual(chained.receipt);
    expect(b.ledger.spent(grantId(root.grant))).toBe(1_200n);
    const next = await c2.call({ chain, action: 'write', payload: { x: 3 }, cost: { uj: 1n, provenance: 'Estimator' } });
    const core = openReceipt(next.receipt, b.did);
    expect(core.ok && core.value.seq).toBe(seqBefore);
    await c2.close();
    await b.close();
    const verify = await cli(['receipts', 'verify', dir]);
    expect(verify.code).toBe(0);
    expect(JSON.parse(verify.out)).toMatchObject({ receipts: 8, good: 8, bad: 0, breaks: 0 });
  });

  test('a tampered receipt or a deleted one stops the node (log-damaged); accepted, the bad one is counted, never applied, the gap named', async () => {
    const dir = folder();
    const g = mint(alice, bob, 'tools', ['read'], 10_000n, rng);
    const a = await liveNode({}, {}, dir);
    const c = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: bob });
    for (let i = 0; i < 6; i++) await c.call({ chain: [g], action: 'read', payload: { i }, cost: { uj: 10n, provenance: 'Estimator' } });
    await c.close();
    await a.close();
    const db = new ClassicLevel<Uint8Array, Uint8Array>(path.join(dir, 'receipts'), { keyEncoding: 'view', valueEncoding: 'view' });
    const r1 = (await db.get(receiptKey(1)))!;
    const tampered = new Uint8Array(r1);
    tampered[tampered.length - 1]! ^= 0x01;
    await db.put(receiptKey(1), tampered);
    await db.del(receiptKey(4));
    await db.close();

    await expect(liveNode({}, {}, dir)).rejects.toMatchObject({ code: 'log-damaged' });
    const b = await liveNode({}, { acceptDamagedLog: true }, dir);
    expect(b.boot).toMatchObject({ receipts: 5, good: 4, bad: 1 });
    expect(b.boot.problems.some((p) => p.seq === 1 && p.code === 'signature-invalid')).toBe(true);
    expect(b.boot.problems.some((p) => p.seq === 5 && p.code === 'seq-gap')).toBe(true);
    expect(b.ledger.spent(grantId(g.grant))).toBe(40n);
    await b.close();
    const verify = await cli(['receipts', 'verify', dir]);
    expect(verify.code).toBe(1);
    const report = JSON.parse(verify.out) as { bad: number; continuity: Array<{ seq: number; code: string; why: string }> };
    expect(report.bad).toBe(1);
    expect(report.continuity.find((b) => b.seq === 5)?.why).toMatch(/receipts 4\.\.4 are missing/);
  });

  test('a broken prev link is named by seq', async () => {
    const dir = folder();
    const g = mint(alice, bob, 'tools', ['read'], 10_000n, rng);
    const a = await liveNode({}, {}, dir);
    const c = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: bob });
    const rs = [];
    for (let i = 0; i < 4; i++) rs.push(await c.call({ chain: [g], action: 'read', payload: { i } }));
    await c.close();
    await a.close();
    const db = new ClassicLevel<Uint8Array, Uint8Array>(path.join(dir, 'receipts'), { keyEncoding: 'view', valueEncoding: 'view' });
    // Swap two receipts: both still verify, but the chain of prev links no longer holds.
    await db.put(receiptKey(2), rs[3]!.receipt);
    await db.put(receiptKey(3), rs[2]!.receipt);
    await db.close();
    const verify = await cli(['receipts', 'verify', dir]);
    const report = JSON.parse(verify.out) as { bad: number; breaks: number; continuity: Array<{ seq: number; code: string }> };
    expect(verify.code).toBe(1);
    expect(report.bad).toBe(0);
    expect(report.continuity.map((b) => b.code)).toContain('seq-gap');
  });

  test('revocations come back on boot, for known grants and for ones still waiting for their grant', async () => {
    const dir = folder();
    const known = mint(alice, bob, 'tools', ['read'], 1000n, rng);
    const unseen = mint(alice, bob, 'tools', ['read'], 1000n, rng);
    const a = await liveNode({}, {}, dir);
    const c = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: bob });
    expect((await c.call({ chain: [known], action: 'read' })).decision.verdict).toBe('allow');
    await c.revoke(signRevocation(grantId(known.grant), alice, rng(16)));
    await c.revoke(signRevocation(grantId(unseen.grant), alice, rng(16)));
    const forgedPending = signRevocation(grantId(mint(alice, bob, 'tools', ['read'], 1n, rng).grant), mallory, rng(16));
    await c.revoke(forgedPending);
    await c.close();
    await a.close();

    const b = await liveNode({}, {}, dir);
    expect(b.boot.revocations).toEqual({ admitted: 1, pending: 2, bad: 0 });
    const c2 = await JcpClient.connect({ host: '127.0.0.1', port: b.port, signer: bob });
    expect((await c2.call({ chain: [known], action: 'read', payload: { n: 2 } })).decision).toEqual({
      verdict: 'deny',
      deny_reason: 'revoked',
    });
    expect((await c2.call({ chain: [unseen], action: 'read' })).decision).toEqual({ verdict: 'deny', deny_reason: 'revoked' });
    await c2.close();
    await b.close();
    const c3 = await liveNode({}, {}, dir);
    expect(c3.boot.revocations).toEqual({ admitted: 2, pending: 1, bad: 0 });
    await c3.close();
  });
});

describe('receipt log: faults stop the node', () => {
  test('log-missing / the log is never recreated empty', async () => {
    const dir = folder();
    const a = await liveNode({}, {}, dir);
    await a.close();
    rmSync(path.join(dir, 'receipts'), { recursive: true });
    const e = await liveNode({}, {}, dir).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(NodeFault);
    expect((e as NodeFault).code).toBe('log-missing');
  });

  test('log-corrupt / an unreadable LevelDB stops the node; repair is the operator’s explicit command', async () => {
    const dir = folder();
    const g = mint(alice, bob, 'tools', ['read'], 10_000n, rng);
    const a = await liveNode({}, {}, dir);
    const c = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: bob });
    for (let i = 0; i < 3; i++) await c.call({ chain: [g], action: 'read', payload: { i }, cost: { uj: 5n, provenance: 'Estimator' } });
    await c.close();
    await a.close();
    writeFileSync(path.join(dir, 'receipts', 'CURRENT'), 'MANIFEST-999999\n');
    const e = await liveNode({}, {}, dir).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(NodeFault);
    expect((e as NodeFault).code).toBe('log-corrupt');
    const repaired = await cli(['receipts', 'repair', dir]);
    expect(repaired.code).toBe(0);
    expect(JSON.parse(repaired.out)).toMatchObject({ receipts: 3, bad: 0 });
    const b = await liveNode({}, {}, dir);
    expect(b.ledger.spent(grantId(g.grant))).toBe(15n);
    await b.close();
  });

  test('log-steward-mismatch / a log written by another steward key is refused', async () => {
    const dir = folder();
    const a = await liveNode({}, {}, dir);
    await a.close();
    rmSync(path.join(dir, 'steward.key'));
    const e = await liveNode({}, {}, dir).catch((x: unknown) => x);
    expect((e as NodeFault).code).toBe('log-steward-mismatch');
  });

  test('log-failed / when the log cannot be written the node answers log-failed and stops', async () => {
    let fatal: Error | undefined;
    const node = await liveNode({}, { onFatal: (e) => (fatal = e) }, folder());
    const c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob, reconnectAttempts: 0 });
    await node.log.close();
    const g = mint(alice, bob, 'tools', ['read'], 1000n, rng);
    const e = await c.callRequest(request(bob, [g])).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(WireErrorReply);
    expect((e as WireErrorReply).code).toBe(NodeErrorCodes.LOG_FAILED);
    expect(fatal).toBeInstanceOf(Error);
    await c.close();
    await node.close();
  });

  test('internal / an unexpected fault is an error reply, and the node keeps serving', async () => {
    let boom = true;
    const meter = {
      probe: async () => ({
        rung: 'estimator' as const,
        provenance: 'Estimator' as const,
        detail: '',
        skipped: [],
        model: { basis: 'cpu-time' as const },
      }),
      measure: async <T>(_a: string, fn: () => T | Promise<T>) => ({
        result: await fn(),
        cost: { uj: 0n, provenance: 'Estimator' as const },
        reading: { rung: 'estimator' as const, floorUj: 0n, wallNs: 0n, cpuUs: 0, degraded: [] },
      }),
      estimateUj: () => {
        if (boom) throw new Error('meter exploded');
        return 0n;
      },
    };
    const node = await liveNode({}, { meter }, folder());
    const c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    const g = mint(alice, bob, 'tools', ['read'], 1000n, rng);
    const e = await c.call({ chain: [g], action: 'read' }).catch((x: unknown) => x);
    expect((e as WireErrorReply).code).toBe(NodeErrorCodes.INTERNAL);
    boom = false;
    expect((await c.call({ chain: [g], action: 'read', payload: { again: 1 } })).decision.verdict).toBe('allow');
    await c.close();
    await node.cleanup();
  });

  test('a log opened by another process is refused with a typed error, not recreated', async () => {
    const dir = folder();
    const a = await liveNode({}, {}, dir);
    const e = await ReceiptLog.open(dir, { steward: a.did, nowS: 0 }).catch((x: unknown) => x);
    expect((e as NodeFault).code).toBe('log-locked');
    await a.close();
  });
});

describe('receipt log: the head mark (receipts LevelDB loses are noticed)', () => {
  /** A node folder with 6 allowed receipts of 100 µJ, closed; the receipts sit in LevelDB's write-ahead file. */
  async function sixReceipts(): Promise<{ dir: string; grant: ReturnType<typeof mint>; wal: string }> {
    const dir = folder();
    const grant = mint(alice, bob, 'tools', ['read'], 10_000n, rng);
    const a = await liveNode({}, {}, dir);
    const c = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: bob });
    for (let i = 0; i < 6; i++)
      await c.call({ chain: [grant], action: 'read', payload: { i }, cost: { uj: 100n, provenance: 'Estimator' } });
    await c.close();
    await a.close();
    const logs = readdirSync(path.join(dir, 'receipts')).filter((f) => f.endsWith('.log'));
    expect(logs).toHaveLength(1);
    return { dir, grant, wal: path.join(dir, 'receipts', logs[0]!) };
  }

  test('accepted damage is recorded: later starts need no flag for it, but new damage still stops the node', async () => {
    const { dir, grant, wal } = await sixReceipts();
    rmSync(wal);
    const a = await liveNode({}, { acceptDamagedLog: true }, dir);
    await a.close(); // no receipt written: the same tail loss is found again below
    const b = await liveNode({}, {}, dir);
    expect(b.boot.head).toMatchObject({ ok: false, code: 'tail-lost' });
    const c = await JcpClient.connect({ host: '127.0.0.1', port: b.port, signer: bob });
    const r = await c.call({ chain: [grant], action: 'read', payload: { after: 2 } });
    expect(openReceipt(r.receipt, b.did).ok && (openReceipt(r.receipt, b.did) as { value: { seq: number } }).value.seq).toBe(6);
    await c.close();
    await b.close();
    // Now the log has a seq gap (0..5 missing) that lies in the accepted lost range: a plain start.
    const d = await liveNode({}, {}, dir);
    expect(d.boot.breaks).toBe(1);
    expect(d.boot.head).toEqual({ ok: true, markSeq: 6 });
    await d.close();
    expect((await cli(['receipts', 'verify', dir])).code).toBe(1); // the evidence is still reported
    // New damage is not covered by what was accepted.
    const db = new ClassicLevel<Uint8Array, Uint8Array>(path.join(dir, 'receipts'), { keyEncoding: 'view', valueEncoding: 'view' });
    const r6 = (await db.get(receiptKey(6)))!;
    const bad = new Uint8Array(r6);
    bad[bad.length - 2]! ^= 0x01;
    await db.put(receiptKey(6), bad);
    await db.close();
    await expect(liveNode({}, {}, dir)).rejects.toMatchObject({ code: 'log-damaged' });
  });

  test('a healthy restart passes the check; the mark names the last receipt', async () => {
    const { dir, grant } = await sixReceipts();
    const b = await liveNode({}, {}, dir);
    expect(b.boot.head).toEqual({ ok: true, markSeq: 5 });
    expect(b.ledger.spent(grantId(grant.grant))).toBe(600n);
    await b.close();
    const verify = await cli(['receipts', 'verify', dir]);
    expect(verify.code).toBe(0);
    expect(JSON.parse(verify.out).head_mark).toEqual({ ok: true, seq: 5 });
  });

  test('a deleted write-ahead file: the node refuses to start (log-damaged), verify names the lost receipts; accepted, no seq is reused', async () => {
    const { dir, grant, wal } = await sixReceipts();
    rmSync(wal);
    await expect(liveNode({}, {}, dir)).rejects.toMatchObject({
      code: 'log-damaged',
      message: expect.stringMatching(/up to seq 5 durable .* ends at seq -1: receipts 0\.\.5 are lost/),
    });
    const verify = await cli(['receipts', 'verify', dir]);
    expect(verify.code).toBe(1);
    expect(JSON.parse(verify.out).head_mark).toMatchObject({ ok: false, code: 'tail-lost', seq: 5, log_ends_at: -1 });
    const b = await liveNode({}, { acceptDamagedLog: true }, dir);
    expect(b.boot.head).toMatchObject({ ok: false, code: 'tail-lost' });
    expect(b.ledger.spent(grantId(grant.grant))).toBe(0n); // the operator accepted handing it back
    const c = await JcpClient.connect({ host: '127.0.0.1', port: b.port, signer: bob });
    const next = await c.call({ chain: [grant], action: 'read', payload: { after: 1 } });
    const core = openReceipt(next.receipt, b.did);
    expect(core.ok && core.value.seq).toBe(6); // seqs 0..5 were handed out before: never again
    await c.close();
    await b.close();
  });

  test('a flipped byte in the write-ahead file (LevelDB skips the record and what follows): refused, and verify exits 1', async () => {
    const { dir, wal } = await sixReceipts();
    const bytes = readFileSync(wal);
    bytes[Math.floor(bytes.length / 2)]! ^= 0x40;
    writeFileSync(wal, bytes);
    await expect(liveNode({}, {}, dir)).rejects.toMatchObject({ code: 'log-damaged', message: expect.stringMatching(/are lost/) });
    const verify = await cli(['receipts', 'verify', dir]);
    expect(verify.code).toBe(1);
    const report = JSON.parse(verify.out) as { receipts: number; head_mark: { ok: boolean; code: string } };
    expect(report.receipts).toBeLessThan(6);
    expect(report.head_mark).toMatchObject({ ok: false, code: 'tail-lost' });
  });

  test("receipts export --out writes only a new file outside the data folder: never the node's own files, never an existing file, a folder is a clean error", async () => {
    const { dir } = await sixReceipts();
    const meta = readFileSync(path.join(dir, 'node.json'));
    expect((await cli(['receipts', 'export', dir, '--out', path.join(dir, 'node.json')])).code).toBe(2);
    expect((await cli(['receipts', 'export', dir, '--out', path.join(dir, 'x.json')])).code).toBe(2);
    expect(readFileSync(path.join(dir, 'node.json'))).toEqual(meta);
    const outDir = folder();
    const existing = path.join(outDir, 'old.json');
    writeFileSync(existing, 'keep me');
    expect((await cli(['receipts', 'export', dir, '--out', existing])).code).toBe(1);
    expect(readFileSync(existing, 'utf8')).toBe('keep me');
    expect((await cli(['receipts', 'export', dir, '--out', outDir])).code).toBe(1); // a folder: EEXIST, refused
    const fresh = path.join(outDir, 'new.json');
    expect((await cli(['receipts', 'export', dir, '--out', fresh])).code).toBe(0);
    expect((JSON.parse(readFileSync(fresh, 'utf8')) as { receipts: unknown[] }).receipts).toHaveLength(6);
  });

  test("a deferred write (a measurement record) rides with the next write's batch, goes on its own after the timer, and is written by close", async () => {
    const dir = folder();
    const batches: number[] = [];
    const log = await ReceiptLog.open(dir, { steward: alice.did, nowS: 1, onBatch: (n) => batches.push(n) });
    await log.appendReceipt(0, Uint8Array.of(0xd2, 0));
    expect(batches).toEqual([1]);
    let done = false;
    const deferred = log.putOutcome('measurement', 0, Uint8Array.of(1), undefined, { deferred: true }).then(() => {
      done = true;
    });
    await new Promise((r) => setImmediate(r));
    expect(done).toBe(false); // no batch of its own yet
    await log.appendReceipt(1, Uint8Array.of(0xd2, 1));
    await deferred;
    expect(batches).toEqual([1, 2]); // one fsync'd batch for both, not two
    const alone = log.putOutcome('measurement', 1, Uint8Array.of(2), undefined, { deferred: true });
    await alone; // nothing else comes: the timer writes it
    expect(batches).toEqual([1, 2, 1]);
    const last = log.putOutcome('measurement', 2, Uint8Array.of(3), undefined, { deferred: true });
    await log.close(); // loses nothing
    await last;
    expect(batches).toEqual([1, 2, 1, 1]);
    const db = new ClassicLevel<Uint8Array, Uint8Array>(path.join(dir, 'receipts'), { keyEncoding: 'view', valueEncoding: 'view' });
    try {
      for (const seq of [0, 1, 2]) expect([...(await db.get(outcomeKey('measurement', seq)))!]).toEqual([seq + 1]);
    } finally {
      await db.close();
    }
  });

  test('the mark names a batch before its writes resolve (so before any reply of that batch leaves)', async () => {
    const dir = folder();
    const log = await ReceiptLog.open(dir, { steward: alice.did, nowS: 1 });
    for (let seq = 0; seq < 5; seq++) {
      await log.appendReceipt(seq, Uint8Array.of(0xd2, seq));
      const mark = HeadMarkFile.open(dir); // a second reader, as a restart would read it now
      expect(mark.found).toMatchObject({ seq });
      await mark.close();
    }
    await log.close();
  });

  test('a mark that is gone, emptied or zeroed in a folder that keeps one is mark-missing; a new empty log is fine', async () => {
    const { dir } = await sixReceipts();
    for (const damage of [
      () => rmSync(path.join(dir, 'head')),
      () => writeFileSync(path.join(dir, 'head'), ''),
      () => writeFileSync(path.join(dir, 'head'), Buffer.alloc(128)),
    ]) {
      damage();
      await expect(liveNode({}, {}, dir)).rejects.toMatchObject({
        code: 'log-damaged',
        message: expect.stringMatching(/head mark this folder keeps is gone or empty/),
      });
      expect(JSON.parse((await cli(['receipts', 'verify', dir])).out).head_mark).toMatchObject({ ok: false, code: 'mark-missing' });
    }
    const b = await liveNode({}, { acceptDamagedLog: true }, dir); // accepted: the mark is rewritten from the log
    await b.close();
    const c = await liveNode({}, {}, dir);
    expect(c.boot.head).toEqual({ ok: true, markSeq: 5 });
    await c.close();
    const fresh = folder();
    const n = await liveNode({}, {}, fresh);
    await n.close();
    rmSync(path.join(fresh, 'head'));
    const again = await liveNode({}, {}, fresh);
    expect(again.boot.head).toEqual({ ok: true });
    await again.close();
  });

  test('a mark that is a symbolic link (to /dev/null, say) is refused, never written through', async () => {
    const { dir } = await sixReceipts();
    rmSync(path.join(dir, 'head'));
    symlinkSync('/dev/null', path.join(dir, 'head'));
    await expect(liveNode({}, {}, dir)).rejects.toMatchObject({ code: 'log-corrupt', message: expect.stringMatching(/head mark/) });
  });

  test('a damaged mark is reported (mark-damaged), not trusted and not ignored', async () => {
    const { dir } = await sixReceipts();
    writeFileSync(path.join(dir, 'head'), Buffer.alloc(128, 0x5a));
    await expect(liveNode({}, {}, dir)).rejects.toMatchObject({
      code: 'log-damaged',
      message: expect.stringMatching(/head mark is damaged/),
    });
    const b = await liveNode({}, { acceptDamagedLog: true }, dir);
    expect(b.boot.head).toMatchObject({ ok: false, code: 'mark-damaged' });
    await b.close();
    // The accepted start wrote a fresh mark on close: the folder checks clean again.
    const c = await liveNode({}, {}, dir);
    expect(c.boot.head).toEqual({ ok: true, markSeq: 5 });
    await c.close();
  });
});
