/** Node configuration and key files: bad fields are refused with the field named; keys are 0600. */
import { chmodSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { readClusterConfig } from '../../node/index.ts';
import {
  CONFIG_DEFAULTS,
  configFromJson,
  loadConfig,
  loadOrCreateKey,
  NodeFault,
  readKeyFile,
  resourceIdOf,
  startNode,
} from '../../node/index.ts';
import { cast, quiet, tempDir } from './fixtures.ts';

const { rng, alice } = cast('config');
const t = tempDir('config');
afterAll(() => t.cleanup());

function refusal(v: unknown, overrides = {}): { code: string; where: string | undefined } {
  return refused(() => configFromJson(v, overrides, t.dir));
}

function refused(fn: () => unknown): { code: string; where: string | undefined } {
  try {
    fn();
  } catch (e) {
    if (e instanceof NodeFault) return { code: e.code, where: e.where };
    throw e;
  }
  throw new Error('config was accepted');
}

describe('config', () => {
  test('abuse: the deny bucket, revocation bound and record policy default, and bad values are refused naming the field', () => {
    const c = configFromJson({}, {}, t.dir);
    expect(c.abuse).toMatchObject({
      denyBurst: CONFIG_DEFAULTS.abuseDenyBurst,
      denyRefillPerS: CONFIG_DEFAULTS.abuseDenyRefillPerS,
      maxRevocations: CONFIG_DEFAULTS.abuseMaxRevocations,
      recordPolicy: 'strict',
      recordIssuers: [],
      recordMaxBytes: CONFIG_DEFAULTS.abuseRecordMaxBytes,
    });
    expect(configFromJson({ abuse: { record_issuers: [alice.did], record_policy: 'open' } }, {}, t.dir).abuse).toMatchObject({
      recordPolicy: 'open',
      recordIssuers: [alice.did],
    });
    expect(refusal({ abuse: { record_policy: 'lax' } })).toEqual({ code: 'config-invalid', where: 'abuse.record_policy' });
    expect(refusal({ abuse: { record_issuers: ['did:key:zNope'] } })).toEqual({ code: 'config-invalid', where: 'abuse.record_issuers[0]' });
    expect(refusal({ abuse: { max_revocations: 0 } })).toEqual({ code: 'config-invalid', where: 'abuse.max_revocations' });
    expect(refusal({ abuse: { deny_burst: -1 } })).toEqual({ code: 'config-invalid', where: 'abuse.deny_burst' });
    expect(refusal({ abuse: { failure_burst: -1 } })).toEqual({ code: 'config-invalid', where: 'abuse.failure_burst' });
    expect(refusal({ abuse: { failure_refill_per_s: 1.5 } })).toEqual({ code: 'config-invalid', where: 'abuse.failure_refill_per_s' });
    expect(refusal({ abuse: { record_max_bytes: 10 } })).toEqual({ code: 'config-invalid', where: 'abuse.record_max_bytes' });
  });

  test('defaults apply to an empty config', () => {
    const c = configFromJson({}, {}, t.dir);
    expect(c.listen).toEqual({ host: '127.0.0.1', port: 7400 });
    expect(c.maxSkewS).toBe(CONFIG_DEFAULTS.maxSkewS);
    expect(c.frameCap).toBe(1 << 20);
    expect(c.stewardKey).toBe(path.join(c.dataDir, 'steward.key'));
  });

  test('snapshot.scheduling: nice by default, idle when asked', () => {
    expect(configFromJson({}, {}, t.dir).snapshot.scheduling).toBe('nice');
    expect(configFromJson({ snapshot: { scheduling: 'idle' } }, {}, t.dir).snapshot.scheduling).toBe('idle');
  });

  test('snapshot.builder: thread by default, process when asked', () => {
    expect(configFromJson({}, {}, t.dir).snapshot.builder).toBe('thread');
    expect(configFromJson({ snapshot: { builder: 'process' } }, {}, t.dir).snapshot.builder).toBe('process');
  });

  test('snapshot.pause_ms: 0 (no pause) by default, the milliseconds given when asked, up to 1000', () => {
    expect(configFromJson({}, {}, t.dir).snapshot.pauseMs).toBe(0);
    expect(configFromJson({ snapshot: { pause_ms: 25 } }, {}, t.dir).snapshot.pauseMs).toBe(25);
    expect(configFromJson({ snapshot: { pause_ms: 1000 } }, {}, t.dir).snapshot.pauseMs).toBe(1000);
  });

  test('command-line overrides win over the file', () => {
    const c = configFromJson(
      { listen: '127.0.0.1:1' },
      { listen: '127.0.0.1:2', data: 'd', metrics: '127.0.0.1:3', nats: 'nats://127.0.0.1:4222' },
      t.dir,
    );
    expect([c.listen.port, c.dataDir, c.metrics?.port, c.nats]).toEqual([2, path.join(t.dir, 'd'), 3, 'nats://127.0.0.1:4222']);
  });

  test('a resource id defaults to the content id of its name, and trust roots are per resource', () => {
    const c = configFromJson({ resources: [{ name: 'fs', trust_roots: [alice.did] }, { name: 'open' }] }, {}, t.dir);
    expect(c.resources.map((r) => [r.id, r.trustRoots])).toEqual([
      [resourceIdOf('fs'), [alice.did]],
      [resourceIdOf('open'), undefined],
    ]);
  });

  test.each([
    [{ max_skew_s: -1 }, {}, 'max_skew_s'],
    [{ max_skew_s: 1.5 }, {}, 'max_skew_s'],
    [{ frame_cap: 10 }, {}, 'frame_cap'],
    [{ listen: 'nowhere' }, {}, 'listen'],
    [{}, { listen: '127.0.0.1:99999' }, '--listen'],
    [{ nats: 'http://x' }, {}, 'nats'],
    [{ typo_field: 1 }, {}, 'typo_field'],
    [{ log: { batch_max: 0 } }, {}, 'log.batch_max'],
    [{ resources: [{ name: 'x', trust_roots: ['did:key:zNope'] }] }, {}, 'resources[0].trust_roots[0]'],
    [{ resources: [{ name: 'x', id: 'ABC' }] }, {}, 'resources[0].id'],
    [{ resources: [{ name: 'x' }, { name: 'x' }] }, {}, 'resources[1].id'],
    [{ resources: [{ name: 'x', endpoint: { kind: 'http' } }] }, {}, 'resources[0].endpoint.kind'],
    [{ resources: [{ name: 'x', endpoint: { kind: 'mcp-stdio', command: 'x', args: [1] } }] }, {}, 'resources[0].endpoint.args'],
    [{ log_level: 'loud' }, {}, 'log_level'],
    [{ snapshot: { scheduling: 'fast' } }, {}, 'snapshot.scheduling'],
    [{ snapshot: { scheduling: 19 } }, {}, 'snapshot.scheduling'],
    [{ snapshot: { builder: 'fork' } }, {}, 'snapshot.builder'],
    [{ snapshot: { builder: null } }, {}, 'snapshot.builder'],
    [{ snapshot: { pause_ms: -1 } }, {}, 'snapshot.pause_ms'],
    [{ snapshot: { pause_ms: 1001 } }, {}, 'snapshot.pause_ms'],
    [{ snapshot: { pause_ms: 2.5 } }, {}, 'snapshot.pause_ms'],
    [{ snapshot: { pause_ms: '25' } }, {}, 'snapshot.pause_ms'],
  ])('config-invalid / %j names its field', (v, o, where) => {
    expect(refusal(v, o)).toEqual({ code: 'config-invalid', where });
  });

  test('config-invalid / a bad meter section is refused at start with its field named', async () => {
    const cfg = configFromJson({ data_dir: path.join(t.dir, 'meter'), listen: '127.0.0.1:0', meter: { active_watts: -3 } }, {}, t.dir);
    const e = await startNode(cfg, { logger: quiet }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(NodeFault);
    expect([(e as NodeFault).code, (e as NodeFault).where]).toEqual(['config-invalid', 'meter.active_watts']);
  });

  test('config-invalid / a cluster section without nats is refused (it would be ignored), naming cluster', () => {
    const cluster = { channels: [{ grant_id: 'a'.repeat(64), window_uj: 5000 }] };
    expect(refusal({ cluster })).toEqual({ code: 'config-invalid', where: 'cluster' });
    expect(() => configFromJson({ cluster }, { nats: 'nats://127.0.0.1:4222' }, t.dir)).not.toThrow();
    expect(() => configFromJson({ cluster, nats: 'nats://127.0.0.1:4222' }, {}, t.dir)).not.toThrow();
    expect(() => configFromJson({ cluster: {} }, {}, t.dir)).not.toThrow(); // empty: nothing ignored
  });

  test('config-invalid / a channel window_uj over 64 bits is refused (energy amounts are uint64)', () => {
    const channel = (window_uj: unknown) => ({ channels: [{ grant_id: 'a'.repeat(64), window_uj }] });
    for (const w of ['18446744073709551616', '99999999999999999999999999']) {
      expect(refused(() => readClusterConfig(channel(w)))).toEqual({ code: 'config-invalid', where: 'cluster.channels[0].window_uj' });
    }
    expect(readClusterConfig(channel('18446744073709551615')).channels[0]!.windowUj).toBe((1n << 64n) - 1n);
    expect(readClusterConfig(channel(5000)).channels[0]!.windowUj).toBe(5000n);
  });

  test('cluster.stream_cluster: a NATS cluster name is kept; anything else is config-invalid naming it', () => {
    expect(readClusterConfig({ stream_cluster: 'a' }).streamCluster).toBe('a');
    expect(readClusterConfig({}).streamCluster).toBeUndefined();
    for (const bad of ['', 'a b', 'x'.repeat(65), 7, 'a.b']) {
      expect(refused(() => readClusterConfig({ stream_cluster: bad }))).toEqual({
        code: 'config-invalid',
        where: 'cluster.stream_cluster',
      });
    }
  });

  test('config-invalid / a config file over 4 MiB is refused without reading it all, naming the file', () => {
    const f = path.join(t.dir, 'huge.json');
    writeFileSync(f, '');
    truncateSync(f, (4 << 20) + 1);
    expect(refused(() => loadConfig(f))).toEqual({ code: 'config-invalid', where: f });
    expect(() => loadConfig(f)).toThrow(/larger than 4 MiB, the most a config file may be/);
  });

  test('config-invalid / a file that is not JSON names the file', () => {
    const f = path.join(t.dir, 'bad.json');
    writeFileSync(f, '{ nope');
    expect(() => loadConfig(f)).toThrow(NodeFault);
    try {
      loadConfig(f);
    } catch (e) {
      expect((e as NodeFault).where).toBe(f);
    }
  });
});

describe('key files', () => {
  test('the steward key is created with mode 0600 on first start and reused after', () => {
    const f = path.join(t.dir, 'keys', 'steward.key');
    const first = loadOrCreateKey(f, rng);
    expect(first.created).toBe(true);
    expect(statSync(f).mode & 0o777).toBe(0o600);
    const again = loadOrCreateKey(f, rng);
    expect(again.created).toBe(false);
    expect(again.actor.did).toBe(first.actor.did);
  });

  test('key-file-invalid / a key others can read is refused', () => {
    const f = path.join(t.dir, 'open.key');
    loadOrCreateKey(f, rng);
    chmodSync(f, 0o644);
    expect(() => readKeyFile(f)).toThrow(/chmod 600/);
  });

  test('key-file-invalid / content is checked before the mode: another kind of file is "not a key file"', () => {
    const f = path.join(t.dir, 'chain.json');
    writeFileSync(f, JSON.stringify({ type: 'jcp-chain', chain: [] }), { mode: 0o644 });
    chmodSync(f, 0o644);
    expect(refused(() => readKeyFile(f))).toEqual({ code: 'key-file-invalid', where: f });
    expect(() => readKeyFile(f)).toThrow(/not a key file/);
    writeFileSync(f, 'plain text');
    expect(() => readKeyFile(f)).toThrow(/not a key file \(not JSON\)/);
  });

  test('key-file-invalid / a key file over 64 KiB is refused without reading it all', () => {
    const f = path.join(t.dir, 'huge.key');
    writeFileSync(f, '', { mode: 0o600 });
    truncateSync(f, 1 << 20); // sparse: nothing on disk
    expect(refused(() => readKeyFile(f))).toEqual({ code: 'key-file-invalid', where: f });
    expect(() => readKeyFile(f)).toThrow(/larger than 64 KiB, the most a key file may be/);
  });

  test('key-file-invalid / a key whose did does not match its seed is refused', () => {
    const f = path.join(t.dir, 'mismatch.key');
    const { actor } = loadOrCreateKey(f, rng);
    writeFileSync(f, JSON.stringify({ type: 'jcp-ed25519-seed', seed: Buffer.from(actor.key.seed).toString('hex'), did: alice.did }), {
      mode: 0o600,
    });
    let code: string | undefined;
    try {
      readKeyFile(f);
    } catch (e) {
      code = (e as NodeFault).code;
    }
    expect(code).toBe('key-file-invalid');
  });
});

describe('start faults', () => {
  test('listen-failed / a port already in use stops the node with a typed error', async () => {
    const { liveNode } = await import('./fixtures.ts');
    const a = await liveNode();
    const e = await liveNode({ listen: `127.0.0.1:${a.port}` }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(NodeFault);
    expect((e as NodeFault).code).toBe('listen-failed');
    await a.cleanup();
  });
});
