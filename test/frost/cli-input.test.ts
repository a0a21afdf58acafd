/**
 * `jcp frost` input handling, driven as a child process (bin/jcp.mjs), plus the shared folder
 * helper (io/files.ts) the node uses too:
 *
 * - every usage error is one line `jcp frost: error [usage]: …` (then the help hint), exit 2;
 * - a file or folder that cannot be read or created is `error [io]` naming the path, exit 1
 *   (never a raw ENOENT/EEXIST code);
 * - folders under /proc fail at once instead of spinning (Node 20's recursive mkdir loops there);
 * - a wrong passphrase leaves the keystore untouched;
 * - `--message` is unambiguous, `--timeout-ms` is range-checked, a repeated option is refused.
 *
 * Children run with a timeout, so a hang fails the test instead of blocking the run. Signing
 * commands are pointed at a closed port: reaching `frost-transport` proves the input was accepted.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { actorFromSeed } from '../../core/index.ts';
import { readMessage } from '../../cli/internal.ts';
import { isFrostError, Keystore } from '../../frost/index.ts';
import { JCP_BIN } from '../../testkit/internal.ts';
import { NATS_URL, uniquePrefix } from './helpers.ts';

const exec = promisify(execFile);
const root = mkdtempSync(join(tmpdir(), 'jcp-frost-cli-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** No NATS listens here: a command that gets this far has accepted its input. */
const DEAD_NATS = 'nats://127.0.0.1:1';
const GROUP = actorFromSeed(new Uint8Array(32).fill(7)).did;
const LINUX = process.platform === 'linux';

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

async function jcp(args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<Ran> {
  return exec(process.execPath, [JCP_BIN, ...args], { timeout: 25_000, killSignal: 'SIGKILL', ...opts }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e: { code?: number | string; killed?: boolean; stdout: string; stderr: string }) => ({
      code: e.killed ? null : typeof e.code === 'number' ? e.code : null,
      stdout: e.stdout,
      stderr: e.stderr,
    }),
  );
}

const frost = (args: string[], opts?: { cwd?: string; env?: NodeJS.ProcessEnv }) => jcp(['frost', ...args], opts);

/** Runs `code` (an ES module body, TS imports allowed) in a child with a timeout. */
async function tsChild(code: string): Promise<Ran> {
  return exec(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], {
    timeout: 25_000,
    killSignal: 'SIGKILL',
    cwd: process.cwd(),
  }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e: { code?: number; killed?: boolean; stdout: string; stderr: string }) => ({
      code: e.killed ? null : (e.code ?? null),
      stdout: e.stdout,
      stderr: e.stderr,
    }),
  );
}

/** One usage line, the hint, nothing else; exit 2. */
function expectUsage(r: Ran, text?: RegExp): void {
  expect(r.code, r.stderr).toBe(2);
  expect(r.stderr).toMatch(/^jcp frost: error \[usage\]: [^\n]+\nRun 'jcp frost --help'\.\n$/);
  if (text) expect(r.stderr.split('\n')[0]).toMatch(text);
}

/** One `io` line naming `path`; exit 1; no raw system code in brackets. */
function expectIo(r: Ran, path: string): void {
  expect(r.code, r.stderr).toBe(1);
  expect(r.stderr).toMatch(/^jcp frost: error \[io\]: [^\n]+\n$/);
  expect(r.stderr).toContain(path);
  expect(r.stderr).not.toMatch(/\[E[A-Z]+\]/);
}

function tmp(name: string): string {
  return mkdtempSync(join(root, `${name}-`));
}

