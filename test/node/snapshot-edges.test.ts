/**
 * Edge cases of ledger snapshots and archival found by probing them as an operator and an
 * attacker would: gaps at the start of an archive range, a segment left by a crash, damaged or
 * foreign snapshot files, a snapshot made while the clock ran ahead.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { getPriority } from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, test } from 'vitest';
import { grantId } from '../../core/index.ts';
import pino from 'pino';
import { NodeErrorCodes, ReceiptLog, readKeyFile, receiptKey, Snapshotter } from '../../node/index.ts';
import { SCHED_IDLE, SnapshotProcess, threadPolicy } from '../../node/internal.ts';
import { ClassicLevel } from 'classic-level';
import { JcpClient, type WireErrorReply } from '../../client/index.ts';
import { cast, catchWorkers, liveNode, manualSnapshotter, mint, request, tempFolders } from './fixtures.ts';
import { runJcpInProcess } from '../support.ts';

const { rng, alice, bob } = cast('snapshot-edges');
const folder = tempFolders('snapedge');
const cli = (argv: string[]) => runJcpInProcess(argv);
const T = 1_900_000_000;
const cfg = { snapshot: { every_receipts: 0, every_s: 0 }, max_skew_s: 30, request_index_margin_s: 60 };
const cost = { uj: 100n, provenance: 'Estimator' } as const;

/** A log of `n` old receipts (below the request index's horizon) and 2 recent ones, with a snapshot of it all. */
async function loggedFolder(n: number) {
  const dir = folder();
  let clock = T;
  const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
  const a = await liveNode(cfg, { clockS: () => clock }, dir);
  const c = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: bob });
  for (let i = 0; i < n; i++) await c.call({ chain: [g], action: 'read', payload: { i }, cost, now: T });
  clock = T + 200;
  for (let i = 0; i < 2; i++) await c.call({ chain: [g], action: 'read', payload: { j: i }, cost, now: clock });
  await c.close();
  await a.snapshots.snapshotNow();
  const steward = a.steward;
  await a.close();
  return { dir, g, steward };
}

async function deleteReceipt(dir: string, seq: number) {
  const { ClassicLevel } = await import('classic-level');
  const db = new ClassicLevel<Uint8Array, Uint8Array>(`${dir}/receipts`, { keyEncoding: 'view', valueEncoding: 'view' });
  await db.open();
  await db.del(receiptKey(seq));
  await db.close();
}

describe('archival refuses a gap at the start of its range', () => {
  test('receipt 0 missing: nothing is archived, the gap is named', async () => {
    const f = await loggedFolder(6);
    const out = folder();
    await deleteReceipt(f.dir, 0);
    const r = await cli(['receipts', 'archive', f.dir, '--before', '4', '--out', out]);
    expect(r.err).toContain('receipt 0 is missing from the log: a gap is not archived');
    expect(r.code).toBe(1);
    expect(readdirSync(out)).toEqual([]);
  });

  test('the receipt right after the last archived segment missing: the second archive refuses it', async () => {
    const f = await loggedFolder(8);
    const out = folder();
    expect((await cli(['receipts', 'archive', f.dir, '--before', '3', '--out', out])).code).toBe(0);
    await deleteReceipt(f.dir, 3);
    const r = await cli(['receipts', 'archive', f.dir, '--before', '6', '--out', out]);
    expect(r.err).toContain('receipt 3 is missing from the log: a gap is not archived');
    expect(r.code).toBe(1);
    expect(readdirSync(out)).toEqual(['seg-0000000000000000-0000000000000002.cbor']);
  });
});

describe('archival after a run stopped between its segment and its record', () => {
  test('a segment file already holding exactly those receipts is recorded on the next run; one with other bytes is refused', async () => {
    const f = await loggedFolder(6);
    const out = folder();
    // What a run killed after the segment's rename, before the log's batch, leaves behind.
    const { ReceiptLog } = await import('../../node/index.ts');
    const log = await ReceiptLog.open(f.dir, { steward: f.steward.did, mustExist: true, nowS: 0 });
    const receipts: Uint8Array[] = [];
    for (let seq = 0; seq < 4; seq++) receipts.push((await log.getReceipt(seq))!);
    await log.close();
    const name = 'seg-0000000000000000-0000000000000003.cbor';
    writeFileSync(path.join(out, name), Buffer.concat(receipts));
    const r = await cli(['receipts', 'archive', f.dir, '--before', '4', '--out', out]);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out)).toMatchObject({ archived: 4, segments: [{ first: 0, last: 3, count: 4 }] });
    const v = await cli(['receipts', 'verify', f.dir, '--archive', out]);
    expect(JSON.parse(v.out)).toMatchObject({ receipts: 8, bad: 0, breaks: 0, archive: [{ first: 0, last: 3, ok: true }] });
    expect(v.code).toBe(0);
    // Something else under that name is never overwritten.
    const g = await loggedFolder(6);
    const other = folder();
    writeFileSync(path.join(other, name), 'not these receipts');
    const refused = await cli(['receipts', 'archive', g.dir, '--before', '4', '--out', other]);
    expect(refused.code).toBe(1);
    expect(refused.err).toContain('exists with other bytes: an archive segment is never overwritten');
    expect(readFileSync(path.join(other, name), 'utf8')).toBe('not these receipts');
  });
});

