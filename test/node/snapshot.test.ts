/**
 * Ledger snapshots (node/snapshot.ts) and the time-bounded request index
 * (node/requestindex.ts `TimedRequestIndex`): a start continues from the newest snapshot that
 * verifies and agrees with the log and replays only the receipts after it; a snapshot that does
 * not is ignored and the start replays everything; `jcp receipts verify` checks every snapshot
 * against the full replay; an old request sent again gets `clock-skew`, never a second debit.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, test, vi } from 'vitest';
import { decode, encode, grantId, receiptId, signBody } from '../../core/index.ts';
import { listSnapshots, NodeErrorCodes, sealOutcome, TimedRequestIndex } from '../../node/index.ts';
import { requestKeyWords } from '../../node/internal.ts';
import { JcpClient, WireErrorReply } from '../../client/index.ts';
import { writeBackRange, writeFileDurablyAsync } from '../../io/index.ts';
import { cast, liveNode, mint, request, tempFolders } from './fixtures.ts';
import { runJcpInProcess } from '../support.ts';

const { rng, alice, bob } = cast('snapshot');
const folder = tempFolders('snap');

/** `jcp` in this process (test/support.ts). */
const cli = (argv: string[]) => runJcpInProcess(argv);

/** Snapshots only when asked (no trigger fires during a test unless it sets one). */
const manual = { snapshot: { every_receipts: 0, every_s: 0 } };

async function calls(port: number, chain: Parameters<typeof request>[1], n: number, tag: string) {
  const c = await JcpClient.connect({ host: '127.0.0.1', port, signer: bob });
  const out = [];
  for (let i = 0; i < n; i++)
    out.push(await c.call({ chain, action: 'read', payload: { tag, i }, cost: { uj: 100n, provenance: 'Estimator' } }));
  await c.close();
  return out;
}

