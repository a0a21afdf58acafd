/**
 * Helpers for the NATS-backed FROST tests: a unique subject prefix per run and its JetStream
 * cleanup, and a hand-rolled malicious DKG participant built from the library's own pieces
 * (it speaks the protocol correctly except for the one fault it is asked to commit).
 */
import { randomBytes } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { type Actor, actorFromSeed } from '../../core/index.ts';
import {
  frostStreams,
  boxContext,
  dkgRound1,
  dkgRound2,
  Fn,
  natsBus,
  newBoxKey,
  openMessage,
  pairKey,
  readRound1,
  readStart,
  type Round1Package,
  seal,
  sealMessage,
  subjects,
} from '../../frost/internal.ts';

/** The local NATS server the tests use. */
export const NATS_URL = process.env['JCP_NATS_URL'] ?? 'nats://127.0.0.1:4222';

/** A subject prefix unique to this test run. */
export function uniquePrefix(tag: string): string {
  return `jcptest.${tag}.${randomBytes(5).toString('hex')}`;
}

/** Deletes the JetStream bucket and stream a prefix created (best effort). */
export async function cleanupPrefix(nc: NatsConnection, prefix: string): Promise<void> {
  try {
    const jsm = await jetstreamManager(nc);
    for (const name of frostStreams(prefix)) {
      await jsm.streams.delete(name).catch(() => false);
    }
  } catch {
    // server gone: nothing to clean
  }
}

/** The misbehaviour a {@link EvilParticipant} commits in round 2. */
export type EvilMode = 'bad-share' | 'wrong-session';

/**
 * A DKG participant that follows the protocol up to round 2, then either sends its first peer a
 * share that does not match its commitment (`bad-share`, encrypted and signed properly), or
 * sends every peer its share bound to another session id (`wrong-session`). It never confirms.
 */
export class EvilParticipant {
  readonly actor: Actor = actorFromSeed(new Uint8Array(randomBytes(32)));
  readonly #unsubs: (() => void)[] = [];

  constructor(nc: NatsConnection, prefix: string, mode: EvilMode) {
    const bus = natsBus(nc);
    const sub = subjects(prefix);
    const box = newBoxKey();
    const rng = (n: number) => new Uint8Array(randomBytes(n));
    let session = '';
    let initiator = '';
    let state: ReturnType<typeof dkgRound1> | undefined;
    let roster: ReturnType<typeof readStart> | undefined;
    const r1 = new Map<string, Round1Package>();
    this.#unsubs.push(
      bus.subscribe(sub.dkgInvite, (m) => {
        const o = openMessage(m.data);
        if (!o.ok || !m.reply || session) return;
        session = o.value.body.session;
        initiator = o.value.body.from;
        bus.publish(
          m.reply,
          sealMessage({ kind: 'dkg-hello', session, round: 0, to: initiator, payload: { enc_key: box.public } }, this.actor),
        );
      }),
    );
    this.#unsubs.push(
      bus.subscribe(sub.dkgAnyBcast, (m) => {
        const o = openMessage(m.data);
        if (!o.ok || o.value.body.session !== session) return;
        const b = o.value.body;
        if (b.kind === 'dkg-start' && b.from === initiator) {
          roster = readStart(o.value);
          if (!roster.ok) return;
          const me = roster.value.roster.findIndex((r) => r.did === this.actor.did);
          state = dkgRound1(me + 1, roster.value, rng);
          if (!state.ok) return;
          const p = state.value.package;
          bus.publish(
            sub.dkgBcast(session),
            sealMessage(
              {
                kind: 'dkg-round1',
                session,
                round: 1,
                payload: { identifier: p.identifier, commitment: [...p.commitment], proof: p.proof },
              },
              this.actor,
            ),
          );
        } else if (b.kind === 'dkg-round1' && roster?.ok && state?.ok && b.from !== this.actor.did) {
          r1.set(b.from, readRound1(b.payload));
          if (r1.size < roster.value.max - 1) return;
          const shares = dkgRound2(state.value.state, [...r1.values()]);
          if (!shares.ok) return;
          const meIdx = roster.value.roster.findIndex((r) => r.did === this.actor.did);
          const meEntry = roster.value.roster[meIdx]!;
          let first = true;
          for (const [j, entry] of roster.value.roster.entries()) {
            if (j === meIdx) continue;
            let share = shares.value.get(j + 1)!;
            if (mode === 'bad-share' && first) share = Fn.toBytes(Fn.add(Fn.fromBytes(share), 1n));
            first = false;
            const sealedSession = mode === 'wrong-session' ? randomBytes(16).toString('hex') : session;
            const ctx = boxContext(sealedSession, meEntry, entry);
            const nonce = new Uint8Array(randomBytes(12));
            const ct = seal(pairKey(box.secret, entry.encKey, ctx), nonce, ctx, share);
            bus.publish(
              sub.dkgDirect(session, entry.did),
              sealMessage(
                {
                  kind: 'dkg-round2',
                  session: sealedSession,
                  round: 2,
                  to: entry.did,
                  payload: { identifier: meIdx + 1, nonce, ciphertext: ct },
                },
                this.actor,
              ),
            );
          }
        }
      }),
    );
  }

  /** Stops listening. */
  stop(): void {
    for (const u of this.#unsubs.splice(0)) u();
  }
}
