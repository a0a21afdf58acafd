/**
 * Threshold approvals between processes over the local NATS (spec §2.2): three holders of a
 * dealt 2-of-3 group run `jcp frost participant` with different policies (a rules file that
 * keeps arguments inside a folder, a webhook the test runs, a looser rules file). Each decides
 * on the exact call before it commits a nonce; refusals are reported by holder and reason; every
 * decision is a signed record an auditor lists with `jcp frost approvals`; a coordinator that
 * shows one call and asks a share for another, a holder killed between approval and share, a
 * webhook that never answers, and a rules file that does not parse each end in a refusal or a
 * named error, never a share for a call the holder did not approve.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { actorFromSeed, contentIdOfBytes, parseDid, toHex, utf8, verify } from '../../core/index.ts';
import {
  type Bus,
  deal,
  FrostErrorCodes,
  isFrostError,
  natsBus,
  natsRegistry,
  openMessage,
  packagePayload,
  readCommitment,
  readDecisionFile,
  readDecisionStream,
  readRefusal,
  sealMessage,
  shareRecord,
  type SigningCommitment,
  signWithGroup,
  subjects,
  writeShareFile,
} from '../../frost/internal.ts';
import { JCP_BIN, type ParticipantProc, startParticipantProc } from '../../testkit/internal.ts';
import { callBytes } from './approval-call.ts';
import { cleanupPrefix, NATS_URL, uniquePrefix } from './helpers.ts';

const run = promisify(execFile);
const ROUND_MS = 8000;

let nc: NatsConnection;
let bus: Bus;
let root: string;
let prefix: string;
let group = '';
let roster: string[] = [];
let server: Server;
let hookUrl = '';
/** What the webhook saw, in order. */
const hookCalls: { call: { request: string; arguments?: { path?: string } } }[] = [];
const procs: ParticipantProc[] = [];
const argsOf: string[][] = [];

/** The webhook approver the test runs: approves paths under /srv/, never answers for "hang". */
function startHook(): Promise<void> {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => {
      body += c.toString('utf8');
    });
    req.on('end', () => {
      const v = JSON.parse(body) as (typeof hookCalls)[number];
      hookCalls.push(v);
      const path = v.call.arguments?.path ?? '';
      if (path.includes('hang')) return; // never answers (the socket stays open)
      const approve = path.startsWith('/srv/');
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ approve, reason: approve ? 'reviewed: inside /srv' : `reviewed: ${path} is outside /srv` }));
    });
  });
  return new Promise((r) => server.listen(0, '127.0.0.1', () => r()));
}

function holderArgs(i: number): string[] {
  if (i === 0) return ['--approve', 'rules', join(root, 'folder.json')];
  if (i === 1) return ['--approve', 'webhook', hookUrl, '--webhook-unauthenticated', '--approve-timeout-ms', '1000'];
  return ['--approve', 'rules', join(root, 'loose.json')];
}

async function startHolder(i: number): Promise<ParticipantProc> {
  const p = await startParticipantProc({ keystore: join(root, `p${i + 1}`), natsUrl: NATS_URL, prefix, args: argsOf[i]! });
  procs[i] = p;
  return p;
}