describe('snapshots: a start replays only the receipts after the newest snapshot', () => {
  test('restart from a snapshot: the same ledger, seq and head as a full replay; only the tail is replayed; old requests still replay idempotently', async () => {
    const dir = folder();
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const a = await liveNode(manual, {}, dir);
    const first = await calls(a.port, [g], 8, 'a');
    const made = await a.snapshots.snapshotNow();
    expect(made?.seq).toBe(7);
    expect(listSnapshots(dir).map((s) => s.seq)).toEqual([7]);
    await calls(a.port, [g], 3, 'b');
    const ledger = new Map(a.ledger.entries());
    const next = a.enforcer.nextSeq;
    await a.close();

    const b = await liveNode(manual, {}, dir);
    expect(b.boot.snapshot).toMatchObject({ seq: 7, replayed: 3 });
    expect(b.boot.receipts).toBe(11);
    expect(new Map(b.ledger.entries())).toEqual(ledger);
    expect(b.ledger.spent(grantId(g.grant))).toBe(1_100n);
    expect(b.enforcer.nextSeq).toBe(next);
    // A request decided before the snapshot gets its original receipt back, and no new debit.
    const c = await JcpClient.connect({ host: '127.0.0.1', port: b.port, signer: bob });
    const again = await c.callRequest(first[2]!.request);
    expect(again.receipt).toEqual(first[2]!.receipt);
    expect(b.ledger.spent(grantId(g.grant))).toBe(1_100n);
    // The chain continues from the tail (prev of the next receipt is the last one's id).
    const more = await c.call({ chain: [g], action: 'read', payload: { tag: 'c' }, cost: { uj: 100n, provenance: 'Estimator' } });
    expect(more.decision.verdict).toBe('allow');
    await c.close();
    await b.close();
    const v = await cli(['receipts', 'verify', dir]);
    expect(JSON.parse(v.out)).toMatchObject({ receipts: 12, bad: 0, breaks: 0, snapshots: [{ seq: 7, ok: true }] });
    expect(v.code).toBe(0);
  });

  test('the node writes a snapshot every N receipts by itself', async () => {
    const dir = folder();
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const a = await liveNode({ snapshot: { every_receipts: 5, every_s: 0 } }, {}, dir);
    await calls(a.port, [g], 6, 'n');
    // Polled until it is there: the check runs each second and the replay is on a nice-19 worker
    // thread, which a loaded machine runs last; 30 s of polling, the test ends as soon as it is written.
    for (let i = 0; i < 600 && a.snapshots.coveredSeq < 4; i++) await new Promise((r) => setTimeout(r, 50));
    expect(a.snapshots.coveredSeq).toBeGreaterThanOrEqual(4);
    expect(listSnapshots(dir).length).toBe(1);
    await a.close();
  });

  test('a running node writes its snapshot off the event loop: the whole signed file, no temporary file left', async () => {
    const dir = folder();
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const a = await liveNode(manual, {}, dir);
    await calls(a.port, [g], 3, 'w');
    const made = await a.snapshots.snapshotNow();
    await a.close();
    expect(made?.seq).toBe(2);
    const names = readdirSync(path.join(dir, 'snapshots'));
    expect(names).toEqual(['snap-0000000000000002.cbor']);
    const bytes = readFileSync(path.join(dir, 'snapshots', names[0]!));
    expect(bytes.length).toBe(made!.bytes);
    const v = decode(bytes) as { body: Record<string, unknown>; signature: Uint8Array };
    expect(v.body['seq']).toBe(2);
    expect(v.signature.length).toBe(64);
  });

  test('writeFileDurablyAsync: every byte in place of the old file, no temporary left, no file handle left open; a failed step rejects with its error and leaves nothing', async () => {
    const dir = folder();
    const file = path.join(dir, 'f.bin');
    writeFileSync(file, 'old');
    const big = Buffer.alloc(3 << 20);
    for (let i = 0; i < big.length; i++) big[i] = (i * 7) & 0xff;
    const fds = () => readdirSync('/proc/self/fd').length;
    const before = fds();
    await writeFileDurablyAsync(file, big);
    // Buffer.equals, not toEqual: a deep equality over 3 MiB, byte by byte, takes vitest half a minute.
    expect(readFileSync(file).equals(big)).toBe(true);
    expect(readdirSync(dir)).toEqual(['f.bin']);
    // A missing folder: the open fails, nothing is made.
    const gone = path.join(dir, 'missing', 'g.bin');
    await expect(writeFileDurablyAsync(gone, big)).rejects.toMatchObject({ code: 'ENOENT' });
    expect(existsSync(path.join(dir, 'missing'))).toBe(false);
    // A folder (not empty) where the file goes: written and fsync'd, the rename fails; the temporary is removed.
    const taken = path.join(dir, 'taken');
    mkdirSync(taken);
    writeFileSync(path.join(taken, 'x'), 'x');
    await expect(writeFileDurablyAsync(taken, big)).rejects.toMatchObject({ syscall: 'rename' });
    expect(readdirSync(dir).sort()).toEqual(['f.bin', 'taken']);
    expect(readFileSync(file).equals(big)).toBe(true);
    expect(fds()).toBe(before);
  });

  test('writeFileDurablyAsync with syncEveryBytes: every byte in place, written back piece by piece (sync_file_range, no fdatasync; fdatasync where that answers false), then the fsync', async () => {
    const dir = folder();
    const file = path.join(dir, 'p.bin');
    const big = Buffer.alloc((1 << 20) + 5);
    for (let i = 0; i < big.length; i++) big[i] = (i * 13) & 0xff;
    // The FileHandle prototype, from a handle of its own.
    const probe = await open(path.join(dir, 'probe'), 'w');
    const proto = Object.getPrototypeOf(probe) as { datasync: () => Promise<void>; sync: () => Promise<void> };
    await probe.close();
    const datasync = vi.spyOn(proto, 'datasync');
    const sync = vi.spyOn(proto, 'sync');
    const ranges: Array<[number, number, boolean]> = [];
    const counted = async (fd: number, offset: number, length: number) => {
      const done = await writeBackRange(fd, offset, length);
      ranges.push([offset, length, done]);
      return done;
    };
    try {
      await writeFileDurablyAsync(file, big, 0o600, { syncEveryBytes: 128 << 10, writeBack: counted });
      // 1 MiB + 5 bytes in 128 KiB pieces: 9 pieces, each written back but the last, then the fsync (and the folder's).
      expect(ranges).toEqual(Array.from({ length: 8 }, (_, i) => [i * (128 << 10), 128 << 10, process.platform === 'linux']));
      expect(datasync).toHaveBeenCalledTimes(process.platform === 'linux' ? 0 : 8);
      expect(sync).toHaveBeenCalledTimes(2);
      // Where the write-back is not available, each piece is flushed with fdatasync instead.
      await writeFileDurablyAsync(file, big, 0o600, { syncEveryBytes: 128 << 10, writeBack: async () => false });
      expect(datasync).toHaveBeenCalledTimes(process.platform === 'linux' ? 8 : 16);
      datasync.mockClear();
      await writeFileDurablyAsync(file, big);
      expect(datasync).not.toHaveBeenCalled();
    } finally {
      datasync.mockRestore();
      sync.mockRestore();
    }
    expect(readFileSync(file).equals(big)).toBe(true);
    expect(readdirSync(dir).sort()).toEqual(['p.bin', 'probe']);
  });

  test.runIf(process.platform === 'linux')(
    'writeBackRange: true on an open file (its dirty pages written back), false on a descriptor that is not open',
    async () => {
      const fh = await open(path.join(folder(), 'w.bin'), 'w');
      try {
        await fh.write(Buffer.alloc(64 << 10, 7), 0, 64 << 10, 0);
        expect(await writeBackRange(fh.fd, 0, 64 << 10)).toBe(true);
      } finally {
        await fh.close();
      }
      expect(await writeBackRange(1 << 20, 0, 4096)).toBe(false);
    },
  );

  test('a snapshot that does not verify is ignored with its reason, and the start replays the whole log', async () => {
    const dir = folder();
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const warn = vi.fn();
    const a = await liveNode(manual, {}, dir);
    await calls(a.port, [g], 4, 'x');
    await a.snapshots.snapshotNow();
    await a.close();
    const file = listSnapshots(dir)[0]!.file;
    const v = decode(readFileSync(file)) as { body: Record<string, unknown>; signature: Uint8Array };
    // Forged spend: the signature no longer covers the body.
    writeFileSync(file, encode({ body: { ...v.body, spent: [] }, signature: v.signature }));
    const { pino } = await import('pino');
    const logger = pino({ level: 'warn' }, { write: (s: string) => warn(JSON.parse(s)) });
    const b = await liveNode(manual, { logger }, dir);
    expect(b.boot.snapshot).toBeUndefined();
    expect(b.boot.receipts).toBe(4);
    expect(b.ledger.spent(grantId(g.grant))).toBe(400n);
    expect(warn.mock.calls.map((c) => c[0].why)).toContain('the steward signature does not verify');
    await b.close();
    const r = await cli(['receipts', 'verify', dir]);
    expect(r.code).toBe(1);
    expect(JSON.parse(r.out).snapshots[0]).toMatchObject({ seq: 3, ok: false, why: 'the steward signature does not verify' });
  });

  test('a signed snapshot that disagrees with the log at its seq is ignored; one whose state differs is caught by verify', async () => {
    const dir = folder();
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const a = await liveNode(manual, {}, dir);
    await calls(a.port, [g], 4, 'y');
    await a.snapshots.snapshotNow();
    const steward = a.steward;
    await a.close();
    const file = listSnapshots(dir)[0]!.file;
    const body = (decode(readFileSync(file)) as { body: Record<string, unknown> }).body;
    // Signed by the steward, but bound to another receipt at seq 3.
    writeFileSync(file, encode(signBody({ ...body, receipt_id: '00'.repeat(32) }, steward)));
    const b = await liveNode(manual, {}, dir);
    expect(b.boot.snapshot).toBeUndefined();
    expect(b.ledger.spent(grantId(g.grant))).toBe(400n);
    await b.close();
    // Signed, bound right, but claiming less spend: the node would trust it; verify does not.
    writeFileSync(file, encode(signBody({ ...body, spent: [[grantId(g.grant), 1n]] }, steward)));
    const r = await cli(['receipts', 'verify', dir]);
    expect(r.code).toBe(1);
    expect(JSON.parse(r.out).snapshots[0]).toMatchObject({ seq: 3, ok: false, why: 'differs from the full replay at seq 3 (field spent)' });
  });

  test('jcp receipts snapshot makes one with the node stopped, continues from the last, and refuses a log a running node holds', async () => {
    const dir = folder();
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const a = await liveNode(manual, {}, dir);
    await calls(a.port, [g], 3, 's');
    const locked = await cli(['receipts', 'snapshot', dir]);
    expect(locked.code).toBe(1);
    expect(locked.err).toContain('[log-locked]');
    expect(listSnapshots(dir)).toEqual([]);
    await calls(a.port, [g], 2, 't');
    await a.snapshots.snapshotNow();
    await calls(a.port, [g], 2, 'u');
    await a.close();
    const made = await cli(['receipts', 'snapshot', dir]);
    expect(made.code).toBe(0);
    expect(JSON.parse(made.out)).toMatchObject({ seq: 6, replayed: 2 });
    expect(listSnapshots(dir).map((s) => s.seq)).toEqual([6, 4]);
    // --keep: as many as the node's snapshot.keep, not always 2 (break18 F6).
    const c3 = await liveNode(manual, {}, dir);
    await calls(c3.port, [g], 1, 'k');
    await c3.close();
    const kept = await cli(['receipts', 'snapshot', dir, '--keep', '3']);
    expect(kept.code).toBe(0);
    expect(listSnapshots(dir).map((s) => s.seq)).toEqual([7, 6, 4]);
    expect((await cli(['receipts', 'snapshot', dir, '--keep', '0'])).code).toBe(2);
    const v = await cli(['receipts', 'verify', dir]);
    expect(v.code).toBe(0);
    expect(JSON.parse(v.out).snapshots).toEqual([
      { file: listSnapshots(dir)[2]!.file, seq: 4, ok: true },
      { file: listSnapshots(dir)[1]!.file, seq: 6, ok: true },
      { file: listSnapshots(dir)[0]!.file, seq: 7, ok: true },
    ]);
    const b = await liveNode(manual, {}, dir);
    expect(b.boot.snapshot).toMatchObject({ seq: 7, replayed: 0 });
    expect(b.ledger.spent(grantId(g.grant))).toBe(800n);
    await b.close();
  });

  test('a stray snapshot file with a higher seq never makes the node delete the snapshot it just wrote (break18 F1)', async () => {
    const dir = folder();
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const a = await liveNode({ snapshot: { every_receipts: 0, every_s: 0, keep: 1 } }, {}, dir);
    await calls(a.port, [g], 3, 'p');
    await a.snapshots.snapshotNow();
    // Junk (or a snapshot of a log restored from an older copy) named above anything the log holds.
    writeFileSync(`${dir}/snapshots/snap-0000000000009999.cbor`, 'junk');
    await calls(a.port, [g], 2, 'q');
    const made = await a.snapshots.snapshotNow();
    expect(made?.seq).toBe(4);
    expect(listSnapshots(dir).map((s) => s.seq)).toEqual([9999, 4]);
    await a.close();
    const b = await liveNode(manual, {}, dir);
    expect(b.boot.snapshot).toMatchObject({ seq: 4, replayed: 0 });
    expect(b.ledger.spent(grantId(g.grant))).toBe(500n);
    await b.close();
  });

  test('a snapshot that is a symbolic link is not followed: ignored at start with its reason, not ok in verify (break18 F4)', async () => {
    const dir = folder();
    const away = folder();
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const a = await liveNode(manual, {}, dir);
    await calls(a.port, [g], 3, 'l');
    await a.snapshots.snapshotNow();
    await a.close();
    const file = listSnapshots(dir)[0]!.file;
    const target = `${away}/snap.cbor`;
    renameSync(file, target);
    symlinkSync(target, file);
    const warn = vi.fn();
    const { pino } = await import('pino');
    const logger = pino({ level: 'warn' }, { write: (s: string) => warn(JSON.parse(s)) });
    const b = await liveNode(manual, { logger }, dir);
    expect(b.boot.snapshot).toBeUndefined();
    expect(b.ledger.spent(grantId(g.grant))).toBe(300n);
    expect(warn.mock.calls.map((c) => String(c[0].why))).toContainEqual(expect.stringContaining('a symbolic link, not a snapshot file'));
    await b.close();
    const r = await cli(['receipts', 'verify', dir]);
    expect(r.code).toBe(1);
    expect(JSON.parse(r.out).snapshots[0]).toMatchObject({ seq: 2, ok: false });
  });

  test('a receipt lost after the snapshot is still damage (the head mark and continuity are checked over the tail)', async () => {
    const dir = folder();
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const a = await liveNode(manual, {}, dir);
    await calls(a.port, [g], 3, 'h');
    await a.snapshots.snapshotNow();
    await calls(a.port, [g], 3, 'i');
    await a.close();
    const { ClassicLevel } = await import('classic-level');
    const { receiptKey } = await import('../../node/index.ts');
    const db = new ClassicLevel<Uint8Array, Uint8Array>(`${dir}/receipts`, { keyEncoding: 'view', valueEncoding: 'view' });
    await db.open();
    await db.del(receiptKey(4));
    await db.close();
    await expect(liveNode(manual, {}, dir)).rejects.toMatchObject({ code: 'log-damaged' });
  });
});

