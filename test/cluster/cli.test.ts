/**
 * The cluster's command line: `jcp cluster up|status|down`, `jcp channel audit`, `jcp shards
 * mint|show`, and the node config's `cluster` section.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { actorFromSeed, contentId, grantId, seededRng, signGrant } from '../../core/index.ts';
import { writeChainFile } from '../../client/index.ts';
import { JCP_BIN } from '../../testkit/internal.ts';
import { readClusterConfig, writeKeyFile } from '../../node/index.ts';

const dirs: string[] = [];
const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), 'jcp-cli-cluster-'));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) {
    if (existsSync(join(d, 'cluster', 'cluster.json'))) jcp(['cluster', 'down', '--dir', join(d, 'cluster')]);
    rmSync(d, { recursive: true, force: true });
  }
});

function jcp(args: string[]): { code: number; out: string; err: string } {
  const r = spawnSync(process.execPath, [JCP_BIN, ...args], { encoding: 'utf8', timeout: 60_000 });
  return { code: r.status ?? -1, out: r.stdout, err: r.stderr };
}

describe('node config - the cluster section', () => {
  it('defaults to subject root jcp, one replica and no channels', () => {
    expect(readClusterConfig(undefined)).toEqual({
      subjectRoot: 'jcp',
      replicas: 1,
      settleIntervalMs: 250,
      revocationCatchUpMs: 5_000,
      channels: [],
      checkpointEveryMs: 5_000,
      checkpointEveryReceipts: 1_000,
    });
  });

  it('reads a channel with its window in µJ', () => {
    const id = contentId({ g: 1 });
    expect(readClusterConfig({ channels: [{ grant_id: id, window_uj: '5000' }] }).channels).toEqual([{ grantId: id, windowUj: 5_000n }]);
  });

  it.each([
    [{ chanels: [] }, 'cluster.chanels'],
    [{ channels: [{ grant_id: 'nope', window_uj: 1 }] }, 'cluster.channels[0].grant_id'],
    [{ channels: [{ grant_id: contentId({ g: 1 }), window_uj: -1 }] }, 'cluster.channels[0].window_uj'],
    [{ subject_root: 'Bad Root' }, 'cluster.subject_root'],
    [{ replicas: 0 }, 'cluster.replicas'],
  ])('refuse / config-invalid / %j names %s', (cfg, where) => {
    expect(() => readClusterConfig(cfg)).toThrow(where);
  });
});

describe('jcp cluster, channel and shards', () => {
  it('up starts nodes that answer, status sees them, audit reads an empty channel, down stops them', () => {
    const root = tmp();
    const dir = join(root, 'cluster');
    const up = jcp(['cluster', 'up', '--nodes', '2', '--dir', dir]);
    expect(up.code).toBe(0);
    expect(up.out).toMatch(/n1 +jcp\/1 127\.0\.0\.1:\d+/);
    const state = JSON.parse(readFileSync(join(dir, 'cluster.json'), 'utf8')) as { nats: { urls: string }; nodes: unknown[] };
    expect(state.nodes.length).toBe(2);
    const status = jcp(['cluster', 'status', '--dir', dir]);
    expect(status.out.match(/healthy/g)?.length).toBe(2);
    const audit = jcp(['channel', 'audit', '--grant', contentId({ g: 'none' }), '--nats', state.nats.urls, '--budget', '10']);
    expect([audit.code, /total +0 µJ over 0 point/.test(audit.out)]).toEqual([0, true]);
    const down = jcp(['cluster', 'down', '--dir', dir]);
    expect(down.out).toMatch(/stopped 3 process/);
    expect(jcp(['cluster', 'status', '--dir', dir]).code).toBe(2);
  }, 120_000);

  it('shards mint writes a manifest and one chain file per slice; over 100% is refused', () => {
    const dir = tmp();
    const rng = seededRng('cli/shards');
    const issuer = actorFromSeed(rng(32));
    const holder = actorFromSeed(rng(32));
    writeKeyFile(join(dir, 'holder.key'), holder);
    const parent = signGrant(
      {
        issuer: issuer.did,
        subject: holder.did,
        capability: { resource: contentId({ r: 1 }), actions: ['call'] },
        budget_uj: 1_000n,
        expiry: 0,
        nonce: rng(16),
      },
      issuer,
    );
    writeChainFile(join(dir, 'parent.json'), [parent]);
    const out = join(dir, 'shards');
    const r = jcp([
      'shards',
      'mint',
      '--parent',
      join(dir, 'parent.json'),
      '--key',
      join(dir, 'holder.key'),
      '--split',
      'a=40%,b=30%,c=30%',
      '--out',
      out,
    ]);
    expect(r.code).toBe(0);
    const m = JSON.parse(readFileSync(join(out, 'shards.json'), 'utf8')) as { parent_id: string; shards: { budget_uj: string }[] };
    expect([m.parent_id, m.shards.map((s) => s.budget_uj)]).toEqual([grantId(parent.grant), ['400', '300', '300']]);
    expect(['a', 'b', 'c'].every((n) => existsSync(join(out, `shard-${n}.json`)))).toBe(true);
    const over = jcp([
      'shards',
      'mint',
      '--parent',
      join(dir, 'parent.json'),
      '--key',
      join(dir, 'holder.key'),
      '--split',
      'a=60%,b=50%',
      '--out',
      join(dir, 'x'),
    ]);
    expect([over.code, /over-sum/.test(over.err)]).toEqual([1, true]);
    expect(jcp(['shards', 'show', '--shards', out]).out).toMatch(/live +a +400 µJ/);
  }, 60_000);
});
