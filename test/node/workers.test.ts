import { getPriority } from 'node:os';
/**
 * The signature worker pool (node/workers.ts): caller-signature checks split into chunks keep their
 * order and verdicts (§11); log slices replayed on workers rebuild what an inline replay does (§8.1).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { grantId, newActor, seededRng, sign, toHex } from '../../core/index.ts';
import {
  type LogReplay,
  ReceiptLog,
  replayChunks,
  replayLog,
  SCHED_IDLE,
  type SliceResult,
  SNAPSHOT_WORKER_NICE,
  threadPolicy,
  VERIFY_CHUNK,
  WorkerPool,
} from '../../node/internal.ts';
import { bob as worker, carol, child, request, rootGrant, TestSteward } from '../core/evidence-fixtures.ts';
import { catchWorkers, tempDir } from './fixtures.ts';

const rng = seededRng('workers');
const alice = newActor(rng);
const bob = newActor(rng);

describe('WorkerPool.verify', () => {
  let pool: WorkerPool;
  beforeAll(async () => {
    pool = await WorkerPool.start(2);
  });
  afterAll(async () => {
    await pool.close();
  });

  test('checks asked for in one turn, many chunks over two workers: each gets its own verdict', async () => {
    const n = VERIFY_CHUNK * 7 + 3;
    const cases = Array.from({ length: n }, (_, i) => {
      const msg = rng(20 + (i % 50));
      const sig = sign(alice.key, msg);
      switch (i % 4) {
        case 0:
          return { did: alice.did, msg, sig, ok: true };
        case 1:
          return { did: bob.did, msg, sig, ok: false }; // another key
        case 2: {
          const bad = new Uint8Array(sig);
          bad[i % 64]! ^= 1;
          return { did: alice.did, msg, sig: bad, ok: false }; // a flipped bit
        }
        default:
          return { did: 'did:key:zNotAKey', msg, sig, ok: false }; // a did that does not parse
      }
    });
    const verdicts = await Promise.all(cases.map((c) => pool.verify(c.did, c.msg, c.sig)));
    expect(verdicts).toEqual(cases.map((c) => c.ok));
  });
});

describe('a WorkerPool whose worker exited', () => {
  test('checks in flight when a worker exits are all answered right: its own batches checked by the pool, the others by their workers', async () => {
    const { workers, restore } = catchWorkers('nice');
    const pool = await WorkerPool.start(3);
    try {
      await pool.bootScheduling();
      const cases = Array.from({ length: VERIFY_CHUNK * 30 }, (_, i) => {
        const msg = rng(40);
        const sig = sign(alice.key, msg);
        if (i % 5 === 0) sig[0]! ^= 1; // a bad one among them: still refused
        return { msg, sig, ok: i % 5 !== 0 };
      });
      const verdicts = Promise.all(cases.map((c) => pool.verify(alice.did, c.msg, c.sig)));
      // The batches are sent on the next turn; the first worker ends right after (before it answers them).
      setImmediate(() => setImmediate(() => void workers[0]!.terminate()));
      expect(await verdicts).toEqual(cases.map((c) => c.ok));
    } finally {
      restore();
      await pool.close();
    }
  });

  test('its work goes to the worker still running; a message for the exited one alone is refused at once, not left waiting', async () => {
    // The pool's workers, caught as they are asked how they run (this stands in for a crash).
    const { workers, restore } = catchWorkers('nice');
    const pool = await WorkerPool.start(2);
    try {
      await pool.bootScheduling();
      expect(workers).toHaveLength(2);
      expect(pool.exited).toBe(false);
      await workers[0]!.terminate();
      await new Promise((r) => setTimeout(r, 50)); // its exit event
      expect(pool.exited).toBe(true);
      const msg = rng(32);
      const sig = sign(alice.key, msg);
      const within = <T>(p: Promise<T>) =>
        Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error('not answered in 10 s')), 10_000))]);
      // One turn of checks spread over both workers before: all answered now, by the one running.
      const verdicts = await within(Promise.all(Array.from({ length: 40 }, () => pool.verify(alice.did, msg, sig))));
      expect(verdicts.every((v) => v)).toBe(true);
      // A snapshot session goes to the first worker alone: refused.
      await expect(within(pool.snapshotJob({ t: 'snap-end', id: 0 }))).rejects.toThrow('worker: exited');
    } finally {
      restore();
      await pool.close();
    }
  });
});

describe('WorkerPool: a worker that exits while the pool is open', () => {
  test('is replaced while `replace` allows (onExit told each time); then its work goes to the workers left and the main thread', async () => {
    const { workers, restore } = catchWorkers('nice');
    const exits: Array<{ index: number; code: number; replaced: boolean }> = [];
    const pool = await WorkerPool.start(2, { replace: 1, onExit: (e) => exits.push(e) });
    const msg = rng(32);
    const sig = sign(alice.key, msg);
    const checks = async () => (await Promise.all(Array.from({ length: 40 }, () => pool.verify(alice.did, msg, sig)))).every((v) => v);
    try {
      expect(await pool.bootScheduling()).toHaveLength(2);
      await workers[1]!.terminate();
      await new Promise((r) => setTimeout(r, 50)); // its exit event
      expect(exits).toEqual([{ index: 1, code: 1, replaced: true }]);
      expect(pool.exited).toBe(false);
      // The new worker answers in the dead one's place.
      expect(await pool.bootScheduling()).toHaveLength(2);
      expect(workers).toHaveLength(3);
      expect(await checks()).toBe(true);
      // Replacements used up: the next exit is told, not replaced.
      await workers[2]!.terminate();
      await new Promise((r) => setTimeout(r, 50));
      expect(exits).toEqual([
        { index: 1, code: 1, replaced: true },
        { index: 1, code: 1, replaced: false },
      ]);
      expect(pool.exited).toBe(true);
      expect(await checks()).toBe(true);
    } finally {
      restore();
      await pool.close();
    }
    // Ended by close(): neither told nor replaced.
    expect(exits).toHaveLength(2);
  });
});

describe('a replay whose slice fails while another is awaited', () => {
  test('rejects with the error, and leaves no unhandled rejection (which ends the process: a worker exiting mid-replay did that at boot)', async () => {
    const unhandled: unknown[] = [];
    const listener = (e: unknown) => void unhandled.push(e);
    process.on('unhandledRejection', listener);
    try {
      const source = async function* (): AsyncGenerator<Array<[number, Uint8Array]>> {
        yield Array.from({ length: 4 }, (_, i): [number, Uint8Array] => [i, Uint8Array.of(i)]);
      };
      let n = 0;
      // Slice 1 fails after 50 ms; slice 2 at once, while the replay awaits slice 1.
      const runner = (): Promise<SliceResult> => {
        n++;
        return n === 1
          ? new Promise((_, reject) => setTimeout(() => reject(new Error('worker: exited (code 1) before it answered')), 50))
          : Promise.reject(new Error('worker: exited (code 1) before it answered'));
      };
      await expect(replayChunks(() => source(), { steward: alice.did, sliceSize: 2, parallel: 2, runner })).rejects.toThrow(
        'worker: exited (code 1) before it answered',
      );
      expect(n).toBe(2);
      await new Promise((r) => setTimeout(r, 50));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', listener);
    }
  });
});

describe('WorkerPool.replaySlice', () => {
  test('a log replayed in many slices on two workers rebuilds the inline replay: ledger, request index, head, the bad receipt and the duplicate request', async () => {
    const { dir, cleanup } = tempDir('jcp-workers-replay-');
    const pool = await WorkerPool.start(2);
    try {
      const st = new TestSteward();
      const root = rootGrant(worker, 50_000n);
      const sub = child(root, worker, carol, 20_000n);
      const ids: string[] = [];
      for (let i = 0; i < 150; i++) {
        // Request ids: mostly fresh, every 37th repeats an earlier one (the first receipt must keep it).
        const id = i % 37 === 36 ? ids[i - 30]! : toHex(rng(32));
        ids.push(id);
        const req = i % 3 === 0 ? request([root, sub], carol, 300n) : request([root], worker, 100n + BigInt(i));
        st.handle(req, id);
      }
      const log = await ReceiptLog.open(dir, { steward: st.actor.did, nowS: 1_700_000_000 });
      const bytes = st.receipts.map((r, seq) => {
        if (seq !== 90) return r;
        const bad = new Uint8Array(r);
        bad[bad.length - 3]! ^= 0x10; // a flipped signature bit: counted, never applied
        return bad;
      });
      await Promise.all(bytes.map((r, seq) => log.appendReceipt(seq, r)));
      const inline = await replayLog(log, { steward: st.actor.did, sliceSize: 16 });
      const onWorkers = await replayLog(log, {
        steward: st.actor.did,
        sliceSize: 16,
        parallel: 4,
        expected: 150,
        runner: (job) => pool.replaySlice(job),
      });
      await log.close();
      const summary = (r: LogReplay) => ({
        ledger: [...r.ledger.entries()],
        allowed: r.allowed,
        denied: r.denied,
        rejected: r.rejected,
        breaks: r.breaks.map((b) => [b.code, b.seq]),
        total: r.total,
        nextSeq: r.nextSeq,
        headId: r.headId,
        requests: ids.map((id) => r.requests.get(id)),
        attribution: [...r.attribution.entries()],
      });
      expect(summary(onWorkers)).toEqual(summary(inline));
      expect(inline.rejected.map((x) => x.seq)).toEqual([90]);
      expect(inline.ledger.spent(grantId(root.grant))).toBeGreaterThan(0n);
      // The first receipt of a repeated id keeps it; the bad receipt's id is not indexed.
      expect(onWorkers.requests.get(ids[36]!)).toBe(6);
      expect(onWorkers.requests.get(ids[90]!)).toBeUndefined();
      expect(onWorkers.requests.size).toBe(new Set(ids).size - 1);
    } finally {
      await pool.close();
      cleanup();
    }
  });
});

/** Scheduling policies of this process's threads (0 normal, 5 SCHED_IDLE), by thread id; a thread that ended meanwhile is left out. */
function threadPolicies(): Map<number, number> {
  const out = new Map<number, number>();
  for (const tid of readdirSync(`/proc/${process.pid}/task`)) {
    const policy = threadPolicy(`/proc/${process.pid}/task/${tid}`);
    if (policy !== undefined) out.set(Number(tid), policy);
  }
  return out;
}

