/**
 * One caller cannot crash-loop a shared stdio upstream for free (node/endpoint.ts, attacker
 * finding: results past the 10 MiB stdio read cap closed the connection, every call in flight was
 * refunded, and the next call respawned the server; 12 calls in 30 s made 11 respawns):
 * - a result past the read cap fails that call only, as the server's error (`endpoint-failed`,
 *   charged), while the connection and a call in flight beside it carry on, with no new process;
 * - losses after the tool list was read (the server exits on some input) are backed off once they
 *   repeat (3 within 10 s by default), as losses before the list, and the back-off doubles until
 *   the upstream stays up; calls meanwhile are refused `endpoint-unavailable`, phase `start`.
 * Starts are counted by test/node/counted-server.mjs.
 */
import { afterEach, describe, expect, test } from 'vitest';
import { EndpointError, type McpStdioEndpoint, type RespawnOptions, STDIO_READ_CAP_BYTES } from '../../node/index.ts';
import { countedEndpoint } from './counted.ts';
import { tempDir } from './fixtures.ts';

const REPEATED = 'upstream lost repeatedly after its tool list was read; its next start is backed off';
const OVERSIZED = 'upstream result larger than the stdio read cap: that call failed (endpoint-failed), the connection stays up';
/** A `big` result past the cap (its JSON line is some 90 bytes more). */
const PAST_CAP = STDIO_READ_CAP_BYTES + 1024;

describe('stdio upstreams: a result past the read cap, and repeated losses after the tool list', () => {
  const work = tempDir('upstream-oversized');
  const open: McpStdioEndpoint[] = [];
  afterEach(async () => {
    for (const e of open.splice(0)) await e.close();
  });

  /** An endpoint for the counted server (its `big` and `exit` tools listed); its starts so far and its log lines. */
  const counted = (name: string, opts: RespawnOptions = {}, env: Record<string, string> = {}) =>
    countedEndpoint(work.dir, open, name, { EXTRA_TOOLS: '1', ...env }, opts);

  const failure = (p: Promise<unknown>) => p.then(() => undefined).catch((e: unknown) => e as EndpointError);
  const text = (b: Uint8Array) => new TextDecoder().decode(b);

  test("the node's reader replaced the SDK's (this SDK has the transport's _readBuffer)", async () => {
    const { endpoint } = counted('reader');
    expect(await endpoint.readsWithStdioReader()).toBe(true);
  });

  test('a result past the cap: that call endpoint-failed (naming the cap), a call in flight beside it answered, no new process', async () => {
    const { endpoint, starts, logged } = counted('big', { respawnLogEveryMs: 600_000 });
    await endpoint.start();
    expect(endpoint.toolStatus('big')).toBe('known');
    const pid = await endpoint.pid();
    const beside = endpoint.invoke('t0', { sleep_ms: 400 }).then(text, (e: unknown) => e);
    const big = await failure(endpoint.invoke('big', { bytes: PAST_CAP }));
    expect(big).toBeInstanceOf(EndpointError);
    expect(big!.code).toBe('endpoint-failed');
    expect(big!.message).toContain(`result larger than the stdio read cap of ${STDIO_READ_CAP_BYTES} bytes`);
    expect(await beside).toContain('ran t0');
    // Again, and a result just within the cap still reads.
    expect((await failure(endpoint.invoke('big', { bytes: PAST_CAP })))?.code).toBe('endpoint-failed');
    expect(text(await endpoint.invoke('big', { bytes: STDIO_READ_CAP_BYTES - 1024 })).length).toBeGreaterThan(STDIO_READ_CAP_BYTES - 1024);
    expect(text(await endpoint.invoke('t0', {}))).toContain('ran t0');
    expect(starts()).toBe(1);
    expect(await endpoint.pid()).toBe(pid);
    // One warning naming the cap (the second within the rate limit is counted, not logged).
    expect(logged(OVERSIZED)).toHaveLength(1);
    expect(logged(OVERSIZED)[0]).toMatchObject({ level: 40, cap: 'stdio-read-buffer', cap_bytes: STDIO_READ_CAP_BYTES, suppressed: 0 });
  }, 60_000);

  test('a server that exits on an input: the third loss within the window backs its start off; calls then refused (phase start), no process', async () => {
    const { endpoint, starts, logged } = counted('exits', { respawnBackoffMs: 60_000, respawnLogEveryMs: 0 });
    await endpoint.start();
    for (let i = 1; i <= 3; i++) {
      const lost = await failure(endpoint.invoke('exit', {}));
      expect([lost?.code, lost?.phase]).toEqual(['endpoint-unavailable', 'call']);
    }
    expect(starts()).toBe(3);
    for (let i = 0; i < 5; i++) {
      const refused = await failure(endpoint.invoke('t0', {}));
      expect([refused?.code, refused?.phase]).toEqual(['endpoint-unavailable', 'start']);
      expect(refused?.message).toContain('the connection closed; not started again for');
    }
    expect(starts()).toBe(3);
    expect(logged(REPEATED)).toHaveLength(1);
    expect(logged(REPEATED)[0]).toMatchObject({
      level: 40,
      reason: 'the connection closed',
      lost_within_window: 3,
      window_ms: 10_000,
      failures: 1,
      respawn_in_ms: 60_000,
    });
  }, 60_000);

  test('once backed off, each quick loss backs off again, doubled; an upstream that stayed up starts afresh', async () => {
    const { endpoint, starts, logged } = counted('streak', { respawnBackoffMs: 200, respawnLogEveryMs: 0, respawnStableMs: 1_500 });
    const exit = async (sleepMs = 0) => {
      const lost = await failure(endpoint.invoke('exit', { sleep_ms: sleepMs }));
      expect([lost?.code, lost?.phase]).toEqual(['endpoint-unavailable', 'call']);
    };
    for (let i = 0; i < 3; i++) await exit();
    expect((await failure(endpoint.invoke('t0', {})))?.phase).toBe('start');
    await new Promise((r) => setTimeout(r, 250));
    await exit();
    expect((await failure(endpoint.invoke('t0', {})))?.phase).toBe('start');
    expect(logged(REPEATED).map((l) => l['respawn_in_ms'])).toEqual([200, 400]);
    expect(starts()).toBe(4);
    await new Promise((r) => setTimeout(r, 450));
    // Up past respawnStableMs before it exits: counted afresh, not backed off.
    await exit(1_600);
    expect(text(await endpoint.invoke('t0', {}))).toContain('ran t0');
    expect(logged(REPEATED)).toHaveLength(2);
    expect(starts()).toBe(6);
  }, 60_000);

  test('losses spread wider than the window are never backed off', async () => {
    const { endpoint, starts, logged } = counted('spread', { respawnBackoffMs: 60_000, lostAfterListWindowMs: 300 });
    for (let i = 0; i < 4; i++) {
      const lost = await failure(endpoint.invoke('exit', { sleep_ms: 350 }));
      expect(lost?.phase).toBe('call');
    }
    expect(text(await endpoint.invoke('t0', {}))).toContain('ran t0');
    expect(starts()).toBe(5);
    expect(logged(REPEATED)).toHaveLength(0);
  }, 60_000);
});
