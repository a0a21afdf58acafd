/**
 * What `jcp demo` (`npm start`) loads before it starts its first node (docs/benchmarks.md
 * "startup: the command, a node, the demo"): the command's module graph, loaded in a fresh Node
 * process, holds none of the libraries only the later phases use (express, behind the bridge's A2A
 * face and the testkit's test agent; the bridge itself, the MCP server SDK and the team's modules
 * with it); they load once the nodes are up. Not a timing: the set of packages loaded, which is what the start-up time
 * follows (0.65 s of CPU for the whole graph against 0.25 s for this one, measured here).
 */
import { describe, expect, it } from 'vitest';
import { cjsLoadedBy } from '../support.ts';

describe('demo start: modules loaded before the first node starts', () => {
  it('the command module of `jcp demo` does not load express', () => {
    const loaded = cjsLoadedBy('./cli/demo.ts');
    // What it does load (a check that the listing sees CommonJS packages at all): the NATS client, LevelDB.
    expect(loaded.some((f) => f.includes('/classic-level/'))).toBe(true);
    expect(loaded.filter((f) => /\/express\/|\/body-parser\//.test(f))).toEqual([]);
  });
});