/** Nice values of this process's threads (Linux /proc), by thread id. */
function threadNices(): Map<number, number> {
  const out = new Map<number, number>();
  for (const tid of readdirSync(`/proc/${process.pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${process.pid}/task/${tid}/stat`, 'utf8');
      // Fields after the command name (in parentheses): state is field 3, nice field 19.
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.set(Number(tid), Number(rest[16]));
    } catch {
      // the thread ended meanwhile
    }
  }
  return out;
}

describe('WorkerPool priority', () => {
  test('nice / a background pool runs its worker threads at the priority asked (the snapshot replay yields the cores to decisions)', async () => {
    const before = threadNices();
    const pool = await WorkerPool.start(1, { nice: SNAPSHOT_WORKER_NICE });
    try {
      // The worker lowers its priority as it boots: one round trip makes sure it has.
      expect(await pool.verify(bob.did, Uint8Array.of(1), new Uint8Array(64))).toBe(false);
      const added = [...threadNices()].filter(([tid]) => !before.has(tid));
      expect(added.some(([, nice]) => nice === SNAPSHOT_WORKER_NICE)).toBe(true);
      expect([...threadNices()].filter(([t]) => before.has(t)).every(([t, nice]) => nice === before.get(t))).toBe(true);
    } finally {
      await pool.close();
    }
  });

  test('idle / a pool asked for SCHED_IDLE runs its worker threads in that class from before their modules load; others stay in the normal class', async () => {
    const before = threadPolicies();
    const idle = await WorkerPool.start(2, { nice: SNAPSHOT_WORKER_NICE, idle: true });
    const normal = await WorkerPool.start(1, { nice: SNAPSHOT_WORKER_NICE });
    try {
      // Each answer comes once the worker's modules have loaded: the boot script has set its class.
      expect(await idle.bootScheduling()).toEqual([
        { nice: SNAPSHOT_WORKER_NICE, idle: true },
        { nice: SNAPSHOT_WORKER_NICE, idle: true },
      ]);
      const withIdle = threadPolicies();
      expect(await normal.bootScheduling()).toEqual([{ nice: SNAPSHOT_WORKER_NICE, idle: false }]);
      // /proc says the same: threads in SCHED_IDLE (5) were added (each idle worker, and any thread
      // such a worker started, such as a module loader's); this process's own threads are untouched.
      const idleAdded = (from: Map<number, number>, to: Map<number, number>) =>
        [...to].filter(([tid, p]) => !from.has(tid) && p === SCHED_IDLE).length;
      expect(idleAdded(before, withIdle)).toBeGreaterThanOrEqual(2);
      expect([...before.keys()].every((tid) => threadPolicies().get(tid) === 0)).toBe(true);
    } finally {
      await idle.close();
      await normal.close();
    }
  });

  test('a worker that ends (close, or a crash) rejects the jobs it still had instead of leaving them pending', async () => {
    const pool = await WorkerPool.start(1);
    const pending = pool.bootScheduling();
    await pool.close();
    await expect(pending).rejects.toThrow(/worker: exited/);
  });

  test('nice / the priority is lowered before the worker loads its modules (its start-up, most of a short job, never runs at the normal priority)', async () => {
    const low = await WorkerPool.start(2, { nice: SNAPSHOT_WORKER_NICE });
    const normal = await WorkerPool.start(1);
    try {
      expect(await low.bootNices()).toEqual([SNAPSHOT_WORKER_NICE, SNAPSHOT_WORKER_NICE]);
      expect(await normal.bootNices()).toEqual([getPriority()]);
    } finally {
      await low.close();
      await normal.close();
    }
  });
});