describe('jcp frost / usage errors are one line with code usage, exit 2', () => {
  it('sub-commands, missing and malformed options, bad values, unset variables', async () => {
    const out = join(tmp('usage'), 'out');
    const cases: [string[], RegExp][] = [
      [[], /a sub-command is required/],
      [['bogus'], /unknown sub-command 'bogus'/],
      [['deal', '--participants', '3', '--out', out], /--threshold is required/],
      [['deal', '--threshold', '-2', '--participants', '3', '--out', out], /--threshold needs a value.*--threshold=-VALUE/],
      [['deal', '--threshold=-2', '--participants', '3', '--out', out], /--threshold must be a non-negative integer, got '-2'/],
      [['deal', '--threshold'], /--threshold needs a value$/],
      [['deal', '--threshold', '2x', '--participants', '3', '--out', out], /--threshold must be/],
      [['sign', '--retries', '-1'], /--retries needs a value/],
      [['deal', '--json=1'], /--json takes no value/],
      [['deal', '--bogus'], /unknown option --bogus/],
      [['deal', 'stray'], /unexpected argument 'stray'/],
      [['sign', '--message', '00'], /--group DID is required/],
      [['sign', '--group', GROUP, '--message', 'zz', '--nats', DEAD_NATS], /--message zz: neither hex .* nor an existing file/],
      [['sign', '--group', GROUP, '--message', join(root, 'no-such-message'), '--nats', DEAD_NATS], /no such file/],
      [['sign', '--group', GROUP, '--message', '00', '--nats', DEAD_NATS, '--signers', '0'], /--signers must be an integer ≥ 1/],
      [
        ['deal', '--threshold', '2', '--participants', '3', '--out', out, '--passphrase-env', 'JCP_TEST_SURELY_UNSET_VAR'],
        /JCP_TEST_SURELY_UNSET_VAR: the variable is empty or unset/,
      ],
    ];
    // Independent commands, four at a time (each is mostly Node's start-up).
    const ran: Ran[] = [];
    for (let i = 0; i < cases.length; i += 4) ran.push(...(await Promise.all(cases.slice(i, i + 4).map(([args]) => frost(args)))));
    for (const [i, [, text]] of cases.entries()) expectUsage(ran[i]!, text);
    expect(existsSync(out)).toBe(false);
  });

  it('refusing to overwrite a share is a usage error, and writes none of the files', async () => {
    const dir = tmp('overwrite');
    expect((await frost(['deal', '--threshold', '2', '--participants', '3', '--out', dir])).code).toBe(0);
    rmSync(join(dir, 'participant-1.share'));
    expectUsage(
      await frost(['deal', '--threshold', '2', '--participants', '3', '--out', dir]),
      /participant-2\.share exists; refusing to overwrite/,
    );
    expect(readdirSync(dir).sort()).toEqual(['participant-2.share', 'participant-3.share']);
  });
});