describe('snapshots and outcome records', () => {
  test('a reversal written before or after a snapshot is applied exactly once at every start (the snapshot holds the receipts’ debits only)', async () => {
    const dir = folder();
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const a = await liveNode(manual, {}, dir);
    const r = await calls(a.port, [g], 4, 'rev');
    const reverse = (seq: number) =>
      a.log.putOutcome(
        'reversal',
        seq,
        sealOutcome(
          {
            jcp_outcome: 'jcp-node/1',
            kind: 'reversal',
            outcome: 'endpoint-unavailable',
            phase: 'start',
            at: 1,
            receipt_seq: seq,
            receipt_id: receiptId(r[seq]!.receipt),
            refund_uj: 100n,
            steward: a.did,
          },
          a.steward,
        ),
      );
    await reverse(1); // before the snapshot
    await calls(a.port, [g], 1, 'rev2');
    expect((await a.snapshots.snapshotNow())?.seq).toBe(4);
    await reverse(2); // after it, for a receipt it covers
    await a.close();
    for (let i = 0; i < 2; i++) {
      const b = await liveNode(manual, {}, dir);
      expect(b.boot.snapshot).toMatchObject({ seq: 4, replayed: 0 });
      expect(b.boot.reversals).toMatchObject({ applied: 2, bad: 0 });
      expect(b.ledger.spent(grantId(g.grant))).toBe(300n);
      await b.close();
    }
    const v = await cli(['receipts', 'verify', dir]);
    expect(JSON.parse(v.out)).toMatchObject({ snapshots: [{ seq: 4, ok: true }], outcomes: { reversals: 2, bad: 0 } });
    expect(v.code).toBe(0);
  });
});

