/**
 * kill -9 under load (spec §8.1: the receipt stream is the write-ahead log). A node runs as a
 * child process; clients pipeline calls on several connections; the node is killed with SIGKILL
 * while requests are in flight, 20 times in a row. After each kill the log is read back and
 * after each restart the previous requests are re-sent. Checked every time:
 * - every allow a client got a reply for is in the log, byte for byte (and a re-send after the
 *   restart returns that same receipt);
 * - the budgets the live node held equal the replayed receipts: at every allow receipt, in seq
 *   order, the replayed spend equals `budget − budget_remaining_uj` the node sealed into it;
 * - no request is decided twice (re-sent requests are not debited twice), the log verifies with
 *   no bad receipt and no break, and a small grant never allows more than its budget.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { bytesEqual, grantId, openReceipt, receiptId, replayReceipts, type WireRequest } from '../../core/index.ts';
import { ReceiptLog, readDataMeta, replayLog } from '../../node/index.ts';
import { type CallResult, JcpClient } from '../../client/index.ts';
import { cast, mint, request, tempDir } from './fixtures.ts';

const ROUNDS = 20;
const CONNECTIONS = 4;
const PER_CONNECTION = 30;
const BIG_BUDGET = 10n ** 12n;
const SMALL_BUDGET = 50n;
const repo = path.resolve(import.meta.dirname, '../..');

const { rng, alice, bob } = cast('crash');
const big = mint(alice, bob, 'tools', ['read'], BIG_BUDGET, rng);
const small = mint(alice, bob, 'tools', ['read'], SMALL_BUDGET, rng);
const t = tempDir('crash');
const children = new Set<ChildProcess>();
afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
  t.cleanup();
});

/** A node process with its code loaded, waiting for its config (see nodechild.ts). */
interface Warm {
  readonly child: ChildProcess;
  readonly ready: Promise<void>;
  readonly stderr: () => string;
}

function warmChild(): Warm {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(repo, 'test/node/nodechild.ts')], {
    cwd: repo,
    stdio: ['pipe', 'ignore', 'pipe'],
  });
  children.add(child);
  child.on('exit', () => children.delete(child));
  let err = '';
  child.stderr!.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const ready = new Promise<void>((resolve, reject) => {
    const check = () => {
      if (err.includes('ready')) resolve();
    };
    child.stderr!.on('data', check);
    child.once('exit', (code) => reject(new Error(`node process exited ${code} before ready: ${err}`)));
  });
  ready.catch(() => undefined);
  return { child, ready, stderr: () => err };
}

async function startChild(w: Warm, configFile: string): Promise<{ child: ChildProcess; port: number }> {
  await w.ready;
  w.child.stdin!.write(`${configFile}\n`);
  return new Promise((resolve, reject) => {
    const check = () => {
      const m = /listening on [^\s:]+:(\d+)/.exec(w.stderr());
      if (m) resolve({ child: w.child, port: Number(m[1]) });
    };
    w.child.stderr!.on('data', check);
    check();
    w.child.once('exit', (code) => reject(new Error(`node exited ${code}: ${w.stderr()}`)));
  });
}

function kill9(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });
}

interface Sent {
  readonly req: WireRequest;
  reply?: CallResult;
}

/** The receipts from `fromSeq` on (the log is read between a kill and the next start). */
async function readLog(dataDir: string, fromSeq: number) {
  const meta = readDataMeta(dataDir)!;
  const log = await ReceiptLog.open(dataDir, { steward: meta.steward, mustExist: true, nowS: 0 });
  try {
    const receipts: Array<{ seq: number; bytes: Uint8Array }> = [];
    for await (const chunk of log.receiptChunks(4096, fromSeq))
      for (const [seq, bytes] of chunk) receipts.push({ seq, bytes: new Uint8Array(bytes) });
    return { receipts, steward: meta.steward };
  } finally {
    await log.close();
  }
}

/** The whole log replayed by the node's own boot replay. */
async function replayAll(dataDir: string) {
  const meta = readDataMeta(dataDir)!;
  const log = await ReceiptLog.open(dataDir, { steward: meta.steward, mustExist: true, nowS: 0 });
  try {
    return await replayLog(log, { steward: meta.steward });
  } finally {
    await log.close();
  }
}