describe('jcp frost / repeated options', () => {
  it('refuse / a single-value option given twice (deal --threshold 2 --threshold 3 is not a 3-of-3)', async () => {
    const out = join(tmp('repeat'), 'out');
    expectUsage(
      await frost(['deal', '--threshold', '2', '--threshold', '3', '--participants', '3', '--out', out]),
      /--threshold is given more than once/,
    );
    expectUsage(
      await frost(['deal', '--threshold', '2', '--participants', '3', '--out', out, '--json', '--json']),
      /--json is given more than once/,
    );
    expectUsage(
      await frost(['sign', '--group', GROUP, '--message', '00', '--message', '01', '--nats', DEAD_NATS]),
      /--message is given more than once/,
    );
    expect(existsSync(out)).toBe(false);
  });

  it('refuse / participant without --approve: frost-approve-required before anything is opened or connected', async () => {
    const ks = join(tmp('noapprove'), 'ks');
    const r = await frost(['participant', '--keystore', ks, '--nats', DEAD_NATS]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/^jcp frost: error \[frost-approve-required\]: .*--approve allow-all/);
    // Not even the keystore folder was made, and the dead NATS URL was never tried.
    expect(existsSync(ks)).toBe(false);
    expect(r.stderr).not.toMatch(/frost-transport/);
  });

  it('refuse / a webhook secret file group or others can read, or a secret flag without --approve webhook', async () => {
    const dir = tmp('websecret');
    const f = join(dir, 'hook.secret');
    writeFileSync(f, 's'.repeat(40), { mode: 0o644 });
    const hook = ['participant', '--keystore', join(dir, 'ks'), '--nats', DEAD_NATS, '--approve', 'webhook', 'http://127.0.0.1:9/'];
    const loose = await frost([...hook, '--webhook-secret-file', f]);
    expect(loose.code, loose.stderr).toBe(1);
    expect(loose.stderr).toMatch(
      /^jcp frost: error \[frost-policy-invalid\]: webhook secret file .*mode 0644 lets group or others read it/,
    );
    expectUsage(
      await frost(['participant', '--keystore', join(dir, 'ks'), '--approve', 'allow-all', '--webhook-secret-env', 'X']),
      /--webhook-secret-file\/--webhook-secret-env go with --approve webhook/,
    );
  });

  it('refuse / --approve webhook without a secret, unless --webhook-unauthenticated says so', async () => {
    const dir = tmp('nosecret');
    const ks = join(dir, 'ks');
    const hook = ['participant', '--keystore', ks, '--nats', DEAD_NATS, '--approve', 'webhook', 'http://127.0.0.1:9/'];
    const bare = await frost(hook);
    expect(bare.code, bare.stderr).toBe(1);
    expect(bare.stderr).toMatch(/^jcp frost: error \[frost-webhook-secret-required\]: --approve webhook needs --webhook-secret-file/);
    expect(existsSync(ks)).toBe(false);
    // The explicit opt-out gets past the check (to the dead NATS) and says what it costs.
    const open = await frost([...hook, '--webhook-unauthenticated']);
    expect(open.code, open.stderr).toBe(1);
    expect(open.stderr).toMatch(/webhook answers are not authenticated/);
    expect(open.stderr).not.toMatch(/frost-webhook-secret-required/);
    expectUsage(
      await frost(['participant', '--keystore', ks, '--approve', 'allow-all', '--webhook-unauthenticated']),
      /--webhook-unauthenticated goes with --approve webhook and no webhook secret/,
    );
  });

  it('a repeatable option (--coordinator) may still be given twice', async () => {
    const a = actorFromSeed(new Uint8Array(32).fill(1)).did;
    const b = actorFromSeed(new Uint8Array(32).fill(2)).did;
    const r = await frost([
      'participant',
      '--keystore',
      join(tmp('coord'), 'ks'),
      '--coordinator',
      a,
      '--coordinator',
      b,
      '--nats',
      DEAD_NATS,
      '--approve',
      'allow-all',
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/error \[frost-transport\]/);
  });
});

describe('jcp frost / --timeout-ms is 1..3600000', () => {
  it('refuse / 0, 3600001, 99999999999 and 1.5 for dkg and sign, with no TimeoutOverflowWarning', async () => {
    for (const bad of ['0', '3600001', '99999999999', '1.5']) {
      const dkg = await frost(['dkg', '--threshold', '2', '--participants', '3', '--nats', DEAD_NATS, '--timeout-ms', bad]);
      expectUsage(dkg, /--timeout-ms must be an integer in 1\.\.3600000/);
      const sign = await frost(['sign', '--group', GROUP, '--message', '00', '--nats', DEAD_NATS, '--timeout-ms', bad]);
      expectUsage(sign, /--timeout-ms must be an integer in 1\.\.3600000/);
      expect(dkg.stderr + sign.stderr).not.toMatch(/TimeoutOverflowWarning/);
    }
  });

  it('accepts 1 and 3600000 (the command goes on to connect)', async () => {
    // Both reach the dead NATS and wait out its connect deadline: side by side, not one after the other.
    const ran = await Promise.all(
      ['1', '3600000'].map((ok) => frost(['sign', '--group', GROUP, '--message', '00', '--nats', DEAD_NATS, '--timeout-ms', ok])),
    );
    for (const r of ran) {
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/error \[frost-transport\]/);
    }
  });
});

