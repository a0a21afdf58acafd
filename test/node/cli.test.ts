/** The CLI around the node: keys, grants, `jcp call`, `jcp grant revoke`, `jcp receipts`, `jcp node start` refusals. */
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { decode } from '../../core/cbor.ts';
import { main } from '../../cli/main.ts';
import { liveNode, tempDir } from './fixtures.ts';

async function jcp(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const text = (s: string | Uint8Array) => (typeof s === 'string' ? s : Buffer.from(s).toString('latin1'));
  const w = vi.spyOn(process.stdout, 'write').mockImplementation((s: string | Uint8Array) => {
    out += text(s);
    return true;
  });
  const e = vi.spyOn(process.stderr, 'write').mockImplementation((s: string | Uint8Array) => {
    err += text(s);
    return true;
  });
  try {
    return { code: await main(argv), out, err };
  } finally {
    w.mockRestore();
    e.mockRestore();
  }
}

describe('jcp CLI around a node', () => {
  const t = tempDir('cli');
  const f = (n: string) => path.join(t.dir, n);
  let node: Awaited<ReturnType<typeof liveNode>>;
  let addr: string;
  beforeAll(async () => {
    node = await liveNode({ resources: [{ name: 'demo' }], meter: { default_estimate_uj: 0, estimates_uj: { big: 700 }, rungs: ['estimator'] } });
    addr = `127.0.0.1:${node.port}`;
  });
  afterAll(async () => {
    await node.cleanup();
    t.cleanup();
  });

  test('key new writes a 0600 key file and prints its did; key show reads it back', async () => {
    const r = await jcp('key', 'new', '--out', f('alice.key'));
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^did:key:z/);
    expect(statSync(f('alice.key')).mode & 0o777).toBe(0o600);
    expect((await jcp('key', 'show', f('alice.key'))).out).toBe(r.out);
    expect((await jcp('key', 'new', '--out', f('alice.key'))).code).toBe(1);
    await jcp('key', 'new', '--out', f('bob.key'));
    await jcp('key', 'new', '--out', f('carol.key'));
  });

  test('grant mint / delegate / call: allow exits 0 and prints decision + receipt; deny exits 3', async () => {
    const mint = await jcp('grant', 'mint', '--key', f('alice.key'), '--subject', f('bob.key'), '--resource', 'demo', '--actions', 'read,big', '--budget', '10000', '--out', f('root.json'));
    expect(mint.code).toBe(0);
    const del = await jcp('grant', 'delegate', '--chain', f('root.json'), '--key', f('bob.key'), '--subject', f('carol.key'), '--budget', '1000', '--actions', 'read', '--out', f('child.json'));
    expect(del.code).toBe(0);
    const bad = await jcp('grant', 'delegate', '--chain', f('root.json'), '--key', f('carol.key'), '--subject', f('carol.key'), '--budget', '1', '--out', f('x.json'));
    expect(bad.code).toBe(1);
    expect(bad.err).toMatch(/not-holder/);

    const call = await jcp('call', '--node', addr, '--chain', f('child.json'), '--key', f('carol.key'), '--action', 'read', '--payload', '{"q":1}', '--cost', '40');
    expect(call.code).toBe(0);
    const out = JSON.parse(call.out) as { decision: unknown; receipt: { core: { cost_uj: string; chain_ids: string[] } } };
    expect(out.decision).toEqual({ verdict: 'allow' });
    expect(out.receipt.core.cost_uj).toBe('40');
    expect(out.receipt.core.chain_ids).toHaveLength(2);

    const priced = await jcp('call', '--node', addr, '--chain', f('root.json'), '--key', f('bob.key'), '--action', 'big', '--cost', '1');
    expect((JSON.parse(priced.out) as { receipt: { core: { cost_uj: string } } }).receipt.core.cost_uj).toBe('700');

    const deny = await jcp('call', '--node', addr, '--chain', f('child.json'), '--key', f('bob.key'), '--action', 'read');
    expect(deny.code).toBe(3);
    expect(JSON.parse(deny.out).decision).toEqual({ verdict: 'deny', deny_reason: 'wrong-subject' });
  });

  test('grant revoke sends a signed revocation; the subtree is denied revoked', async () => {
    const notIssuer = await jcp('grant', 'revoke', '--chain', f('root.json'), '--key', f('bob.key'), '--node', addr, '--link', '0');
    expect(notIssuer.code).toBe(1);
    expect(notIssuer.err).toMatch(/not-issuer/);
    const r = await jcp('grant', 'revoke', '--chain', f('root.json'), '--key', f('alice.key'), '--node', addr, '--link', '0');
    expect(r.code).toBe(0);
    const call = await jcp('call', '--node', addr, '--chain', f('child.json'), '--key', f('carol.key'), '--action', 'read', '--payload', '{"q":2}');
    expect(JSON.parse(call.out).decision).toEqual({ verdict: 'deny', deny_reason: 'revoked' });
  });

  test('receipts repair and verify refuse a log a running node holds (log-locked), and change nothing', async () => {
    for (const verb of ['repair', 'verify']) {
      const r = await jcp('receipts', verb, node.dataDir);
      expect(r.code).toBe(1);
      expect(r.err).toMatch(/log-locked/);
      expect(r.err).not.toMatch(/log-corrupt/);
    }
    const after = await jcp('call', '--node', addr, '--chain', f('root.json'), '--key', f('bob.key'), '--action', 'read', '--cost', '1');
    expect(after.code).toBe(3); // the root was revoked above: still decided, sealed and logged
    expect(JSON.parse(after.out).decision).toEqual({ verdict: 'deny', deny_reason: 'revoked' });
  });

  test('receipts replay / attribute / export read the log of a stopped node', async () => {
    await node.close();
    const replay = await jcp('receipts', 'replay', node.dataDir);
    expect(replay.code).toBe(0);
    const r = JSON.parse(replay.out) as { receipts: number; allowed: number; budgets: Array<{ grant_id: string; spent_uj: string }> };
    expect(r.receipts).toBe(5);
    expect(r.allowed).toBe(2);
    const root = JSON.parse(readFileSync(f('root.json'), 'utf8')) as { chain: Array<{ id: string }> };
    expect(r.budgets.find((b) => b.grant_id === root.chain[0]!.id)?.spent_uj).toBe('740');

    const attr = JSON.parse((await jcp('receipts', 'attribute', node.dataDir)).out) as {
      attribution: Array<{ subject: string; allowed: number; refused: number; uj: string }>;
    };
    const carolDid = (await jcp('key', 'show', f('carol.key'))).out.trim();
    expect(attr.attribution.find((a) => a.subject === carolDid)).toMatchObject({ allowed: 1, refused: 2, uj: '40' });

    const json = await jcp('receipts', 'export', node.dataDir, '--format', 'json', '--out', f('log.json'));
    expect(json.code).toBe(0);
    const exported = JSON.parse(readFileSync(f('log.json'), 'utf8')) as { receipts: Array<{ seq: number; verified: boolean }> };
    expect(exported.receipts.map((x) => [x.seq, x.verified])).toEqual([0, 1, 2, 3, 4].map((s) => [s, true]));
    await jcp('receipts', 'export', node.dataDir, '--format', 'cbor', '--out', f('log.cbor'));
    const seq = readFileSync(f('log.cbor'));
    expect(seq.length).toBeGreaterThan(0);
    expect(() => decode(new Uint8Array(seq))).toThrow();
  });

  test('node start refuses a bad config with the field named, and exits 1', async () => {
    writeFileSync(f('bad.json'), JSON.stringify({ max_skew_s: 'soon' }));
    const r = await jcp('node', 'start', '--config', f('bad.json'));
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/config-invalid.*max_skew_s/);
  });
});

