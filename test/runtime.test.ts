/**
 * The suite runs on the Node that runs the product (engines: Node ≥ 20.6): no `node` binary inside
 * the repository (a package's bin linked into node_modules/.bin) stands in for it, which npm scripts
 * and npx would otherwise put first on PATH. The MCP conformance suite's Node 22 lives in
 * scripts/mcp-conformance/, a package of its own, for that reason.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '..');

describe('runtime', () => {
  it('the tests run on a Node from outside the repository, and node_modules/.bin has no node', () => {
    expect(path.relative(ROOT, process.execPath).startsWith('..')).toBe(true);
    expect(existsSync(path.join(ROOT, 'node_modules/.bin/node'))).toBe(false);
    expect(Number(process.versions.node.split('.')[0])).toBeGreaterThanOrEqual(20);
  });
});
