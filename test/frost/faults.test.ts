/**
 * Faults between processes over NATS (spec §2.2): a participant SIGKILLed during each DKG round
 * and during signing, a share sent for the wrong session, a share inconsistent with its
 * commitment, a coordinator replaying an old signing package (before and after a crash and
 * restart of the participant), a tampered or wrongly unlocked share file. Each ends in an error
 * that names what went wrong and whom, and no key or signature that should not exist.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decode, newActor, seededRng, utf8 } from '../../core/index.ts';
import {
  type Bus,
  evidenceStream,
  FrostError,
  FrostErrorCodes,
  isFrostError,
  natsBus,
  natsRegistry,
  openMessage,
  packagePayload,
  readCommitment,
  readRefusal,
  runDkg,
  sealMessage,
  signWithGroup,
  subjects,
  verifyComplaint,
  withEarlier,
} from '../../frost/internal.ts';
import { JCP_BIN, type ParticipantProc, startParticipantProc } from '../../testkit/internal.ts';
import { cleanupPrefix, EvilParticipant, NATS_URL, uniquePrefix } from './helpers.ts';

const run = promisify(execFile);
const FIXTURE = resolve(import.meta.dirname, 'fixtures/participant.ts');
/** Per-round deadline: generous, so a slow but honest participant on a loaded machine is never blamed. */
const ROUND_MS = 2000;

let nc: NatsConnection;
const prefixes: string[] = [];
const roots: string[] = [];

beforeAll(async () => {
  nc = await connect({ servers: NATS_URL });
});

