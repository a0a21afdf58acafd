/** The bridge's tool catalogue (bridge/catalogue.ts): what an agent's grants list, under which names. */
import { describe, expect, test } from 'vitest';
import { catalogue, type NodeResourceTools } from '../../bridge/index.ts';
import { cast, mint, rid } from '../node/fixtures.ts';

const { rng, alice, bob } = cast('bridge-catalogue');

const node: NodeResourceTools[] = [
  {
    name: 'fs',
    resource: rid('fs'),
    tools: [{ name: 'read', inputSchema: { type: 'object', properties: { path: {} } } }, { name: 'write' }, { name: 'stat' }],
  },
  { name: 'my.disk', resource: rid('my.disk'), tools: [{ name: 'read' }, { name: 'fs__read' }] },
  { name: 'memory', resource: rid('memory'), tools: [{ name: 'read_graph' }] },
];

describe('bridge catalogue', () => {
  test('lists exactly the granted tools the upstream has, in upstream order, definitions kept', () => {
    const g = mint(alice, bob, 'fs', ['write', 'read', 'delete'], 10n, rng);
    const c = catalogue([[g]], node);
    expect(c.map((t) => t.name)).toEqual(['read', 'write']);
    expect(c[0]!.definition).toEqual({ name: 'read', inputSchema: { type: 'object', properties: { path: {} } } });
    expect(c[0]!.resource).toBe(rid('fs'));
  });

  test('a resource the node does not serve lists nothing', () => {
    expect(catalogue([[mint(alice, bob, 'elsewhere', ['read'], 10n, rng)]], node)).toEqual([]);
  });

  test('a name two resources share is qualified by the resource name; a clash with a real name gets a suffix', () => {
    const a = mint(alice, bob, 'fs', ['read', 'stat'], 10n, rng);
    const b = mint(alice, bob, 'my.disk', ['read', 'fs__read'], 10n, rng);
    const c = catalogue([[a], [b]], node);
    expect(c.map((t) => [t.name, t.action, t.chainIndex])).toEqual([
      ['fs__read_2', 'read', 0],
      ['stat', 'stat', 0],
      ['my_disk__read', 'read', 1],
      ['fs__read', 'fs__read', 1],
    ]);
    expect(new Set(c.map((t) => t.name)).size).toBe(c.length);
  });

  test('the same tool granted by two chains is listed once, with the first chain', () => {
    const a = mint(alice, bob, 'memory', ['read_graph'], 10n, rng);
    const b = mint(alice, bob, 'memory', ['read_graph'], 99n, rng);
    const c = catalogue([[a], [b]], node);
    expect(c.map((t) => [t.name, t.chainIndex])).toEqual([['read_graph', 0]]);
  });

  test('an older node that lists no tools: each granted action is a tool taking an object', () => {
    const c = catalogue([[mint(alice, bob, 'fs', ['read', 'write'], 10n, rng)]], undefined);
    expect(c.map((t) => t.name)).toEqual(['read', 'write']);
    expect(c[0]!.definition['inputSchema']).toEqual({ type: 'object' });
  });
});
