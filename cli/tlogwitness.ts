/**
 * `jcp receipts witness-audit|fleet|verify-fleet` (docs/tlog.md "Witnessing over NATS", "Fleet
 * records"): what the transparency-log stream holds, read-only — each node's latest checkpoint,
 * who cosigned it, every alarm with its evidence — and the fleet record over those checkpoints,
 * signed by the team's root key, with its verifier.
 */
import path from 'node:path';
import { type Did, isDid } from '../core/index.ts';
import { buildFleetRecord, type FleetRecord, verifyFleetRecord } from '../core/index.ts';
import { NatsLink, NatsUnavailable, natsHostPort } from '../natsio/index.ts';
import { readKeyFile } from '../node/index.ts';
import { TlogStream, witnessAudit } from '../node/index.ts';
import { CliError, UsageError } from './command.ts';
import { READ_CAPS, readFileCapped } from '../io/index.ts';

/**
 * Opens a plain NATS connection for `--nats` (default nats://127.0.0.1:4222): an audit makes no
 * stream (a channel bus would make the channel's streams). @throws UsageError, NatsUnavailable
 */
async function openLink(url: string | undefined): Promise<NatsLink> {
  const u = url ?? 'nats://127.0.0.1:4222';
  const servers = u.split(',').map((x) => x.trim());
  const bad = servers.find((x) => natsHostPort(x) === undefined);
  if (bad !== undefined) throw new UsageError(`--nats: expected nats://host:port, got ${bad}`);
  const link = NatsLink.start(servers, { name: 'jcp-tlog-audit' });
  try {
    await link.ready(5_000);
  } catch (e) {
    await link.close();
    throw new NatsUnavailable(`cannot reach NATS at ${u}: ${(e as Error).message.replace(/^NATS connection: /, '')}`, {
      cause: e,
    });
  }
  return link;
}

/**
 * Runs `witness-audit`, `fleet` or `verify-fleet` with the parsed flags. Exit code: 0; 1 for
 * `witness-audit` when an alarm is stored (a log was rewritten), with the alarms printed.
 * @throws UsageError, NatsUnavailable, CliError `fleet-empty`, JcpError (`note-unverified`, `proof-invalid`, …)
 */
export async function runTlogWitness(
  verb: 'witness-audit' | 'fleet' | 'verify-fleet',
  values: { nats?: string; 'subject-root'?: string; key?: string; json?: boolean; record?: string; root?: string },
): Promise<number> {
  if (verb === 'verify-fleet') {
    if (values.record === undefined || values.root === undefined)
      throw new UsageError('verify-fleet: give --record FILE (fleet --json) and --root DID');
    if (!isDid(values.root)) throw new UsageError('--root: expected a did:key');
    let record: FleetRecord;
    try {
      record = JSON.parse(
        readFileCapped(path.resolve(values.record), READ_CAPS.messageFile, 'fleet record').toString('utf8'),
      ) as FleetRecord;
      if (typeof record !== 'object' || record === null || !Array.isArray(record.members)) throw new Error('not a fleet record');
    } catch (e) {
      throw new CliError('record-malformed', `${values.record}: ${(e as Error).message}`);
    }
    const c = verifyFleetRecord(record, values.root);
    process.stdout.write(
      `${JSON.stringify({ ok: true, origin: c.origin, size: c.size, time_s: record.time_s, members: record.members.map((m) => ({ origin: m.origin, size: m.size })) })}\n`,
    );
    return 0;
  }
  const root = values['subject-root'] ?? 'jcp';
  const link = await openLink(values.nats);
  try {
    const s = new TlogStream(link.connection!, { root, readOnly: true });
    const a = await witnessAudit(s);
    if (verb === 'fleet') {
      if (values.key === undefined) throw new UsageError("fleet: --key FILE (the team root's key) is required");
      const rootKey = readKeyFile(path.resolve(values.key));
      // Each node's newest checkpoint a peer cosigned: the record vouches only for witnessed logs.
      const members: Array<{ steward: Did; note: string; origin: string }> = [];
      for (const l of a.logs) {
        const w = (await s.newestWitnessed(l.steward, l.origin)).newest;
        if (w !== undefined) members.push({ steward: l.steward, note: w.checkpoint.note, origin: l.origin });
        else process.stderr.write(`jcp receipts fleet: ${l.origin} left out: no peer cosigned a checkpoint of it yet\n`);
      }
      if (members.length === 0) throw new CliError('fleet-empty', 'no cosigned checkpoint of any node on the transparency-log stream');
      const rec = buildFleetRecord(members, { did: rootKey.did, key: rootKey.key }, Math.floor(Date.now() / 1000));
      process.stdout.write(values.json ? `${JSON.stringify(rec, null, 2)}\n` : rec.note);
      return 0;
    }
    if (values.json) process.stdout.write(`${JSON.stringify(a, null, 2)}\n`);
    else {
      for (const l of a.logs) {
        process.stdout.write(
          `${l.origin}  size ${l.size}  root ${l.root.slice(0, 16)}…  cosigned by ${l.cosigned_by.length}: ${l.cosigned_by.join(', ') || '(none yet)'}\n`,
        );
        for (const b of l.behind) process.stdout.write(`  ${b.witness} last cosigned size ${b.size}\n`);
      }
      for (const al of a.alarms) {
        process.stdout.write(
          `ALARM log-inconsistent ${al.origin} (witness ${al.witness}): ${al.why}\n--- previous\n${al.evidence[0]}--- next\n${al.evidence[1]}`,
        );
      }
      for (const i of a.ignored) process.stdout.write(`ignored   ${i}\n`);
    }
    return a.alarms.length > 0 ? 1 : 0;
  } finally {
    await link.close();
  }
}
