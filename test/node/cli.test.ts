/** The CLI around the node: keys, grants, `jcp call`, `jcp grant revoke`, `jcp receipts`, `jcp node start` refusals. */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { decode } from '../../core/index.ts';
import { runJcpInProcess } from '../support.ts';
import { JCP_BIN } from '../../testkit/internal.ts';
import { JcpClient } from '../../client/index.ts';
import { liveNode, tempDir } from './fixtures.ts';

/** The `jcp` command run in this process (test/support.ts). */
const jcp = (...argv: string[]) => runJcpInProcess(argv, 'latin1');

describe('jcp CLI around a node', () => {
  const t = tempDir('cli');
  const f = (n: string) => path.join(t.dir, n);
  let node: Awaited<ReturnType<typeof liveNode>>;
  let addr: string;
  beforeAll(async () => {
    node = await liveNode({
      resources: [{ name: 'demo' }],
      meter: { default_estimate_uj: 0, estimates_uj: { big: 700 }, rungs: ['estimator'] },
    });
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
    const mint = await jcp(
      'grant',
      'mint',
      '--key',
      f('alice.key'),
      '--subject',
      f('bob.key'),
      '--resource',
      'demo',
      '--actions',
      'read,big',
      '--budget',
      '10000',
      '--out',
      f('root.json'),
    );
    expect(mint.code).toBe(0);
    const del = await jcp(
      'grant',
      'delegate',
      '--chain',
      f('root.json'),
      '--key',
      f('bob.key'),
      '--subject',
      f('carol.key'),
      '--budget',
      '1000',
      '--actions',
      'read',
      '--out',
      f('child.json'),
    );
    expect(del.code).toBe(0);
    const bad = await jcp(
      'grant',
      'delegate',
      '--chain',
      f('root.json'),
      '--key',
      f('carol.key'),
      '--subject',
      f('carol.key'),
      '--budget',
      '1',
      '--out',
      f('x.json'),
    );
    expect(bad.code).toBe(1);
    expect(bad.err).toMatch(/^jcp grant: error \[not-holder\]: delegate refused: /);

    const call = await jcp(
      'call',
      '--node',
      addr,
      '--chain',
      f('child.json'),
      '--key',
      f('carol.key'),
      '--action',
      'read',
      '--payload',
      '{"q":1}',
      '--cost',
      '40',
    );
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
    expect(notIssuer.err).toMatch(/^jcp grant: error \[not-issuer\]: revoke refused: /);
    const r = await jcp('grant', 'revoke', '--chain', f('root.json'), '--key', f('alice.key'), '--node', addr, '--link', '0');
    expect(r.code).toBe(0);
    const call = await jcp(
      'call',
      '--node',
      addr,
      '--chain',
      f('child.json'),
      '--key',
      f('carol.key'),
      '--action',
      'read',
      '--payload',
      '{"q":2}',
    );
    expect(JSON.parse(call.out).decision).toEqual({ verdict: 'deny', deny_reason: 'revoked' });
  });

  test('an error reply exits 1, prints the reply on stdout and one line `jcp call: error [code]` on stderr (break18 F7)', async () => {
    const mint = await jcp(
      'grant',
      'mint',
      '--key',
      f('alice.key'),
      '--subject',
      f('bob.key'),
      '--resource',
      'elsewhere',
      '--actions',
      'read',
      '--budget',
      '10',
      '--out',
      f('elsewhere.json'),
    );
    expect(mint.code).toBe(0);
    const r = await jcp('call', '--node', addr, '--chain', f('elsewhere.json'), '--key', f('bob.key'), '--action', 'read');
    expect(r.code).toBe(1);
    expect(JSON.parse(r.out).error.code).toBe('unknown-resource');
    expect(r.err).toMatch(/^jcp call: error \[unknown-resource\]: frame\.resource [0-9a-f]{64} is not a resource this node serves/);
    expect(r.err.trimEnd().split('\n')).toHaveLength(1);
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
    // docs/console.md has auditors compare the console with `attribute --json`: the same JSON.
    const attrJson = await jcp('receipts', 'attribute', node.dataDir, '--json');
    expect(attrJson.code).toBe(0);
    expect(JSON.parse(attrJson.out)).toEqual(attr);
    expect(JSON.parse((await jcp('receipts', 'replay', node.dataDir, '--json')).out)).toEqual(r);
    // export chooses its format with --format: --json there is still a usage error
    expect((await jcp('receipts', 'export', node.dataDir, '--json')).code).toBe(2);

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
        '--budget=-5',
        '--out',
        f('g.json'),
      );
      expect(mint.code).toBe(2);
      expect(mint.err).toMatch(/^jcp grant: error \[usage\]: --budget: expected a non-negative integer/);
      expect(
        (
          await jcp(
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
            '5',
            '--out',
            f('g.json'),
          )
        ).code,
      ).toBe(0);
      // A grant the chain reader would refuse (an action over 256) is refused at mint, and no file is written.
      const long = await jcp(
        'grant',
        'mint',
        '--key',
        f('k.key'),
        '--subject',
        f('k.key'),
        '--resource',
        'r',
        '--actions',
        'x'.repeat(1201),
        '--budget',
        '5',
        '--out',
        f('long.json'),
      );
      expect(long.code).toBe(2);
      expect(long.err).toMatch(
        /^jcp grant: error \[usage\]: the grant would not load back: grant\.capability\.actions\[0\]: longer than 256/,
      );
      expect(existsSync(f('long.json'))).toBe(false);
      const delegated = await jcp(
        'grant',
        'delegate',
        '--chain',
        f('g.json'),
        '--key',
        f('k.key'),
        '--subject',
        f('k.key'),
        '--actions',
        'a',
        '--budget',
        '5',
        '--out',
        f('d.json'),
      );
      expect(delegated.code).toBe(0); // delegate runs the same check and accepts what loads back
      // Port 1 on loopback: nothing listens there, so reaching the network first would be ECONNREFUSED.
      const call = await jcp(
        'call',
        '--node',
        '127.0.0.1:1',
        '--chain',
        f('g.json'),
        '--key',
        f('k.key'),
        '--action',
        'a',
        '--cost',
        'abc',
      );
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

/** A sparse file of `bytes` zero bytes (no disk used): bigger than a cap, cheap to make. */
function sparse(file: string, bytes: number): string {
  writeFileSync(file, '', { mode: 0o600 });
  truncateSync(file, bytes);
  return file;
}

/** Runs bin/jcp.mjs in a child killed after `ms`: a command that reads without end fails by timeout, not by eating the test's memory. */
async function jcpChild(args: string[], ms = 45_000): Promise<{ code: number | null; err: string }> {
  return promisify(execFile)(process.execPath, [JCP_BIN, ...args], { timeout: ms, killSignal: 'SIGKILL' }).then(
    (r) => ({ code: 0, err: r.stderr }),
    (e: { code?: number | string; killed?: boolean; stderr: string }) => ({
      code: e.killed ? null : typeof e.code === 'number' ? e.code : null,
      err: e.stderr,
    }),
  );
}

describe('jcp CLI reads every key, config and chain file through a size cap', () => {
  const t = tempDir('cli-caps');
  const f = (n: string) => path.join(t.dir, n);
  beforeAll(async () => {
    expect((await jcp('key', 'new', '--out', f('k.key'))).code).toBe(0);
    expect(
      (
        await jcp(
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
          '5',
          '--out',
          f('g.json'),
        )
      ).code,
    ).toBe(0);
  });
  afterAll(() => t.cleanup());

  test("a file over its kind's cap is refused with the cap named, under the reader's stable code, exit 1", async () => {
    const big = sparse(f('big'), 9 << 20); // over every cap here: key 64 KiB, config 4 MiB, chain 8 MiB
    const cases: [string[], RegExp][] = [
      [
        ['key', 'show', big],
        /^jcp key: error \[key-file-invalid\]: key file .*big: larger than 64 KiB, the most a key file may be; not read \(EFBIG\)\n$/,
      ],
      [['node', 'start', '--config', big], /^jcp node: error \[config-invalid\]: config: config file .*big: larger than 4 MiB/],
      [['grant', 'show', '--chain', big], /^jcp grant: error \[schema\]: chain file .*big: larger than 8 MiB/],
      [
        ['call', '--node', '127.0.0.1:1', '--chain', big, '--key', f('k.key'), '--action', 'a'],
        /^jcp call: error \[schema\]: chain file .*larger than 8 MiB/,
      ],
      [
        ['call', '--node', '127.0.0.1:1', '--chain', f('g.json'), '--key', big, '--action', 'a'],
        /^jcp call: error \[key-file-invalid\]: key file .*larger than 64 KiB/,
      ],
      [['meter', 'probe', '--config', big], /^jcp meter: error \[usage\]: --config .*larger than 4 MiB/],
    ];
    for (const [argv, want] of cases) {
      const r = await jcp(...argv);
      expect(r.err, argv.join(' ')).toMatch(want);
      expect(r.code).toBe(argv[0] === 'meter' ? 2 : 1);
    }
    // Folders and missing files keep their codes.
    expect((await jcp('key', 'show', t.dir)).err).toMatch(/^jcp key: error \[key-file-invalid\]: .*EISDIR/);
    expect((await jcp('grant', 'show', '--chain', f('nope.json'))).err).toMatch(/^jcp grant: error \[schema\]: .*ENOENT/);
  });

  test.skipIf(process.platform !== 'linux')(
    'endless files (/dev/zero, /dev/urandom) are refused at once, not read until memory runs out',
    async () => {
      const cases: [string[], RegExp][] = [
        [['key', 'show', '/dev/zero'], /^jcp key: error \[key-file-invalid\]: key file \/dev\/zero: larger than 64 KiB/],
        [
          ['node', 'start', '--config', '/dev/zero'],
          /^jcp node: error \[config-invalid\]: config: config file \/dev\/zero: larger than 4 MiB/,
        ],
        [
          ['call', '--node', '127.0.0.1:1', '--chain', '/dev/zero', '--key', f('k.key'), '--action', 'a'],
          /^jcp call: error \[schema\]: chain file \/dev\/zero: larger than 8 MiB/,
        ],
        [
          ['call', '--node', '127.0.0.1:1', '--chain', f('g.json'), '--key', '/dev/urandom', '--action', 'a'],
          /^jcp call: error \[key-file-invalid\]: key file \/dev\/urandom: larger than 64 KiB/,
        ],
      ];
      await Promise.all(
        cases.map(async ([argv, want]) => {
          const r = await jcpChild(argv);
          expect(r.code, `${argv.join(' ')}: ${r.err}`).toBe(1);
          expect(r.err).toMatch(want);
        }),
      );
    },
  );
});

describe("jcp CLI error lines: `jcp <command>: error [code]: message` with the product's codes", () => {
  const t = tempDir('cli-errors');
  const f = (n: string) => path.join(t.dir, n);
  beforeAll(async () => {
    expect((await jcp('key', 'new', '--out', f('k.key'))).code).toBe(0);
    expect(
      (
        await jcp(
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
          '5',
          '--out',
          f('g.json'),
        )
      ).code,
    ).toBe(0);
  });
  afterAll(() => t.cleanup());

  test('a malformed --node (call, grant revoke) or --listen (node start) is a usage error, exit 2', async () => {
    const cases: [string[], RegExp][] = [
      [
        ['call', '--node', '127.0.0.1', '--chain', f('g.json'), '--key', f('k.key'), '--action', 'a'],
        /^jcp call: error \[usage\]: --node: expected host:port, got "127\.0\.0\.1"$/,
      ],
      [
        ['grant', 'revoke', '--chain', f('g.json'), '--key', f('k.key'), '--node', 'nowhere'],
        /^jcp grant: error \[usage\]: --node: expected host:port/,
      ],
      [['node', 'start', '--listen', 'nowhere'], /^jcp node: error \[usage\]: --listen: expected host:port/],
    ];
    for (const [argv, want] of cases) {
      const r = await jcp(...argv);
      expect(r.code, r.err).toBe(2);
      const lines = r.err.trimEnd().split('\n');
      expect(lines[0]).toMatch(want);
      expect(lines[1]).toBe(`Run 'jcp ${argv[0]} --help'.`);
    }
  });

  test('system errors map to io / connection-failed, the errno kept in the message, never as the code', async () => {
    const refused = await jcp('call', '--node', '127.0.0.1:1', '--chain', f('g.json'), '--key', f('k.key'), '--action', 'a');
    expect(refused.code).toBe(1);
    expect(refused.err).toBe('jcp call: error [connection-failed]: cannot reach node 127.0.0.1:1: connection refused (ECONNREFUSED)\n');
    const mint = (out: string) =>
      jcp(
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
        '5',
        '--out',
        out,
      );
    const noDir = await mint(f('nodir/x.json'));
    expect(noDir.code).toBe(1);
    expect(noDir.err).toMatch(/^jcp grant: error \[io\]: cannot write chain file .*nodir\/x\.json: no such file or folder \(ENOENT\)\n$/);
    const notDir = await mint(path.join(f('k.key'), 'x.json'));
    expect(notDir.err).toMatch(/^jcp grant: error \[io\]: .*\(ENOTDIR\)\n$/);
    for (const r of [refused, noDir, notDir]) expect(r.err).not.toMatch(/\[E[A-Z]+\]/);
  });

  test("any command's stray system error is mapped too: EEXIST is [io], ECONNRESET [connection-failed]", async () => {
    const { keyCommand: command } = await import('../../cli/internal.ts');
    const sys = (code: string, syscall: string, extra: object) =>
      Object.assign(new Error(`${code}: raw ${syscall}`), { code, syscall, errno: -1, ...extra });
    const run = vi.spyOn(command, 'run');
    try {
      run.mockRejectedValueOnce(sys('EEXIST', 'mkdir', { path: '/x/y' }));
      const exists = await jcp('key', 'show', 'whatever');
      expect([exists.code, exists.err]).toEqual([1, 'jcp key: error [io]: cannot create folder /x/y: already exists (EEXIST)\n']);
      run.mockRejectedValueOnce(sys('ECONNRESET', 'read', {}));
      const reset = await jcp('key', 'show', 'whatever');
      expect([reset.code, reset.err]).toEqual([
        1,
        'jcp key: error [connection-failed]: cannot reach the server: connection reset by the peer (ECONNRESET)\n',
      ]);
    } finally {
      run.mockRestore();
    }
  });

  test('a chain file given as --key is "not a key file", whatever its mode', async () => {
    expect(statSync(f('g.json')).mode & 0o077).not.toBe(0); // written 0644 (less the umask): readable by others
    const r = await jcp('call', '--node', '127.0.0.1:1', '--chain', f('g.json'), '--key', f('g.json'), '--action', 'a');
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/^jcp call: error \[key-file-invalid\]: key file .*g\.json: not a key file/);
    expect(r.err).not.toMatch(/chmod/);
  });
});

describe('jcp CLI small inputs', () => {
  const t = tempDir('cli-inputs');
  const f = (n: string) => path.join(t.dir, n);
  let node: Awaited<ReturnType<typeof liveNode>>;
  beforeAll(async () => {
    node = await liveNode({ resources: [{ name: 'demo' }], meter: { default_estimate_uj: 0, rungs: ['estimator'] } });
    expect((await jcp('key', 'new', '--out', f('k.key'))).code).toBe(0);
    expect(
      (
        await jcp(
          'grant',
          'mint',
          '--key',
          f('k.key'),
          '--subject',
          f('k.key'),
          '--resource',
          'demo',
          '--actions',
          'a',
          '--budget',
          '5',
          '--out',
          f('g.json'),
        )
      ).code,
    ).toBe(0);
  });
  afterAll(async () => {
    await node.cleanup();
    t.cleanup();
  });

  test('grant mint refuses an empty --resource, and writes nothing', async () => {
    const r = await jcp(
      'grant',
      'mint',
      '--key',
      f('k.key'),
      '--subject',
      f('k.key'),
      '--resource',
      '',
      '--actions',
      'a',
      '--budget',
      '5',
      '--out',
      f('empty.json'),
    );
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/^jcp grant: error \[usage\]: --resource: empty resource name/);
    expect(existsSync(f('empty.json'))).toBe(false);
  });

  test('--payload is sent as the exact bytes typed; a number JSON readers would change is refused', async () => {
    const spy = vi.spyOn(JcpClient.prototype, 'call');
    try {
      const typed = '{ "q": 1.50, "s": "\u00e9t\u00e9", "n": 9007199254740992, "e": 2.5e-3 }';
      const r = await jcp(
        'call',
        '--node',
        `127.0.0.1:${node.port}`,
        '--chain',
        f('g.json'),
        '--key',
        f('k.key'),
        '--action',
        'a',
        '--payload',
        typed,
      );
      expect(r.code, r.err).toBe(0);
      expect(spy).toHaveBeenCalledTimes(1);
      expect(spy.mock.calls[0]![0].payload).toEqual(new TextEncoder().encode(typed));
      for (const bad of ['{"big":1e400}', '{"n":12345678901234567890123}', '[9007199254740993]', '{"tiny":1e-400}']) {
        const refused = await jcp(
          'call',
          '--node',
          `127.0.0.1:${node.port}`,
          '--chain',
          f('g.json'),
          '--key',
          f('k.key'),
          '--action',
          'a',
          '--payload',
          bad,
        );
        expect(refused.code, bad).toBe(2);
        expect(refused.err).toMatch(/^jcp call: error \[usage\]: --payload: the number \S+ cannot be represented exactly/);
      }
      expect(spy).toHaveBeenCalledTimes(1); // nothing refused was sent
    } finally {
      spy.mockRestore();
    }
  });
});

describe('jcp call when the endpoint cannot run the call', () => {
  const t = tempDir('cli-gone');
  const f = (n: string) => path.join(t.dir, n);
  let node: Awaited<ReturnType<typeof liveNode>>;
  let addr: string;
  beforeAll(async () => {
    node = await liveNode({
      resources: [{ name: 'demo' }, { name: 'gone', endpoint: { kind: 'mcp-stdio', command: '/nonexistent/mcp-server' } }],
    });
    addr = `127.0.0.1:${node.port}`;
    await jcp('key', 'new', '--out', f('a.key'));
    await jcp('key', 'new', '--out', f('b.key'));
  });
  afterAll(async () => {
    await node.cleanup();
    t.cleanup();
  });

  test('an allowed call its endpoint could not run exits 0 and says so on stderr, with the refund', async () => {
    for (const resource of ['gone', 'demo']) {
      const args = ['--key', f('a.key'), '--subject', f('b.key'), '--resource', resource, '--actions', 'read', '--budget', '100'];
      expect((await jcp('grant', 'mint', ...args, '--out', f(`${resource}.json`))).code).toBe(0);
    }
    const r = await jcp('call', '--node', addr, '--chain', f('gone.json'), '--key', f('b.key'), '--action', 'read', '--cost', '30');
    expect(r.code).toBe(0);
    const out = JSON.parse(r.out) as { decision: unknown; result: { jcp_error: { code: string; refunded_uj: string } } };
    expect(out.decision).toEqual({ verdict: 'allow' });
    expect(out.result.jcp_error.code).toBe('endpoint-unavailable');
    expect(r.err).toMatch(/^jcp call: allowed, but the endpoint failed \[endpoint-unavailable\]: .+; refunded 30 µJ\n$/);
    // A call whose tool answered says nothing on stderr.
    const ok = await jcp('call', '--node', addr, '--chain', f('demo.json'), '--key', f('b.key'), '--action', 'read', '--cost', '1');
    expect(ok.code).toBe(0);
    expect(ok.err).toBe('');
  });
});