describe('the request index is bounded by time', () => {
  test('a request resent after the node clock passed the window gets clock-skew, and the ledger is unchanged', async () => {
    const dir = folder();
    let clock = 1_900_000_000;
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const a = await liveNode({ ...manual, max_skew_s: 30, request_index_margin_s: 10 }, { clockS: () => clock }, dir);
    const c = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: bob });
    const req = request(bob, [g], { action: 'read', now: clock, costUj: 100n, payload: new TextEncoder().encode('{"k":1}') });
    const first = await c.callRequest(req);
    expect(first.decision.verdict).toBe('allow');
    // Within the skew window a resend is an idempotent replay: the same receipt, no second debit.
    clock += 25;
    expect((await c.callRequest(req)).receipt).toEqual(first.receipt);
    expect(a.ledger.spent(grantId(g.grant))).toBe(100n);
    // Past max_skew_s + margin the id may be gone from the index: the request is refused.
    clock += 100;
    const err = await c.callRequest(req).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WireErrorReply);
    expect((err as WireErrorReply).code).toBe(NodeErrorCodes.CLOCK_SKEW);
    expect(a.ledger.spent(grantId(g.grant))).toBe(100n);
    // The clock stepping back does not bring the dropped ids' time back (the horizon never falls).
    clock -= 100;
    const back = await c.callRequest(req).catch((e: unknown) => e);
    expect((back as WireErrorReply).code).toBe(NodeErrorCodes.CLOCK_SKEW);
    expect(a.ledger.spent(grantId(g.grant))).toBe(100n);
    expect(a.enforcer.nextSeq).toBe(1);
    await c.close();
    await a.close();
  });

  test('buckets below the horizon are dropped; entries at or above it are all kept and found', () => {
    const index = new TimedRequestIndex(10);
    const id = (n: number) => `${n.toString(16).padStart(8, '0')}${'e'.repeat(56)}`;
    for (let i = 0; i < 100; i++) index.set(id(i), i, 1000 + i);
    expect(index.size).toBe(100);
    expect(index.advance(1060)).toBe(50); // horizon 1050: buckets 100..104 (at 1000..1049) go
    expect(index.horizon).toBe(1050);
    for (let i = 0; i < 100; i++) expect(index.get(id(i), 1000 + i)).toBe(i >= 50 ? i : undefined);
    expect(index.get(id(70))).toBe(70);
    index.set(id(200), 200, 1049); // below the horizon: never needed, not kept
    expect(index.get(id(200), 1049)).toBeUndefined();
    expect([...index.entries().seqs]).toEqual(Array.from({ length: 50 }, (_, i) => 50 + i));
    expect(index.advance(1000)).toBe(0);
    expect(index.horizon).toBe(1050);
  });

  test('entries: every entry at or above the given time, in seq order, each with its own key words and time', () => {
    const index = new TimedRequestIndex(7);
    // 600 entries over many buckets, inserted in an order unrelated to their seqs.
    const rows = Array.from({ length: 600 }, (_, i) => ({ seq: 10_000 + ((i * 389) % 600) * 3, at: 2000 + ((i * 7919) % 97) }));
    const id = (seq: number) =>
      `${(seq * 2654435761).toString(16).slice(-8).padStart(8, '0')}${seq.toString(16).padStart(8, '0')}${'ab'.repeat(24)}`;
    for (const r of rows) index.set(id(r.seq), r.seq, r.at);
    const minAt = 2040;
    const want = rows.filter((r) => r.at >= minAt).sort((a, b) => a.seq - b.seq);
    const e = index.entries(minAt);
    expect(want.length).toBeGreaterThan(100);
    expect(want.length).toBeLessThan(rows.length);
    expect([...e.seqs]).toEqual(want.map((r) => r.seq));
    expect([...e.ats]).toEqual(want.map((r) => r.at));
    const words = new Uint32Array(4);
    want.forEach((r, i) => {
      requestKeyWords(id(r.seq), words, 0);
      expect([...e.keys.subarray(i * 4, i * 4 + 4)]).toEqual([...words]);
    });
  });
});