afterAll(async () => {
  for (const p of prefixes) await cleanupPrefix(nc, p);
  await nc.close();
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

/** Starts fixture participants; `killAt[i]` makes participant i crash before sending that kind. */
async function start(tag: string, killAt: (string | undefined)[]): Promise<{ prefix: string; procs: ParticipantProc[]; root: string }> {
  const prefix = uniquePrefix(tag);
  prefixes.push(prefix);
  const root = mkdtempSync(join(tmpdir(), `jcp-frost-${tag}-`));
  roots.push(root);
  const procs = await Promise.all(
    killAt.map((k, i) =>
      startParticipantProc({
        keystore: join(root, `p${i + 1}`),
        natsUrl: NATS_URL,
        prefix,
        script: FIXTURE,
        ...(k ? { env: { JCP_FROST_KILL_AT: k } } : {}),
      }),
    ),
  );
  return { prefix, procs, root };
}

/** Every share file (and leftover temp file) under the participants' keystores. */
function keptShares(procs: readonly ParticipantProc[]): string[] {
  return procs.flatMap((p) => {
    const dir = join(p.keystore, 'shares');
    return existsSync(dir) ? readdirSync(dir).map((f) => join(dir, f)) : [];
  });
}

async function stopAll(procs: readonly ParticipantProc[]): Promise<void> {
  await Promise.all(procs.map((p) => p.stop()));
}

describe('faults / a participant killed during each DKG round', () => {
  for (const kind of ['dkg-round1', 'dkg-round2', 'dkg-confirm'] as const) {
    it(`abort / killed before sending ${kind}: the session aborts naming it, and nobody keeps a share`, async () => {
      const { prefix, procs } = await start(kind, [undefined, undefined, kind]);
      const victim = procs[2]!;
      const victimDid = victim.did;
      try {
        const err = await runDkg({ bus: natsBus(nc), prefix, min: 2, max: 3, timeoutMs: ROUND_MS }).catch((e) => e);
        expect(isFrostError(err)).toBe(true);
        expect([FrostErrorCodes.ABORTED, FrostErrorCodes.PARTICIPANT_LOST]).toContain(err.code);
        expect(err.culprits.map((c: { did?: string }) => c.did)).toEqual([victimDid]);
        expect(victim.child.signalCode).toBe('SIGKILL');
        for (const p of procs.slice(0, 2)) {
          const e = await p.waitFor((x) => x.event === 'dkg-aborted', 'dkg-aborted');
          expect((e['culprits'] as { did: string }[]).map((c) => c.did)).toEqual([victimDid]);
        }
        expect(keptShares(procs)).toEqual([]);
      } finally {
        await stopAll(procs);
      }
    });
  }
});

describe('faults / misbehaving DKG participants', () => {
  it('abort / a share sent for the wrong session is refused; the session aborts naming the sender, no share kept', async () => {
    const { prefix, procs } = await start('wrongsession', [undefined, undefined]);
    const evil = new EvilParticipant(nc, prefix, 'wrong-session');
    try {
      const err = await runDkg({ bus: natsBus(nc), prefix, min: 2, max: 3, timeoutMs: ROUND_MS }).catch((e) => e);
      expect(err.culprits.map((c: { did?: string }) => c.did)).toEqual([evil.actor.did]);
      for (const p of procs) {
        const e = await p.waitFor((x) => x.event === 'dkg-aborted', 'dkg-aborted');
        expect((e['culprits'] as { did: string }[]).map((c) => c.did)).toEqual([evil.actor.did]);
      }
      const own = await Promise.all(procs.map((p) => p.waitFor((x) => x.event === 'dkg-aborted', 'dkg-aborted')));
      expect(
        own.some(
          (e) => e['code'] === FrostErrorCodes.PARTICIPANT_LOST && /for session [0-9a-f]{32} sent on session/.test(String(e['why'])),
        ),
      ).toBe(true);
      expect(keptShares(procs)).toEqual([]);
    } finally {
      evil.stop();
      await stopAll(procs);
    }
  });

  it('abort / an inconsistent share is named with verifiable evidence kept on disk and in JetStream, no share kept', async () => {
    const { prefix, procs } = await start('badshare', [undefined, undefined]);
    const evil = new EvilParticipant(nc, prefix, 'bad-share');
    try {
      const err = await runDkg({ bus: natsBus(nc), prefix, min: 2, max: 3, timeoutMs: ROUND_MS }).catch((e) => e);
      expect(err.culprits.map((c: { did?: string }) => c.did)).toEqual([evil.actor.did]);
      const events = await Promise.all(procs.map((p) => p.waitFor((x) => x.event === 'dkg-aborted', 'dkg-aborted')));
      for (const e of events) expect((e['culprits'] as { did: string }[]).map((c) => c.did)).toEqual([evil.actor.did]);
      expect(events.map((e) => e['code'])).toContain(FrostErrorCodes.INCONSISTENT_SHARE);
      // The victim kept its complaint: a third party can re-check it.
      const complaints = procs.flatMap((p) =>
        readdirSync(join(p.keystore, 'evidence'))
          .filter((f) => f.includes('complaint-against'))
          .map((f) => ({ p, bytes: new Uint8Array(readFileSync(join(p.keystore, 'evidence', f))) })),
      );
      expect(complaints).toHaveLength(1);
      const c = complaints[0]!;
      const session = String(events[0]!['session']);
      expect(verifyComplaint(decode(c.bytes) as Record<string, unknown>, c.p.did, session)).toEqual({
        ok: true,
        value: { accused: evil.actor.did, code: FrostErrorCodes.INCONSISTENT_SHARE },
      });
      const jsm = await jetstreamManager(nc);
      const info = await jsm.streams.info(evidenceStream(prefix));
      expect(info.state.messages).toBeGreaterThanOrEqual(1);
      expect(keptShares(procs)).toEqual([]);
    } finally {
      evil.stop();
      await stopAll(procs);
    }
  });
});

/** A bus that records every request it sends (to replay a signing package later). */
function recordingBus(inner: Bus, sent: { subject: string; data: Uint8Array }[]): Bus {
  return {
    ...inner,
    request: (subject, data, t) => {
      sent.push({ subject, data });
      return inner.request(subject, data, t);
    },
  };
}

describe('faults / signing', () => {
  let ctx: { prefix: string; procs: ParticipantProc[]; root: string };
  let group = '';

  beforeAll(async () => {
    ctx = await start('signing', [undefined, undefined, 'sign-share']);
    group = (await runDkg({ bus: natsBus(nc), prefix: ctx.prefix, min: 2, max: 3, timeoutMs: 5000 })).did;
    await Promise.all(ctx.procs.map((p) => p.waitFor((e) => e.event === 'dkg-complete', 'dkg-complete')));
  });

  afterAll(async () => {
    await stopAll(ctx.procs);
  });

  it('replay / a coordinator replaying an old signing package is refused with frost-nonce-used, also after a crash and restart', async () => {
    const sent: { subject: string; data: Uint8Array }[] = [];
    const registry = await natsRegistry(nc, ctx.prefix);
    const idOf = (p: ParticipantProc) => p.events.find((e) => e.event === 'dkg-complete')!['identifier'] as number;
    const victimId = idOf(ctx.procs[2]!);
    const msg = utf8('pay 10');
    const r = await signWithGroup({
      bus: recordingBus(natsBus(nc), sent),
      registry,
      prefix: ctx.prefix,
      group,
      message: msg,
      exclude: [victimId],
    });
    expect(r.signers.map((s) => s.identifier)).not.toContain(victimId);
    const old = sent[0]!;
    const targetId = Number(/\.p(\d+)$/.exec(old.subject)![1]);
    const refusal = async () => {
      const reply = await nc.request(old.subject, old.data, { timeout: 3000 });
      const o = openMessage(reply.data);
      if (!o.ok) throw new Error(o.error.why);
      expect(o.value.body.kind).toBe('sign-refusal');
      return readRefusal(o.value.body.payload).code;
    };
    expect(await refusal()).toBe(FrostErrorCodes.NONCE_USED);
    // Crash that holder and start it again on the same keystore: the journal still refuses.
    const target = ctx.procs.find((p) => idOf(p) === targetId)!;
    await target.kill();
    const again = await startParticipantProc({ keystore: target.keystore, natsUrl: NATS_URL, prefix: ctx.prefix, script: FIXTURE });
    again.events.push({ event: 'dkg-complete', identifier: targetId });
    ctx.procs[ctx.procs.indexOf(target)] = again;
    expect(await refusal()).toBe(FrostErrorCodes.NONCE_USED);
    // …and it still signs fresh sessions.
    const fresh = await signWithGroup({
      bus: natsBus(nc),
      registry,
      prefix: ctx.prefix,
      group,
      message: utf8('pay 11'),
      exclude: [victimId],
    });
    expect(fresh.signers.map((s) => s.identifier)).toContain(targetId);
  });

  it('misrouted / a package from anyone but the coordinator that drew the commitments is refused; the rightful one is signed', async () => {
    const rng = seededRng('faults/misrouted');
    const [a, b] = [newActor(rng), newActor(rng)];
    const sub = subjects(ctx.prefix);
    const session = 'c0'.repeat(16);
    // Coordinator A asks every holder for a commitment.
    const inbox = `_INBOX.misrouted.${session}`;
    const got: Uint8Array[] = [];
    const s = nc.subscribe(inbox, {
      callback: (_e, m) => {
        got.push(m.data);
      },
    });
    nc.publish(sub.signRequest(group), sealMessage({ kind: 'sign-request', session, round: 1, payload: { group } }, a), { reply: inbox });
    for (let i = 0; i < 100 && got.length < 3; i++) await new Promise((r) => setTimeout(r, 20));
    s.unsubscribe();
    // The third holder is scripted to die before sending a share (for the `lost` test): leave it out.
    const dying = ctx.procs[2]!.did;
    const commitments = got
      .map((raw) => {
        const o = openMessage(raw);
        if (!o.ok) throw new Error(o.error.why);
        return o.value;
      })
      .filter((m) => m.body.from !== dying)
      .map((m) => readCommitment(m.body.payload).commitment);
    expect(commitments).toHaveLength(2);
    const target = commitments[0]!.identifier;
    const holder = ctx.procs.find((p) => p.events.find((e) => e.event === 'dkg-complete')?.['identifier'] === target)!;
    const ask = async (from: typeof a, message: string) => {
      const pkg = packagePayload(group, { message: utf8(message), commitments });
      const reply = await nc.request(
        sub.signPackage(group, target),
        sealMessage({ kind: 'sign-package', session, round: 2, to: holder.did, payload: pkg }, from),
        { timeout: 3000 },
      );
      const o = openMessage(reply.data);
      if (!o.ok) throw new Error(o.error.why);
      return o.value.body.kind === 'sign-refusal' ? readRefusal(o.value.body.payload).code : o.value.body.kind;
    };
    // B replays A's session id with its own message: refused, and the nonce is not spent…
    expect(await ask(b, 'pay mallory')).toBe(FrostErrorCodes.MISROUTED);
    // …so A's own package is still signed, once.
    expect(await ask(a, 'pay alice')).toBe('sign-share');
    expect(await ask(a, 'pay alice')).toBe(FrostErrorCodes.NONCE_USED);
  });

  it('lost / a signer killed before sending its share: the session fails naming it, no signature; a retry without it succeeds', async () => {
    const registry = await natsRegistry(nc, ctx.prefix);
    const victim = ctx.procs[2]!;
    const victimId = victim.events.find((e) => e.event === 'dkg-complete')!['identifier'] as number;
    const msg = utf8('needs everyone');
    const err = await signWithGroup({
      bus: natsBus(nc),
      registry,
      prefix: ctx.prefix,
      group,
      message: msg,
      signers: 3,
      retries: 0,
      timeoutMs: 1500,
    }).catch((e) => e);
    expect(err).toMatchObject({ code: FrostErrorCodes.PARTICIPANT_LOST, culprits: [{ identifier: victimId, did: victim.did }] });
    expect(victim.child.signalCode).toBe('SIGKILL');
    const ok = await signWithGroup({ bus: natsBus(nc), registry, prefix: ctx.prefix, group, message: msg, timeoutMs: 1500 });
    expect(ok.signers.map((s) => s.identifier)).not.toContain(victimId);
  });

  it('an explicit number of signers is a requirement: with that holder gone, 3 signers is frost-not-enough-participants naming it', async () => {
    const registry = await natsRegistry(nc, ctx.prefix);
    const victim = ctx.procs[2]!;
    expect(victim.child.signalCode).toBe('SIGKILL');
    const err = await signWithGroup({
      bus: natsBus(nc),
      registry,
      prefix: ctx.prefix,
      group,
      message: utf8('all three'),
      signers: 3,
      timeoutMs: 1000,
    }).catch((e) => e);
    expect(err).toMatchObject({ code: FrostErrorCodes.NOT_ENOUGH_PARTICIPANTS });
    expect(String(err.message)).toContain(victim.did);
  });
});

describe('faults / signing requests the coordinator refuses or reports in full', () => {
  it('a message too large for one NATS message is frost-bad-params before any holder is asked, blaming nobody', async () => {
    const prefix = uniquePrefix('bigmsg');
    const registry = {
      get: async () => ({ min: 2, max: 3, commitments: [], verifyingShares: [], roster: [] }),
      put: async () => undefined,
    };
    const bus = natsBus(nc);
    const cap = bus.maxPayload?.();
    expect(cap).toBeGreaterThan(0);
    const err = await signWithGroup({
      bus,
      registry: registry as never,
      prefix,
      group: 'did:key:z6MkfakeGroupForTheSizeCheck',
      message: new Uint8Array(cap!),
    }).catch((e) => e);
    expect(err).toMatchObject({ code: FrostErrorCodes.BAD_PARAMS, culprits: [] });
    expect(String(err.message)).toMatch(/max_payload/);
  });

  it('a coordinator looking a group up under an unknown prefix gets frost-unknown-group and leaves no bucket behind', async () => {
    const prefix = uniquePrefix('noregistry');
    const registry = await natsRegistry(nc, prefix, { create: false });
    const err = await signWithGroup({
      bus: natsBus(nc),
      registry,
      prefix,
      group: 'did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK',
      message: utf8('x'),
    }).catch((e) => e);
    expect(err).toMatchObject({ code: FrostErrorCodes.UNKNOWN_GROUP });
    const jsm = await jetstreamManager(nc);
    const names: string[] = [];
    for await (const si of jsm.streams.list()) names.push(si.config.name);
    expect(names.filter((n) => n.includes(prefix.replace(/[^A-Za-z0-9_-]/g, '_')))).toEqual([]);
  });

  it('after a retry, the final error still names whoever was blamed in the earlier attempt', () => {
    const first = new FrostError(FrostErrorCodes.PARTICIPANT_LOST, 'no signature share from participant 2', [
      { identifier: 2, did: 'did:key:z6Mktwo' },
    ]);
    const last = new FrostError(FrostErrorCodes.NOT_ENOUGH_PARTICIPANTS, 'only 1 of the 2 signers needed answered', []);
    const e = withEarlier(last, [first]);
    expect(e.code).toBe(FrostErrorCodes.NOT_ENOUGH_PARTICIPANTS);
    expect(e.culprits).toEqual([{ identifier: 2, did: 'did:key:z6Mktwo' }]);
    expect(e.message).toMatch(/attempt 1: \[frost-participant-lost\] no signature share from participant 2/);
    expect(withEarlier(last, [])).toBe(last);
  });
});

describe('faults / share files', () => {
  it('refuse / a tampered share file stops the participant with frost-file-tampered; a wrong passphrase with frost-wrong-passphrase', async () => {
    const root = mkdtempSync(join(tmpdir(), 'jcp-frost-files-'));
    roots.push(root);
    const out = join(root, 'out');
    const env = { ...process.env, JCP_TEST_PASS: 'correct horse battery staple', JCP_TEST_WRONG: 'Tr0ub4dor&3' };
    await run(
      process.execPath,
      [JCP_BIN, 'frost', 'deal', '--threshold', '2', '--participants', '3', '--out', out, '--passphrase-env', 'JCP_TEST_PASS'],
      { env },
    );
    const participant = async (ks: string, pass: string) => {
      const r = await run(
        process.execPath,
        [
          JCP_BIN,
          'frost',
          'participant',
          '--keystore',
          ks,
          '--nats',
          NATS_URL,
          '--prefix',
          uniquePrefix('files'),
          '--passphrase-env',
          pass,
          '--approve',
          'allow-all',
        ],
        { env },
      ).catch((e) => e as { code: number; stderr: string });
      return r as { code: number; stderr: string };
    };
    // Wrong passphrase.
    const ks1 = join(root, 'k1');
    mkdirSync(ks1, { mode: 0o700 });
    writeFileSync(join(ks1, 'participant-1.share'), readFileSync(join(out, 'participant-1.share')), { mode: 0o600 });
    const wrong = await participant(ks1, 'JCP_TEST_WRONG');
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/error \[frost-wrong-passphrase\]/);
    // Tampered: one byte of the ciphertext flipped.
    const ks2 = join(root, 'k2');
    mkdirSync(ks2, { mode: 0o700 });
    const bytes = readFileSync(join(out, 'participant-2.share'));
    bytes[bytes.length - 40] = bytes[bytes.length - 40]! ^ 0x01;
    writeFileSync(join(ks2, 'participant-2.share'), bytes, { mode: 0o600 });
    const tampered = await participant(ks2, 'JCP_TEST_PASS');
    expect(tampered.code).toBe(1);
    expect(tampered.stderr).toMatch(/error \[frost-file-tampered\]/);
  });
});
