/**
 * Threshold actors between processes over the local NATS (spec §2.2, C18): DKG among three
 * participant processes, signing sessions, dealer shares, the signer function used to issue and
 * revoke grants, and the one-share refusal — each checked, not assumed.
 */
import { execFile } from 'node:child_process';
import { createPublicKey, verify as nodeVerify } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  actorFromSeed,
  contentId,
  fromHex,
  type Grant,
  grantId,
  parseDid,
  utf8,
  verify,
  verifyGrantSignature,
  verifyRevocation,
} from '../../core/internal.ts';
import {
  CommitmentPrefetch,
  FrostErrorCodes,
  issueGrant,
  natsBus,
  natsRegistry,
  openMessage,
  processCoordinator,
  readShareFile,
  revokeGrant,
  runDkg,
  sealMessage,
  signWithGroup,
  soloSignature,
  subjects,
  type ThresholdActor,
  thresholdSigner,
  writeIdentityFile,
} from '../../frost/internal.ts';
import { JCP_BIN, ParticipantCluster, startDealtGroup, startParticipantProc } from '../../testkit/internal.ts';
import { cleanupPrefix, NATS_URL, uniquePrefix } from './helpers.ts';

const run = promisify(execFile);
const SPKI = Buffer.from('302a300506032b6570032100', 'hex');

/** Ed25519 verification straight through OpenSSL, with no project code in the way. */
function opensslVerify(did: string, msg: Uint8Array, sig: Uint8Array): boolean {
  const key = createPublicKey({ key: Buffer.concat([SPKI, parseDid(did).bytes]), format: 'der', type: 'spki' });
  return nodeVerify(null, msg, key, sig);
}

