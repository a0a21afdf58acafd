/**
 * The demo's threshold team (spec §2.2): three `jcp frost participant` processes, each with its own
 * keystore, make a 2-of-3 group key by distributed key generation over NATS (no dealer: the
 * group's private key never exists anywhere), and the group's signatures come from signing
 * sessions that need two of them (frost/ coordinator).
 *
 * The participants answer only this demo's initiator and coordinator (`--initiator`,
 * `--coordinator`), and everything lives under a subject prefix of its own, removed at the end.
 */
import { randomBytes } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { type Actor, actorFromSeed } from '../../core/actor.ts';
import type { Did } from '../../core/didkey.ts';
import { evidenceStream, natsBus, registryBucket } from '../../frost/bus.ts';
import { type Signer, thresholdSigner } from '../../frost/coordinator.ts';
import { runDkg } from '../../frost/initiator.ts';
import { readShareFile, type ShareRecord } from '../../frost/sharefile.ts';
import { ParticipantCluster } from '../frost-procs.ts';

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
  /** Member 1's share, read from its keystore: what one member alone holds. */
  readonly soloShare: ShareRecord;
  /** Where the keystores are. */
  readonly dir: string;
  /** Stops the participants and removes the prefix's registry bucket and evidence stream. */
  close(): Promise<void>;
}

/**
 * Starts three participants under `dir` and runs a 2-of-3 DKG among them.
 * @throws Error / FrostError when a participant does not start or the DKG fails (the participants are stopped).
 */
export async function startTeam(nc: NatsConnection, natsUrl: string, dir: string): Promise<Team> {
  const prefix = `jcpdemo.${randomBytes(5).toString('hex')}`;
  const initiator: Actor = actorFromSeed(new Uint8Array(randomBytes(32)));
  const coordinator: Actor = actorFromSeed(new Uint8Array(randomBytes(32)));
  const cluster = await ParticipantCluster.start(3, { natsUrl, prefix, args: ['--initiator', initiator.did, '--coordinator', coordinator.did] }, dir);
  const close = async () => {
    await cluster.dispose();
    await removePrefix(nc, prefix);
  };
  try {
    const members = cluster.procs.map((p) => p.did as Did);
    const dkg = await runDkg({ bus: natsBus(nc), prefix, min: 2, max: 3, members, actor: initiator, timeoutMs: 10_000 });
    const first = cluster.procs[0]!;
    const done = await first.waitFor((e) => e.event === 'dkg-complete' && e['session'] === dkg.session, 'dkg-complete', 15_000);
    const soloShare = readShareFile(done['path'] as string);
    const sign = await thresholdSigner({ nc, group: dkg.did, prefix, actor: coordinator, timeoutMs: 5_000 });
    return { group: dkg.did, members: dkg.roster, min: 2, max: 3, dkgMs: Math.round(dkg.elapsedMs), prefix, sign, soloShare, dir, close };
  } catch (e) {
    await close();
    throw e;
  }
}

/** Deletes the KV bucket and evidence stream a prefix created (best effort). */
async function removePrefix(nc: NatsConnection, prefix: string): Promise<void> {
  try {
    const jsm = await jetstreamManager(nc);
    for (const name of [`KV_${registryBucket(prefix)}`, evidenceStream(prefix)]) await jsm.streams.delete(name).catch(() => false);
  } catch {
    // NATS gone: nothing to remove
  }
}