describe('archive --before takes a decimal seq only', () => {
  // One log for the six refusals: a usage error reads nothing of it (each case checks its own --out).
  let f: Awaited<ReturnType<typeof loggedFolder>>;
  beforeAll(async () => {
    f = await loggedFolder(6);
  });
  test.each(['', ' 3', '0x3', '1e0', '3.0', '+3'])('--before %j is a usage error and archives nothing', async (before) => {
    const out = folder();
    const r = await cli(['receipts', 'archive', f.dir, `--before=${before}`, '--out', out]);
    expect(r.err).toContain('archive: --before SEQ (an integer ≥ 0)');
    expect(r.code).toBe(2);
    expect(readdirSync(out)).toEqual([]);
  });
});

describe('a snapshot write cut short by a crash', () => {
  test('the temporary file a killed process left is ignored at start and removed by the next snapshot written', async () => {
    const f = await loggedFolder(3);
    const snaps = path.join(f.dir, 'snapshots');
    // What kill -9 during the write leaves: the temporary file of another (dead) process, half written.
    const orphan = path.join(snaps, `.snap-0000000000000009.cbor.${process.pid + 100_000}.0a1b2c3d.tmp`);
    writeFileSync(orphan, Buffer.alloc(100, 7));
    const other = path.join(snaps, 'notes.txt'); // not a snapshot's: left alone
    writeFileSync(other, 'x');
    const b = await liveNode(cfg, { clockS: () => T + 200 }, f.dir);
    expect(b.boot.snapshot).toMatchObject({ seq: 4, replayed: 0 });
    const c = await JcpClient.connect({ host: '127.0.0.1', port: b.port, signer: bob });
    await c.call({ chain: [f.g], action: 'read', payload: { k: 1 }, cost, now: T + 200 });
    await c.close();
    expect((await b.snapshots.snapshotNow())?.seq).toBe(5);
    await b.close();
    expect(readdirSync(snaps).sort()).toEqual(['notes.txt', 'snap-0000000000000004.cbor', 'snap-0000000000000005.cbor']);
  });

  test('a temporary file that carries this process id (a container node is PID 1 at every start) is removed too; a folder with a snapshot name does not fail the snapshot written', async () => {
    const f = await loggedFolder(3);
    const snaps = path.join(f.dir, 'snapshots');
    // Left by an earlier run with the same pid (PID 1 in a container, killed mid-write).
    const mine = path.join(snaps, `.snap-0000000000000009.cbor.${process.pid}.0a1b2c3d.tmp`);
    writeFileSync(mine, Buffer.alloc(100, 7));
    // A folder named like an old snapshot (made by hand): not a snapshot this node wrote.
    mkdirSync(path.join(snaps, 'snap-0000000000000001.cbor'));
    const b = await liveNode({ ...cfg, snapshot: { every_receipts: 0, every_s: 0, keep: 1 } }, { clockS: () => T + 200 }, f.dir);
    const c = await JcpClient.connect({ host: '127.0.0.1', port: b.port, signer: bob });
    await c.call({ chain: [f.g], action: 'read', payload: { k: 2 }, cost, now: T + 200 });
    await c.close();
    expect((await b.snapshots.snapshotNow())?.seq).toBe(5);
    expect(b.snapshots.coveredSeq).toBe(5);
    await b.close();
    expect(readdirSync(snaps).sort()).toEqual(['snap-0000000000000001.cbor', 'snap-0000000000000005.cbor']);
  });
});

