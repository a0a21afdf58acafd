/**
 * What `jcp node start` loads before it listens (docs/benchmarks.md "startup: the command, a node,
 * the demo"): the command's module graph, loaded in a fresh Node process, holds none of the
 * libraries only some nodes use. The NATS client (a node with `--nats`) and prom-client's default
 * process metrics (a node with `--metrics`) load at their first use; hash-wasm's BLAKE3 alone is
 * loaded, not every algorithm it ships. Not a timing: the set of
 * packages loaded, which is what the start-up time follows.
 */
import { describe, expect, it } from 'vitest';
import { cjsLoadedBy } from '../support.ts';

describe('node start: modules loaded before listening', () => {
  it('the command module of `jcp node start` loads neither the NATS client nor the default metrics', () => {
    const loaded = cjsLoadedBy('./cli/node.ts');
    // The libraries it does load (a check that the listing sees CommonJS packages at all).
    expect(loaded.some((f) => f.includes('/classic-level/'))).toBe(true);
    expect(loaded.some((f) => f.includes('/prom-client/lib/counter.js'))).toBe(true);
    expect(loaded.filter((f) => /\/@nats-io\/|\/prom-client\/lib\/defaultMetrics|\/@opentelemetry\//.test(f))).toEqual([]);
  });

  it("BLAKE3 comes from hash-wasm's BLAKE3 bundle, not its every-algorithm index", () => {
    const loaded = cjsLoadedBy('./core/index.ts');
    expect(loaded.filter((f) => f.includes('/hash-wasm/')).map((f) => f.slice(f.indexOf('/hash-wasm/')))).toEqual([
      '/hash-wasm/dist/blake3.umd.min.js',
    ]);
  });
});