describe('archival: receipts a snapshot covers move into sealed segments', () => {
  test('archive below the snapshot, start from it, verify with --archive; a changed segment or a bound past what the snapshot allows is refused', async () => {
    const dir = folder();
    const out = folder();
    const T = 1_900_000_000;
    let clock = T;
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const cfg = { ...manual, max_skew_s: 30, request_index_margin_s: 60 };
    const a = await liveNode(cfg, { clockS: () => clock }, dir);
    const c = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: bob });
    const cost = { uj: 100n, provenance: 'Estimator' } as const;
    const old = [];
    for (let i = 0; i < 6; i++) old.push(await c.call({ chain: [g], action: 'read', payload: { i }, cost, now: T }));
    clock = T + 200; // the first six requests are now below the request index's horizon
    for (let i = 0; i < 4; i++) await c.call({ chain: [g], action: 'read', payload: { j: i }, cost, now: clock });
    await c.close();
    expect((await a.snapshots.snapshotNow())?.seq).toBe(9);
    await a.close();

    // Seq 6.. answer request ids the snapshot still keeps: they stay.
    const tooFar = await cli(['receipts', 'archive', dir, '--before', '7', '--out', out]);
    expect(tooFar.code).toBe(1);
    expect(tooFar.err).toContain('[not-covered]');
    const done = await cli(['receipts', 'archive', dir, '--before', '6', '--out', out]);
    expect(done.code).toBe(0);
    const report = JSON.parse(done.out);
    expect(report).toMatchObject({ archived: 6, segments: [{ first: 0, last: 5, count: 6 }] });
    const segment = readFileSync(report.segments[0].file);
    expect(segment).toEqual(Buffer.concat(old.map((r) => Buffer.from(r.receipt))));

    const b = await liveNode(cfg, { clockS: () => clock }, dir);
    expect(b.boot.snapshot).toMatchObject({ seq: 9, replayed: 0 });
    expect(await b.log.firstSeq()).toBe(6);
    expect(b.ledger.spent(grantId(g.grant))).toBe(1_000n);
    const c2 = await JcpClient.connect({ host: '127.0.0.1', port: b.port, signer: bob });
    const err = await c2.callRequest(old[2]!.request).catch((e: unknown) => e);
    expect((err as WireErrorReply).code).toBe(NodeErrorCodes.CLOCK_SKEW);
    expect((await c2.call({ chain: [g], action: 'read', payload: { k: 1 }, cost, now: clock })).decision.verdict).toBe('allow');
    await c2.close();
    await b.close();

    const blind = await cli(['receipts', 'verify', dir]);
    expect(blind.code).toBe(1);
    expect(blind.err).toContain('[archive-needed]');
    const v = await cli(['receipts', 'verify', dir, '--archive', out]);
    expect(v.code).toBe(0);
    expect(JSON.parse(v.out)).toMatchObject({
      receipts: 11,
      bad: 0,
      breaks: 0,
      snapshots: [{ seq: 9, ok: true }],
      archive: [{ first: 0, last: 5, ok: true }],
    });
    // replay and attribute: the live log only unless given the segments, and they say so (break18 F3).
    const partial = await cli(['receipts', 'replay', dir]);
    expect(partial.code).toBe(0);
    expect(partial.err).toContain('warning [archive-needed]: receipts 0..5 of this log are archived and not counted here');
    expect(JSON.parse(partial.out)).toMatchObject({ receipts: 5, archived: { first: 0, last: 5, receipts: 6, included: false } });
    const whole = await cli(['receipts', 'replay', dir, '--archive', out]);
    expect(whole.code).toBe(0);
    expect(whole.err).toBe('');
    expect(JSON.parse(whole.out)).toMatchObject({
      receipts: 11,
      budgets: [{ grant_id: grantId(g.grant), spent_uj: '1100' }],
      archived: { first: 0, last: 5, receipts: 6, included: true },
      archive: [{ first: 0, last: 5, ok: true }],
    });
    const attr = await cli(['receipts', 'attribute', dir, '--archive', out]);
    expect(JSON.parse(attr.out)).toMatchObject({ receipts: 11, attribution: [{ allowed: 11, uj: '1100' }], archived: { included: true } });
    const changed = Buffer.from(segment);
    changed[changed.length - 1]! ^= 1;
    writeFileSync(report.segments[0].file, changed);
    const bad = await cli(['receipts', 'verify', dir, '--archive', out]);
    expect(bad.code).toBe(1);
    expect(JSON.parse(bad.out).archive[0]).toMatchObject({ ok: false, why: 'its BLAKE3 is not the one the log recorded' });
  });
});
