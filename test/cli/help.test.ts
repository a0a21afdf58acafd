/**
 * `jcp --help` lists every command from the registry (cli/commands.ts) without loading a command
 * module; each listed summary must be the one the command itself carries.
 */
import { describe, expect, it } from 'vitest';
import { COMMANDS } from '../../cli/internal.ts';
import { runJcpInProcess } from '../support.ts';

describe('jcp --help', () => {
  it('lists every registered command with the summary its module carries', async () => {
    const { code, out } = await runJcpInProcess(['--help']);
    expect(code).toBe(0);
    for (const c of COMMANDS) {
      const cmd = await c.load();
      expect([cmd.name, cmd.summary]).toEqual([c.name, c.summary]);
      expect(out).toContain(`  ${c.name.padEnd(14)}${c.summary}\n`);
    }
  });
});
