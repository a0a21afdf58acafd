/** Chain files: a readable `grant` view that disagrees with the signed `cbor` is refused `chain-file-mismatch` wherever a chain file is read. */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { readChainFile } from '../../client/index.ts';
import { runJcpInProcess } from '../support.ts';
import { readAmendmentFile, readCheckpointFile, readPolicyFile } from '../../cli/internal.ts';
import { codeOf } from '../support.ts';
import { tempDir } from './fixtures.ts';

/** The `jcp` command run in this process (test/support.ts). */
const jcp = (...argv: string[]) => runJcpInProcess(argv);

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
    const mint = await jcp(
      'grant',
      'mint',
      '--key',
      f('k.key'),
      '--subject',
      f('k.key'),
      '--resource',
      'r',
      '--actions',
      'a',
      '--budget',
      '1000',
      '--out',
      f('g.json'),
    );
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
    const del = await jcp(
      'grant',
      'delegate',
      '--chain',
      file,
      '--key',
      f('k.key'),
      '--subject',
      f('b.key'),
      '--budget',
      '10',
      '--out',
      f('child.json'),
    );
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

describe('steering and policy files - view against signed bytes (break12 F2)', () => {
  const t = tempDir('steerfile-view');
  const f = (n: string) => path.join(t.dir, n);
  const edit = (from: string, name: string, change: (c: Record<string, Record<string, unknown>>) => void): string => {
    const c = JSON.parse(readFileSync(f(from), 'utf8')) as Record<string, Record<string, unknown>>;
    change(c);
    writeFileSync(f(name), JSON.stringify(c, null, 2));
    return f(name);
  };
  beforeAll(async () => {
    for (const k of ['issuer', 'agent', 'holder']) expect((await jcp('key', 'new', '--out', f(`${k}.key`))).code).toBe(0);
    const run = await jcp(
      'grant',
      'mint',
      '--key',
      f('issuer.key'),
      '--subject',
      f('agent.key'),
      '--resource',
      'r',
      '--actions',
      'a',
      '--budget',
      '1000',
      '--out',
      f('run.json'),
    );
    expect(run.code, run.err).toBe(0);
    const cp = await jcp(
      'grant',
      'checkpoint',
      '--chain',
      f('run.json'),
      '--key',
      f('agent.key'),
      '--state',
      f('run.json'),
      '--out',
      f('cp.json'),
    );
    expect(cp.code, cp.err).toBe(0);
    const am = await jcp(
      'grant',
      'amend',
      '--chain',
      f('run.json'),
      '--checkpoint',
      f('cp.json'),
      '--key',
      f('issuer.key'),
      '--budget',
      '1000',
      '--out',
      f('am.json'),
    );
    expect(am.code, am.err).toBe(0);
    const st = await jcp(
      'grant',
      'mint',
      '--key',
      f('issuer.key'),
      '--subject',
      f('holder.key'),
      '--resource',
      'r',
      '--actions',
      'a',
      '--budget',
      '100',
      '--depth',
      '1',
      '--out',
      f('st.json'),
    );
    expect(st.code, st.err).toBe(0);
    const pol = await jcp(
      'standing',
      'policy',
      '--chain',
      f('st.json'),
      '--key',
      f('issuer.key'),
      '--source',
      'tickets',
      '--kind',
      'opened',
      '--per-firing',
      '30',
      '--max-firings',
      '4',
      '--out',
      f('pol.json'),
    );
    expect(pol.code, pol.err).toBe(0);
  });
  afterAll(() => t.cleanup());

  test('accepted / the files as written, and with their views left out', async () => {
    expect(readCheckpointFile(f('cp.json')).body.grant_id).toBeTypeOf('string');
    expect(readAmendmentFile(f('am.json')).amendment.body.budget_uj).toBe(1000n);
    expect(readPolicyFile(f('pol.json')).body.max_firings).toBe(4);
    expect(readAmendmentFile(edit('am.json', 'am-noview.json', (c) => delete c['amendment'])).amendment.body.budget_uj).toBe(1000n);
    expect(readPolicyFile(edit('pol.json', 'pol-noview.json', (c) => delete c['policy'])).body.max_firings).toBe(4);
  });

  test('refused / chain-file-mismatch / an amendment budget lowered in the view', async () => {
    const file = edit('am.json', 'am-budget.json', (c) => {
      c['amendment']!['budget_uj'] = '5';
    });
    expect(codeOf(() => readAmendmentFile(file))).toBe('chain-file-mismatch');
    const r = await jcp(
      'grant',
      'continue',
      '--chain',
      f('run.json'),
      '--amendment',
      file,
      '--key',
      f('issuer.key'),
      '--out',
      f('cont.json'),
    );
    expect(r.code).toBe(1);
    expect(r.err).toContain('[chain-file-mismatch]');
    expect(r.err).toContain('budget_uj (view "5", signed "1000")');
  });

  test('refused / chain-file-mismatch / a checkpoint state edited in the view', () => {
    const file = edit('cp.json', 'cp-state.json', (c) => {
      c['checkpoint']!['state'] = '00'.repeat(32);
    });
    expect(codeOf(() => readCheckpointFile(file))).toBe('chain-file-mismatch');
  });

  test('refused / chain-file-mismatch / a policy max_firings raised, or its source renamed, in the view', () => {
    const more = edit('pol.json', 'pol-max.json', (c) => {
      c['policy']!['max_firings'] = 400;
    });
    expect(codeOf(() => readPolicyFile(more))).toBe('chain-file-mismatch');
    const other = edit('pol.json', 'pol-src.json', (c) => {
      c['policy']!['event_source'] = 'payments';
    });
    expect(codeOf(() => readPolicyFile(other))).toBe('chain-file-mismatch');
  });
});
