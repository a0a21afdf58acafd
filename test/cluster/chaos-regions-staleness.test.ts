/**
 * The multi-region chaos target configures its nodes with the runner's `--revocation-staleness`
 * (`revocation_staleness_s` in each node.json): the runner counts allows of the revoked grant
 * after that limit, so the nodes must stop allowing at the same limit (they used to keep the node
 * default, 30 s, while the runner counted from 10 s).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { actorFromSeed, seededRng } from '../../core/index.ts';
import { startChaosCluster } from '../../chaos/index.ts';

describe('chaos across regions: the staleness limit', () => {
  it('every node gets revocation_staleness_s = --revocation-staleness', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'jcp-chaos-stale-'));
    const rng = seededRng('chaos-stale');
    const plan = {
      seeds: [rng(32), rng(32)],
      subjectRoot: 'jcpstale',
      issuer: actorFromSeed(rng(32)),
      rootId: 'ab'.repeat(32),
      window: 1000n,
    };
    const c = await startChaosCluster(
      { regions: 2, nodes: 2, mode: 'shards', rttMs: 2, revocationStalenessS: 7 } as never,
      plan,
      dir,
      () => {},
    );
    try {
      for (const r of ['a', 'b']) {
        const cfg = JSON.parse(readFileSync(join(dir, r, 'n1', 'node.json'), 'utf8')) as Record<string, unknown>;
        expect(cfg['revocation_staleness_s']).toBe(7);
      }
    } finally {
      await c.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