describe('a snapshot folder that cannot be read', () => {
  test('a file where the snapshot folder goes: the start replays the whole log and says why; the node keeps deciding; verify names it', async () => {
    const f = await loggedFolder(3);
    rmSync(path.join(f.dir, 'snapshots'), { recursive: true });
    writeFileSync(path.join(f.dir, 'snapshots'), 'a file where the folder goes');
    const warn: Array<Record<string, unknown>> = [];
    const { pino } = await import('pino');
    const logger = pino({ level: 'warn' }, { write: (s: string) => warn.push(JSON.parse(s)) });
    const b = await liveNode(cfg, { clockS: () => T + 200, logger }, f.dir);
    expect(b.boot.snapshot).toBeUndefined();
    expect(b.boot.receipts).toBe(5);
    expect(b.ledger.spent(grantId(f.g.grant))).toBe(500n);
    expect(warn.map((x) => String(x['why']))).toContainEqual(expect.stringContaining('the snapshot folder cannot be read'));
    const c = await JcpClient.connect({ host: '127.0.0.1', port: b.port, signer: bob });
    expect((await c.call({ chain: [f.g], action: 'read', payload: { k: 2 }, cost, now: T + 200 })).decision.verdict).toBe('allow');
    await c.close();
    await expect(b.snapshots.snapshotNow()).rejects.toThrow();
    await b.close();
    const v = await cli(['receipts', 'verify', f.dir]);
    expect(v.code).toBe(1);
    expect(JSON.parse(v.out).snapshots).toEqual([
      { file: path.join(f.dir, 'snapshots'), seq: -1, ok: false, why: expect.stringContaining('the snapshot folder cannot be read') },
    ]);
  });
});

describe('a snapshot that keeps failing', () => {
  test('the timer waits longer after each failure instead of replaying the log every second', async () => {
    const dir = folder();
    let clock = T;
    const failed: string[] = [];
    const { pino } = await import('pino');
    const logger = pino({ level: 'warn' }, { write: (s: string) => failed.push(JSON.parse(s).msg) });
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const a = await liveNode({ ...cfg, snapshot: { every_receipts: 2, every_s: 0 } }, { clockS: () => clock, logger }, dir);
    writeFileSync(path.join(dir, 'snapshots'), 'a file where the folder goes');
    const c = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: bob });
    for (let i = 0; i < 3; i++) await c.call({ chain: [g], action: 'read', payload: { i }, cost, now: T });
    await c.close();
    const failures = () => failed.filter((m) => m.startsWith('snapshot failed')).length;
    for (let i = 0; i < 200 && failures() === 0; i++) await new Promise((r) => setTimeout(r, 50));
    expect(failures()).toBe(1);
    // The node clock stands still: the 1-second timer ticks, but the wait after the failure is not over.
    await new Promise((r) => setTimeout(r, 3_500));
    expect(failures()).toBe(1);
    clock += 1; // past the first wait (1 s): one more try, then 2 s
    for (let i = 0; i < 400 && failures() === 1; i++) await new Promise((r) => setTimeout(r, 50));
    expect(failures()).toBe(2);
    rmSync(path.join(dir, 'snapshots'));
    clock += 2; // the fault is gone: the next try writes it
    for (let i = 0; i < 400 && a.snapshots.coveredSeq < 2; i++) await new Promise((r) => setTimeout(r, 50));
    expect(a.snapshots.coveredSeq).toBe(2);
    await a.close();
  }, 60_000); // its own waits add up to 54 s at most: on busy cores a worker start alone can take seconds
});

describe('a quiet log can be archived', () => {
  test('jcp receipts snapshot on a log its newest snapshot covers renews the request window, so the archive may go up to that seq', async () => {
    const dir = folder();
    const out = folder();
    const past = Math.floor(Date.now() / 1000) - 1_000; // requests long out of the window by now
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const a = await liveNode(cfg, { clockS: () => past }, dir);
    const c = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: bob });
    for (let i = 0; i < 5; i++) await c.call({ chain: [g], action: 'read', payload: { i }, cost, now: past });
    await c.close();
    expect((await a.snapshots.snapshotNow())?.seq).toBe(4); // its request index names seq 0..4
    await a.close();
    const renewed = await cli(['receipts', 'snapshot', dir]);
    expect(renewed.code).toBe(0);
    expect(JSON.parse(renewed.out)).toMatchObject({ seq: 4, replayed: 0, requests: 0 });
    expect(readdirSync(path.join(dir, 'snapshots'))).toEqual(['snap-0000000000000004.cbor']);
    const again = await cli(['receipts', 'snapshot', dir]); // nothing more to drop: nothing written
    expect(again.err).toContain('nothing to snapshot');
    const r = await cli(['receipts', 'archive', dir, '--before', '4', '--out', out]);
    expect(r.err).toBe('');
    expect(JSON.parse(r.out)).toMatchObject({ archived: 4, segments: [{ first: 0, last: 3 }] });
    const b = await liveNode(cfg, {}, dir);
    expect(b.boot.snapshot).toMatchObject({ seq: 4, replayed: 0 });
    expect(b.ledger.spent(grantId(g.grant))).toBe(500n);
    await b.close();
    const v = await cli(['receipts', 'verify', dir, '--archive', out]);
    expect(JSON.parse(v.out)).toMatchObject({ receipts: 5, bad: 0, breaks: 0, snapshots: [{ seq: 4, ok: true }] });
    expect(v.code).toBe(0);
  });
});

