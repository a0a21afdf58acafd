/**
 * Through a live node (attacker finding: results past the 10 MiB stdio read cap crash-looped a
 * shared stdio upstream at no cost to the caller): a call whose result is past the cap is charged
 * (`endpoint-failed`: the tool ran; no reversal record), a call on the same upstream in flight
 * beside it is answered, and the upstream is not started again. Starts are counted by
 * test/node/counted-server.mjs.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { JcpClient } from '../../client/index.ts';
import { grantId, openReceipt } from '../../core/index.ts';
import { STDIO_READ_CAP_BYTES } from '../../node/index.ts';
import { cast, liveNode, mint, tempDir } from './fixtures.ts';

const SERVER = path.join(import.meta.dirname, 'counted-server.mjs');
const { rng, alice, bob, mallory } = cast('upstream-oversized-live');
const work = tempDir('upstream-oversized-live');
afterAll(() => work.cleanup());

const json = (b: Uint8Array | undefined) =>
  JSON.parse(new TextDecoder().decode(b)) as { isError?: boolean; content?: { text?: string }[]; jcp_error?: Record<string, string> };

test('a result past the read cap: that call charged (endpoint-failed, no reversal), a call beside it answered, one upstream process', async () => {
  const starts = path.join(work.dir, 'starts');
  writeFileSync(starts, '');
  const node = await liveNode({
    resources: [
      {
        name: 'files',
        endpoint: { kind: 'mcp-stdio', command: process.execPath, args: [SERVER], env: { COUNT_FILE: starts, EXTRA_TOOLS: '1' } },
      },
    ],
  });
  try {
    const attacker = mint(alice, mallory, 'files', ['big'], 10_000_000n, rng);
    const honest = mint(alice, bob, 'files', ['t0'], 10_000_000n, rng);
    const m = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: mallory });
    const b = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    try {
      const cost = { uj: 1_000n, provenance: 'Estimator' } as const;
      const beside = b.call({ chain: [honest], action: 't0', payload: { sleep_ms: 500 }, cost });
      beside.catch(() => undefined); // awaited below, after the oversized calls
      const bigs = [];
      for (let i = 0; i < 3; i++) {
        bigs.push(await m.call({ chain: [attacker], action: 'big', payload: { bytes: STDIO_READ_CAP_BYTES + 1024, n: i }, cost }));
      }
      for (const r of bigs) {
        expect(r.decision).toEqual({ verdict: 'allow' });
        const err = json(r.result).jcp_error!;
        expect(err['code']).toBe('endpoint-failed');
        expect(err['message']).toContain(`result larger than the stdio read cap of ${STDIO_READ_CAP_BYTES} bytes`);
        expect(err['refunded_uj']).toBeUndefined();
        const receipt = openReceipt(r.receipt, node.did);
        expect(receipt.ok).toBe(true);
        if (receipt.ok) expect(await node.log.getReversal(receipt.value.seq)).toBeUndefined();
      }
      expect(node.ledger.spent(grantId(attacker.grant))).toBe(3_000n);
      const ok = await beside;
      expect(ok.decision).toEqual({ verdict: 'allow' });
      expect(json(ok.result).content?.[0]?.text).toBe('ran t0');
      expect(node.ledger.spent(grantId(honest.grant))).toBe(1_000n);
      expect(readFileSync(starts, 'utf8').split('\n').filter(Boolean)).toHaveLength(1);
    } finally {
      m.close();
      b.close();
    }
  } finally {
    await node.cleanup();
  }
}, 60_000);
