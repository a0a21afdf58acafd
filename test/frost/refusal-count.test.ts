/**
 * The coordinator's verdict when some holders refuse and others are silent (docs/bridge.md "A
 * threshold subject"): `frost-not-approved` only when the refusals alone leave fewer than k
 * holders who could still sign; a refusal beside a silent holder whose commitment would still
 * have made k is `frost-not-enough-participants`, naming the silent holder (the bridge's
 * `threshold-unavailable`), not a policy verdict. Runs on an in-memory bus: no NATS.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { actorFromSeed, utf8 } from '../../core/index.ts';
import { type Bus, type BusMsg, deal, FrostErrorCodes, openMessage, sealMessage, signWithGroup, subjects } from '../../frost/internal.ts';

const prefix = 'jcp-frost-refusal-count';

/** A 2-of-3 dealt group whose holders answer a sign-request as `answers` says (`silent`: nothing). */
function setup(answers: ('refuse' | 'silent')[]) {
  const d = deal({ min: 2, max: 3 }, (n) => new Uint8Array(randomBytes(n)));
  if (!d.ok) throw new Error(d.error.why);
  const g = d.value.shares[0]!.group;
  const holders = d.value.shares.map((s) => actorFromSeed(s.identitySeed));
  const handlers = new Map<string, (m: BusMsg) => void>();
  let n = 0;
  const sub = subjects(prefix);
  const bus: Bus = {
    publish(subject, data, reply) {
      if (subject !== sub.signRequest(d.value.did) || !reply) return;
      const o = openMessage(data);
      if (!o.ok) throw new Error(o.error.why);
      const { session, from } = o.value.body;
      answers.forEach((a, i) => {
        if (a !== 'refuse') return;
        const msg = sealMessage(
          {
            kind: 'sign-refusal',
            session,
            round: 1,
            to: from,
            payload: { code: FrostErrorCodes.NOT_APPROVED, why: `policy of holder ${i + 1}` },
          },
          holders[i]!,
        );
        setImmediate(() => handlers.get(reply)?.({ subject: reply, data: msg }));
      });
    },
    subscribe(subject, handler) {
      handlers.set(subject, handler);
      return () => handlers.delete(subject);
    },
    request: async () => {
      throw new Error('no round two in these tests');
    },
    inbox: () => `_INBOX.test.${n++}`,
    flush: async () => {},
  };
  const registry = { get: async () => g, put: async () => undefined };
  return {
    did: d.value.did,
    roster: g.roster,
    sign: (timeoutMs: number) =>
      signWithGroup({ bus, registry, prefix, group: d.value.did, message: utf8('a call'), timeoutMs, retries: 0 }),
  };
}

describe('frost coordinator / refusals against silence', () => {
  it('one refusal, two silent holders (2 of 3 could still sign): frost-not-enough-participants naming the silent ones, not frost-not-approved', async () => {
    const t = setup(['silent', 'silent', 'refuse']);
    const e = await t.sign(300).catch((x) => x);
    expect(e).toMatchObject({ code: FrostErrorCodes.NOT_ENOUGH_PARTICIPANTS });
    expect(String(e.message)).toContain(t.roster[0]);
    expect(String(e.message)).toContain(t.roster[1]);
    // the refusal is still reported, as a note and in the detail
    expect(String(e.message)).toMatch(/policy of holder 3/);
    expect(e.detail.refusals).toEqual([{ identifier: 3, did: t.roster[2], code: FrostErrorCodes.NOT_APPROVED, why: 'policy of holder 3' }]);
  });

  it('two refusals (only 1 of 3 could sign): frost-not-approved at once, naming both', async () => {
    const t = setup(['refuse', 'silent', 'refuse']);
    const started = Date.now();
    const e = await t.sign(60_000).catch((x) => x);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(e).toMatchObject({ code: FrostErrorCodes.NOT_APPROVED });
    expect(e.culprits.map((c: { did: string }) => c.did).sort()).toEqual([t.roster[0], t.roster[2]].sort());
  });
});
