/**
 * Standing grants fired by real events (§4.6, C20): `jcp standing policy` and `jcp standing serve`
 * as a process receiving webhooks on loopback, its durable mint ledger across restarts (kill -9
 * included), every refusal leaving the ledger unchanged, and both hand-offs (folder, callback).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { authorPolicy, contentId, grantId, newActor, seededRng, signGrant } from '../../core/index.ts';
import { chainFileText, readChainFile, writeChainFile } from '../../client/index.ts';
import { runJcpInProcess } from '../support.ts';
import { JCP_BIN } from '../../testkit/internal.ts';
import { eventClassOf, MintLedgerFile, startStandingServer } from '../../node/index.ts';
import { tempDir } from './fixtures.ts';
import { perPeerBound } from '../listeners.ts';

/** The `jcp` command run in this process (test/support.ts). */
const jcp = (...argv: string[]) => runJcpInProcess(argv);

type Answer = {
  status: number;
  body: {
    fired?: { child_id: string; firings: number; spent_uj: string; replayed: boolean; file?: string };
    error?: { code: string };
    ledger?: { firings: number; spent_uj: string };
  };
};

async function post(port: number, pathname: string, body: string): Promise<Answer> {
  const r = await fetch(`http://127.0.0.1:${port}${pathname}`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
  return { status: r.status, body: (await r.json()) as Answer['body'] };
}

async function ledgerOf(port: number): Promise<{ firings: number; spent_uj: string }> {
  const r = (await (await fetch(`http://127.0.0.1:${port}/ledger`)).json()) as { firings: number; spent_uj: string };
  return { firings: r.firings, spent_uj: r.spent_uj };
}

/** `jcp standing serve` as its own process; resolves once it printed where it listens. */
function serveProc(args: string[]): Promise<{ child: ChildProcess; port: number; hello: { firings: number; spent_uj: string } }> {
  const child = spawn(process.execPath, [JCP_BIN, 'standing', 'serve', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    child.stderr!.on('data', (d: Buffer) => {
      err += d.toString();
    });
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const nl = out.indexOf('\n');
      if (nl >= 0) {
        const hello = JSON.parse(out.slice(0, nl)) as { listening: string; firings: number; spent_uj: string };
        resolve({ child, port: Number(hello.listening.split(':').pop()), hello });
      }
    });
    child.once('exit', (code) => reject(new Error(`jcp standing serve exited ${code}: ${err}`)));
  });
}

async function stop(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.removeAllListeners('exit');
  const gone = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill(signal);
  await gone;
}

