/**
 * Witnessing over NATS (node/witnessing.ts, docs/tlog.md): two live nodes on a NATS server of the
 * test's own publish their checkpoints and cosign each other's; a rewritten or shrunk checkpoint
 * is refused `log-inconsistent` (metric, alarm with both notes as evidence); and a node whose log
 * folder was swapped for an older copy after a witnessed checkpoint refuses to start `log-damaged`
 * naming that checkpoint.
 */
import { createHash } from 'node:crypto';
import { cpSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { type FleetRecord, verifyFleetRecord } from '../../core/index.ts';
import { writeKeyFile } from '../../node/index.ts';
import { runJcpInProcess } from '../support.ts';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { signCheckpoint, verifyCosignature } from '../../core/index.ts';
import { parseDid } from '../../core/index.ts';
import { NatsServer } from '../../testkit/index.ts';
import { ClusterHooks, readClusterConfig } from '../../node/index.ts';
import { NodeFault } from '../../node/index.ts';
import { JcpClient } from '../../client/index.ts';
import { originOf } from '../../node/index.ts';
import { TlogStream, tlogStreamConfig, witnessName } from '../../node/index.ts';
import { DiscardPolicy, jetstream, jetstreamManager, StorageType } from '@nats-io/jetstream';
import { pino } from 'pino';
import { cast, liveNode, mint, quiet, tempDir } from './fixtures.ts';

const { rng, alice, bob } = cast('tlog-witnessing');
type Live = Awaited<ReturnType<typeof liveNode>>;

async function until<T>(what: string, f: () => Promise<T | undefined>, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('tlog witnessing over NATS', () => {
  let nats: NatsServer;
  const root = `tlogw${process.pid}x${Date.now().toString(36)}`;
  const dirs = [tempDir('tlogw-a'), tempDir('tlogw-b'), tempDir('tlogw-old'), tempDir('tlogw-lost')];
  const running: Array<{ node: Live; hooks: ClusterHooks }> = [];
  let stream: TlogStream;
  let probe: ClusterHooks;

  async function start(dir: string): Promise<{ node: Live; hooks: ClusterHooks }> {
    const hooks = new ClusterHooks(
      nats.url,
      readClusterConfig({ subject_root: root, checkpoint_every_ms: 100, checkpoint_every_receipts: 1 }),
      quiet,
    );
    try {
      const node = await liveNode(
        {},
        { budgetPolicy: hooks.budgetPolicy, revocationFeeds: [hooks.revocationFeed], witnessed: (d) => hooks.witnessed(d) },
        dir,
      );
      hooks.attach(node.steward, node.ledger, node.amendments);
      hooks.startWitnessing(node, quiet);
      const r = { node, hooks };
      running.push(r);
      return r;
    } catch (e) {
      await hooks.close();
      throw e;
    }
  }

  async function stop(r: { node: Live; hooks: ClusterHooks }): Promise<void> {
    running.splice(running.indexOf(r), 1);
    await r.hooks.close();
    await r.node.close();
  }

  async function calls(n: Live, k: number): Promise<void> {
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const c = await JcpClient.connect({ host: '127.0.0.1', port: n.port, signer: bob });
    for (let i = 0; i < k; i++) expect((await c.call({ chain: [g], action: 'read', payload: { i } })).decision.verdict).toBe('allow');
    await c.close();
  }

  beforeAll(async () => {
    nats = await NatsServer.start();
    probe = new ClusterHooks(nats.url, readClusterConfig({ subject_root: root }), quiet);
    await probe.bus.ready();
    stream = new TlogStream(probe.bus.connection!, { root });
  }, 60_000);

  afterAll(async () => {
    for (const r of [...running]) await stop(r).catch(() => undefined);
    await probe?.close().catch(() => undefined);
    await nats?.dispose();
    for (const d of dirs) d.cleanup();
  });

  test('peers cosign each other; inconsistent checkpoints are refused; a rolled-back log does not start', async () => {
    const a = await start(dirs[0]!.dir);
    const b = await start(dirs[1]!.dir);
    await calls(a.node, 3);
    const w1 = await until('B to cosign A at size 3', async () => {
      const r = await stream.newestWitnessed(a.node.steward.did);
      return r.newest !== undefined && r.newest.checkpoint.size === 3 ? r.newest : undefined;
    });
    expect(w1.cosigners).toEqual([b.node.steward.did]);
    // The stored note carries a cosignature/v1 line by B that verifies under B's key.
    expect(verifyCosignature(w1.checkpoint.note, witnessName(b.node.steward.did), b.node.steward.key.publicKey).name).toBe(
      witnessName(b.node.steward.did),
    );
    // A cosigns B's (empty) log too.
    await until('A to cosign B', async () => (await stream.newestWitnessed(b.node.steward.did)).newest);

    // An older copy of A's folder (3 receipts), taken with A stopped; A then starts again from its folder.
    await stop(a);
    rmSync(dirs[2]!.dir, { recursive: true, force: true });
    cpSync(dirs[0]!.dir, dirs[2]!.dir, { recursive: true });
    const a2 = await start(dirs[0]!.dir);
    expect(a2.node.witnessCheck).toContain('at size 3');

    // The log grows: B fetches a consistency proof from A and cosigns the larger checkpoint.
    await calls(a2.node, 2);
    await until('B to cosign A at size 5', async () =>
      (await stream.newestWitnessed(a.node.steward.did)).newest?.checkpoint.size === 5 ? true : undefined,
    );

    // A checkpoint of A's log rewritten at a larger size (signed by A's key: a forked log) and one shrunk.
    const aDid = a2.node.steward.did;
    const forged = signCheckpoint(
      { origin: originOf(aDid), size: 7, root: new Uint8Array(32).fill(7), extensions: [] },
      a2.node.steward.key,
    );
    const swapped = signCheckpoint(
      { origin: originOf(aDid), size: 5, root: new Uint8Array(32).fill(5), extensions: [] },
      a2.node.steward.key,
    );
    const shrunk = signCheckpoint(
      { origin: originOf(aDid), size: 2, root: new Uint8Array(32).fill(2), extensions: [] },
      a2.node.steward.key,
    );
    await a2.hooks.witnessing?.stop(); // A's own publisher stays quiet meanwhile
    // The forged log's publisher answers the proof request with a proof of its own making.
    const liar = probe.bus.connection!.subscribe(stream.proofSubject(aDid), {
      callback: (_e, m) => {
        m.respond(JSON.stringify({ proof: ['ab'.repeat(32), 'cd'.repeat(32)] }));
      },
    });
    for (const [size, note] of [
      [2, shrunk],
      [5, swapped],
      [7, forged],
    ] as const) {
      await stream.publish(stream.cpSubject(aDid), { v: 1, steward: aDid, origin: originOf(aDid), size, note });
    }
    // The stream keeps the newest alarm per log and witness: the forged one, with both notes.
    const alarm = await until('B to raise the alarm over the forged checkpoint', async () => {
      const al = await stream.alarms();
      return al.length > 0 && al[0]!.evidence[1] === forged ? al : undefined;
    });
    expect(alarm).toHaveLength(1);
    expect(alarm[0]!.code).toBe('log-inconsistent');
    expect(alarm[0]!.witness).toBe(b.node.steward.did);
    expect(alarm[0]!.evidence[0]).toContain(`${originOf(aDid)}\n5\n`);
    const refused = await until('both refusals counted', async () => {
      const m = await b.node.metrics.registry.getSingleMetricAsString('jcp_tlog_witness_refusals_total');
      const n = /code="log-inconsistent"} (\d+)/.exec(m)?.[1];
      return n === '3' ? m : undefined;
    });
    expect(refused).not.toContain('code="proof-unavailable"');
    liar.unsubscribe();
    // What B stands behind is still the size-5 checkpoint.
    expect((await stream.newestWitnessed(aDid)).newest?.checkpoint.size).toBe(5);
    expect(b.hooks.witnessing?.lastCosigned(aDid)).toContain('\n5\n');
    expect(() => verifyCosignature(forged, witnessName(b.node.steward.did), parseDid(b.node.steward.did))).toThrow();

    // The audit CLI over the stream: both logs with their cosigners, the alarm, exit 1.
    const audit = await runJcpInProcess(['receipts', 'witness-audit', '--nats', nats.url, '--subject-root', root, '--json']);
    expect(audit.code).toBe(1);
    // A's latest checkpoint on the stream is the forged one: cosigned by nobody, B behind at 5.
    type L = { steward: string; size: number; cosigned_by: string[]; behind: Array<{ witness: string; size: number }> };
    const aj = JSON.parse(audit.out) as { logs: L[]; alarms: Array<{ why: string }> };
    const by = new Map(aj.logs.map((l) => [l.steward, l]));
    expect(by.get(aDid)).toMatchObject({ size: 7, cosigned_by: [], behind: [{ witness: b.node.steward.did, size: 5 }] });
    expect(by.get(b.node.steward.did)).toMatchObject({ size: 0, cosigned_by: [aDid], behind: [] });
    expect(aj.alarms).toHaveLength(1);

    // The fleet record over both logs, signed by the team root (alice), verifies; a member's
    // membership proof altered does not.
    const keyFile = path.join(dirs[2]!.dir, '..', `${path.basename(dirs[2]!.dir)}-root.key`);
    writeKeyFile(keyFile, alice);
    const fleet = await runJcpInProcess(['receipts', 'fleet', '--nats', nats.url, '--subject-root', root, '--key', keyFile, '--json']);
    rmSync(keyFile, { force: true });
    expect(fleet.code).toBe(0);
    const rec = JSON.parse(fleet.out) as FleetRecord;
    expect(rec.size).toBe(2);
    // Each member is the node's newest cosigned checkpoint (not A's forged, uncosigned one).
    expect(new Map(rec.members.map((m) => [m.steward, m.size]))).toEqual(
      new Map([
        [aDid, 5],
        [b.node.steward.did, 0],
      ]),
    );
    expect(verifyFleetRecord(rec, alice.did).origin).toBe(`jcp-fleet/${alice.did}`);
    // Independently: the record's root is RFC 9162 MTH over the two member notes in origin order.
    const H = (...p: Buffer[]) => createHash('sha256').update(Buffer.concat(p)).digest();
    const leaf = (n: string) => H(Buffer.from([0]), Buffer.from(n, 'utf8'));
    expect(H(Buffer.from([1]), leaf(rec.members[0]!.note), leaf(rec.members[1]!.note)).toString('hex')).toBe(rec.root);
    const recFile = path.join(dirs[1]!.dir, 'fleet.json');
    const bad = { ...rec, members: [{ ...rec.members[0]!, proof: ['00'.repeat(32)] }, rec.members[1]!] };
    writeFileSync(recFile, JSON.stringify(rec));
    expect((await runJcpInProcess(['receipts', 'verify-fleet', '--record', recFile, '--root', alice.did])).code).toBe(0);
    writeFileSync(recFile, JSON.stringify(bad));
    const refusedFleet = await runJcpInProcess(['receipts', 'verify-fleet', '--record', recFile, '--root', alice.did]);
    expect(refusedFleet.code).toBe(1);
    expect(refusedFleet.err).toContain('proof-invalid');
    const otherRoot = await runJcpInProcess(['receipts', 'verify-fleet', '--record', recFile, '--root', bob.did]);
    expect(otherRoot.err).toContain('note-unverified');

    // Rolled back: A stopped, its folder swapped for the older copy (3 receipts < the witnessed 5).
    await stop(a2);
    rmSync(dirs[0]!.dir, { recursive: true, force: true });
    cpSync(dirs[2]!.dir, dirs[0]!.dir, { recursive: true });
    const refusedStart = await start(dirs[0]!.dir).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(refusedStart).toBeInstanceOf(NodeFault);
    expect((refusedStart as NodeFault).code).toBe('log-damaged');
    expect((refusedStart as NodeFault).message).toMatch(
      /the log holds 3 receipts, but the checkpoint of jcp\/did:key:\S+ at size 5 \(root [0-9a-f]{64}\) cosigned by did:key:/,
    );
    expect((refusedStart as NodeFault).message).toContain(b.node.steward.did);
  }, 90_000);

  test('a deleted tlog stream is made again at the next checkpoint; while it cannot be, one warning, not one per tick', async () => {
    const root2 = `${root}lost`;
    const lines: Array<{ level: number; msg: string; failures?: number }> = [];
    const logger = pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l)) });
    const hooks = new ClusterHooks(
      nats.url,
      readClusterConfig({ subject_root: root2, checkpoint_every_ms: 100, checkpoint_every_receipts: 1 }),
      quiet,
    );
    const node = await liveNode({}, { budgetPolicy: hooks.budgetPolicy }, dirs[3]!.dir);
    const r = { node, hooks };
    running.push(r);
    hooks.attach(node.steward, node.ledger, node.amendments);
    hooks.startWitnessing(node, logger);
    const s2 = new TlogStream(probe.bus.connection!, { root: root2 });
    const published = (size: number) =>
      until(`a checkpoint at size ${size} on the stream`, async () => {
        const cps = await s2.lastOf(s2.cpSubject(node.steward.did));
        return cps[0]?.msg['size'] === size ? true : undefined;
      });
    await calls(node, 1);
    await published(1);
    // The stream deleted, and a full one holding its subjects (it refuses every message, and the
    // stream cannot be made again beside it).
    const jsm = await jetstreamManager(probe.bus.connection!);
    const cfg = tlogStreamConfig(root2, 1);
    await jsm.streams.delete(s2.stream);
    await jsm.streams.add({ name: `${s2.stream}_BLOCK`, subjects: cfg.subjects, max_msgs: 1, discard: DiscardPolicy.New });
    await jetstream(probe.bus.connection!).publish(`${root2}.tlog.cp.fill`, '{}');
    await calls(node, 2);
    // 15 ticks of 100 ms, each failing.
    await new Promise((res) => setTimeout(res, 1_500));
    const warned = lines.filter((l) => l.msg.startsWith('tlog: checkpoint'));
    expect(warned.map((l) => l.msg)).toEqual(['tlog: checkpoint not published']);
    // Unblocked: the stream is made again and the size-3 checkpoint lands in it.
    await jsm.streams.delete(`${s2.stream}_BLOCK`);
    await published(3);
    const again = await until('the published-again line', async () => lines.find((l) => l.msg === 'tlog: checkpoint published again'));
    expect(again.failures).toBeGreaterThanOrEqual(10);

    // A stream of someone else's holding the subjects and acking every message: the checkpoint
    // is not where witnesses read it, so it is not published (it was counted published, silently).
    lines.length = 0;
    await jsm.streams.delete(s2.stream);
    await jsm.streams.add({ name: `${s2.stream}_SQUAT`, subjects: cfg.subjects, storage: StorageType.Memory });
    await calls(node, 1);
    const squat = await until('the not-published warning', async () => lines.find((l) => l.msg === 'tlog: checkpoint not published'));
    expect((squat as { why?: string }).why).toContain(`stored by stream ${s2.stream}_SQUAT, not ${s2.stream}`);
    // The audit says so with a code, not an internal error.
    const audit = await runJcpInProcess(['receipts', 'witness-audit', '--nats', nats.url, '--subject-root', root2, '--json']);
    expect(audit.code, audit.err).not.toBe(0);
    expect(audit.err).toContain(`error [tlog-stream-missing]: no ${s2.stream} stream`);
    expect(audit.err).not.toContain('internal error');
    await jsm.streams.delete(`${s2.stream}_SQUAT`);
    await published(4);

    // NATS down for 3 s with calls meanwhile: publishes wait for their acks longer than a tick,
    // and the ones sent before the outage must not start a second warning after the recovery.
    await until('the published-again line', async () => lines.find((l) => l.msg === 'tlog: checkpoint published again'));
    lines.length = 0;
    await nats.stop();
    await calls(node, 1).catch(() => undefined);
    await new Promise((res) => setTimeout(res, 3_000));
    await nats.start();
    await published(5);
    await new Promise((res) => setTimeout(res, 3_000));
    expect(lines.filter((l) => l.msg.startsWith('tlog: checkpoint')).map((l) => l.msg)).toEqual([
      'tlog: checkpoint not published',
      'tlog: checkpoint published again',
    ]);
    await stop(r);
    await jsm.streams.delete(s2.stream);
  }, 90_000);

  test('witness-audit makes no stream: under a subject root nobody published, it fails tlog-stream-missing and the NATS is as it was', async () => {
    const empty = `${root}empty`;
    const jsm = await jetstreamManager(probe.bus.connection!);
    const streams = async () => {
      const names: string[] = [];
      for await (const si of jsm.streams.list()) names.push(si.config.name);
      return names.sort();
    };
    const before = await streams();
    const audit = await runJcpInProcess(['receipts', 'witness-audit', '--nats', nats.url, '--subject-root', empty]);
    expect(audit.code).toBe(1);
    expect(audit.err).toContain(`error [tlog-stream-missing]: no ${empty.toUpperCase()}_TLOG stream`);
    expect(await streams()).toEqual(before);
  });
});
