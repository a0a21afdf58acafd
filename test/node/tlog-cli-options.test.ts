/**
 * `jcp receipts checkpoint|check-witnessed` (cli/tlog.ts) refuse the proof options they do not
 * take: `checkpoint --size 3` used to print the whole log's checkpoint as if asked for size 3.
 */
import { afterAll, describe, expect, test } from 'vitest';
import { JcpClient } from '../../client/index.ts';
import { cast, liveNode, mint, tempDir } from './fixtures.ts';
import { runJcpInProcess } from '../support.ts';

const { rng, alice, bob } = cast('tlog-cli-options');
const dirs: Array<() => void> = [];
afterAll(() => {
  for (const d of dirs) d();
});
/** `jcp` in this process (test/support.ts). */
const cli = (argv: string[]) => runJcpInProcess(argv);
describe('tlog cli - options a verb does not take are refused, not ignored', () => {
  test('checkpoint --size N, checkpoint --inclusion, check-witnessed --consistency: usage error (exit 2), nothing printed', async () => {
    const t = tempDir('tlog-opts');
    dirs.push(t.cleanup);
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const node = await liveNode({}, {}, t.dir);
    const c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    for (let i = 0; i < 5; i++) await c.call({ chain: [g], action: 'read', payload: { i }, cost: { uj: 10n, provenance: 'Estimator' } });
    await c.close();
    await node.close();
    const whole = await cli(['receipts', 'checkpoint', t.dir]);
    expect(whole.code).toBe(0);
    expect(whole.out.split('\n')[1]).toBe('5');
    for (const argv of [
      ['receipts', 'checkpoint', t.dir, '--size', '3'],
      ['receipts', 'checkpoint', t.dir, '--inclusion', '1'],
      ['receipts', 'checkpoint', t.dir, '--consistency', '2'],
      ['receipts', 'check-witnessed', t.dir, '--checkpoint', 'x', '--size', '3'],
    ]) {
      const r = await cli(argv);
      expect({ argv: argv.slice(1, 2).concat(argv.slice(3)), code: r.code, out: r.out }).toEqual({
        argv: argv.slice(1, 2).concat(argv.slice(3)),
        code: 2,
        out: '',
      });
      expect(r.err).toMatch(/error \[usage\]: .*(--size|--inclusion|--consistency)/);
    }
  }, 120_000);
});
