/** Chain files: a readable `grant` view that disagrees with the signed `cbor` is refused `chain-file-mismatch` wherever a chain file is read. */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { readChainFile } from '../../cli/chainfile.ts';
import { main } from '../../cli/main.ts';
import { codeOf } from '../support.ts';
import { tempDir } from './fixtures.ts';

async function jcp(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const w = vi.spyOn(process.stdout, 'write').mockImplementation((s: string | Uint8Array) => {
    out += String(s);
    return true;
  });
  const e = vi.spyOn(process.stderr, 'write').mockImplementation((s: string | Uint8Array) => {
    err += String(s);
    return true;
  });
  try {
    return { code: await main(argv), out, err };
  } finally {
    w.mockRestore();
    e.mockRestore();
  }
}

type ChainJson = { type: string; chain: { id: string; cbor: string; grant: Record<string, unknown> }[] };

describe('chain file - view against signed bytes', () => {
  const t = tempDir('chainfile');
  const f = (n: string) => path.join(t.dir, n);
  const edit = (name: string, change: (c: ChainJson) => void): string => {
    const c = JSON.parse(readFileSync(f('g.json'), 'utf8')) as ChainJson;
    change(c);
    writeFileSync(f(name), JSON.stringify(c, null, 2));
    return f(name);
  };
  beforeAll(async () => {
    expect((await jcp('key', 'new', '--out', f('k.key'))).code).toBe(0);
    expect((await jcp('key', 'new', '--out', f('b.key'))).code).toBe(0);
    const mint = await jcp('grant', 'mint', '--key', f('k.key'), '--subject', f('k.key'), '--resource', 'r', '--actions', 'a', '--budget', '1000', '--out', f('g.json'));
    expect(mint.code, mint.err).toBe(0);
  });
  afterAll(() => t.cleanup());

  test('refused / chain-file-mismatch / a budget raised in the view', async () => {
    const file = edit('budget.json', (c) => {
      c.chain[0]!.grant['budget_uj'] = '999999999';
    });
    expect(codeOf(() => readChainFile(file))).toBe('chain-file-mismatch');
    const show = await jcp('grant', 'show', '--chain', file);
    expect(show.code).toBe(1);
    expect(show.out).toBe('');
    expect(show.err).toBe(
      `jcp grant: error [chain-file-mismatch]: ${file}: chain[0].grant disagrees with its signed cbor at budget_uj (view "999999999", signed "1000"): a node enforces the signed bytes; restore the view or drop it\n`,
    );
  });

  test('refused / chain-file-mismatch / an action added in the view, by call (before any connection) and delegate', async () => {
    const file = edit('actions.json', (c) => {
      (c.chain[0]!.grant['capability'] as { actions: string[] }).actions.push('write');
    });
    const call = await jcp('call', '--node', '127.0.0.1:1', '--chain', file, '--key', f('k.key'), '--action', 'write');
    expect(call.code).toBe(1);
    expect(call.err).toMatch(/^jcp call: error \[chain-file-mismatch\]: .*chain\[0\]\.grant disagrees with its signed cbor at capability /);
    const del = await jcp('grant', 'delegate', '--chain', file, '--key', f('k.key'), '--subject', f('b.key'), '--budget', '10', '--out', f('child.json'));
    expect(del.code).toBe(1);
    expect(del.err).toMatch(/^jcp grant: error \[chain-file-mismatch\]: /);
  });

  test('refused / chain-file-mismatch / a field added to or removed from the view', () => {
    const added = edit('added.json', (c) => {
      c.chain[0]!.grant['delegate_depth'] = 3;
    });
    expect(codeOf(() => readChainFile(added))).toBe('chain-file-mismatch');
    const removed = edit('removed.json', (c) => {
      delete c.chain[0]!.grant['subject'];
    });
    expect(codeOf(() => readChainFile(removed))).toBe('chain-file-mismatch');
  });

  test('accepted / a view whose keys are only reordered, or a link without a view', async () => {
    const reordered = edit('reordered.json', (c) => {
      const g = c.chain[0]!.grant;
      c.chain[0]!.grant = Object.fromEntries(Object.entries(g).reverse());
    });
    expect(readChainFile(reordered)).toHaveLength(1);
    const bare = edit('bare.json', (c) => {
      delete (c.chain[0] as { grant?: unknown }).grant;
    });
    expect(readChainFile(bare)).toHaveLength(1);
    const show = await jcp('grant', 'show', '--chain', f('g.json'));
    expect(show.code, show.err).toBe(0);
  });
});