describe('kill -9 under load', () => {
  test(`${ROUNDS} kills in a row: replied allows are durable, budgets equal the replayed receipts, nothing is debited twice`, async () => {
    const configFile = path.join(t.dir, 'node.json');
    writeFileSync(
      configFile,
      JSON.stringify({
        listen: '127.0.0.1:0',
        data_dir: path.join(t.dir, 'data'),
        log_level: 'silent',
        resources: [{ name: 'tools' }],
        meter: { default_estimate_uj: 0, rungs: ['estimator'] },
      }),
    );
    let previous: Sent[] = [];
    const everReplied = new Map<string, Uint8Array>();
    const inLog = new Map<number, Uint8Array>();
    const spent = new Map<string, bigint>();
    const seen = new Set<string>();
    let nextSeq = 0;
    let head: string | undefined;
    let warm = warmChild();
    for (let round = 0; round < ROUNDS; round++) {
      const { child, port } = await startChild(warm, configFile);
      warm = warmChild();
      const clients = await Promise.all(
        Array.from({ length: CONNECTIONS }, () => JcpClient.connect({ host: '127.0.0.1', port, signer: bob, reconnectAttempts: 0 })),
      );
      // Re-send everything of the last round: answered ones must come back byte for byte.
      const resent = await Promise.all(previous.map((s, i) => clients[i % CONNECTIONS]!.callRequest(s.req)));
      resent.forEach((r, i) => {
        const before = previous[i]!.reply;
        if (before) expect(bytesEqual(r.receipt, before.receipt)).toBe(true);
      });
      // New load; kill -9 while it is in flight.
      const sent: Sent[] = [];
      const killAfter = 10 + (rng(1)[0]! % 80);
      let replies = 0;
      let killed: Promise<void> | undefined;
      const inflight: Array<Promise<unknown>> = [];
      for (let k = 0; k < CONNECTIONS * PER_CONNECTION; k++) {
        const grant = k % 3 === 0 ? small : big;
        const s: Sent = { req: request(bob, [grant], { costUj: 1n, payload: new TextEncoder().encode(`{"round":${round},"k":${k}}`) }) };
        sent.push(s);
        inflight.push(
          clients[k % CONNECTIONS]!.callRequest(s.req).then(
            (r) => {
              s.reply = r;
              if (++replies === killAfter) killed = kill9(child);
            },
            () => undefined,
          ),
        );
      }
      await Promise.all(inflight);
      await (killed ?? kill9(child));
      for (const c of clients) await c.close();

      const { receipts, steward } = await readLog(path.join(t.dir, 'data'), nextSeq);
      // The new suffix verifies and continues the chain (core replay, started where we left off).
      const suffix = replayReceipts(
        receipts.map((r) => r.bytes),
        { steward, start: { seq: nextSeq, ...(head !== undefined ? { prev: head } : {}) } },
      );
      expect(suffix.rejected).toEqual([]);
      expect(suffix.breaks).toEqual([]);
      // The live ledger, as sealed into each allow receipt, equals the replay at every step;
      // no request id is decided twice.
      for (const { seq, bytes } of receipts) {
        inLog.set(seq, bytes);
        const core = openReceipt(bytes, steward);
        if (!core.ok) throw new Error(core.error.why);
        const c = core.value;
        expect(seen.has(c.request_id!)).toBe(false);
        seen.add(c.request_id!);
        nextSeq = seq + 1;
        head = receiptId(bytes);
        if (c.verdict !== 'allow') continue;
        const total = (spent.get(c.grant_id) ?? 0n) + c.cost_uj;
        spent.set(c.grant_id, total);
        expect(c.budget_uj - c.budget_remaining_uj).toBe(total);
      }
      for (const s of [...previous, ...sent]) {
        if (s.reply?.decision.verdict !== 'allow') continue;
        const core = openReceipt(s.reply.receipt, steward);
        expect(core.ok).toBe(true);
        if (core.ok) expect(bytesEqual(inLog.get(core.value.seq)!, s.reply.receipt)).toBe(true);
        everReplied.set(s.reply.requestId, s.reply.receipt);
      }
      expect(spent.get(grantId(small.grant)) ?? 0n).toBeLessThanOrEqual(SMALL_BUDGET);
      previous = sent;
    }
    warm.child.kill('SIGKILL');
    expect(everReplied.size).toBeGreaterThanOrEqual(ROUNDS * 10);
    for (const [id] of everReplied) expect(seen.has(id)).toBe(true);
    // The node's own boot replay of the whole log agrees with the receipts' sealed budgets.
    const all = await replayAll(path.join(t.dir, 'data'));
    expect(all.rejected).toEqual([]);
    expect(all.breaks).toEqual([]);
    expect(all.ledger.spent(grantId(big.grant))).toBe(spent.get(grantId(big.grant)));
    expect(all.ledger.spent(grantId(small.grant))).toBe(spent.get(grantId(small.grant)));
  }, 240_000);
});
