/** The signature worker pool (node/workers.ts): caller-signature checks split into chunks keep their order and verdicts (§11). */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { newActor, seededRng } from '../../core/actor.ts';
import { sign } from '../../core/ed25519.ts';
import { VERIFY_CHUNK, WorkerPool } from '../../node/workers.ts';

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
