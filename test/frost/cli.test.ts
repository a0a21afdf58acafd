/**
 * `jcp frost` as a command: help for every sub-verb, usage errors exit 2, protocol refusals
 * exit 1 with a stable code on stderr.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { JCP_BIN } from '../../testkit/internal.ts';

const run = promisify(execFile);
const jcp = async (...args: string[]) =>
  run(process.execPath, [JCP_BIN, 'frost', ...args]).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
  );

describe('jcp frost / command line', () => {
  it('--help after each sub-verb prints the usage of deal, participant, dkg and sign', async () => {
    for (const verb of ['deal', 'participant', 'dkg', 'sign']) {
      const r = await jcp(verb, '--help');
      expect(r.code).toBe(0);
      expect(r.stdout).toContain(`jcp frost ${verb} `);
    }
  });

  it('usage / an unknown sub-verb or a missing option exits 2', async () => {
    expect((await jcp('bogus')).code).toBe(2);
    expect((await jcp('sign', '--message', '00')).code).toBe(2);
  });

  it('refuse / a 1-of-3 deal exits 1 with frost-bad-params (a single signer needs no FROST)', async () => {
    const r = await jcp('deal', '--threshold', '1', '--participants', '3', '--out', '/nonexistent-never-written');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/error \[frost-bad-params\]/);
  });
});
