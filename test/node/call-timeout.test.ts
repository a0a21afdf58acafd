/**
 * `jcp call` and JcpClient against a port that accepts and never answers: a per-call timeout
 * (code `timeout`) instead of a hang; and `--payload-file F|-` for payloads too large for a shell
 * argument, sent byte for byte (seen by a capturing listener that decodes the request).
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runJcpInProcess } from '../support.ts';
import { decodeWireMessage, frameMessage, FrameReader, type WireRequest } from '../../core/index.ts';
import { JCP_BIN } from '../../testkit/internal.ts';
import { CallTimeout, JcpClient } from '../../client/index.ts';
import { fakeListener, type FakeListener, silentListener } from '../listeners.ts';
import { cast, mint, tempDir } from './fixtures.ts';

const { rng, alice, bob } = cast('call-timeout');

/** The `jcp` command run in this process (test/support.ts). */
const jcp = (...argv: string[]) => runJcpInProcess(argv);

/** A listener that decodes every jcp/1 request it gets and never answers. */
async function capturingListener(): Promise<FakeListener & { requests: WireRequest[] }> {
  const requests: WireRequest[] = [];
  const l = await fakeListener((s) => {
    const reader = new FrameReader(128 << 20);
    s.on('data', (chunk: Buffer) => {
      for (const body of reader.read(new Uint8Array(chunk)).bodies) {
        const m = decodeWireMessage(body);
        if (m.kind === 'request') requests.push(m.request);
      }
    });
  });
  return Object.assign(l, { requests });
}

