/**
 * A refusing holder's decision record as the bridge reads it back (bridge/threshold.ts
 * `ThresholdCaller.explain`; spec §2.2): anyone on the bus can publish on a holder's approvals
 * subject, so records published after the holder's own — one validly signed by another key
 * naming itself, one naming the holder but not signed by it, one that is not a record, and the
 * holder's own record of another session — must not hide it. The bridge reads every record of
 * the window and uses the one that verifies under the holder's roster identity.
 */
import { randomBytes } from 'node:crypto';
import { jetstream } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ThresholdCaller } from '../../bridge/index.ts';
import { type Actor, actorFromSeed, contentId, contentIdOfBytes, type Did } from '../../core/index.ts';
import {
  approvalsSubject,
  type DecisionBody,
  deal,
  FrostError,
  FrostErrorCodes,
  natsRegistry,
  publishDecision,
  sealDecision,
} from '../../frost/internal.ts';
import { cleanupPrefix, NATS_URL, uniquePrefix } from '../frost/helpers.ts';
import { cast } from '../node/fixtures.ts';

const { bob, mallory } = cast('bridge-threshold-records');

describe('bridge / a threshold refusal is explained by the holder’s own record (needs NATS)', () => {
  const prefix = uniquePrefix('records');
  let nc: NatsConnection;
  let group: Did;
  let holder: Actor;
  const session = randomBytes(16).toString('hex');

  const body = (o: Partial<DecisionBody>): DecisionBody => ({
    proto: 'jcp-frost-approval/1',
    holder: holder.did,
    group,
    identifier: 1,
    session,
    request: contentIdOfBytes(new Uint8Array([1, 2, 3])),
    policy: contentId({ policy: 'test' }),
    policy_kind: 'rules',
    decision: 'refuse',
    reason: 'the real reason: payroll is not under scratch-',
    at_s: Math.floor(Date.now() / 1000),
    action: 'delete_entities',
    resource: '',
    ...o,
  });

  beforeAll(async () => {
    nc = await connect({ servers: NATS_URL });
    const d = deal({ min: 2, max: 3 }, (n) => new Uint8Array(randomBytes(n)));
    if (!d.ok) throw new Error(d.error.why);
    group = d.value.did;
    holder = actorFromSeed(d.value.shares[0]!.identitySeed);
    await (await natsRegistry(nc, prefix)).put(d.value.group, group);
  });

  afterAll(async () => {
    await cleanupPrefix(nc, prefix);
    await nc?.close();
  });

  test('forged records published after the real one: the real one is used', async () => {
    const real = await publishDecision(nc, prefix, group, 1, sealDecision(body({}), holder));
    // Another key, validly signed, naming itself as the holder, for this very session: "approve".
    await publishDecision(
      nc,
      prefix,
      group,
      1,
      sealDecision(body({ holder: mallory.did, decision: 'approve', reason: 'forged' }), mallory),
    );
    // The holder named, but the signature is mallory's.
    const forged = sealDecision(body({ holder: mallory.did, reason: 'forged, re-labelled' }), mallory);
    const swapped = new TextDecoder('latin1').decode(forged).replace(mallory.did, holder.did);
    await publishDecision(nc, prefix, group, 1, new Uint8Array([...swapped].map((c) => c.charCodeAt(0))));
    // Not a record at all, and the holder's own record of another session.
    await jetstream(nc).publish(approvalsSubject(prefix, group, 1), new Uint8Array([0xff, 0x00]));
    await publishDecision(nc, prefix, group, 1, sealDecision(body({ session: 'ff'.repeat(16), reason: 'another session' }), holder));

    const caller = await ThresholdCaller.open({ nc, group, prefix, coordinator: bob, recordWaitMs: 1000 });
    // The refusal as the coordinator listed it; once with the holder's did, once naming mallory's.
    for (const did of [holder.did, mallory.did]) {
      const e = new FrostError(FrostErrorCodes.NOT_APPROVED, 'not approved', [], {
        session,
        refusals: [{ identifier: 1, did, code: FrostErrorCodes.NOT_APPROVED, why: 'from the signed refusal' }],
      });
      const r = await caller.explain(e);
      expect(r?.code).toBe('threshold-refused');
      expect(r?.refusals[0]?.reason).toBe('the real reason: payroll is not under scratch-');
      expect(r?.refusals[0]?.record).toMatchObject({ stream_seq: real, decision: 'refuse', valid: true });
    }
  }, 30_000);
});
