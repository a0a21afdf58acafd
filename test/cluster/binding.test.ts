/**
 * Shards bound to their points (spec §4.5 baseline: "one per enforcement point. Each point then
 * enforces only its own shard"): `jcp shards mint --cluster` assigns each shard to its node over
 * the shard assignment stream, and every node refuses a shard that is not its own, so the shards'
 * sum is a hard limit. Also: `shards mint` never overwrites a manifest, rebalance refuses to
 * re-issue after an overspend, and every error line is `jcp shards: error [code]: …`.
 *
 * Real `jcp` processes (cluster up, shards mint|rebalance) and real nodes on their own NATS.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Actor,
  actorFromSeed,
  contentId,
  DenyReasons,
  type Did,
  grantId,
  seededRng,
  type SignedGrant,
  signGrant,
} from '../../core/index.ts';
import { readChainFile, writeChainFile } from '../../client/index.ts';
import { JCP_BIN } from '../../testkit/internal.ts';
import { resourceIdOf } from '../../node/index.ts';
import { JcpClient } from '../../client/index.ts';
import { writeKeyFile } from '../../node/index.ts';
import { ShardBindings, signShardAssignment } from '../../shards/index.ts';

const rng = seededRng('shards/binding');
const actor = (): Actor => actorFromSeed(rng(32));

function jcp(args: string[]): { code: number; out: string; err: string } {
  const r = spawnSync(process.execPath, [JCP_BIN, ...args], { encoding: 'utf8', timeout: 90_000 });
  return { code: r.status ?? -1, out: r.stdout, err: r.stderr };
}

function rootGrant(issuer: Actor, holder: Actor, budgetUj: bigint, resource = resourceIdOf('cluster')): SignedGrant {
  return signGrant(
    {
      issuer: issuer.did,
      subject: holder.did,
      capability: { resource, actions: ['call'] },
      budget_uj: budgetUj,
      expiry: 0,
      nonce: rng(16),
    },
    issuer,
  );
}

function child(parent: SignedGrant, holder: Actor, subject: Actor, budgetUj: bigint): SignedGrant {
  return signGrant(
    {
      issuer: holder.did,
      subject: subject.did,
      capability: parent.grant.capability,
      budget_uj: budgetUj,
      expiry: 0,
      parent: grantId(parent.grant),
      nonce: rng(16),
    },
    holder,
  );
}

describe('shards - ShardBindings (the check each node makes)', () => {
  const issuer = actor();
  const holder = actor();
  const [p1, p2] = [actor(), actor()];
  const root = rootGrant(issuer, holder, 1_000n, contentId({ r: 'binding' }));
  const a = child(root, holder, holder, 500n);
  const b = child(root, holder, holder, 500n);
  const ids = (chain: SignedGrant[]) => chain.map((g) => grantId(g.grant));
  const assign = (shards: { grant_id: string; point: Did }[]) =>
    signShardAssignment({ parent_id: grantId(root.grant), holder: holder.did, generation: 1, shards }, holder);
  const ready = () => {
    const s = new ShardBindings();
    s.markReady();
    expect(
      s.take(
        assign([
          { grant_id: grantId(a.grant), point: p1.did },
          { grant_id: grantId(b.grant), point: p2.did },
        ]),
      ).ok,
    ).toBe(true);
    return s;
  };

  it('allow / its own shard, and a root-only chain', () => {
    const s = ready();
    expect(s.check([root, a], ids([root, a]), p1.did, 10n)).toBeUndefined();
    expect(s.check([root], ids([root]), p1.did, 10n)).toBeUndefined();
  });

  it('allow / the continuation of a steered shard at its shard’s point only (break12 F9)', () => {
    const s = ready();
    const cont = child(root, holder, holder, 500n); // a sibling of shard a, as §4.7 re-issues it
    const steering = { origin: (id: string) => (id === grantId(cont.grant) ? { steeredId: grantId(a.grant) } : undefined) };
    expect(s.check([root, cont], ids([root, cont]), p1.did, 10n)?.why).toMatch(/not-in-set/);
    s.steering = steering;
    expect(s.check([root, cont], ids([root, cont]), p1.did, 10n)).toBeUndefined();
    expect(s.check([root, cont], ids([root, cont]), p2.did, 10n)?.why).toMatch(/assigned-elsewhere/);
  });

  it('deny / budget-exceeded / a sibling shard assigned to another point', () => {
    const d = ready().check([root, b], ids([root, b]), p1.did, 10n);
    expect(d).toMatchObject({ reason: DenyReasons.BUDGET_EXCEEDED, link: 1, requestedUj: 10n, remainingUj: 0n });
    expect(d?.why).toMatch(/assigned-elsewhere/);
  });

  it('deny / budget-exceeded / a child of a sharded parent that is not in the set, even delegated further', () => {
    const other = child(root, holder, holder, 100n);
    const worker = actor();
    const leaf = child(other, holder, worker, 50n);
    expect(ready().check([root, other, leaf], ids([root, other, leaf]), p1.did, 1n)?.why).toMatch(/not-in-set/);
    const own = child(a, holder, worker, 50n);
    expect(ready().check([root, a, own], ids([root, a, own]), p1.did, 1n)).toBeUndefined();
  });

  it('deny / budget-exceeded / any delegated chain before the assignments are read', () => {
    const s = new ShardBindings();
    expect(s.check([root, a], ids([root, a]), p1.did, 1n)?.why).toMatch(/assignments-not-read/);
    s.markReady();
    expect(s.check([root, a], ids([root, a]), p1.did, 1n)).toBeUndefined();
  });

  it('deny / budget-exceeded / a shard before the point knows its own did; other chains pass', () => {
    expect(ready().check([root, a], ids([root, a]), undefined, 1n)?.why).toMatch(/not-attached/);
    const plain = rootGrant(issuer, holder, 10n, contentId({ r: 'other' }));
    const plainChild = child(plain, holder, holder, 5n);
    expect(ready().check([plain, plainChild], ids([plain, plainChild]), undefined, 1n)).toBeUndefined();
  });

  it('refuse / forged / an assignment not signed by its holder is not applied', () => {
    const s = new ShardBindings();
    s.markReady();
    const sa = assign([{ grant_id: grantId(a.grant), point: p2.did }]);
    const forged = { ...sa, signature: signShardAssignment(sa.body, holder).signature.map((x, i) => (i === 0 ? x ^ 1 : x)) };
    expect(s.take(forged)).toMatchObject({ ok: false, error: { code: 'forged' } });
    expect(s.check([root, a], ids([root, a]), p1.did, 1n)).toBeUndefined();
  });
});

describe('jcp shards - bound to their nodes on a live cluster', () => {
  let dir: string;
  let clusterDir: string;
  let state: { nodes: { did: string; address: string; pid: number }[] };
  const issuer = actor();
  const holder = actor();
  const clients: JcpClient[] = [];
  let n = 0;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'jcp-shards-bind-'));
    clusterDir = join(dir, 'cluster');
    const up = jcp(['cluster', 'up', '--nodes', '3', '--dir', clusterDir]);
    if (up.code !== 0) throw new Error(`cluster up: ${up.err}`);
    state = JSON.parse(readFileSync(join(clusterDir, 'cluster.json'), 'utf8'));
    for (const node of state.nodes) {
      const [host, port] = node.address.split(':');
      clients.push(await JcpClient.connect({ host: host!, port: Number(port), signer: holder }));
    }
    writeKeyFile(join(dir, 'bob.key'), holder);
  }, 120_000);

  afterAll(async () => {
    for (const c of clients) await c.close();
    if (existsSync(join(clusterDir, 'cluster.json'))) jcp(['cluster', 'down', '--dir', clusterDir]);
    rmSync(dir, { recursive: true, force: true });
  });

  async function spend(node: number, chain: SignedGrant[], costUj: bigint) {
    const r = await clients[node]!.call({
      chain,
      action: 'call',
      payload: new TextEncoder().encode(`bind ${n++}`),
      cost: { uj: costUj, provenance: 'Estimator' },
    });
    return r.decision;
  }

  async function allowsOf(
    node: number,
    chain: SignedGrant[],
    calls: number,
    costUj: bigint,
  ): Promise<{ allows: number; reasons: Set<string> }> {
    let allows = 0;
    const reasons = new Set<string>();
    for (let i = 0; i < calls; i++) {
      const d = await spend(node, chain, costUj);
      if (d.verdict === 'allow') allows++;
      else reasons.add(d.deny_reason ?? '');
    }
    return { allows, reasons };
  }

  it('a shard is spent only at its own node: 50 calls of 10,000 µJ at each node allow 36, all at n1', async () => {
    writeChainFile(join(dir, 'sh.chain.json'), [rootGrant(issuer, holder, 900_000n)]);
    const out = join(dir, 'shards');
    const mint = jcp([
      'shards',
      'mint',
      '--parent',
      join(dir, 'sh.chain.json'),
      '--key',
      join(dir, 'bob.key'),
      '--split',
      'a=40%,b=30%,c=30%',
      '--cluster',
      clusterDir,
      '--out',
      out,
    ]);
    expect([mint.code, mint.err]).toEqual([0, '']);
    const a = readChainFile(join(out, 'shard-a.json'));
    const b = readChainFile(join(out, 'shard-b.json'));

    const atN1 = await allowsOf(0, a, 50, 10_000n);
    const atN2 = await allowsOf(1, a, 50, 10_000n);
    const atN3 = await allowsOf(2, a, 50, 10_000n);
    expect([atN1.allows, atN2.allows, atN3.allows]).toEqual([36, 0, 0]);
    expect([...atN2.reasons, ...atN3.reasons]).toEqual([DenyReasons.BUDGET_EXCEEDED, DenyReasons.BUDGET_EXCEEDED]);
    expect((await spend(1, b, 10_000n)).verdict).toBe('allow');
    expect((await spend(0, b, 10_000n)).verdict).toBe('deny');
    expect(mint.out).toMatch(/assigned: each of the 3 node\(s\) refuses every shard but its own/);

    // Rebalance: the consumed record is what the owning nodes spent; the new shards are bound too.
    const reb = jcp(['shards', 'rebalance', '--shards', out, '--key', join(dir, 'bob.key'), '--cluster', clusterDir, '--timeout', '20000']);
    expect([reb.code, reb.err]).toEqual([0, '']);
    const show = jcp(['shards', 'show', '--shards', out]);
    expect(show.out).toMatch(/generation 2, consumed 370000 µJ/);
    const a2 = readChainFile(join(out, 'shard-a.json'));
    expect(grantId(a2[1]!.grant)).not.toBe(grantId(a[1]!.grant));
    expect((await spend(1, a2, 1_000n)).deny_reason).toBe(DenyReasons.BUDGET_EXCEEDED);
    expect((await spend(0, a2, 1_000n)).verdict).toBe('allow');
  }, 180_000);

  it('mint --out over an existing manifest is refused and writes nothing', () => {
    const out = join(dir, 'shards');
    const before = readFileSync(join(out, 'shards.json'), 'utf8');
    const again = jcp([
      'shards',
      'mint',
      '--parent',
      join(dir, 'sh.chain.json'),
      '--key',
      join(dir, 'bob.key'),
      '--split',
      'a=50%,b=50%',
      '--out',
      out,
    ]);
    expect(again.code).toBe(1);
    expect(again.err).toMatch(/^jcp shards: error \[refused\]: .*shards\.json exists: refusing to overwrite/);
    expect(readFileSync(join(out, 'shards.json'), 'utf8')).toBe(before);
    expect(jcp(['shards', 'show', '--shards', out]).out).toMatch(/generation 2, consumed 370000 µJ/);
  }, 60_000);

  it('error lines read `jcp shards: error [code]: …`', () => {
    const over = jcp([
      'shards',
      'mint',
      '--parent',
      join(dir, 'sh.chain.json'),
      '--key',
      join(dir, 'bob.key'),
      '--split',
      'a=60%,b=50%',
      '--out',
      join(dir, 'over'),
    ]);
    expect([over.code, over.err]).toEqual([1, expect.stringMatching(/^jcp shards: error \[over-sum\]: /)]);
    expect(existsSync(join(dir, 'over'))).toBe(false);
  }, 60_000);

  it('rebalance after unbound shards overspent the parent: error [overspent], the spend recorded, nothing re-issued', async () => {
    writeChainFile(join(dir, 'loose.chain.json'), [rootGrant(issuer, holder, 100_000n)]);
    const out = join(dir, 'loose');
    // No --cluster: the shards are not bound, so two nodes both spend shard a.
    const mint = jcp([
      'shards',
      'mint',
      '--parent',
      join(dir, 'loose.chain.json'),
      '--key',
      join(dir, 'bob.key'),
      '--split',
      'a=50%,b=50%',
      '--out',
      out,
    ]);
    expect(mint.code).toBe(0);
    const a = readChainFile(join(out, 'shard-a.json'));
    expect((await allowsOf(0, a, 5, 10_000n)).allows).toBe(5);
    expect((await allowsOf(1, a, 5, 10_000n)).allows).toBe(5);
    expect((await allowsOf(2, a, 2, 10_000n)).allows).toBe(2);
    const reb = jcp(['shards', 'rebalance', '--shards', out, '--key', join(dir, 'bob.key'), '--cluster', clusterDir, '--timeout', '20000']);
    expect(reb.code).toBe(1);
    expect(reb.err).toMatch(/^jcp shards: error \[overspent\]: the closed shards spent 120000 µJ on a 100000 µJ parent \(20000 µJ over\)/);
    const show = jcp(['shards', 'show', '--shards', out]).out;
    expect(show).toMatch(/generation 2, consumed 120000 µJ/);
    expect(show).not.toMatch(/live/);
  }, 90_000);

  it('mint --cluster with a node down: error [assign-timeout] naming it, nothing written', () => {
    process.kill(state.nodes[2]!.pid, 'SIGTERM');
    const out = join(dir, 'down');
    const r = jcp([
      'shards',
      'mint',
      '--parent',
      join(dir, 'sh.chain.json'),
      '--key',
      join(dir, 'bob.key'),
      '--split',
      'a=50%,b=50%',
      '--cluster',
      clusterDir,
      '--out',
      out,
      '--timeout',
      '1500',
    ]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/^jcp shards: error \[assign-timeout\]: /);
    expect(r.err).toContain(`waiting for ${state.nodes[2]!.did} to acknowledge`);
    expect(existsSync(join(out, 'shards.json'))).toBe(false);
  }, 60_000);
});