describe('client - timeout', () => {
  test('timeout / a port that accepts and never answers: the call fails CallTimeout (code timeout), carrying its request', async () => {
    const l = await silentListener();
    const c = await JcpClient.connect({ host: '127.0.0.1', port: l.port, signer: bob });
    const g = mint(alice, bob, 'tools', ['read'], 100n, rng);
    const e = await c.call({ chain: [g], action: 'read', timeoutS: 0.2 }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(CallTimeout);
    expect((e as CallTimeout).code).toBe('timeout');
    expect((e as CallTimeout).timeoutS).toBe(0.2);
    expect((e as CallTimeout).request?.frame.action).toBe('read');
    await c.close();
    await l.close();
  });

  test('timeout / the client-wide timeoutS applies to every call; a bad one is a RangeError', async () => {
    const l = await silentListener();
    const c = await JcpClient.connect({ host: '127.0.0.1', port: l.port, signer: bob, timeoutS: 0.2 });
    const e = await c.roundTrip(Uint8Array.of(0xa0)).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(CallTimeout);
    await c.close();
    await l.close();
    await expect(JcpClient.connect({ host: '127.0.0.1', port: l.port, timeoutS: 0 })).rejects.toThrow(RangeError);
  });

  test('after a timeout the connection is replaced: the next call gets its own reply, not the late one', async () => {
    let connection = 0;
    const l = await fakeListener((s) => {
      // The first connection never answers; later ones echo each request body as the reply.
      if (++connection === 1) return;
      const reader = new FrameReader(1 << 20);
      s.on('data', (chunk: Buffer) => {
        for (const body of reader.read(new Uint8Array(chunk)).bodies) s.write(frameMessage(body));
      });
    });
    const c = await JcpClient.connect({ host: '127.0.0.1', port: l.port, reconnectDelayMs: 10 });
    const first = await c.roundTrip(Uint8Array.of(0xa1, 0x61, 0x61, 0x01), 0.2).catch((x: unknown) => x);
    expect(first).toBeInstanceOf(CallTimeout);
    const second = await c.roundTrip(Uint8Array.of(0xa1, 0x61, 0x62, 0x02), 5);
    expect([...second]).toEqual([0xa1, 0x61, 0x62, 0x02]);
    expect(connection).toBe(2);
    await c.close();
    await l.close();
  });
});

describe('jcp call - timeout and payload file', () => {
  const t = tempDir('call-timeout');
  const f = (n: string) => path.join(t.dir, n);
  let l: Awaited<ReturnType<typeof capturingListener>>;
  beforeAll(async () => {
    l = await capturingListener();
    expect((await jcp('key', 'new', '--out', f('k.key'))).code).toBe(0);
    expect(
      (
        await jcp(
          'grant',
          'mint',
          '--key',
          f('k.key'),
          '--subject',
          f('k.key'),
          '--resource',
          'r',
          '--actions',
          'a',
          '--budget',
          '5',
          '--out',
          f('g.json'),
        )
      ).code,
    ).toBe(0);
  });
  afterAll(async () => {
    await l.close();
    t.cleanup();
  });
  const call = (...extra: string[]) =>
    jcp('call', '--node', `127.0.0.1:${l.port}`, '--chain', f('g.json'), '--key', f('k.key'), '--action', 'a', ...extra);

  test('timeout / jcp call --timeout-s against a silent port exits 1 with error [timeout]', async () => {
    const r = await call('--timeout-s', '0.3');
    expect(r.code).toBe(1);
    expect(r.err).toMatch(
      /^jcp call: error \[timeout\]: node 127\.0\.0\.1:\d+ did not answer within 0\.3 s \(--timeout-s\); it may still decide the request/,
    );
  });

  test('usage / --timeout-s must be seconds > 0; --payload and --payload-file together are refused', async () => {
    for (const bad of ['0', '-1', 'soon', '1e3']) expect((await call('--timeout-s', bad)).code).toBe(2);
    writeFileSync(f('p.json'), '{}');
    const both = await call('--payload', '{}', '--payload-file', f('p.json'));
    expect([both.code, both.err.split('\n')[0]]).toEqual([2, 'jcp call: error [usage]: give --payload or --payload-file, not both']);
  });

  test('--payload-file sends the file bytes exactly, too large for a command line', async () => {
    const big = `{"text": "${'x'.repeat(3 << 20)}", "n": 1}\n`;
    writeFileSync(f('big.json'), big);
    const before = l.requests.length;
    const r = await call('--payload-file', f('big.json'), '--timeout-s', '3');
    expect(r.err).toMatch(/error \[timeout\]/);
    const sent = l.requests[before]!;
    expect(Buffer.from(sent.payload!).toString('utf8')).toBe(big);
  });

  test('--payload-file refuses what --payload refuses, naming the flag; an endless file is refused [io]', async () => {
    writeFileSync(f('bad.json'), '{"n": 12345678901234567890123}');
    const inexact = await call('--payload-file', f('bad.json'));
    expect(inexact.code).toBe(2);
    expect(inexact.err).toMatch(
      /^jcp call: error \[usage\]: --payload-file: the number 12345678901234567890123 cannot be represented exactly/,
    );
    const zero = await call('--payload-file', '/dev/zero');
    expect(zero.code).toBe(1);
    expect(zero.err).toMatch(/^jcp call: error \[io\]: payload file \/dev\/zero: larger than 64 MiB/);
  });

  test('--payload-file - reads the payload from standard input', async () => {
    const before = l.requests.length;
    const child = spawn(
      process.execPath,
      [
        JCP_BIN,
        'call',
        '--node',
        `127.0.0.1:${l.port}`,
        '--chain',
        f('g.json'),
        '--key',
        f('k.key'),
        '--action',
        'a',
        '--payload-file',
        '-',
        '--timeout-s',
        '2',
      ],
      {
        stdio: ['pipe', 'pipe', 'pipe'],
      },
    );
    let err = '';
    child.stderr.on('data', (d: Buffer) => {
      err += d.toString();
    });
    child.stdin.end('{"from": "stdin"}');
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(code, err).toBe(1);
    expect(err).toMatch(/error \[timeout\]/);
    expect(Buffer.from(l.requests[before]!.payload!).toString('utf8')).toBe('{"from": "stdin"}');
  }, 60_000);
});