describe('frost sessions / dkg and signing between processes over NATS', () => {
  const prefix = uniquePrefix('session');
  let nc: NatsConnection;
  let cluster: ParticipantCluster;
  let group = '';

  beforeAll(async () => {
    nc = await connect({ servers: NATS_URL });
    cluster = await ParticipantCluster.start(3, { natsUrl: NATS_URL, prefix });
  });

  afterAll(async () => {
    await cluster?.dispose();
    if (nc) {
      await cleanupPrefix(nc, prefix);
      await nc.close();
    }
  });

  it('dkg 2-of-3: every participant ends with the same group did:key, confirmed by all, share files mode 0600', async () => {
    const r = await runDkg({ bus: natsBus(nc), prefix, min: 2, max: 3, timeoutMs: 5000 });
    group = r.did;
    expect([...r.roster].sort()).toEqual(cluster.procs.map((p) => p.did).sort());
    for (const p of cluster.procs) {
      const e = await p.waitFor((x) => x.event === 'dkg-complete' && x['session'] === r.session, 'dkg-complete');
      expect(e['group']).toBe(group);
      const st = statSync(e['path'] as string);
      expect(st.mode & 0o777).toBe(0o600);
      expect(readShareFile(e['path'] as string).did).toBe(group);
    }
  });

  it('signing 2-of-3: the aggregate is an ordinary Ed25519 signature (project verifier and OpenSSL agree)', async () => {
    const msg = utf8('an irreversible action needs two agents');
    const r = await signWithGroup({ bus: natsBus(nc), registry: await natsRegistry(nc, prefix), prefix, group, message: msg });
    expect(r.signers).toHaveLength(2);
    expect(verify(parseDid(group), msg, r.signature)).toBe(true);
    expect(opensslVerify(group, msg, r.signature)).toBe(true);
    expect(opensslVerify(group, utf8('another message'), r.signature)).toBe(false);
  });

  it('signing 3-of-3 signers on a 2-of-3 group also verifies (all holders online)', async () => {
    const msg = utf8('all three');
    const r = await signWithGroup({ bus: natsBus(nc), registry: await natsRegistry(nc, prefix), prefix, group, message: msg, signers: 3 });
    expect(r.signers).toHaveLength(3);
    expect(opensslVerify(group, msg, r.signature)).toBe(true);
  });

  it('prefetch: the next session uses commitments drawn after the previous one (one round trip), and stale ones fall back to a fresh round one', async () => {
    const requests: string[] = [];
    const spy = nc.subscribe(subjects(prefix).signRequest(group), {
      callback: (_e, m) => {
        const o = openMessage(m.data);
        if (o.ok) requests.push(o.value.body.session);
      },
    });
    const bus = natsBus(nc);
    const registry = await natsRegistry(nc, prefix);
    const prefetch = new CommitmentPrefetch();
    const sign = (text: string) => signWithGroup({ bus, registry, prefix, group, message: utf8(text), prefetch });
    const first = await sign('first');
    // The first session drew its own round one, then the prefetch drew the next one.
    expect(requests[0]).toBe(first.session);
    const second = await sign('second');
    expect(opensslVerify(group, utf8('second'), second.signature)).toBe(true);
    expect(requests[1]).toBe(second.session); // drawn before 'second' was asked for: no round one of its own
    expect(requests.filter((x) => x === second.session)).toHaveLength(1);
    // Make the next prefetched commitments stale: the holders release them (sign-done from the
    // same coordinator), so the prefetched attempt is refused and a fresh round one signs.
    await prefetch.take(group, 'did:key:nobody', 2, new Set()); // waits for the fill; a stranger gets nothing…
    const third = await sign('third'); // …so 'third' drew its own round one
    await new Promise((r) => setTimeout(r, 300));
    const stale = requests[requests.length - 1]!;
    nc.publish(
      subjects(prefix).signDone(group),
      sealMessage({ kind: 'sign-done', session: stale, round: 3, payload: {} }, processCoordinator()),
    );
    await nc.flush();
    await new Promise((r) => setTimeout(r, 300));
    const fourth = await sign('fourth');
    expect(opensslVerify(group, utf8('fourth'), fourth.signature)).toBe(true);
    expect(fourth.session).not.toBe(stale);
    expect([second.attempts, fourth.attempts]).toEqual([1, 2]); // the refused prefetched attempt counts
    expect(opensslVerify(group, utf8('third'), third.signature)).toBe(true);
    spy.unsubscribe();
    await new Promise((r) => setTimeout(r, 300)); // let the last background fill finish
  });

  it('a threshold actor issues a grant and revokes it; both verify like any other actor', async () => {
    const signer = await thresholdSigner({ nc, group, prefix });
    const ta: ThresholdActor = { did: group, sign: signer };
    const g: Grant = {
      issuer: group,
      subject: cluster.procs[0]!.did,
      capability: { resource: contentId({ tool: 'payments' }), actions: ['transfer'] },
      budget_uj: 5_000_000n,
      expiry: 0,
      nonce: new Uint8Array(16).fill(1),
    };
    const sg = await issueGrant(g, ta);
    expect(verifyGrantSignature(sg)).toBe(true);
    const rev = await revokeGrant(grantId(g), ta, new Uint8Array(16).fill(2));
    expect(verifyRevocation(rev, g)).toEqual({ ok: true, value: undefined });
  });

  it('jcp frost sign prints a signature that OpenSSL verifies under the group did', async () => {
    const { stdout } = await run(process.execPath, [
      JCP_BIN,
      'frost',
      'sign',
      '--group',
      group,
      '--message',
      '68656c6c6f',
      '--nats',
      NATS_URL,
      '--prefix',
      prefix,
    ]);
    expect(opensslVerify(group, fromHex('68656c6c6f'), fromHex(stdout.trim()))).toBe(true);
  });

  it('one share alone cannot sign: its solo signature does not verify, and a coordinator with one holder online gets no signature', async () => {
    const msg = utf8('one is not enough');
    for (const p of cluster.procs) {
      const dir = join(p.keystore, 'shares');
      for (const f of readdirSync(dir).filter((x) => x.endsWith('.share'))) {
        const rec = readShareFile(join(dir, f));
        if (rec.did === group) expect(opensslVerify(group, msg, soloSignature(rec, msg))).toBe(false);
      }
    }
    await cluster.procs[1]!.stop();
    await cluster.procs[2]!.stop();
    const err = await signWithGroup({
      bus: natsBus(nc),
      registry: await natsRegistry(nc, prefix),
      prefix,
      group,
      message: msg,
      timeoutMs: 800,
    }).catch((e) => e);
    expect(err).toMatchObject({ code: FrostErrorCodes.NOT_ENOUGH_PARTICIPANTS });
  });
});