describe('jcp CLI usage errors (every command shares the option parser)', () => {
  test('a repeated option, an unknown option and a missing value are one line `error [usage]`, exit 2', async () => {
    const cases: [string[], RegExp][] = [
      [['receipts', 'export', '/nowhere', '--format', 'json', '--format', 'cbor'], /--format is given more than once/],
      [['receipts', 'verify', '/nowhere', '--bogus'], /unknown option --bogus/],
      [['receipts', 'export', '/nowhere', '--format'], /--format needs a value/],
    ];
    for (const [argv, why] of cases) {
      const r = await jcp(...argv);
      expect(r.code).toBe(2);
      const lines = r.err.trimEnd().split('\n');
      expect(lines[0]).toMatch(/^jcp receipts: error \[usage\]: /);
      expect(lines[0]).toMatch(why);
      expect(lines).toEqual([lines[0], "Run 'jcp receipts --help'."]);
    }
  });

  test('a malformed value is a usage error found before any network work; an unknown command is one too', async () => {
    const t = tempDir('cli-usage');
    const f = (n: string) => path.join(t.dir, n);
    try {
      expect((await jcp('key', 'new', '--out', f('k.key'))).code).toBe(0);
      const mint = await jcp('grant', 'mint', '--key', f('k.key'), '--subject', f('k.key'), '--resource', 'r', '--actions', 'a', '--budget=-5', '--out', f('g.json'));
      expect(mint.code).toBe(2);
      expect(mint.err).toMatch(/^jcp grant: error \[usage\]: --budget: expected a non-negative integer/);
      expect((await jcp('grant', 'mint', '--key', f('k.key'), '--subject', f('k.key'), '--resource', 'r', '--actions', 'a', '--budget', '5', '--out', f('g.json'))).code).toBe(0);
      // A grant the chain reader would refuse (an action over 256) is refused at mint, and no file is written.
      const long = await jcp('grant', 'mint', '--key', f('k.key'), '--subject', f('k.key'), '--resource', 'r', '--actions', 'x'.repeat(1201), '--budget', '5', '--out', f('long.json'));
      expect(long.code).toBe(2);
      expect(long.err).toMatch(/^jcp grant: error \[usage\]: the grant would not load back: grant\.capability\.actions\[0\]: longer than 256/);
      expect(existsSync(f('long.json'))).toBe(false);
      const delegated = await jcp('grant', 'delegate', '--chain', f('g.json'), '--key', f('k.key'), '--subject', f('k.key'), '--actions', 'a', '--budget', '5', '--out', f('d.json'));
      expect(delegated.code).toBe(0); // delegate runs the same check and accepts what loads back
      // Port 1 on loopback: nothing listens there, so reaching the network first would be ECONNREFUSED.
      const call = await jcp('call', '--node', '127.0.0.1:1', '--chain', f('g.json'), '--key', f('k.key'), '--action', 'a', '--cost', 'abc');
      expect(call.code).toBe(2);
      expect(call.err).toMatch(/^jcp call: error \[usage\]: --cost: expected a non-negative integer/);
    } finally {
      t.cleanup();
    }
    const unknown = await jcp('frobnicate');
    expect(unknown.code).toBe(2);
    expect(unknown.err).toBe("jcp: error [usage]: unknown command 'frobnicate'\nRun 'jcp --help'.\n");
  });
});
