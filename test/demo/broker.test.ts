/**
 * Which NATS the demo uses: the one that answers on the default url, else a nats-server it starts
 * on a free loopback port, else none (with the reason), and a url the user names must answer
 * (a listener that is not NATS is refused in seconds, leaving no socket open).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULT_NATS_URL, findBroker, natsAnswers, natsProblem } from '../../demo/index.ts';
import { freePort } from '../../testkit/index.ts';
import { silentListener } from '../listeners.ts';

const dirs: string[] = [];
const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), 'jcp-demo-broker-'));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('demo broker - finding NATS', () => {
  it('uses the NATS with JetStream that answers on 127.0.0.1:4222', async () => {
    const b = await findBroker({ dir: tmp() });
    expect(b).toEqual({ mode: 'external', url: DEFAULT_NATS_URL });
  });

  it('starts a nats-server on a free loopback port when nothing answers, and it stops', async () => {
    const silent = `nats://127.0.0.1:${await freePort()}`;
    const b = await findBroker({ dir: tmp(), defaultUrl: silent });
    expect(b.mode).toBe('started');
    if (b.mode !== 'started') return;
    try {
      expect(b.url).toMatch(/^nats:\/\/127\.0\.0\.1:\d+$/);
      expect(b.url).not.toBe(silent);
      expect(await natsAnswers(b.url)).toBe(true);
    } finally {
      await b.server.stop();
    }
    expect(await natsAnswers(b.url, 500)).toBe(false);
  });

  it('none / nothing answers and no nats-server is installed: says why', async () => {
    const silent = `nats://127.0.0.1:${await freePort()}`;
    const b = await findBroker({ dir: tmp(), defaultUrl: silent, natsServerBin: null });
    expect(b).toEqual({ mode: 'none', why: `nothing answers on ${silent} and no nats-server binary was found` });
  });

  it('none / run with --no-nats', async () => {
    expect(await findBroker({ dir: tmp(), disabled: true })).toEqual({ mode: 'none', why: 'run with --no-nats' });
  });

  it('refuse / a url the user names must answer', async () => {
    const silent = `nats://127.0.0.1:${await freePort()}`;
    await expect(findBroker({ dir: tmp(), url: silent })).rejects.toThrow(`no NATS with JetStream answers at ${silent}`);
  });

  it('refuse / a url that leads to a listener that never speaks NATS: nats-unavailable naming the greeting timeout, no socket left open', async () => {
    const l = await silentListener();
    try {
      const err = await findBroker({ dir: tmp(), url: l.url }).then(
        () => undefined,
        (e: unknown) => e as Error & { code?: string },
      );
      expect(err?.code).toBe('nats-unavailable');
      expect(err?.message).toBe(
        `no NATS with JetStream answers at ${l.url}: accepts connections but sent no NATS greeting within 1500 ms (is it a NATS server?)`,
      );
      // The NATS client alone left this connection open, which kept `jcp demo` from exiting.
      expect(await l.drained(1_000)).toBe(true);
      expect(await natsAnswers(l.url, 200)).toBe(false);
      expect(await l.drained(1_000)).toBe(true);
    } finally {
      await l.close();
    }
  });

  it('natsProblem says why: nothing listens, not NATS, NATS without JetStream is told apart', async () => {
    expect(await natsProblem(DEFAULT_NATS_URL)).toBeUndefined();
    const refused = `nats://127.0.0.1:${await freePort()}`;
    expect(await natsProblem(refused, 300)).toBe('connection refused (nothing listens there)');
  });

  it('refuse / a url the user names must be loopback', async () => {
    await expect(findBroker({ dir: tmp(), url: 'nats://10.0.0.1:4222' })).rejects.toThrow('expected a loopback nats:// url');
  });
});