describe('a snapshot made while the node clock ran ahead', () => {
  /** Two requests at T, then the clock a day ahead, 2 requests there and a snapshot; the node stops. */
  async function aheadFolder() {
    const dir = folder();
    let clock = T;
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const a = await liveNode(cfg, { clockS: () => clock }, dir);
    const c = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: bob });
    const early = request(bob, [g], { action: 'read', now: T, costUj: 100n, payload: new TextEncoder().encode('{"early":1}') });
    const first = await c.callRequest(early);
    await c.call({ chain: [g], action: 'read', payload: { early: 2 }, cost, now: T });
    clock = T + 86_400;
    for (let i = 0; i < 2; i++) await c.call({ chain: [g], action: 'read', payload: { ahead: i }, cost, now: clock });
    expect((await a.snapshots.snapshotNow())?.seq).toBe(3);
    await c.close();
    await a.close();
    return { dir, g, early, first };
  }

  test('is ignored at a start with the clock set right: a full replay keeps the early ids, and requests now are decided', async () => {
    const f = await aheadFolder();
    const lines: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (s: string) => void lines.push(s) });
    const b = await liveNode(cfg, { clockS: () => T + 10, logger }, f.dir);
    expect(b.boot.snapshot).toBeUndefined();
    expect(lines.join('')).toContain('86390 s ahead of the node clock (1900000010; 60 s allowed)');
    const c = await JcpClient.connect({ host: '127.0.0.1', port: b.port, signer: bob });
    // The early request resent within its skew window is a replay: the same receipt, no second debit.
    expect((await c.callRequest(f.early)).receipt).toEqual(f.first.receipt);
    const now = await c.call({ chain: [f.g], action: 'read', payload: { now: 1 }, cost, now: T + 10 });
    expect(now.decision.verdict).toBe('allow');
    expect(b.ledger.spent(grantId(f.g.grant))).toBe(500n);
    // The snapshot the node writes next is made by this clock, and a later start uses it.
    expect((await b.snapshots.snapshotNow())?.seq).toBe(4);
    await c.close();
    await b.close();
    const d = await liveNode(cfg, { clockS: () => T + 20 }, f.dir);
    expect(d.boot.snapshot).toMatchObject({ seq: 4, replayed: 0 });
    expect(d.ledger.spent(grantId(f.g.grant))).toBe(500n);
    await d.close();
  });

  test('within request_index_margin_s ahead it is used', async () => {
    const f = await aheadFolder();
    const b = await liveNode(cfg, { clockS: () => T + 86_400 - 60 }, f.dir);
    expect(b.boot.snapshot).toMatchObject({ seq: 3, replayed: 0 });
    await b.close();
    const d = await liveNode(cfg, { clockS: () => T + 86_400 - 61 }, f.dir);
    expect(d.boot.snapshot).toBeUndefined();
    await d.close();
  });

  test('on an archived log (no full replay) it is used, and requests below its horizon get clock-skew, never a second debit', async () => {
    const f = await aheadFolder();
    const out = folder();
    const r = await cli(['receipts', 'archive', f.dir, '--before', '2', '--out', out]);
    expect(JSON.parse(r.out)).toMatchObject({ archived: 2 });
    const b = await liveNode(cfg, { clockS: () => T + 10 }, f.dir);
    expect(b.boot.snapshot).toMatchObject({ seq: 3, replayed: 0 });
    const c = await JcpClient.connect({ host: '127.0.0.1', port: b.port, signer: bob });
    const err = await c.callRequest(f.early).catch((e: unknown) => e);
    expect((err as WireErrorReply).code).toBe(NodeErrorCodes.CLOCK_SKEW);
    expect(b.ledger.spent(grantId(f.g.grant))).toBe(400n);
    await c.close();
    await b.close();
  });
});

