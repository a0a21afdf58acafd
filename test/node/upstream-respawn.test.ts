/**
 * A stdio upstream lost before its tool list was read is not respawned at every ask
 * (node/endpoint.ts, attacker finding: a server listing 100,000 tools, one 26 MB line past the
 * client's 10 MiB stdio read buffer, was restarted every few seconds with no reason logged): the
 * reason is logged (the cap that fired and its size), at most once per start and rate-limited, and
 * the next start is backed off, so list checks and calls meanwhile are refused
 * `endpoint-unavailable` (phase `start`: charged nothing) without a new process. Starts are counted
 * by test/node/counted-server.mjs.
 */
import { afterEach, describe, expect, test } from 'vitest';
import { EndpointError, type McpStdioEndpoint, type RespawnOptions } from '../../node/index.ts';
import { countedEndpoint } from './counted.ts';
import { tempDir } from './fixtures.ts';

const LOST = 'upstream lost before its tool list was read; its next start is backed off';

describe('stdio upstreams lost before their tool list: the reason logged, restarts backed off', () => {
  const work = tempDir('upstream-respawn');
  const open: McpStdioEndpoint[] = [];
  afterEach(async () => {
    for (const e of open.splice(0)) await e.close();
  });

  /** An endpoint for the counted server with `env`; its starts so far and its log lines. */
  const counted = (name: string, env: Record<string, string>, opts: RespawnOptions) => {
    const c = countedEndpoint(work.dir, open, name, env, opts);
    return { ...c, lost: () => c.logged(LOST) };
  };

  test('100,000 tools (a 26 MB line past the 10 MiB read cap): one start, the cap named once, checks and calls refused until the back-off ends', async () => {
    const { endpoint, starts, lost } = counted('huge', { TOOLS: '100000' }, { respawnBackoffMs: 60_000 });
    await endpoint.start();
    expect(endpoint.tools()).toBeUndefined();
    for (let i = 0; i < 3; i++) await endpoint.ensureTools();
    const refused = await endpoint.invoke('t0', {}).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(EndpointError);
    expect((refused as EndpointError).code).toBe('endpoint-unavailable');
    expect((refused as EndpointError).phase).toBe('start');
    expect((refused as EndpointError).message).toContain('longer than the stdio read cap of 10485760 bytes');
    expect(starts()).toBe(1);
    expect(lost()).toHaveLength(1);
    expect(lost()[0]).toMatchObject({
      level: 40,
      reason: 'the server sent a message longer than the stdio read cap of 10485760 bytes',
      cap: 'stdio-read-buffer',
      cap_bytes: 10485760,
      failures: 1,
      respawn_in_ms: 60_000,
    });
  }, 60_000);

  test('a start lost at every try: one warning per start at most, rate-limited (the rest counted in the next)', async () => {
    const { endpoint, starts, lost } = counted('crashes', { CRASH_ON_LIST: '1' }, { respawnBackoffMs: 0, respawnLogEveryMs: 600_000 });
    await endpoint.start();
    const refused = await endpoint.invoke('t0', {}).catch((e: unknown) => e);
    expect((refused as EndpointError).code).toBe('endpoint-unavailable');
    // One start, then a call's three connect attempts: four lost starts, one warning.
    expect(starts()).toBe(4);
    expect(lost()).toHaveLength(1);
    expect(lost()[0]).toMatchObject({ reason: 'the connection closed', failures: 1, suppressed: 0 });
  }, 60_000);
});
