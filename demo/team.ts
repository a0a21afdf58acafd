/**
 * The demo's threshold team (spec §2.2): three `jcp frost participant` processes, each with its own
 * keystore, make a 2-of-3 group key by distributed key generation over NATS (no dealer: the
 * group's private key never exists anywhere), and the group's signatures come from signing
 * sessions that need two of them (frost/ coordinator).
 *
 * The participants answer only this demo's initiator and coordinator (`--initiator`,
 * `--coordinator`), and everything lives under a subject prefix of its own, removed at the end.
 *
 * Each holder decides on every call it is asked to sign by a policy of its own (docs/frost.md
 * "Approvals"): member 1 a rules file (the team's action on its resource, under a cost cap),
 * member 2 a webhook reviewer this demo runs (refuses names that look secret, or more than one at
 * once), member 3 a rules file that refuses arguments outside a folder (entity names under a prefix).
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync, mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { type Actor, actorFromSeed, type Did } from '../core/index.ts';
import {
  frostStreams,
  natsBus,
  readShareFile,
  runDkg,
  type ShareRecord,
  type Signer,
  thresholdSigner,
  WEBHOOK_SIGNATURE_HEADER,
  WEBHOOK_TIMESTAMP_HEADER,
  webhookMac,
} from '../frost/index.ts';
import { ParticipantCluster, whenInterrupted } from '../testkit/index.ts';

/** A running 2-of-3 team. */
export interface Team {
  /** The group's did:key: an ordinary Ed25519 did:key to everyone else. */
  readonly group: Did;
  /** The members' own identities (roster order). */
  readonly members: readonly Did[];
  readonly min: number;
  readonly max: number;
  /** Wall time of the DKG (ms). */
  readonly dkgMs: number;
  readonly prefix: string;
  /** Signs as the group: one signing session over NATS per call (two members take part). */
  readonly sign: Signer;
  /** The identity the members accept signing sessions from (`--coordinator`): the bridge coordinates with it. */
  readonly coordinator: Actor;
  /** The NATS connection the team was started on. */
  readonly nc: NatsConnection;
  /** Member 1's share, read from its keystore: what one member alone holds. */
  readonly soloShare: ShareRecord;
  /** Where the keystores are. */
  readonly dir: string;
  /** The members' dids in process order: member i is `holders[i − 1]` (the roster is sorted by did). */
  readonly holders: readonly Did[];
  /** Each member's approval policy, by member (process) number 1..3. */
  readonly policies: readonly TeamPolicy[];
  /** Every approval decision the members printed so far (signed records in their journals and on NATS). */
  decisions(): TeamDecision[];
  /** Stops the participants and removes the prefix's registry bucket and evidence stream. */
  close(): Promise<void>;
}

/** One member's approval policy as the report shows it. */
export interface TeamPolicy {
  readonly member: number;
  readonly kind: 'rules' | 'webhook';
  readonly what: string;
}

/** One approval decision a member took (from its `decision` event). */
export interface TeamDecision {
  readonly member: number;
  readonly holder: Did;
  readonly request: string;
  /** The signing session it was asked in: a request the signer retried with other members is decided once per session. */
  readonly session: string;
  readonly policy_kind: string;
  readonly policy: string;
  readonly decision: 'approve' | 'refuse';
  readonly reason: string;
}

/** What the team's policies allow: `action` on the resource named `resource`, `costCapUj` µJ, names under `folder`. */
export interface TeamRules {
  readonly resource: string;
  readonly action: string;
  readonly costCapUj: bigint;
  /** The argument the folder rule constrains (a list of names) and the prefix they must have. */
  readonly arg: string;
  readonly folder: string;
}

/**
 * The demo's webhook reviewer: refuses any name containing "secret", and more than one name per
 * call. It shares a secret with the participant (docs/frost.md "Webhook authentication"; 64 hex
 * characters in `dir`/member2-webhook.secret, mode 0600): a request whose `x-jcp-signature` does
 * not verify is refused, and every answer is signed.
 */