describe('which receipts a running node vouches for by their links', () => {
  test('receipts from before a restart have their signatures checked; those the node then appended are vouched for (checked "chain")', async () => {
    const lines: Array<{ msg: string; seq?: number; checked?: unknown; replayed?: number; base?: unknown }> = [];
    const logger = pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l)) });
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const dir = folder();
    const call = async (node: { port: number }, from: number, n: number) => {
      const c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
      for (let i = from; i < from + n; i++) await c.call({ chain: [g], action: 'read', payload: { i }, cost, now: T });
      await c.close();
    };
    // A fresh log: every receipt is the node's own.
    const a = await liveNode(cfg, { clockS: () => T, logger }, dir);
    await call(a, 0, 2);
    await a.snapshots.snapshotNow();
    await call(a, 2, 2); // seqs 2 and 3, not in a snapshot before the restart
    await a.close();
    const b = await liveNode(cfg, { clockS: () => T, logger }, dir);
    await call(b, 4, 2);
    await b.snapshots.snapshotNow(); // base seq 1: seqs 2, 3 were appended by the node before
    await call(b, 6, 1);
    await b.snapshots.snapshotNow(); // base seq 5: seq 6 is this node's
    await b.close();
    // The last continues the state the kept worker made the one before from (`kept`), not the file.
    expect(lines.filter((l) => l.msg === 'snapshot written').map((l) => [l.seq, l.replayed, l.checked, l.base])).toEqual([
      [1, 2, 'chain', 'none'],
      [5, 4, 'signatures', 'file'],
      [6, 1, 'chain', 'kept'],
    ]);
  });
});

describe.runIf(process.platform === 'linux')('how the snapshot worker is scheduled', () => {
  /** The `scheduling` of each 'snapshot written' line a node with `snapshot` config logs for two snapshots. */
  async function ranAs(snapshot: Record<string, unknown>): Promise<unknown[]> {
    const lines: Array<{ msg: string; scheduling?: unknown }> = [];
    const logger = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s)) });
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const a = await liveNode({ ...cfg, snapshot: { ...cfg.snapshot, ...snapshot } }, { clockS: () => T, logger }, folder());
    try {
      const c = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: bob });
      for (let i = 0; i < 2; i++) {
        await c.call({ chain: [g], action: 'read', payload: { i }, cost, now: T });
        expect(await a.snapshots.snapshotNow()).toBeDefined();
      }
      await c.close();
    } finally {
      await a.close();
    }
    return lines.filter((l) => l.msg === 'snapshot written').map((l) => l.scheduling);
  }

  test('by default at nice 19 in the normal class, said in each snapshot written', async () => {
    expect(await ranAs({})).toEqual(['nice 19', 'nice 19']);
    expect(await ranAs({ scheduling: 'nice' })).toEqual(['nice 19', 'nice 19']);
  });

  test('snapshot.scheduling "idle" puts it in the SCHED_IDLE class (preempted at once by a decision that wakes)', async () => {
    expect(await ranAs({ scheduling: 'idle' })).toEqual(['idle', 'idle']);
  });
});