describe('jcp frost / --message is unambiguous', () => {
  it('refuse / bare hex that is also a file name here; ./NAME is the file, 0xHEX the bytes', async () => {
    const cwd = tmp('msg');
    writeFileSync(join(cwd, 'cafe'), 'file bytes, not 0xcafe');
    const sign = (m: string) => frost(['sign', '--group', GROUP, '--message', m, '--nats', DEAD_NATS], { cwd });
    // The accepted forms each wait out the dead NATS's connect deadline: run side by side.
    const [both, file, hex, bare, missing, odd] = await Promise.all(['cafe', './cafe', '0xcafe', 'beef', './beef', '0xcaf'].map(sign));
    expectUsage(both!, /--message cafe is both hex and the name of a file here: write \.\/cafe to sign the file, or 0xcafe/);
    for (const [m, r] of [
      ['./cafe', file],
      ['0xcafe', hex],
      ['beef', bare],
    ] as const) {
      expect(r!.code, `${m}: ${r!.stderr}`).toBe(1);
      expect(r!.stderr).toMatch(/error \[frost-transport\]/);
    }
    expectUsage(missing!, /--message \.\/beef: no such file/);
    expectUsage(odd!, /not hex after 0x/);
  });

  it('readMessage: which bytes each form names', () => {
    const dir = tmp('msgbytes');
    const file = join(dir, 'cafe');
    writeFileSync(file, 'abc');
    expect(readMessage(file)).toEqual(new Uint8Array([0x61, 0x62, 0x63]));
    expect(readMessage('0xCAFE')).toEqual(new Uint8Array([0xca, 0xfe]));
    expect(readMessage('0x')).toEqual(new Uint8Array(0));
    expect(() => readMessage('')).toThrow(/empty: write 0x/);
    expect(readMessage('00ff')).toEqual(new Uint8Array([0x00, 0xff]));
    expect(() => readMessage(dir)).toThrow(/not a regular file/);
  });
});

describe('jcp frost / files and folders: code io naming the path', () => {
  it('refuse / --out or --keystore that is a file, a path through a file, a missing --identity', async () => {
    const dir = tmp('io');
    const file = join(dir, 'a-file');
    writeFileSync(file, 'x');
    const deal = (out: string) => frost(['deal', '--threshold', '2', '--participants', '3', '--out', out]);
    const r1 = await deal(file);
    expectIo(r1, file);
    expect(r1.stderr).toMatch(/exists and is not a folder/);
    expectIo(await deal(join(file, 'sub')), join(file, 'sub'));
    const missing = join(dir, 'nope.key');
    const r2 = await frost(['sign', '--group', GROUP, '--message', '00', '--identity', missing, '--nats', DEAD_NATS]);
    expectIo(r2, missing);
    expect(r2.stderr).toMatch(/cannot read .*no such file or folder/);
    const r3 = await frost(['dkg', '--threshold', '2', '--participants', '3', '--identity', missing, '--nats', DEAD_NATS]);
    expectIo(r3, missing);
  });

  it.runIf(LINUX)('refuse / a folder that takes no new files (a share cannot be written) is io, not ENOENT', async () => {
    const r = await frost(['deal', '--threshold', '2', '--participants', '3', '--out', '/proc/self']);
    expectIo(r, '/proc/self/participant-1.share');
    expect(r.stderr).toMatch(/cannot write/);
  });

  it('refuse / a --keystore that is a file (participant; needs NATS)', async () => {
    const file = join(tmp('ksfile'), 'a-file');
    writeFileSync(file, 'x');
    const r = await frost([
      'participant',
      '--keystore',
      file,
      '--nats',
      NATS_URL,
      '--prefix',
      uniquePrefix('cliks'),
      '--approve',
      'allow-all',
    ]);
    expectIo(r, file);
    expect(r.stderr).toMatch(/exists and is not a folder/);
  });
});

