/**
 * The demo's revocation check (demo/compile.ts: every call the revoked worker sends after
 * every node acknowledged the revocation is refused `revoked`, and there is at least one) must not
 * race the acknowledgement. A node applies a revocation before it acknowledges it, so the worker's
 * home node can refuse it while the orchestrator still waits for another node's acknowledgement;
 * here that slow acknowledgement is played by holding `revoked-everywhere` back. The worker must
 * make its try at another node only after it, strictly after `at_ms`, or the check has no call.
 * A real worker process (demo/worker.ts, calling through its bridges) against two real nodes on
 * loopback, each fronting a stub MCP server that lists the workers' tools (stub-tools-server.mjs).
 */
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { type Actor, grantId, signRevocation } from '../../core/index.ts';
import { type CallEvent, chainToHex, WorkerProc } from '../../demo/internal.ts';
import { JcpClient } from '../../client/index.ts';
import { cast, liveNode, mint, tempDir } from '../node/fixtures.ts';

const { rng, alice } = cast('revocation-ack');
const FILES = ['read_text_file', 'search_files', 'directory_tree', 'get_file_info'];
const MEMORY = ['create_entities', 'add_observations', 'search_nodes', 'open_nodes'];
const STUB = path.join(import.meta.dirname, 'stub-tools-server.mjs');
const t = tempDir('revocation-ack');
afterAll(() => t.cleanup());

describe('demo - revocation acknowledgement', () => {
  it('a worker refused revoked at home tries elsewhere only after every node acknowledged, so the report has calls to check', async () => {
    const stub = { resources: [{ name: 'tools', endpoint: { command: process.execPath, args: [STUB] } }] };
    const nodes = [await liveNode(stub), await liveNode(stub)];
    let worker: WorkerProc | undefined;
    try {
      let revoking: Promise<void> | undefined;
      let held: Promise<number> | undefined;
      const w = new WorkerProc('w3', t.dir, (proc: WorkerProc, e: CallEvent) => {
        if (revoking === undefined && proc.allowed >= 2) {
          // The issuer revokes both grants at both nodes (each acknowledges)…
          revoking = (async () => {
            for (const n of nodes) {
              const c = await JcpClient.connect({ host: '127.0.0.1', port: n.port });
              for (const g of grants) await c.revoke(signRevocation(grantId(g.grant), alice, new Uint8Array(randomBytes(16))), g.grant);
              await c.close();
            }
          })();
        }
        if (held === undefined && e.reason === 'revoked') {
          // …but the orchestrator hears the last acknowledgement late: revoked-everywhere is held back.
          // (It is sent, as the orchestrator sends it, only once both nodes have acknowledged.)
          const acked = revoking;
          held = new Promise<number>((resolve) =>
            setTimeout(() => {
              void acked!.then(() => {
                const atMs = Date.now();
                proc.send({ type: 'revoked-everywhere', at_ms: atMs });
                resolve(atMs);
              });
            }, 300),
          );
        }
      });
      worker = w;
      const did = await w.hello();
      const subject = { did } as Actor;
      const grants = [mint(alice, subject, 'tools', FILES, 10_000_000n, rng), mint(alice, subject, 'tools', MEMORY, 10_000_000n, rng)];
      w.send({
        type: 'go',
        name: 'w3',
        nodes: nodes.map((n, i) => ({ name: `n${i + 1}`, host: '127.0.0.1', port: n.port, did: n.did })),
        home: 0,
        sampleDir: t.dir,
        paths: [`${t.dir}/a.txt`],
        paceMs: 0,
        files: chainToHex([grants[0]!]),
        memory: chainToHex([grants[1]!]),
      });
      expect(await w.done(60_000)).toBe('revoked');
      await revoking;
      const atMs = await held!;
      // One try elsewhere per lane (in whichever order the lanes were refused), each refused revoked.
      const elsewhere = w.calls.filter((c) => c.node === 'n2');
      expect(elsewhere.map((c) => `${c.lane} ${c.reason}`).sort()).toEqual(['files revoked', 'memory revoked']);
      // What compile.ts counts as "after the revocation": both tries elsewhere among them, every one refused revoked.
      const after = w.calls.filter((c) => c.sent_ms > atMs);
      expect(after.filter((c) => c.node === 'n2')).toHaveLength(2);
      expect(after.every((c) => c.verdict === 'deny' && c.reason === 'revoked')).toBe(true);
      // The allowed calls went through the worker's bridge: the upstream's text came back as the MCP result.
      const allowed = w.calls.filter((c) => c.verdict === 'allow');
      expect(allowed.length).toBeGreaterThanOrEqual(2);
      expect(allowed.every((c) => c.note === `${c.action} done`)).toBe(true);
    } finally {
      await worker?.stop();
      for (const n of nodes) await n.cleanup();
    }
  }, 120_000);
});
