/**
 * What `jcp demo` (`npm start`) loads before it starts its first node (docs/benchmarks.md
 * "startup: the command, a node, the demo"): the command's module graph, loaded in a fresh Node
 * process, holds none of the libraries only the later phases use (express, behind the bridge's A2A
 * face and the testkit's test agent; the bridge itself, the MCP server SDK and the team's modules
 * with it); they load once the nodes are up. Not a timing: the set of packages loaded, which is what the start-up time
 * follows (0.65 s of CPU for the whole graph against 0.25 s for this one, measured here).
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The node_modules files the CommonJS loader holds after `specifier` is imported in a fresh process (tsx for the sources). */
function cjsLoadedBy(specifier: string): string[] {
  const script = `await import(${JSON.stringify(specifier)});
const { createRequire } = await import('node:module');
process.stdout.write(JSON.stringify(Object.keys(createRequire(import.meta.url).cache)));`;
  const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8' });
  return (JSON.parse(out) as string[]).filter((f) => f.includes('/node_modules/'));
}

describe('demo start: modules loaded before the first node starts', () => {
  it('the command module of `jcp demo` does not load express', () => {
    const loaded = cjsLoadedBy('./cli/demo.ts');
    // What it does load (a check that the listing sees CommonJS packages at all): the NATS client, LevelDB.
    expect(loaded.some((f) => f.includes('/classic-level/'))).toBe(true);
    expect(loaded.filter((f) => /\/express\/|\/body-parser\//.test(f))).toEqual([]);
  });
});