describe('frost sessions / dealer shares', () => {
  const prefix = uniquePrefix('dealer');
  let nc: NatsConnection;

  beforeAll(async () => {
    nc = await connect({ servers: NATS_URL });
  });

  afterAll(async () => {
    await cleanupPrefix(nc, prefix);
    await nc.close();
  });

  it('jcp frost deal writes 0600 share files; holders of any two of them sign for the printed did, and only for their coordinator', async () => {
    const base = mkdtempSync(join(tmpdir(), 'jcp-frost-deal-'));
    const out = join(base, 'out');
    const { stdout } = await run(process.execPath, [JCP_BIN, 'frost', 'deal', '--threshold', '2', '--participants', '3', '--out', out]);
    const did = stdout.trim();
    parseDid(did);
    const files = readdirSync(out).sort();
    expect(files).toEqual(['participant-1.share', 'participant-2.share', 'participant-3.share']);
    for (const f of files) expect(statSync(join(out, f)).mode & 0o777).toBe(0o600);
    const coordinator = actorFromSeed(new Uint8Array(32).fill(42));
    const idFile = join(base, 'coordinator.key');
    writeIdentityFile(idFile, coordinator);
    // Holders 1 and 3 run, answering only `coordinator`; holder 2 stays offline.
    const procs = [];
    for (const i of [1, 3]) {
      const ks = join(base, `k${i}`);
      mkdirSync(ks, { recursive: true, mode: 0o700 });
      copyFileSync(join(out, `participant-${i}.share`), join(ks, `participant-${i}.share`));
      procs.push(startParticipantProc({ keystore: ks, natsUrl: NATS_URL, prefix, args: ['--coordinator', coordinator.did] }));
    }
    const started = await Promise.all(procs);
    try {
      const msg = utf8('dealt');
      const r = await signWithGroup({
        bus: natsBus(nc),
        registry: await natsRegistry(nc, prefix),
        prefix,
        group: did,
        message: msg,
        actor: coordinator,
      });
      expect(r.signers.map((s) => s.identifier).sort()).toEqual([1, 3]);
      expect(opensslVerify(did, msg, r.signature)).toBe(true);
      const cli = await run(process.execPath, [
        JCP_BIN,
        'frost',
        'sign',
        '--group',
        did,
        '--message',
        '00ff',
        '--nats',
        NATS_URL,
        '--prefix',
        prefix,
        '--identity',
        idFile,
      ]);
      expect(opensslVerify(did, fromHex('00ff'), fromHex(cli.stdout.trim()))).toBe(true);
      const stranger = await signWithGroup({
        bus: natsBus(nc),
        registry: await natsRegistry(nc, prefix),
        prefix,
        group: did,
        message: msg,
        timeoutMs: 1000,
      }).catch((e) => e);
      expect(stranger).toMatchObject({ code: FrostErrorCodes.NOT_ENOUGH_PARTICIPANTS });
      expect(stranger.message).toMatch(/refused: \[frost-refused\] coordinator did:key:\S+ is not allowed/);
    } finally {
      await Promise.all(started.map((p) => p.stop()));
      rmSync(base, { recursive: true, force: true });
    }
  });

  it('startDealtGroup (for C13): two of three dealt holders online sign through thresholdSigner', async () => {
    const g = await startDealtGroup({ min: 2, max: 3, natsUrl: NATS_URL, prefix: `${prefix}.g`, online: 2 });
    try {
      const sign = await thresholdSigner({ nc, group: g.did, prefix: g.prefix });
      const msg = utf8('signer function');
      expect(opensslVerify(g.did, msg, await sign(msg))).toBe(true);
    } finally {
      await g.dispose();
      await cleanupPrefix(nc, g.prefix);
    }
  });
});