describe.runIf(process.platform === 'linux')('snapshot.builder "process": the snapshot built in a process of its own', () => {
  /** The `scheduling` and `builder` of each 'snapshot written' line for two snapshots, and whether a restart used the last one. */
  async function built(snapshot: Record<string, unknown>): Promise<{ lines: unknown[]; used: unknown }> {
    const lines: Array<{ msg: string; scheduling?: unknown; builder?: unknown; checked?: unknown; base?: unknown }> = [];
    const logger = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s)) });
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const dir = folder();
    const config = { ...cfg, snapshot: { ...cfg.snapshot, ...snapshot } };
    const a = await liveNode(config, { clockS: () => T, logger }, dir);
    try {
      const c = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: bob });
      for (let i = 0; i < 2; i++) {
        await c.call({ chain: [g], action: 'read', payload: { i }, cost, now: T });
        expect(await a.snapshots.snapshotNow()).toMatchObject({ seq: i });
      }
      await c.close();
    } finally {
      await a.close();
    }
    const b = await liveNode(config, { clockS: () => T }, dir);
    const used = b.boot.snapshot;
    await b.close();
    return { lines: lines.filter((l) => l.msg === 'snapshot written').map((l) => [l.scheduling, l.builder, l.checked, l.base]), used };
  }

  test('written as by a worker thread (a restart uses it), said in each snapshot written, at nice 19 or idle', async () => {
    expect(await built({ builder: 'process' })).toEqual({
      // The second continues the state the kept process made the first from.
      lines: [
        ['nice 19', 'process', 'chain', 'none'],
        ['nice 19', 'process', 'chain', 'kept'],
      ],
      used: expect.objectContaining({ seq: 1, replayed: 0 }),
    });
    expect((await built({ builder: 'process', scheduling: 'idle' })).lines).toEqual([
      ['idle', 'process', 'chain', 'none'],
      ['idle', 'process', 'chain', 'kept'],
    ]);
    expect((await built({})).lines).toEqual([
      ['nice 19', 'thread', 'chain', 'none'],
      ['nice 19', 'thread', 'chain', 'kept'],
    ]);
  });

  test("every thread of the process at nice 19 and SCHED_IDLE; none of the node's files or environment beyond PATH, HOME and the locale", async () => {
    const store = path.join(folder(), 'store');
    const db = new ClassicLevel(store);
    await db.open();
    process.env['JCP_TEST_SNAPSHOT_SECRET'] = 'do-not-pass';
    const p = await SnapshotProcess.start({ idle: true });
    try {
      const pid = p.pid!;
      const tasks = readdirSync(`/proc/${pid}/task`);
      expect(tasks.length).toBeGreaterThan(1);
      for (const tid of tasks) {
        expect(threadPolicy(`/proc/${pid}/task/${tid}`)).toBe(SCHED_IDLE);
        expect(getPriority(Number(tid))).toBe(19);
      }
      const fds = readdirSync(`/proc/${pid}/fd`).map((fd) => {
        try {
          return readlinkSync(`/proc/${pid}/fd/${fd}`);
        } catch {
          return '';
        }
      });
      expect(fds.length).toBeGreaterThan(3);
      expect(fds.filter((f) => f.includes(store))).toEqual([]);
      const env = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter(Boolean);
      expect(env.some((e) => e.startsWith('PATH='))).toBe(true);
      expect(env.filter((e) => e.startsWith('JCP_TEST_SNAPSHOT_SECRET'))).toEqual([]);
    } finally {
      delete process.env['JCP_TEST_SNAPSHOT_SECRET'];
      await p.close();
      await db.close();
    }
  });

  test('a session message after the process ended is refused, never left pending', async () => {
    const p = await SnapshotProcess.start();
    await p.close();
    await expect(p.snapshotJob({ t: 'snap-end', id: 0 })).rejects.toThrow(/snapshot process exited/);
  });

  test('a process that cannot be started is refused with why (the spawn error), not a missing IPC channel', async () => {
    // Stands in for a node out of file handles: the spawn fails before any process runs.
    const execPath = process.execPath;
    process.execPath = path.join(folder(), 'no-such-node');
    try {
      await expect(SnapshotProcess.start()).rejects.toThrow(/^worker: cannot start the snapshot process: spawn .*no-such-node ENOENT$/);
    } finally {
      process.execPath = execPath;
    }
  });
});