beforeAll(async () => {
  nc = await connect({ servers: NATS_URL });
  bus = natsBus(nc);
  prefix = uniquePrefix('approvals');
  root = mkdtempSync(join(tmpdir(), 'jcp-frost-approvals-'));
  await startHook();
  hookUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/approve`;
  writeFileSync(
    join(root, 'folder.json'),
    JSON.stringify({ allow: [{ resource: 'fs', actions: ['write_file'], max_cost_uj: 1000, args: { path: { prefix: '/srv/out/' } } }] }),
  );
  writeFileSync(join(root, 'loose.json'), JSON.stringify({ allow: [{ resource: 'fs', actions: ['write_file'], max_cost_uj: 5000 }] }));
  const d = deal({ min: 2, max: 3 }, (n) => new Uint8Array(randomBytes(n)));
  if (!d.ok) throw new Error(d.error.why);
  group = d.value.did;
  roster = [...d.value.shares[0]!.group.roster];
  for (const s of d.value.shares) {
    const dir = join(root, `p${s.identifier}`);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    writeShareFile(join(dir, `participant-${s.identifier}.share`), shareRecord(s.group, s.identifier, s.signingShare, s.identitySeed));
  }
  for (let i = 0; i < 3; i++) argsOf[i] = holderArgs(i);
  await Promise.all([0, 1, 2].map(startHolder));
}, 60_000);

afterAll(async () => {
  await Promise.all(procs.map((p) => p?.stop()));
  server?.closeAllConnections();
  server?.close();
  if (nc) {
    await cleanupPrefix(nc, prefix);
    await nc.close();
  }
  if (root) rmSync(root, { recursive: true, force: true });
});

/**
 * Signs `message` as the group. `timeoutMs` is the coordinator's round deadline: the refusal
 * tests give one far beyond the test's own timeout, so they pass only if the session ends as soon
 * as enough holders refused (not when the deadline passes).
 */
async function sign(message: Uint8Array, timeoutMs = ROUND_MS) {
  return signWithGroup({ bus, registry: await natsRegistry(nc, prefix), prefix, group, message, timeoutMs, retries: 0 });
}

/** A round deadline the refusal tests never reach (their test timeout is {@link REFUSAL_TEST_MS}). */
const NEVER_MS = 600_000;
const REFUSAL_TEST_MS = 20_000;

/** The decision event holder `i` printed for `request`. */
function decisionOf(i: number, request: string) {
  return procs[i]!.waitFor((e) => e.event === 'decision' && e['request'] === request, `decision on ${request}`);
}

describe('approvals / each holder decides on the exact call', () => {
  it('approve / a call inside every policy is signed: an ordinary Ed25519 signature over the request bytes', async () => {
    const m = callBytes({ args: { path: '/srv/out/report.txt' }, costUj: 800n });
    const r = await sign(m);
    expect(verify(parseDid(group), m, r.signature)).toBe(true);
    const ids = r.signers.map((s) => s.identifier!);
    for (const id of ids) {
      const e = await decisionOf(id - 1, contentIdOfBytes(m));
      expect(e['decision']).toBe('approve');
    }
  });

  it(
    'refuse / a path outside the folder: two holders refuse, the session ends with who refused and why, no signature',
    async () => {
      const m = callBytes({ args: { path: '/etc/passwd' }, costUj: 800n });
      const e = await sign(m, NEVER_MS).catch((x) => x);
      expect(isFrostError(e, FrostErrorCodes.NOT_APPROVED)).toBe(true);
      expect(e.culprits.map((c: { did: string }) => c.did).sort()).toEqual([roster[0], roster[1]].sort());
      expect(e.message).toMatch(/argument path is not under \/srv\/out\//);
      expect(e.message).toMatch(/webhook: reviewed: \/etc\/passwd is outside \/srv/);
      const refusals = e.detail.refusals as { did: string; code: string }[];
      expect(refusals.every((x) => x.code === FrostErrorCodes.NOT_APPROVED)).toBe(true);
      // The holder that approved drew a commitment, the two that refused drew none.
      expect((await decisionOf(2, contentIdOfBytes(m)))['decision']).toBe('approve');
    },
    REFUSAL_TEST_MS,
  );

  it(
    'refuse / bytes that are not a jcp/1 request are refused by every holder (frost-not-a-request)',
    async () => {
      const e = await sign(utf8('transfer everything'), NEVER_MS).catch((x) => x);
      expect(isFrostError(e, FrostErrorCodes.NOT_APPROVED)).toBe(true);
      expect((e.detail.refusals as { code: string }[]).map((x) => x.code)).toContain(FrostErrorCodes.NOT_A_REQUEST);
    },
    REFUSAL_TEST_MS,
  );

  it(
    'refuse / a request whose now is outside the holders skew is refused (an approval expires with its request)',
    async () => {
      const e = await sign(callBytes({ args: { path: '/srv/out/old' }, nowS: Math.floor(Date.now() / 1000) - 3600 }), NEVER_MS).catch(
        (x) => x,
      );
      expect(isFrostError(e, FrostErrorCodes.NOT_APPROVED)).toBe(true);
      expect(e.message).toMatch(/more than 300 s from the holder's clock/);
    },
    REFUSAL_TEST_MS,
  );

  it('webhook / one that never answers is a refusal; the other two holders still make 2-of-3', async () => {
    const m = callBytes({ args: { path: '/srv/out/hang.txt' }, costUj: 100n });
    const r = await sign(m);
    expect(verify(parseDid(group), m, r.signature)).toBe(true);
    const d = await decisionOf(1, contentIdOfBytes(m));
    expect(d['decision']).toBe('refuse');
    expect(d['reason']).toMatch(/no answer within 1000 ms/);
    expect(r.signers.map((s) => s.identifier).sort()).toEqual([1, 3]);
  });
});

/** A hand-rolled coordinator: round one with `message`, returns the commitments by identifier. */
async function roundOne(
  coordinator: ReturnType<typeof actorFromSeed>,
  session: string,
  message: Uint8Array,
  want: number,
): Promise<Map<number, SigningCommitment>> {
  const sub = subjects(prefix);
  const inbox = bus.inbox();
  const got = new Map<number, SigningCommitment>();
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`only ${got.size} commitments`)), 15_000);
    const unsub = bus.subscribe(inbox, (m) => {
      const o = openMessage(m.data);
      if (!o.ok || o.value.body.kind !== 'sign-commitment') return;
      const c = readCommitment(o.value.body.payload);
      got.set(c.commitment.identifier, c.commitment);
      if (got.size >= want) {
        clearTimeout(t);
        unsub();
        resolve();
      }
    });
    bus.publish(
      sub.signRequest(group),
      sealMessage({ kind: 'sign-request', session, round: 1, payload: { group, message } }, coordinator),
      inbox,
    );
  });
  return got;
}

async function askShare(
  coordinator: ReturnType<typeof actorFromSeed>,
  session: string,
  id: number,
  message: Uint8Array,
  cs: Map<number, SigningCommitment>,
) {
  const payload = packagePayload(group, { message, commitments: [...cs.values()].sort((a, b) => a.identifier - b.identifier) });
  const raw = await bus.request(
    subjects(prefix).signPackage(group, id),
    sealMessage({ kind: 'sign-package', session, round: 2, to: roster[id - 1]!, payload }, coordinator),
    15_000,
  );
  const o = openMessage(raw);
  if (!o.ok) throw new Error(o.error.why);
  return { kind: o.value.body.kind, ...(o.value.body.kind === 'sign-refusal' ? readRefusal(o.value.body.payload) : { code: '', why: '' }) };
}

describe('approvals / bound to the exact call', () => {
  it('mismatch / a package for another message than the approved one is refused, and its nonce is burnt (the approved message is then refused too)', async () => {
    const coordinator = actorFromSeed(new Uint8Array(randomBytes(32)));
    const session = toHex(new Uint8Array(randomBytes(16)));
    const shown = callBytes({ args: { path: '/srv/out/shown.txt' } });
    const spent = callBytes({ args: { path: '/srv/out/other.txt' } });
    const cs = await roundOne(coordinator, session, shown, 3);
    const pick = new Map([...cs].filter(([id]) => id !== 2));
    const r1 = await askShare(coordinator, session, 1, spent, pick);
    expect(r1).toMatchObject({ kind: 'sign-refusal', code: FrostErrorCodes.APPROVAL_MISMATCH });
    const r2 = await askShare(coordinator, session, 1, shown, pick);
    expect(r2).toMatchObject({ kind: 'sign-refusal', code: FrostErrorCodes.NONCE_USED });
  });

  it('restart / a holder killed between approval and share never releases a share for another message, and never reuses the nonce', async () => {
    const coordinator = actorFromSeed(new Uint8Array(randomBytes(32)));
    const session = toHex(new Uint8Array(randomBytes(16)));
    const shown = callBytes({ args: { path: '/srv/out/before-crash.txt' } });
    const spent = callBytes({ args: { path: '/srv/out/after-crash.txt' } });
    const cs = await roundOne(coordinator, session, shown, 3);
    await decisionOf(2, contentIdOfBytes(shown));
    await procs[2]!.kill();
    await startHolder(2);
    const pick = new Map([...cs].filter(([id]) => id !== 2));
    const r1 = await askShare(coordinator, session, 3, spent, pick);
    expect(r1).toMatchObject({ kind: 'sign-refusal', code: FrostErrorCodes.APPROVAL_MISMATCH });
    const r2 = await askShare(coordinator, session, 3, shown, pick);
    expect(r2).toMatchObject({ kind: 'sign-refusal', code: FrostErrorCodes.NONCE_USED });
  });

  it('replay / a signing package replayed after the share is refused (frost-nonce-used)', async () => {
    const coordinator = actorFromSeed(new Uint8Array(randomBytes(32)));
    const session = toHex(new Uint8Array(randomBytes(16)));
    const m = callBytes({ args: { path: '/srv/out/once.txt' } });
    const cs = await roundOne(coordinator, session, m, 3);
    const pick = new Map([...cs].filter(([id]) => id !== 2));
    expect((await askShare(coordinator, session, 1, m, pick)).kind).toBe('sign-share');
    expect(await askShare(coordinator, session, 1, m, pick)).toMatchObject({ kind: 'sign-refusal', code: FrostErrorCodes.NONCE_USED });
  });
});

describe('approvals / records for an auditor', () => {
  it('audit / every decision is a signed record in the journal and on the stream; jcp frost approvals verifies them all', async () => {
    const m = callBytes({ args: { path: '/srv/out/audited.txt' } });
    await sign(m);
    await new Promise((r) => setTimeout(r, 300)); // publishing is asynchronous; let it land
    const streamed = await readDecisionStream(nc, prefix, group);
    expect(streamed.length).toBeGreaterThan(0);
    expect(streamed.every((s) => s.record?.valid)).toBe(true);
    const mine = streamed.filter((s) => s.record?.body.request === contentIdOfBytes(m));
    expect(mine.length).toBeGreaterThanOrEqual(2);
    for (const s of mine) expect(roster).toContain(s.record!.body.holder);
    const journal = readDecisionFile(join(root, 'p1', 'approvals.journal'));
    expect(journal.length).toBeGreaterThan(0);
    expect(journal.every((d) => d.record?.valid && d.record.body.holder === roster[0])).toBe(true);
    const out = await run(process.execPath, [
      JCP_BIN,
      'frost',
      'approvals',
      '--nats',
      NATS_URL,
      '--prefix',
      prefix,
      '--group',
      group,
      '--json',
    ]);
    const rows = out.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(rows.length).toBe(streamed.length);
    expect(rows.some((r) => r['decision'] === 'refuse' && /not under \/srv\/out\//.test(String(r['reason'])))).toBe(true);
    expect(rows.every((r) => r['valid'] === true && typeof r['policy'] === 'string')).toBe(true);
  });

  it('audit / the untouched journal verifies (exit 0); a reason altered on disk is reported BAD-SIGNATURE (exit 1, frost-bad-signature)', async () => {
    const path = join(root, 'p1', 'approvals.journal');
    const good = await run(process.execPath, [JCP_BIN, 'frost', 'approvals', '--journal', path]);
    expect(good.stdout).toMatch(/ ok {2}approve by /);
    const copy = join(root, 'tampered.journal');
    const buf = readFileSync(path);
    const at = buf.indexOf('allows write_file');
    expect(at).toBeGreaterThan(0);
    buf.write('ALLOWS', at); // same length: still a well-formed record, now a false one
    writeFileSync(copy, buf);
    const e = await run(process.execPath, [JCP_BIN, 'frost', 'approvals', '--journal', copy]).catch((x) => x);
    expect(e.code).toBe(1);
    expect(e.stdout).toMatch(/BAD-SIGNATURE approve by .*ALLOWS write_file/);
    expect(e.stderr).toMatch(/error \[frost-bad-signature\]: 1 of /);
  });
});

describe('approvals / bad policies and a person at the terminal', () => {
  it('invalid / a rules file that does not parse stops the participant at start (frost-policy-invalid)', async () => {
    const bad = join(root, 'bad.json');
    writeFileSync(bad, '{"allow": [{"resource": "fs"}]}');
    const e = await run(process.execPath, [
      JCP_BIN,
      'frost',
      'participant',
      '--keystore',
      join(root, 'bad-ks'),
      '--nats',
      NATS_URL,
      '--prefix',
      prefix,
      '--approve',
      'rules',
      bad,
    ]).catch((x) => x);
    expect(e.code).toBe(1);
    expect(e.stderr).toMatch(/error \[frost-policy-invalid\]: .*rules\.allow\[0\]/);
  });

  it('prompt / the decoded call is shown on the terminal; y approves, n refuses with the typed reason', async () => {
    const d = deal({ min: 2, max: 2 }, (n) => new Uint8Array(randomBytes(n)));
    if (!d.ok) throw new Error(d.error.why);
    const pfx = uniquePrefix('prompt');
    const ps: ParticipantProc[] = [];
    try {
      for (const s of d.value.shares) {
        const dir = join(root, `prompt-p${s.identifier}`);
        mkdirSync(dir, { recursive: true, mode: 0o700 });
        writeShareFile(join(dir, `participant-${s.identifier}.share`), shareRecord(s.group, s.identifier, s.signingShare, s.identitySeed));
        ps.push(
          await startParticipantProc({
            keystore: dir,
            natsUrl: NATS_URL,
            prefix: pfx,
            args:
              s.identifier === 1
                ? ['--approve', 'rules', join(root, 'loose.json')]
                : ['--approve', 'prompt', '--approve-timeout-ms', '20000'],
            stdin: s.identifier === 2,
          }),
        );
      }
      const person = ps[1]!;
      const answer = async (text: string) => {
        for (let i = 0; i < 200 && !person.stderr.includes('approve this call?'); i++) await new Promise((r) => setTimeout(r, 50));
        expect(person.stderr).toMatch(/tool {6}write_file/);
        expect(person.stderr).toMatch(/arguments \{"path":"\/srv\/out\/p\.txt"\}/);
        person.stderr = '';
        person.child.stdin!.write(`${text}\n`);
      };
      const m = callBytes({ args: { path: '/srv/out/p.txt' } });
      const signing = signWithGroup({
        bus,
        registry: await natsRegistry(nc, pfx),
        prefix: pfx,
        group: d.value.did,
        message: m,
        timeoutMs: 30_000,
        retries: 0,
      });
      await answer('y');
      expect(verify(parseDid(d.value.did), m, (await signing).signature)).toBe(true);
      const m2 = callBytes({ args: { path: '/srv/out/p.txt' }, costUj: 501n });
      const refused = signWithGroup({
        bus,
        registry: await natsRegistry(nc, pfx),
        prefix: pfx,
        group: d.value.did,
        message: m2,
        timeoutMs: 30_000,
        retries: 0,
      }).catch((x) => x);
      await answer('n not on a Friday');
      const e = await refused;
      expect(isFrostError(e, FrostErrorCodes.NOT_APPROVED)).toBe(true);
      expect(e.message).toMatch(/refused at the terminal: not on a Friday/);
    } finally {
      await Promise.all(ps.map((p) => p.stop()));
      await cleanupPrefix(nc, pfx);
    }
  }, 60_000);
});
