/**
 * A running node's snapshot built on a worker thread (node/snapshot.ts `makeSnapshotOffThread`,
 * node/snapshotjob.ts): the main thread only reads the log and hands the receipts over; the
 * worker chooses the base, replays, encodes and signs. The file must be the one the offline path
 * (`makeSnapshot`, `jcp receipts snapshot`) writes for the same log, clock and window, byte for
 * byte: with and without a base to continue, short of the log's end, with a bad newest snapshot.
 */
import { cpSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import pino from 'pino';
import { describe, expect, test } from 'vitest';
import { JcpClient } from '../../client/index.ts';
import { type ContentId, receiptId } from '../../core/index.ts';
import {
  listSnapshots,
  type MadeSnapshot,
  makeSnapshot,
  makeSnapshotOffThread,
  type OffThreadSnapshotOptions,
  ReceiptLog,
  readKeyFile,
  SNAPSHOT_DIR,
  WorkerPool,
} from '../../node/index.ts';
import { SNAPSHOT_SLICE, type SnapshotJob } from '../../node/internal.ts';
import { cast, liveNode, manualSnapshotter, mint, tempFolders } from './fixtures.ts';

const { rng, alice, bob } = cast('snapshot-offthread');
const folder = tempFolders('snapoff');
const manual = { snapshot: { every_receipts: 0, every_s: 0 } };

/** A data folder whose log holds `n` receipts from `calls` allowed calls under two grants and one over budget (a deny). */
async function loggedFolder(n: number): Promise<string> {
  const dir = folder();
  const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
  const h = mint(alice, bob, 'tools', ['read'], 250n, rng);
  const node = await liveNode(manual, {}, dir);
  const c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
  for (let i = 0; i < n; i++)
    await c.call({ chain: [i % 3 === 0 ? h : g], action: 'read', payload: { i }, cost: { uj: 100n, provenance: 'Estimator' } });
  await c.close();
  await node.close();
  return dir;
}

/** Both paths on copies of `dir` (with what its snapshot folder holds): the files they write, and what each logged as ignored. */
async function both(
  dir: string,
  o: { nowS: number; windowS: number; toSeq?: number; vouch?: OffThreadSnapshotOptions['vouch']; pauseMs?: number },
  /** Each session message handed to the worker, as it was handed over (`performance.now()` ms). */
  seen: Array<{ t: SnapshotJob['t']; atMs: number; sliceSize?: number | undefined; receipts?: number; slices?: number }> = [],
): Promise<{ inline: MadeSnapshot | undefined; off: MadeSnapshot | undefined; ignored: { inline: string[]; off: string[] } }> {
  const a = folder();
  const b = folder();
  cpSync(dir, a, { recursive: true });
  cpSync(dir, b, { recursive: true });
  const steward = readKeyFile(path.join(dir, 'steward.key'));
  const ignored = { inline: [] as string[], off: [] as string[] };
  const logger = (into: string[]) =>
    pino({ level: 'warn' }, { write: (l: string) => void into.push(String((JSON.parse(l) as { why?: string }).why)) });
  const logA = await ReceiptLog.open(a, { steward: steward.did, nowS: 0, mustExist: true });
  const toSeq = o.toSeq ?? (await logA.lastSeq());
  const inline = await makeSnapshot(logA, a, { steward, nowS: o.nowS, windowS: o.windowS, toSeq, logger: logger(ignored.inline) });
  await logA.close();
  const logB = await ReceiptLog.open(b, { steward: steward.did, nowS: 0, mustExist: true });
  const pool = await WorkerPool.start(1, { nice: 19 });
  try {
    const spy: Pick<WorkerPool, 'snapshotJob'> = {
      snapshotJob(job, transfer) {
        seen.push({
          t: job.t,
          atMs: performance.now(),
          ...(job.t === 'snap-open' ? { sliceSize: job.sliceSize } : {}),
          ...(job.t === 'snap-chunk' ? { receipts: job.seqs.length } : {}),
        });
        const seenAs = seen[seen.length - 1]!;
        // The worker's answer to snap-end says how many replay slices it ran.
        return pool.snapshotJob(job, transfer).then((r) => {
          if (r.t === 'ended' && r.made !== undefined) seenAs.slices = r.made.slices;
          return r;
        });
      },
    };
    const off = await makeSnapshotOffThread(logB, b, spy, {
      steward,
      nowS: o.nowS,
      windowS: o.windowS,
      toSeq,
      logger: logger(ignored.off),
      vouch: o.vouch,
      ...(o.pauseMs !== undefined ? { pauseMs: o.pauseMs } : {}),
    });
    if (inline !== undefined && off !== undefined) {
      expect(path.basename(off.file)).toBe(path.basename(inline.file));
      expect(readFileSync(off.file).equals(readFileSync(inline.file))).toBe(true);
      expect({ ...off, file: '', seconds: 0, checked: '', cpuSeconds: 0 }).toEqual({
        ...inline,
        file: '',
        seconds: 0,
        checked: '',
        cpuSeconds: 0,
      });
      expect(inline.checked).toBe('signatures');
    }
    return { inline, off, ignored };
  } finally {
    await pool.close();
    await logB.close();
  }
}

describe('a running node snapshot built on a worker thread', () => {
  test('the same signed bytes as the offline path: from seq 0, short of the end, and continuing a base; the request window cuts the same ids', async () => {
    const dir = await loggedFolder(14);
    const nowS = Math.floor(Date.now() / 1000);
    // From nothing, the whole log, every request id in the window.
    const whole = await both(dir, { nowS, windowS: 3600 });
    expect(whole.off).toMatchObject({ seq: 13, replayed: 14, requests: 14 });
    // Short of the end: covers seq 9.
    const short = await both(dir, { nowS, windowS: 3600, toSeq: 9 });
    expect(short.off).toMatchObject({ seq: 9, replayed: 10 });
    // A window the requests are older than: none kept.
    const old = await both(dir, { nowS: nowS + 7200, windowS: 3600 });
    expect(old.off).toMatchObject({ seq: 13, requests: 0 });
    // Continuing a base at seq 9: only the 4 after it are replayed, and the bytes still match.
    const based = folder();
    cpSync(dir, based, { recursive: true });
    cpSync(path.dirname(short.off!.file), path.join(based, SNAPSHOT_DIR), { recursive: true });
    const cont = await both(based, { nowS, windowS: 3600 });
    expect(cont.off).toMatchObject({ seq: 13, replayed: 4 });
    // Nothing new to cover: neither writes.
    const full = folder();
    cpSync(dir, full, { recursive: true });
    cpSync(path.dirname(whole.off!.file), path.join(full, SNAPSHOT_DIR), { recursive: true });
    const none = await both(full, { nowS, windowS: 3600 });
    expect(none).toMatchObject({ inline: undefined, off: undefined });
  });

  test('a newest snapshot that does not verify is ignored with the same reason, and the older one continued', async () => {
    const dir = await loggedFolder(8);
    const nowS = Math.floor(Date.now() / 1000);
    const at5 = await both(dir, { nowS, windowS: 3600, toSeq: 5 });
    const at7 = await both(dir, { nowS, windowS: 3600, toSeq: 7 });
    const based = folder();
    cpSync(dir, based, { recursive: true });
    cpSync(path.dirname(at5.off!.file), path.join(based, SNAPSHOT_DIR), { recursive: true });
    // The snapshot at seq 7 with one byte of its signature flipped.
    const bad = readFileSync(at7.off!.file);
    bad.writeUInt8(bad.at(-1)! ^ 1, bad.length - 1);
    writeFileSync(path.join(based, SNAPSHOT_DIR, path.basename(at7.off!.file)), bad);
    expect(listSnapshots(based).map((s) => s.seq)).toEqual([7, 5]);
    const r = await both(based, { nowS, windowS: 3600 });
    expect(r.ignored.off).toEqual(['the steward signature does not verify']);
    expect(r.ignored.off).toEqual(r.ignored.inline);
    expect(r.off).toMatchObject({ seq: 7, replayed: 2 });
  });

  /** What a node that appended receipts `fromSeq`..`seq` of `dir` would vouch: the id of the receipt at `seq` as it is now. */
  async function vouchOf(dir: string, fromSeq: number, seq: number): Promise<{ fromSeq: number; seq: number; id: ContentId }> {
    const steward = readKeyFile(path.join(dir, 'steward.key'));
    const log = await ReceiptLog.open(dir, { steward: steward.did, nowS: 0, mustExist: true });
    try {
      return { fromSeq, seq, id: receiptId((await log.getReceipt(seq))!) };
    } finally {
      await log.close();
    }
  }

  /** A copy of `dir` with receipt `seq`'s last byte (in its signature) flipped, as a disk or a hand could. */
  async function withChanged(dir: string, seq: number): Promise<string> {
    const copy = folder();
    cpSync(dir, copy, { recursive: true });
    const steward = readKeyFile(path.join(dir, 'steward.key'));
    const log = await ReceiptLog.open(copy, { steward: steward.did, nowS: 0, mustExist: true });
    try {
      const bytes = Uint8Array.from((await log.getReceipt(seq))!);
      bytes[bytes.length - 1]! ^= 1;
      await log.appendReceipt(seq, bytes);
    } finally {
      await log.close();
    }
    return copy;
  }

  test('receipts the node appended are vouched for by their prev links to the id it holds: the same bytes, checked "chain"', async () => {
    const dir = await loggedFolder(14);
    const nowS = Math.floor(Date.now() / 1000);
    const whole = await both(dir, { nowS, windowS: 3600, vouch: await vouchOf(dir, 0, 13) });
    expect(whole.off).toMatchObject({ seq: 13, replayed: 14, checked: 'chain' });
    // Not every receipt after the base is the node's own (no base, appended from seq 10): signatures.
    const part = await both(dir, { nowS, windowS: 3600, vouch: await vouchOf(dir, 10, 13) });
    expect(part.off).toMatchObject({ seq: 13, replayed: 14, checked: 'signatures' });
    // A vouch for another seq than the one covered: signatures.
    const short = await both(dir, { nowS, windowS: 3600, toSeq: 9, vouch: await vouchOf(dir, 0, 13) });
    expect(short.off).toMatchObject({ seq: 9, checked: 'signatures' });
    // Continuing a base at seq 9 with the node's receipts from seq 10 on: chain.
    const based = folder();
    cpSync(dir, based, { recursive: true });
    cpSync(path.dirname(short.off!.file), path.join(based, SNAPSHOT_DIR), { recursive: true });
    const cont = await both(based, { nowS, windowS: 3600, vouch: await vouchOf(dir, 10, 13) });
    expect(cont.off).toMatchObject({ seq: 13, replayed: 4, checked: 'chain' });
    expect(whole.ignored.off).toEqual([]);
  });

  test('a receipt changed after the node wrote it breaks the vouch: warned, and made again with every signature checked', async () => {
    const dir = await loggedFolder(14);
    const nowS = Math.floor(Date.now() / 1000);
    const held = await vouchOf(dir, 0, 13); // what the node holds in memory, before the change
    // A receipt in the middle: its id changes, so the next one's prev link breaks.
    const middle = await both(await withChanged(dir, 6), { nowS, windowS: 3600, vouch: held });
    expect(middle.off).toMatchObject({ seq: 13, replayed: 14, checked: 'signatures' });
    expect(middle.ignored.off).toEqual(['receipt seq 7: prev-mismatch']);
    // The inline path (every signature) refused seq 6: the file both wrote counts it.
    expect(readFileSync(middle.off!.file).equals(readFileSync(middle.inline!.file))).toBe(true);
    // The last receipt: no link after it, but it is not the one the node holds.
    const last = await both(await withChanged(dir, 13), { nowS, windowS: 3600, vouch: held });
    expect(last.off).toMatchObject({ checked: 'signatures' });
    expect(last.ignored.off).toEqual([`the log's receipt at seq 13 is not the one the node made durable at seq 13`]);
  });

  test('a worker kept between snapshots continues the state it made last: the same bytes as the offline path reading each file, as the request window moves', async () => {
    // 12 receipts, 3 requests at each of T, T+40, T+80, T+120; window 90 s (max_skew 30 + margin 60).
    const T = 1_900_000_000;
    let clock = T;
    const dir = folder();
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const node = await liveNode({ ...manual, max_skew_s: 30, request_index_margin_s: 60 }, { clockS: () => clock }, dir);
    const c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    for (let i = 0; i < 12; i++) {
      clock = T + 40 * Math.floor(i / 3);
      await c.call({ chain: [g], action: 'read', payload: { i }, cost: { uj: 100n, provenance: 'Estimator' }, now: clock });
    }
    await c.close();
    await node.close();
    const a = folder();
    const b = folder();
    cpSync(dir, a, { recursive: true });
    cpSync(dir, b, { recursive: true });
    const steward = readKeyFile(path.join(dir, 'steward.key'));
    const logA = await ReceiptLog.open(a, { steward: steward.did, nowS: 0, mustExist: true });
    const logB = await ReceiptLog.open(b, { steward: steward.did, nowS: 0, mustExist: true });
    const pool = await WorkerPool.start(1, { nice: 19 });
    try {
      const step = async (toSeq: number, nowS: number, windowS = 90) => {
        const inline = await makeSnapshot(logA, a, { steward, nowS, windowS, toSeq });
        const off = await makeSnapshotOffThread(logB, b, pool, { steward, nowS, windowS, toSeq });
        expect(readFileSync(off!.file).equals(readFileSync(inline!.file))).toBe(true);
        expect(off!.requests).toBe(inline!.requests);
        return { inline: inline!, off: off! };
      };
      const s1 = await step(2, T + 10);
      expect([s1.off.base, s1.inline.base, s1.off.requests]).toEqual(['none', 'none', 3]);
      const s2 = await step(5, T + 50);
      expect([s2.off.base, s2.inline.base, s2.off.replayed, s2.off.requests]).toEqual(['kept', 'file', 3, 6]);
      // The horizon (T + 40) drops the first 3 ids here, and T + 80 the next 3 below.
      const s3 = await step(8, T + 130);
      expect([s3.off.base, s3.off.requests]).toEqual(['kept', 6]);
      const s4 = await step(11, T + 170);
      expect([s4.off.base, s4.off.requests]).toEqual(['kept', 6]);
      // A clock gone back past the kept snapshot's time: not continued, as a file made ahead is not (the one at seq 8 is).
      const back = await step(11, T + 160);
      expect([back.off.base, back.inline.base, back.off.replayed]).toEqual(['file', 'file', 3]);
      // The newest file gone (a write lost): the worker does not continue what it holds; both read the older file.
      rmSync(back.off.file);
      rmSync(back.inline.file);
      const s5 = await step(11, T + 171);
      expect([s5.off.base, s5.inline.base, s5.off.replayed]).toEqual(['file', 'file', 3]);
      // Another window than the kept state's: read from the file (its horizon T + 150 leaves no id).
      const s6 = await step(11, T + 300, 150);
      expect([s6.off.base, s6.off.requests]).toEqual(['file', 0]);
      // The log's receipt at the kept seq changed: not continued; the file there does not match the log either, so the older one (seq 8) is.
      const changed = Uint8Array.from((await logB.getReceipt(11))!);
      changed[changed.length - 1]! ^= 1;
      await logB.appendReceipt(11, changed);
      const off = await makeSnapshotOffThread(logB, b, pool, { steward, nowS: T + 301, windowS: 150, toSeq: 11 });
      expect(off).toMatchObject({ seq: 11, base: 'file', replayed: 3 });
    } finally {
      await pool.close();
      await logA.close();
      await logB.close();
    }
  });

  test('snapshot.pause_ms: the slices handed over at least the pause apart, the worker asked to replay one slice at a time; the same bytes', async () => {
    // 600 receipts: slices of 256, 256 and 88.
    const dir = await loggedFolder(600);
    const nowS = Math.floor(Date.now() / 1000);
    const seen: Parameters<typeof both>[2] = [];
    const paced = await both(dir, { nowS, windowS: 3600, pauseMs: 60 }, seen);
    expect(paced.off).toMatchObject({ seq: 599, replayed: 600 });
    expect(seen.map((m) => m.t)).toEqual(['snap-open', 'snap-chunk', 'snap-chunk', 'snap-chunk', 'snap-end']);
    expect(seen[0]!.sliceSize).toBe(SNAPSHOT_SLICE);
    expect(seen.filter((m) => m.t === 'snap-chunk').map((m) => m.receipts)).toEqual([256, 256, 88]);
    // The worker replayed them one slice at a time.
    expect(seen[4]!.slices).toBe(3);
    // The pause follows each slice but the last (timers fire no earlier than asked; a millisecond of rounding allowed).
    for (const i of [2, 3]) expect(seen[i]!.atMs - seen[i - 1]!.atMs).toBeGreaterThanOrEqual(59);
    // Without a pause: the worker's own slices (all 600 in one), and no wait.
    const plain: typeof seen = [];
    await both(dir, { nowS, windowS: 3600 }, plain);
    expect(plain[0]!.sliceSize).toBeUndefined();
    expect(plain[plain.length - 1]!.slices).toBe(1);
    expect(plain[plain.length - 1]!.atMs - plain[1]!.atMs).toBeLessThan(120);
  });

  test('snapshot.pause_ms: a pause ends when its signal is aborted (the node stopping), and the snapshot rejects with the reason; nothing written', async () => {
    const dir = await loggedFolder(600);
    const steward = readKeyFile(path.join(dir, 'steward.key'));
    const log = await ReceiptLog.open(dir, { steward: steward.did, nowS: 0, mustExist: true });
    const pool = await WorkerPool.start(1, { nice: 19 });
    const stop = new AbortController();
    let stoppedAt = Number.POSITIVE_INFINITY;
    const seen: string[] = [];
    // The node stops as the first slice is handed over: the pause after it (1 s) must not hold the snapshot.
    const spy: Pick<WorkerPool, 'snapshotJob'> = {
      snapshotJob(job, transfer) {
        seen.push(job.t);
        if (job.t === 'snap-chunk' && !stop.signal.aborted) {
          stoppedAt = performance.now();
          stop.abort(new Error('stopping'));
        }
        return pool.snapshotJob(job, transfer);
      },
    };
    try {
      const made = makeSnapshotOffThread(log, dir, spy, {
        steward,
        nowS: Math.floor(Date.now() / 1000),
        windowS: 3600,
        toSeq: 599,
        pauseMs: 1000,
        signal: stop.signal,
      });
      await expect(made).rejects.toThrow('stopping');
      // Ended at the abort, not at the pause's end (1 s after the first slice).
      expect(performance.now() - stoppedAt).toBeLessThan(800);
      expect(listSnapshots(dir)).toEqual([]);
      // A signal aborted before the snapshot starts: nothing is handed over.
      const handed = seen.length;
      await expect(
        makeSnapshotOffThread(log, dir, spy, { steward, nowS: 0, windowS: 3600, toSeq: 599, pauseMs: 1000, signal: stop.signal }),
      ).rejects.toThrow('stopping');
      expect(seen.length).toBe(handed);
    } finally {
      await pool.close();
      await log.close();
    }
  });

  test('snapshot.pause_ms: a node stopping during a pause does not wait for it; the snapshot is abandoned, nothing written', async () => {
    const dir = await loggedFolder(600);
    const steward = readKeyFile(path.join(dir, 'steward.key'));
    const log = await ReceiptLog.open(dir, { steward: steward.did, nowS: 0, mustExist: true });
    // Told when the snapshot has read its first slice of the log (the pause follows its handover).
    let firstRead: () => void = () => undefined;
    const read = new Promise<void>((r) => (firstRead = r));
    const chunks = log.receiptChunks.bind(log);
    log.receiptChunks = async function* (...a: Parameters<typeof chunks>) {
      for await (const chunk of chunks(...a)) {
        firstRead();
        yield chunk;
      }
    };
    const lines: Array<{ msg: string }> = [];
    const logger = pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l) as { msg: string }) });
    const clockS = () => Math.floor(Date.now() / 1000);
    const s = manualSnapshotter({ log, dataDir: dir, steward, windowS: 3600, clockS, durableSeq: () => 599, logger }, { pauseMs: 1000 });
    try {
      const made = s.snapshotNow();
      // Stopped as the first slice goes over: its pause (1 s) is under way, or about to be.
      await read;
      const t0 = performance.now();
      await s.close();
      // Without the abort, close() waits the pause out.
      expect(performance.now() - t0).toBeLessThan(500);
      expect(await made).toBeUndefined();
      expect(lines.map((l) => l.msg)).toContain('snapshot abandoned: the node is stopping');
      expect(listSnapshots(dir)).toEqual([]);
    } finally {
      await s.close();
      await log.close();
    }
  });

  test('snapshot falling behind: warned when the next snapshot is due at once and longer than this one', async () => {
    const dir = await loggedFolder(600);
    const steward = readKeyFile(path.join(dir, 'steward.key'));
    const clockS = () => Math.floor(Date.now() / 1000);
    type Line = { msg: string; seq?: number; replayed?: number; arrived?: number; pause_ms?: number };
    /** The warn lines of one snapshot of a copy of `dir` (600 receipts) while `arrival` more became durable. */
    const warned = async (arrival: number, more: { everyReceipts: number; pauseMs?: number }): Promise<Line[]> => {
      const copy = folder();
      cpSync(dir, copy, { recursive: true });
      const log = await ReceiptLog.open(copy, { steward: steward.did, nowS: 0, mustExist: true });
      const lines: Line[] = [];
      const logger = pino({ level: 'warn' }, { write: (l: string) => void lines.push(JSON.parse(l) as Line) });
      // The head as the snapshot starts (599), then `arrival` more once it is written.
      let asked = 0;
      const durableSeq = () => (asked++ === 0 ? 599 : 599 + arrival);
      const s = manualSnapshotter({ log, dataDir: copy, steward, windowS: 3600, clockS, durableSeq, logger }, more);
      try {
        expect((await s.snapshotNow())?.replayed).toBe(600);
        return lines;
      } finally {
        await s.close();
        await log.close();
      }
    };
    const behind = await warned(1000, { everyReceipts: 500, pauseMs: 1 });
    expect(behind).toEqual([expect.objectContaining({ seq: 599, replayed: 600, arrived: 1000, pause_ms: 1 })]);
    expect(behind[0]?.msg).toMatch(/^snapshot falling behind: .*snapshot\.pause_ms paces it/);
    const unpaced = await warned(1000, { everyReceipts: 500 });
    expect(unpaced.map((l) => l.msg)).toEqual(['snapshot falling behind: more receipts came in while it was written than it replayed']);
    // Keeping up: fewer came in than it replayed, or too few for the next to be due, or no count trigger.
    expect(await warned(600, { everyReceipts: 100, pauseMs: 1 })).toEqual([]);
    expect(await warned(1000, { everyReceipts: 1001 })).toEqual([]);
    expect(await warned(1000, { everyReceipts: 0 })).toEqual([]);
  });

  test('a session message out of order is refused by the worker, and nothing is written', async () => {
    const pool = await WorkerPool.start(1);
    try {
      await expect(pool.snapshotJob({ t: 'snap-end', id: 0 })).rejects.toThrow('snap-end with no session open');
      await expect(
        pool.snapshotJob({ t: 'snap-chunk', id: 0, packed: new Uint8Array(0), ends: new Uint32Array(0), seqs: new Float64Array(0) }),
      ).rejects.toThrow('snap-chunk with no session open');
    } finally {
      await pool.close();
    }
  });
});