describe.runIf(process.platform === 'linux')('the snapshot worker kept from one snapshot to the next', () => {
  /** Threads of this process at nice 19 (the snapshot worker's). */
  const niceThreads = () =>
    readdirSync(`/proc/${process.pid}/task`).filter((t) => {
      try {
        // Field 19 (nice) of /proc/<pid>/task/<tid>/stat: the 17th after the ") " that ends the name.
        return readFileSync(`/proc/${process.pid}/task/${t}/stat`, 'utf8').split(') ')[1]!.split(' ')[16] === '19';
      } catch {
        return false; // the thread ended meanwhile
      }
    }).length;
  const until = async (f: () => boolean) => {
    for (let i = 0; i < 1000 && !f(); i++) await new Promise((r) => setTimeout(r, 10));
  };

  test('kept while snapshots come within its idle time (each continues the state the last made), ended after it and by close()', async () => {
    const dir = folder();
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const a = await liveNode(cfg, { clockS: () => T }, dir);
    const c = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: bob });
    for (let i = 0; i < 6; i++) await c.call({ chain: [g], action: 'read', payload: { i }, cost, now: T });
    await c.close();
    await a.close();
    const steward = readKeyFile(path.join(dir, 'steward.key'));
    const log = await ReceiptLog.open(dir, { steward: steward.did, nowS: T, mustExist: true });
    const lines: Array<{ msg: string; base?: unknown; cpu_s?: unknown }> = [];
    const logger = pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l)) });
    let upTo = 1;
    const s = manualSnapshotter(
      { log, dataDir: dir, steward, windowS: 90, clockS: () => T, durableSeq: () => upTo, logger },
      { workerIdleS: 0.5 },
    );
    const before = niceThreads();
    try {
      expect(await s.snapshotNow()).toMatchObject({ seq: 1, base: 'none' });
      expect(niceThreads()).toBeGreaterThan(before); // kept after the snapshot (a thread, and the loader thread it starts from sources)
      upTo = 3;
      expect(await s.snapshotNow()).toMatchObject({ seq: 3, base: 'kept', replayed: 2 });
      await until(() => niceThreads() === before); // ended after 0.5 s without a snapshot
      expect(niceThreads()).toBe(before);
      upTo = 5;
      expect(await s.snapshotNow()).toMatchObject({ seq: 5, base: 'file', replayed: 2 });
      expect(niceThreads()).toBeGreaterThan(before);
    } finally {
      await s.close();
      await log.close();
    }
    expect(niceThreads()).toBe(before); // close() ends it at once
    expect(lines.filter((l) => l.msg === 'snapshot written').map((l) => l.base)).toEqual(['none', 'kept', 'file']);
    // Each says the CPU seconds its worker thread ran for it (its start included for a new worker).
    const cpu = lines.filter((l) => l.msg === 'snapshot written').map((l) => l.cpu_s);
    expect(cpu.every((x) => typeof x === 'number' && x > 0 && x < 60)).toBe(true);
  });
});

describe.runIf(process.platform === 'linux')('a kept snapshot worker that ended meanwhile', () => {
  const within = <T>(p: Promise<T>, ms: number): Promise<T> =>
    Promise.race([p, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`not settled after ${ms} ms`)), ms))]);

  test('a worker thread that exited is replaced: the next snapshot is made (it waited for ever), and the node stops', async () => {
    // The snapshot worker, caught as the session opens (nothing outside can end it: this stands in for a crash).
    const caught = catchWorkers('snap-open');
    const lines: Array<{ msg: string }> = [];
    const logger = pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l)) });
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const a = await liveNode(cfg, { clockS: () => T, logger }, folder());
    try {
      const c = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: bob });
      for (let i = 0; i < 2; i++) await c.call({ chain: [g], action: 'read', payload: { i }, cost, now: T });
      expect(await a.snapshots.snapshotNow()).toMatchObject({ seq: 1, base: 'none' });
      await caught.workers[0]!.terminate();
      for (let i = 2; i < 4; i++) await c.call({ chain: [g], action: 'read', payload: { i }, cost, now: T });
      await c.close();
      expect(await within(a.snapshots.snapshotNow(), 20_000)).toMatchObject({ seq: 3, base: 'file' });
      expect(lines.map((l) => l.msg)).toContain('snapshot worker: the kept worker had ended; starting a new one');
      expect(lines.map((l) => l.msg)).not.toContain('snapshot failed; retried at the next trigger');
    } finally {
      caught.restore();
      await within(a.close(), 20_000);
    }
  }, 60_000);

  test('a snapshot process killed between snapshots is replaced: no snapshot fails', async () => {
    const lines: Array<{ msg: string }> = [];
    const logger = pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l)) });
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const a = await liveNode({ ...cfg, snapshot: { ...cfg.snapshot, builder: 'process' } }, { clockS: () => T, logger }, folder());
    // This process's children running the snapshot process's boot script.
    const children = () =>
      readdirSync('/proc')
        .filter((p) => /^\d+$/.test(p))
        .filter((p) => {
          try {
            const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
            return (
              Number(stat.split(') ')[1]!.split(' ')[1]) === process.pid && readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('snapshot')
            );
          } catch {
            return false;
          }
        })
        .map(Number);
    try {
      const c = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: bob });
      for (let i = 0; i < 2; i++) await c.call({ chain: [g], action: 'read', payload: { i }, cost, now: T });
      expect(await a.snapshots.snapshotNow()).toMatchObject({ seq: 1, base: 'none' });
      const [pid] = children();
      expect(pid).toBeDefined();
      process.kill(pid!, 'SIGKILL');
      for (let i = 0; i < 500 && children().includes(pid!); i++) await new Promise((r) => setTimeout(r, 10));
      await new Promise((r) => setTimeout(r, 100)); // its exit event
      for (let i = 2; i < 4; i++) await c.call({ chain: [g], action: 'read', payload: { i }, cost, now: T });
      await c.close();
      expect(await a.snapshots.snapshotNow()).toMatchObject({ seq: 3, base: 'file' });
      expect(lines.map((l) => l.msg)).toContain('snapshot worker: the kept worker had ended; starting a new one');
    } finally {
      await a.close();
    }
  }, 60_000);

  test('kept for 60 s after a snapshot, or every_s + 10 s when snapshots are timed at most 10 minutes apart', () => {
    const base = {
      log: {} as ReceiptLog,
      dataDir: '',
      steward: alice,
      everyReceipts: 0,
      keep: 2,
      windowS: 90,
      clockS: () => T,
      durableSeq: () => -1,
      coveredSeq: -1,
      logger: pino({ level: 'silent' }),
    };
    expect(new Snapshotter({ ...base, everyS: 0 }).workerIdleS).toBe(60);
    expect(new Snapshotter({ ...base, everyS: 3600 }).workerIdleS).toBe(60);
    expect(new Snapshotter({ ...base, everyS: 60 }).workerIdleS).toBe(70);
    expect(new Snapshotter({ ...base, everyS: 600 }).workerIdleS).toBe(610);
    expect(new Snapshotter({ ...base, everyS: 601 }).workerIdleS).toBe(60);
    expect(new Snapshotter({ ...base, everyS: 60, workerIdleS: 5 }).workerIdleS).toBe(5);
  });
});

