/**
 * A url that leads to something other than NATS: the greeting probe tells why within its timeout
 * and leaves no socket open, the JetStream bus fails `nats-unavailable` naming the reason and
 * leaves no socket open after close(), and `jcp channel audit` fails with a coded error line
 * within seconds instead of hanging (the NATS client alone leaked a socket per attempt that kept
 * the process alive forever).
 */
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { channelNames, JetStreamBus } from '../../channel/index.ts';
import { greetingServers, natsGreeting, natsHostPort } from '../../natsio/index.ts';
import { freePort } from '../../testkit/index.ts';
import { type FakeListener, fakeListener, httpListener, runJcp, silentListener } from '../listeners.ts';

const NATS = 'nats://127.0.0.1:4222';
const listeners: FakeListener[] = [];
const keep = (l: FakeListener) => {
  listeners.push(l);
  return l;
};
afterAll(async () => {
  for (const l of listeners) await l.close();
});

describe('nats greeting probe', () => {
  it('parses nats urls: scheme optional, port 4222 by default, [::1]', () => {
    expect(natsHostPort('nats://127.0.0.1:4222')).toEqual({ host: '127.0.0.1', port: 4222 });
    expect(natsHostPort('localhost')).toEqual({ host: 'localhost', port: 4222 });
    expect(natsHostPort('nats://[::1]:7')).toEqual({ host: '::1', port: 7 });
    expect(natsHostPort('nats://')).toBeUndefined();
  });

  it('a real NATS greets', async () => {
    expect(await natsGreeting(NATS)).toEqual({ ok: true });
  });

  it('a listener that never writes: refused within the timeout, and its connection is closed', async () => {
    const l = keep(await silentListener());
    const g = await natsGreeting(l.url, 300);
    expect(g).toEqual({
      ok: false,
      why: 'accepts connections but sent no NATS greeting within 300 ms (is it a NATS server?)',
      kind: 'foreign',
    });
    expect(await l.drained(1_000)).toBe(true);
  });

  it('an HTTP server, a refused port, a peer that hangs up, a non-NATS banner', async () => {
    const http = keep(await httpListener());
    // The HTTP listener answers only once spoken to: for a NATS client it is silent too.
    expect((await natsGreeting(http.url, 300)).ok).toBe(false);
    expect(await http.drained(1_000)).toBe(true);
    expect(await natsGreeting(`nats://127.0.0.1:${await freePort()}`, 300)).toEqual({
      ok: false,
      why: 'connection refused (nothing listens there)',
      kind: 'down',
    });
    const hangUp = keep(await fakeListener((s) => s.destroy()));
    expect(await natsGreeting(hangUp.url, 1_000)).toEqual({
      ok: false,
      why: 'closed the connection without a NATS greeting',
      kind: 'down',
    });
    const ssh = keep(await fakeListener((s) => s.write('SSH-2.0-OpenSSH_9.6\r\n')));
    const g = await natsGreeting(ssh.url, 1_000);
    expect(g.ok).toBe(false);
    expect(g.ok ? '' : g.why).toMatch(/^answered "SSH-2.0-OpenSSH_9\.6\\r\\n", not a NATS greeting/);
    expect(await ssh.drained(1_000)).toBe(true);
  });

  it('greetingServers: the servers that greet; usable = all but those that accept without greeting; why for the others', async () => {
    const l = keep(await silentListener());
    const down = `nats://127.0.0.1:${await freePort()}`;
    const r = await greetingServers([l.url, down, NATS], 300);
    expect(r.greeted).toEqual([NATS]);
    // A server that is down now stays usable: the client keeps it in its pool for reconnects.
    expect(r.usable).toEqual([down, NATS]);
    expect(r.problems).toEqual([
      `${l.url}: accepts connections but sent no NATS greeting within 300 ms (is it a NATS server?)`,
      `${down}: connection refused (nothing listens there)`,
    ]);
  });
});

describe('jetstream bus - a listener that is not NATS', () => {
  it('ready() fails nats-unavailable with the reason; after close() no connection is left open', async () => {
    const l = keep(await silentListener());
    const bus = JetStreamBus.start(l.url, { names: channelNames(`t${randomBytes(5).toString('hex')}`), requestTimeoutMs: 300 });
    const err = await bus.ready(1_500).then(
      () => undefined,
      (e: unknown) => e as Error & { code?: string },
    );
    await bus.close();
    expect(err?.code).toBe('nats-unavailable');
    expect(err?.message).toMatch(
      /^NATS connection: not ready within 1500 ms \(nats:\/\/127\.0\.0\.1:\d+: accepts connections but sent no NATS greeting within 300 ms/,
    );
    expect(l.accepted).toBeGreaterThan(1);
    expect(await l.drained(1_500)).toBe(true);
    // and it stays so: no attempt after close()
    const accepted = l.accepted;
    await new Promise((r) => setTimeout(r, 600));
    expect(l.accepted).toBe(accepted);
  });

  it('a cluster list with one silent server connects through the others', async () => {
    const l = keep(await silentListener());
    const bus = JetStreamBus.start([l.url, NATS], { names: channelNames(`t${randomBytes(5).toString('hex')}`), requestTimeoutMs: 500 });
    try {
      await bus.ready(5_000);
      expect(bus.connected).toBe(true);
      expect(await l.drained(1_000)).toBe(true);
    } finally {
      await bus.deleteStreams();
      await bus.close();
    }
  });
});

describe('jcp channel audit - errors', () => {
  const grant = 'ab'.repeat(32);

  it('a listener that never speaks NATS: error [nats-unavailable], exit 1, no hang (killed at 25 s otherwise)', async () => {
    const l = keep(await silentListener());
    const r = await runJcp(['channel', 'audit', '--grant', grant, '--nats', l.url], { killAfterMs: 25_000 });
    expect(r.signal).toBeNull();
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(
      new RegExp(
        `^jcp channel: error \\[nats-unavailable\\]: cannot reach NATS with JetStream at ${l.url}: not ready within 5000 ms \\(${l.url}: accepts connections but sent no NATS greeting`,
      ),
    );
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('a refused port: the same code; a malformed url is a usage error', async () => {
    const refused = `nats://127.0.0.1:${await freePort()}`;
    const r = await runJcp(['channel', 'audit', '--grant', grant, '--nats', refused], { killAfterMs: 25_000 });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      `jcp channel: error [nats-unavailable]: cannot reach NATS with JetStream at ${refused}: not ready within 5000 ms (${refused}: connection refused`,
    );
    const u = await runJcp(['channel', 'audit', '--grant', grant, '--nats', 'nats://'], { killAfterMs: 25_000 });
    expect(u.code).toBe(2);
    expect(u.stderr).toMatch(/^jcp channel: error \[usage\]: --nats: expected nats:\/\/host:port, got nats:\/\//);
  });
});