async function startReviewer(arg: string, dir: string): Promise<{ server: Server; secretFile: string }> {
  const secretFile = join(dir, 'member2-webhook.secret');
  const secretText = randomBytes(32).toString('hex');
  writeFileSync(secretFile, secretText, { mode: 0o600 });
  const secret = new Uint8Array(Buffer.from(secretText, 'utf8'));
  const decide = (body: string): { approve: boolean; reason: string } => {
    try {
      const v = JSON.parse(body) as { call?: { arguments?: Record<string, unknown> } };
      const names = v.call?.arguments?.[arg];
      const list = Array.isArray(names) ? names.map(String) : [];
      if (list.length !== 1) return { approve: false, reason: `one ${arg} entry per irreversible call, got ${list.length}` };
      if (/secret/i.test(list[0]!)) return { approve: false, reason: `${list[0]} looks like a secret: not deleted without a person` };
      return { approve: true, reason: `reviewed ${list[0]}` };
    } catch {
      return { approve: false, reason: 'could not read the call' };
    }
  };
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => {
      body += c.toString('utf8');
    });
    req.on('end', () => {
      const ts = String(req.headers[WEBHOOK_TIMESTAMP_HEADER] ?? '');
      const mac = webhookMac(secret, 'POST', req.url ?? '', ts, body);
      const verified = req.headers[WEBHOOK_SIGNATURE_HEADER] === `v1=${mac}`;
      const answer = JSON.stringify(verified ? decide(body) : { approve: false, reason: 'the request is not signed by the participant' });
      const now = String(Math.floor(Date.now() / 1000));
      res.writeHead(200, {
        'content-type': 'application/json',
        [WEBHOOK_TIMESTAMP_HEADER]: now,
        [WEBHOOK_SIGNATURE_HEADER]: `v1=${webhookMac(secret, 'ANSWER', mac, now, answer)}`,
      });
      res.end(answer);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return { server, secretFile };
}

/** How long each participant may take to print `ready`, ms: as long as a demo node may take to start (demo/nodes.ts). */
const TEAM_READY_TIMEOUT_MS = 90_000;

/**
 * Starts three participants under `dir`, each with its approval policy (see the file comment),
 * and runs a 2-of-3 DKG among them.
 * @throws Error / FrostError when a participant does not start or the DKG fails (the participants are stopped).
 */
export async function startTeam(nc: NatsConnection, natsUrl: string, dir: string, rules: TeamRules): Promise<Team> {
  const prefix = `jcpdemo.${randomBytes(5).toString('hex')}`;
  const initiator: Actor = actorFromSeed(new Uint8Array(randomBytes(32)));
  const coordinator: Actor = actorFromSeed(new Uint8Array(randomBytes(32)));
  mkdirSync(dir, { recursive: true });
  const capFile = join(dir, 'member1-rules.json');
  const folderFile = join(dir, 'member3-rules.json');
  writeFileSync(
    capFile,
    JSON.stringify({ allow: [{ resource: rules.resource, actions: [rules.action], max_cost_uj: rules.costCapUj.toString() }] }),
  );
  writeFileSync(
    folderFile,
    JSON.stringify({ allow: [{ resource: rules.resource, actions: [rules.action], args: { [rules.arg]: { prefix: rules.folder } } }] }),
  );
  const { server: reviewer, secretFile } = await startReviewer(rules.arg, dir);
  const url = `http://127.0.0.1:${(reviewer.address() as AddressInfo).port}/review`;
  const policies: TeamPolicy[] = [
    { member: 1, kind: 'rules', what: `${rules.action} on ${rules.resource}, at most ${rules.costCapUj} µJ (${capFile})` },
    { member: 2, kind: 'webhook', what: `a reviewer at ${url}: one entry per call, nothing that looks secret` },
    {
      member: 3,
      kind: 'rules',
      what: `${rules.action} on ${rules.resource} only for ${rules.arg} under "${rules.folder}" (${folderFile})`,
    },
  ];
  const argsFor = (i: number): string[] =>
    i === 0
      ? ['--approve', 'rules', capFile]
      : i === 1
        ? ['--approve', 'webhook', url, '--webhook-secret-file', secretFile, '--approve-timeout-ms', '2000']
        : ['--approve', 'rules', folderFile];
  let cluster: ParticipantCluster;
  try {
    cluster = await ParticipantCluster.start(
      3,
      { natsUrl, prefix, args: ['--initiator', initiator.did, '--coordinator', coordinator.did], readyTimeoutMs: TEAM_READY_TIMEOUT_MS },
      dir,
      argsFor,
    );
  } catch (e) {
    // The launcher stopped every participant; the registry bucket they made goes too.
    reviewer.close();
    await removePrefix(nc, prefix);
    throw e;
  }
  // Interrupted (Ctrl-C): the participants are SIGKILLed; the registry bucket and streams go too.
  const unregister = whenInterrupted(() => removePrefix(nc, prefix));
  const close = async () => {
    unregister();
    await cluster.dispose();
    reviewer.closeAllConnections();
    reviewer.close();
    await removePrefix(nc, prefix);
  };
  const decisions = (): TeamDecision[] =>
    cluster.procs.flatMap((p, i) =>
      p.events
        .filter((e) => e.event === 'decision')
        .map((e) => ({
          member: i + 1,
          holder: p.did as Did,
          request: String(e['request']),
          session: String(e['session']),
          policy_kind: String(e['policy_kind']),
          policy: String(e['policy']),
          decision: e['decision'] === 'approve' ? ('approve' as const) : ('refuse' as const),
          reason: String(e['reason']),
        })),
    );
  try {
    const members = cluster.procs.map((p) => p.did as Did);
    const dkg = await runDkg({ bus: natsBus(nc), prefix, min: 2, max: 3, members, actor: initiator, timeoutMs: 10_000 });
    const first = cluster.procs[0]!;
    const done = await first.waitFor((e) => e.event === 'dkg-complete' && e['session'] === dkg.session, 'dkg-complete', 15_000);
    const soloShare = readShareFile(done['path'] as string);
    const sign = await thresholdSigner({ nc, group: dkg.did, prefix, actor: coordinator, timeoutMs: 5_000 });
    return {
      group: dkg.did,
      members: dkg.roster,
      min: 2,
      max: 3,
      dkgMs: Math.round(dkg.elapsedMs),
      prefix,
      sign,
      coordinator,
      nc,
      soloShare,
      dir,
      holders: cluster.procs.map((p) => p.did as Did),
      policies,
      decisions,
      close,
    };
  } catch (e) {
    await close();
    throw e;
  }
}

/** Deletes the KV bucket, evidence and approvals streams a prefix created (best effort). */
async function removePrefix(nc: NatsConnection, prefix: string): Promise<void> {
  try {
    const jsm = await jetstreamManager(nc);
    for (const name of frostStreams(prefix)) await jsm.streams.delete(name).catch(() => false);
  } catch {
    // NATS gone: nothing to remove
  }
}