/** A snapshot ended by the node's stop: it made nothing, said so, and left no file. */
async function expectAbandoned(made: Promise<unknown>, lines: ReadonlyArray<{ msg: string }>, dir: string): Promise<void> {
  expect(await made).toBeUndefined();
  expect(lines.map((l) => l.msg)).toContain('snapshot abandoned: the node is stopping');
  expect(lines.map((l) => l.msg)).not.toContain('snapshot written');
  expect(
    existsSync(path.join(dir, 'snapshots')) ? readdirSync(path.join(dir, 'snapshots')).filter((f) => f.startsWith('snap-')) : [],
  ).toEqual([]);
}

describe.runIf(process.platform === 'linux')('stopping while a snapshot is built', () => {
  test('close() ends the snapshot worker instead of waiting for it: nothing written, "snapshot abandoned" logged', async () => {
    const dir = folder();
    const lines: Array<{ msg: string }> = [];
    const logger = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s)) });
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000_000n, rng);
    // In SCHED_IDLE, which it enters once its modules have loaded: that is how this test sees it replaying.
    const a = await liveNode({ ...cfg, snapshot: { ...cfg.snapshot, scheduling: 'idle' } }, { clockS: () => T, logger }, dir);
    const c = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: bob });
    for (let b = 0; b < 30; b++) {
      await Promise.all(Array.from({ length: 100 }, (_, i) => c.call({ chain: [g], action: 'read', payload: { b, i }, cost, now: T })));
    }
    await c.close();
    const idleThreads = () =>
      readdirSync(`/proc/${process.pid}/task`).filter((t) => threadPolicy(`/proc/${process.pid}/task/${t}`) === SCHED_IDLE).length;
    const made = a.snapshots.snapshotNow();
    // The worker enters SCHED_IDLE once its modules have loaded: from then on it is replaying the 3,000 receipts.
    for (let i = 0; i < 2000 && idleThreads() === 0; i++) await new Promise((r) => setTimeout(r, 5));
    expect(idleThreads()).toBeGreaterThan(0);
    await a.close();
    await expectAbandoned(made, lines, dir);
    expect(idleThreads()).toBe(0);
  }, 60_000);
  test('close() while the snapshot worker is still starting: "snapshot abandoned" logged too, nothing written', async () => {
    const dir = folder();
    const lines: Array<{ msg: string }> = [];
    const logger = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s)) });
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000_000n, rng);
    const a = await liveNode(cfg, { clockS: () => T, logger }, dir);
    const c = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: bob });
    await c.call({ chain: [g], action: 'read', payload: {}, cost, now: T });
    await c.close();
    const made = a.snapshots.snapshotNow();
    await a.close(); // the worker has not started yet (it takes tens of ms)
    await expectAbandoned(made, lines, dir);
  }, 60_000);
});