describe.runIf(LINUX)('folders under /proc fail at once (Node 20 recursive mkdir spins there)', () => {
  it('deal --out /proc/x/y: io, no hang', async () => {
    const r = await frost(['deal', '--threshold', '2', '--participants', '3', '--out', '/proc/x/y']);
    expectIo(r, '/proc/x');
    expect(r.stderr).toMatch(/\/proc does not accept new folders/);
  });

  it('participant --keystore /proc/x: io, no hang (needs NATS)', async () => {
    const r = await frost([
      'participant',
      '--keystore',
      '/proc/x',
      '--nats',
      NATS_URL,
      '--prefix',
      uniquePrefix('cliproc'),
      '--approve',
      'allow-all',
    ]);
    expectIo(r, '/proc/x');
  });

  it('jcp node start --data /proc/x: config-invalid naming data_dir, no hang', async () => {
    const r = await jcp(['node', 'start', '--data', '/proc/x', '--listen', '127.0.0.1:0']);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/^jcp node: error \[config-invalid\]: data_dir: cannot create folder \/proc\/x: /);
  });

  it('the key file writer and the helper itself (used by jcp shards too): typed errors, no hang', async () => {
    const r = await tsChild(`
      const { makeDirs } = await import(${JSON.stringify(new URL('../../io/files.ts', import.meta.url).pathname)});
      const { writeKeyFile } = await import(${JSON.stringify(new URL('../../node/keyfile.ts', import.meta.url).pathname)});
      const { actorFromSeed } = await import(${JSON.stringify(new URL('../../core/actor.ts', import.meta.url).pathname)});
      const codes = [];
      try { makeDirs('/proc/x/y'); } catch (e) { codes.push(e.code, e.path); }
      try { writeKeyFile('/proc/x/steward.key', actorFromSeed(new Uint8Array(32))); } catch (e) { codes.push(e.code); }
      console.log(JSON.stringify(codes));
    `);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual(['io', '/proc/x', 'key-file-invalid']);
  });
});

describe('keystore lock / read through a size cap', () => {
  it.skipIf(!LINUX)('a stale .lock that is endless (a link to /dev/zero) is not read to its end: taken over at once', async () => {
    const dir = tmp('lock');
    symlinkSync('/dev/zero', join(dir, '.lock'));
    const r = await tsChild(`
      const { Keystore } = await import(${JSON.stringify(new URL('../../frost/keystore.ts', import.meta.url).pathname)});
      Keystore.open(${JSON.stringify(dir)}, { logN: 10 }).close();
      console.log('opened');
    `);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe('opened');
  });
});

describe('makeDirs', () => {
  it('creates missing parents with the mode, accepts existing folders, refuses a file in the way', async () => {
    const { makeDirs } = await import('../../io/index.ts');
    const base = tmp('mk');
    const deep = join(base, 'a', 'b', 'c');
    makeDirs(deep, 0o700);
    makeDirs(deep, 0o700);
    const { statSync } = await import('node:fs');
    expect(statSync(join(base, 'a')).mode & 0o777).toBe(0o700);
    expect(statSync(deep).isDirectory()).toBe(true);
    mkdirSync(join(base, 'x'));
    writeFileSync(join(base, 'x', 'f'), '');
    expect(() => makeDirs(join(base, 'x', 'f', 'g'))).toThrow(expect.objectContaining({ code: 'io' }));
    expect(() => makeDirs(join(base, 'x', 'f'))).toThrow(/exists and is not a folder/);
  });
});

describe('jcp frost participant / a wrong passphrase writes nothing (needs NATS)', () => {
  it('the first start with a wrong passphrase fails without creating identity.key; the right one then opens the keystore', async () => {
    const ks = tmp('pass');
    const env = { ...process.env, JCP_TEST_RIGHT: 'correct horse battery staple', JCP_TEST_WRONG: 'Tr0ub4dor&3' };
    expect(
      (await frost(['deal', '--threshold', '2', '--participants', '3', '--out', ks, '--passphrase-env', 'JCP_TEST_RIGHT'], { env })).code,
    ).toBe(0);
    const before = readdirSync(ks).sort();
    const r = await frost(
      [
        'participant',
        '--keystore',
        ks,
        '--nats',
        NATS_URL,
        '--prefix',
        uniquePrefix('clipass'),
        '--passphrase-env',
        'JCP_TEST_WRONG',
        '--approve',
        'allow-all',
      ],
      { env },
    );
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/^jcp frost: error \[frost-wrong-passphrase\]/);
    expect(readdirSync(ks).sort()).toEqual(before);
    const k = Keystore.open(ks, { passphrase: 'correct horse battery staple' });
    try {
      expect(k.shares.length).toBe(3);
    } finally {
      k.close();
    }
    let wrongAgain: unknown;
    try {
      Keystore.open(ks, { passphrase: 'Tr0ub4dor&3' });
    } catch (e) {
      wrongAgain = e;
    }
    expect(isFrostError(wrongAgain) ? wrongAgain.code : wrongAgain).toBe('frost-wrong-passphrase');
  });
});