describe('jcp standing policy | serve (§4.6)', () => {
  const t = tempDir('standing');
  const f = (n: string) => path.join(t.dir, n);
  const procs: ChildProcess[] = [];
  const serveArgs = () => [
    '--chain',
    f('standing.json'),
    '--policy',
    f('policy.json'),
    '--key',
    f('trigger.key'),
    '--agent',
    f('worker.key'),
    '--ledger',
    f('mint.jsonl'),
    '--out-dir',
    f('inbox'),
  ];
  beforeAll(async () => {
    for (const k of ['owner', 'trigger', 'worker']) expect((await jcp('key', 'new', '--out', f(`${k}.key`))).code).toBe(0);
    const m = await jcp(
      'grant',
      'mint',
      '--key',
      f('owner.key'),
      '--subject',
      f('trigger.key'),
      '--resource',
      'triage',
      '--actions',
      'label,comment',
      '--budget',
      '100',
      '--out',
      f('standing.json'),
    );
    expect(m.code).toBe(0);
    expect((await jcp('key', 'show', f('worker.key'))).code).toBe(0);
    const { mkdirSync } = await import('node:fs');
    mkdirSync(f('inbox'));
  });
  afterAll(async () => {
    for (const p of procs) await stop(p, 'SIGKILL');
    t.cleanup();
  });

  test('policy: an amplifying policy and one by anyone but the issuer are refused with their codes', async () => {
    const base = ['standing', 'policy', '--chain', f('standing.json'), '--source', 'tickets', '--kind', 'opened', '--max-firings', '4'];
    const amp = await jcp(...base, '--key', f('owner.key'), '--per-firing', '101', '--out', f('p-amp.json'));
    expect(amp.code).toBe(1);
    expect(amp.err).toMatch(/^jcp standing: error \[amplification\]: policy refused: /);
    const byHolder = await jcp(...base, '--key', f('trigger.key'), '--per-firing', '30', '--out', f('p-holder.json'));
    expect(byHolder.code).toBe(1);
    expect(byHolder.err).toMatch(/^jcp standing: error \[wrong-signer\]: policy refused: /);
    expect(existsSync(f('p-amp.json')) || existsSync(f('p-holder.json'))).toBe(false);
    const ok = await jcp(...base, '--key', f('owner.key'), '--per-firing', '30', '--out', f('policy.json'));
    expect(ok.code).toBe(0);
    expect((JSON.parse(readFileSync(f('policy.json'), 'utf8')) as { policy: { event_class: string } }).policy.event_class).toBe(
      eventClassOf('tickets', 'opened'),
    );
  });

  test('serve refuses a non-loopback listen without the flag, and a key that is not the holder', async () => {
    const wide = await jcp('standing', 'serve', ...serveArgs(), '--listen', '0.0.0.0:0');
    expect(wide.code).toBe(1);
    expect(wide.err).toMatch(/^jcp standing: error \[non-loopback\]: /);
    const args = serveArgs();
    args[args.indexOf(f('trigger.key'))] = f('owner.key');
    const notHolder = await jcp('standing', 'serve', ...args);
    expect(notHolder.code).toBe(1);
    expect(notHolder.err).toMatch(/^jcp standing: error \[not-holder\]: /);
    // A policy of another standing grant (same issuer and subject) does not hold for this one.
    const m = await jcp(
      'grant',
      'mint',
      '--key',
      f('owner.key'),
      '--subject',
      f('trigger.key'),
      '--resource',
      'triage',
      '--actions',
      'label',
      '--budget',
      '100',
      '--out',
      f('other-standing.json'),
    );
    expect(m.code).toBe(0);
    const otherArgs = serveArgs();
    otherArgs[otherArgs.indexOf(f('standing.json'))] = f('other-standing.json');
    const wrongGrant = await jcp('standing', 'serve', ...otherArgs);
    expect(wrongGrant.code).toBe(1);
    expect(wrongGrant.err).toMatch(/^jcp standing: error \[wrong-grant\]: /);
    expect(existsSync(f('mint.jsonl'))).toBe(false);
  });

  test('webhooks mint children for the agent; wrong class and exhausted budget are refused, the ledger unchanged, across restarts and kill -9', async () => {
    let s = await serveProc(serveArgs());
    procs.push(s.child);
    expect(s.hello).toMatchObject({ firings: 0, spent_uj: '0' });
    const standing = readChainFile(f('standing.json'))[0]!;

    const first = await post(s.port, '/events/tickets', '{"kind":"opened","n":1}');
    expect(first.status).toBe(200);
    expect(first.body.fired).toMatchObject({ firings: 1, spent_uj: '30', replayed: false });
    const handed = readChainFile(first.body.fired!.file!);
    const child = handed[handed.length - 1]!.grant;
    expect(handed).toHaveLength(2);
    expect(child.parent).toBe(grantId(standing.grant));
    expect(child.budget_uj).toBe(30n);
    expect(child.subject).toBe((await jcp('key', 'show', f('worker.key'))).out.trim());

    const wrongSource = await post(s.port, '/events/billing', '{"kind":"opened"}');
    expect(wrongSource.status).toBe(403);
    expect(wrongSource.body.error?.code).toBe('wrong-event-class');
    expect(wrongSource.body.ledger).toEqual({ firings: 1, spent_uj: '30' });
    const wrongKind = await post(s.port, '/events/tickets', '{"kind":"closed"}');
    expect(wrongKind.body.error?.code).toBe('wrong-event-class');
    expect((await post(s.port, '/events/tickets', 'not json')).body.error?.code).toBe('event-invalid');
    expect((await post(s.port, '/events/tickets', '{"n":1}')).body.error?.code).toBe('event-invalid');

    const retry = await post(s.port, '/events/tickets', '{"kind":"opened","n":1}');
    expect(retry.body.fired).toMatchObject({ child_id: first.body.fired!.child_id, firings: 1, replayed: true });

    expect((await post(s.port, '/events/tickets', '{"kind":"opened","n":2}')).body.fired?.firings).toBe(2);
    await stop(s.child, 'SIGKILL');
    s = await serveProc(serveArgs());
    procs.push(s.child);
    expect(s.hello).toMatchObject({ firings: 2, spent_uj: '60' });
    expect((await post(s.port, '/events/tickets', '{"kind":"opened","n":3}')).body.fired).toMatchObject({ firings: 3, spent_uj: '90' });

    const linesBefore = readFileSync(f('mint.jsonl'), 'utf8');
    const past = await post(s.port, '/events/tickets', '{"kind":"opened","n":4}');
    expect(past.status).toBe(429);
    expect(past.body.error?.code).toBe('budget-exhausted');
    expect(past.body.ledger).toEqual({ firings: 3, spent_uj: '90' });
    expect(readFileSync(f('mint.jsonl'), 'utf8')).toBe(linesBefore);

    await stop(s.child, 'SIGTERM');
    s = await serveProc(serveArgs());
    procs.push(s.child);
    expect(await ledgerOf(s.port)).toEqual({ firings: 3, spent_uj: '90' });
    expect((await post(s.port, '/events/tickets', '{"kind":"opened","n":5}')).body.error?.code).toBe('budget-exhausted');
    expect((await post(s.port, '/events/billing', '{"kind":"opened"}')).body.error?.code).toBe('wrong-event-class');
    expect(await ledgerOf(s.port)).toEqual({ firings: 3, spent_uj: '90' });
    await stop(s.child, 'SIGTERM');
  });
});

