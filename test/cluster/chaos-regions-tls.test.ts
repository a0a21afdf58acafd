/**
 * One chaos seed with every link on TLS (docs/tls.md, docs/chaos.md): two regions of three NATS
 * servers each (so routes carry traffic), gateways through the delaying proxies, one node per
 * region; jcp/1 between the agents and the nodes, the nodes' NATS clients, the routes and the
 * gateways all run TLS with one CA made for the run. Every fault kind; every invariant holds.
 * The run's folder is kept and read afterwards: the servers' and nodes' configs carry the TLS
 * settings, so the run cannot quietly have gone over plaintext.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ALL_FAULT_KINDS, runChaos } from '../../chaos/internal.ts';

const dir = mkdtempSync(join(tmpdir(), 'jcp-chaos-tls-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('chaos across two regions, every link on TLS', () => {
  it('seed t1: every invariant holds', { timeout: 300_000 }, async () => {
    const r = await runChaos({
      nodes: 2,
      regions: 2,
      natsServers: 3,
      rttMs: 40,
      mode: 'channel',
      faults: ALL_FAULT_KINDS,
      durationS: 8,
      seed: 't1',
      ratePerAgent: 15,
      tls: true,
      keepDir: dir,
    });
    expect(r.problems).toEqual([]);
    expect(Object.values(r.invariants).every(Boolean)).toBe(true);
    expect(r.regions?.map((g) => g.name)).toEqual(['a', 'b']);
    expect(r.revoked_allowed_after_reach).toBe(0);
    expect(r.revocation?.revoked_at_s).not.toBeNull();
    expect(BigInt(r.spent_uj)).toBeLessThanOrEqual(BigInt(r.budget_uj) + BigInt(r.bound_uj));
    expect(r.statements?.overdraft_uj).toBe(r.overdraft_uj);
    expect(r.decisions.allow).toBeGreaterThan(0);

    // Every nats-server had TLS on client connections (top level), routes and gateways (verified).
    for (const region of ['a', 'b']) {
      for (const s of ['s1', 's2', 's3']) {
        const conf = readFileSync(join(dir, `nats-${region}`, s, 'nats.conf'), 'utf8');
        expect(conf, `${region}/${s}`).toMatch(/^tls \{/m);
        for (const block of ['cluster', 'gateway']) {
          const body = new RegExp(`^${block} \\{\\n([\\s\\S]*?)\\n\\}$`, 'm').exec(conf)?.[1] ?? '';
          expect(body, `${region}/${s} ${block}`).toMatch(/^ {2}tls \{\n[\s\S]*?^ {4}verify: true$/m);
        }
      }
      // Every node listened with TLS and verified its NATS servers against the run's CA.
      const node = JSON.parse(readFileSync(join(dir, region, 'n1', 'node.json'), 'utf8')) as Record<string, Record<string, string>>;
      expect(node['tls']?.['cert_file']).toBe(join(dir, 'tls', 'server.pem'));
      expect(node['nats_tls']?.['ca_file']).toBe(join(dir, 'tls', 'ca.pem'));
    }
  });
});