describe('the mint ledger file (§4.6)', () => {
  const rng = seededRng('test/node/standing');
  const [owner, trigger, worker] = [newActor(rng), newActor(rng), newActor(rng)];
  const standing = signGrant(
    {
      issuer: owner.did,
      subject: trigger.did,
      capability: { resource: contentId({ tool: 't' }), actions: ['a'] },
      budget_uj: 1000n,
      expiry: 0,
      nonce: rng(16),
    },
    owner,
  );
  const hook = eventClassOf('ci', 'failed');
  const authored = authorPolicy(standing, { event_class: hook, per_firing_uj: 10n, max_firings: 2, nonce: rng(16) }, owner);
  if (!authored.ok) throw new Error(authored.error.why);
  const policy = authored.value;

  test('an exhausted firing count stays exhausted across a restart; a torn last line is cut off; another policy’s ledger is refused', async () => {
    const t = tempDir('mintledger');
    const ledgerFile = path.join(t.dir, 'l.jsonl');
    const opts = {
      chain: [standing],
      policy,
      holder: trigger,
      agent: worker.did,
      ledgerFile,
      handoff: { dir: t.dir },
      writeChain: (file: string, c: readonly (typeof standing)[]) => writeChainFile(file, c),
      chainJson: chainFileText,
      host: '127.0.0.1',
      port: 0,
    };
    try {
      let s = await startStandingServer(opts);
      expect((await post(s.port, '/events/ci', '{"kind":"failed","run":1}')).status).toBe(200);
      expect((await post(s.port, '/events/ci', '{"kind":"failed","run":2}')).body.fired?.firings).toBe(2);
      const third = await post(s.port, '/events/ci', '{"kind":"failed","run":3}');
      expect(third.status).toBe(429);
      expect(third.body.error?.code).toBe('firings-exhausted');
      await s.close();

      appendFileSync(ledgerFile, '{"firing":3,"spent_uj":"30","ev');
      s = await startStandingServer(opts);
      expect(s.ledger.ledger).toEqual({ firings: 2, spent_uj: 20n });
      expect((await post(s.port, '/events/ci', '{"kind":"failed","run":4}')).body.error?.code).toBe('firings-exhausted');
      expect((await post(s.port, '/events/ci', '{"kind":"failed","run":1}')).body.fired?.replayed).toBe(true);
      await s.close();
      expect(readFileSync(ledgerFile, 'utf8').endsWith('}\n')).toBe(true);

      const other = authorPolicy(standing, { event_class: hook, per_firing_uj: 10n, max_firings: 9, nonce: rng(16) }, owner);
      if (!other.ok) throw new Error(other.error.why);
      expect(() => MintLedgerFile.open(ledgerFile, grantId(standing.grant), grantId(standing.grant))).toThrow(/ledger of policy/);
      await expect(startStandingServer({ ...opts, policy: other.value })).rejects.toMatchObject({ code: 'ledger-corrupt' });
    } finally {
      t.cleanup();
    }
  });

  /** A standing server of `policy` on an ephemeral loopback port, its ledger and hand-offs in `dir`. */
  const serverIn = (dir: string) => ({
    chain: [standing],
    policy,
    holder: trigger,
    agent: worker.did,
    ledgerFile: path.join(dir, 'l.jsonl'),
    handoff: { dir },
    writeChain: (file: string, c: readonly (typeof standing)[]) => writeChainFile(file, c),
    chainJson: chainFileText,
    host: '127.0.0.1',
    port: 0,
  });

  test('the webhook listener closes a connection over its per-peer bound at once; 127.0.0.2 is still served', async () => {
    const t = tempDir('mintledger-bound');
    try {
      const s = await startStandingServer({ ...serverIn(t.dir), connectionLimits: { maxPerPeer: 3 } });
      try {
        expect(await perPeerBound(s.port, 3, '/ledger')).toEqual({ extraClosed: true, heldOpen: true, otherServed: 200 });
      } finally {
        await s.close();
      }
    } finally {
      t.cleanup();
    }
  });

  test('a fired body sent again to another source is wrong-event-class, not a replay of the first child (break12 F3)', async () => {
    const t = tempDir('mintledger-src');
    try {
      const s = await startStandingServer(serverIn(t.dir));
      try {
        const body = '{"kind":"failed","run":1}';
        expect((await post(s.port, '/events/ci', body)).body.fired?.replayed).toBe(false);
        const elsewhere = await post(s.port, '/events/deploy', body);
        expect(elsewhere.status).toBe(403);
        expect(elsewhere.body.fired).toBeUndefined();
        expect(elsewhere.body.error?.code).toBe('wrong-event-class');
        expect((await post(s.port, '/events/ci', body)).body.fired?.replayed).toBe(true);
        expect(s.ledger.ledger).toEqual({ firings: 1, spent_uj: 10n });
      } finally {
        await s.close();
      }
    } finally {
      t.cleanup();
    }
  });

  test('a leaf-only standing grant cannot fire: delegation-forbidden, nothing recorded', async () => {
    const t = tempDir('mintleaf');
    const leaf = signGrant({ ...standing.grant, delegate_depth: 0, nonce: rng(16) }, owner);
    const p = authorPolicy(leaf, { event_class: hook, per_firing_uj: 10n, max_firings: 2, nonce: rng(16) }, owner);
    if (!p.ok) throw new Error(p.error.why);
    const s = await startStandingServer({
      chain: [leaf],
      policy: p.value,
      holder: trigger,
      agent: worker.did,
      ledgerFile: path.join(t.dir, 'l.jsonl'),
      handoff: { dir: t.dir },
      writeChain: (file, c) => writeChainFile(file, c),
      chainJson: chainFileText,
      host: '127.0.0.1',
      port: 0,
    });
    try {
      const r = await post(s.port, '/events/ci', '{"kind":"failed"}');
      expect([r.status, r.body.error?.code]).toEqual([403, 'delegation-forbidden']);
      expect(r.body.ledger).toEqual({ firings: 0, spent_uj: '0' });
      expect(readFileSync(path.join(t.dir, 'l.jsonl'), 'utf8').trim().split('\n')).toHaveLength(1);
    } finally {
      await s.close();
      t.cleanup();
    }
  });

  test('a callback URL receives the chain file; a failing callback answers handoff-failed and the firing stays counted', async () => {
    const t = tempDir('mintcb');
    const got: string[] = [];
    let fail = false;
    const cb = createServer((req, res) => {
      let b = '';
      req.on('data', (d: Buffer) => {
        b += d.toString();
      });
      req.on('end', () => {
        got.push(b);
        res.writeHead(fail ? 500 : 204);
        res.end();
      });
    });
    await new Promise<void>((r) => cb.listen(0, '127.0.0.1', () => r()));
    const cbPort = (cb.address() as { port: number }).port;
    const s = await startStandingServer({
      chain: [standing],
      policy,
      holder: trigger,
      agent: worker.did,
      ledgerFile: path.join(t.dir, 'l.jsonl'),
      handoff: { callback: `http://127.0.0.1:${cbPort}/inbox` },
      writeChain: () => {
        throw new Error('not used');
      },
      chainJson: chainFileText,
      host: '127.0.0.1',
      port: 0,
    });
    try {
      const ok = await post(s.port, '/events/ci', '{"kind":"failed","run":1}');
      expect(ok.status).toBe(200);
      const chain = (JSON.parse(got[0]!) as { chain: Array<{ id: string }> }).chain;
      expect(chain.map((l) => l.id)).toEqual([grantId(standing.grant), ok.body.fired!.child_id]);
      fail = true;
      const bad = await post(s.port, '/events/ci', '{"kind":"failed","run":2}');
      expect(bad.status).toBe(502);
      expect(bad.body.error?.code).toBe('handoff-failed');
      expect(bad.body.ledger).toEqual({ firings: 2, spent_uj: '20' });
    } finally {
      await s.close();
      await new Promise<void>((r) => cb.close(() => r()));
      t.cleanup();
    }
  });
});
