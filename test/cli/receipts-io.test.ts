/**
 * `jcp receipts verify` on a log LevelDB cannot open because of the operating system (full disk,
 * quota, permissions, read-only file system, I/O error, descriptor limit) reports `io` with advice
 * to fix the cause and retry, never `log-corrupt` nor the advice to repair: the log is intact, and
 * verify finds every receipt once the cause is gone. A real corruption keeps `log-corrupt` and the
 * repair advice. The same holds for `node.json` and the head mark, read before LevelDB. The system
 * error is injected (LevelDB's open, node:fs's openSync): no real full disk nor unreadable file
 * (these tests may run as root) is needed.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, test, vi } from 'vitest';
import { JcpClient } from '../../client/index.ts';
import { IoError } from '../../io/index.ts';
import { ReceiptLog, readDataMeta } from '../../node/index.ts';
import { runJcpInProcess } from '../support.ts';
import { cast, liveNode, mint, tempFolders } from '../node/fixtures.ts';

/**
 * `text`: the failure LevelDB's next open reports, as classic-level shapes it; `open`: a file name
 * (`node.json`, `head`) whose openSync fails with `errno`. Undefined: everything works.
 */
const fault = vi.hoisted(() => ({ text: undefined as string | undefined, open: undefined as string | undefined, errno: 'EACCES' }));

vi.mock('node:fs', async (importOriginal) => {
  const m = await importOriginal<typeof import('node:fs')>();
  const openSync = (file: import('node:fs').PathLike, ...rest: unknown[]): number => {
    if (fault.open !== undefined && String(file).endsWith(`/${fault.open}`)) {
      const why = { EACCES: 'permission denied', EIO: 'i/o error' }[fault.errno] ?? fault.errno;
      throw Object.assign(new Error(`${fault.errno}: ${why}, open '${String(file)}'`), {
        code: fault.errno,
        syscall: 'open',
        path: String(file),
      });
    }
    return (m.openSync as (...a: unknown[]) => number)(file, ...rest);
  };
  return { ...m, openSync, default: { ...m, openSync } };
});

vi.mock('classic-level', async (importOriginal) => {
  const m = await importOriginal<typeof import('classic-level')>();
  class FaultyLevel<K, V> extends m.ClassicLevel<K, V> {
    // biome-ignore lint/suspicious/noExplicitAny: passes open's overloads through unchanged
    override open(...args: any[]): any {
      if (fault.text === undefined) return (super.open as (...a: unknown[]) => unknown)(...args);
      const cause = Object.assign(new Error(fault.text), { code: 'LEVEL_IO_ERROR' });
      return Promise.reject(Object.assign(new Error('Database failed to open', { cause }), { code: 'LEVEL_DATABASE_NOT_OPEN' }));
    }
  }
  return { ...m, ClassicLevel: FaultyLevel };
});

const folder = tempFolders('receipts-io');
const { rng, alice, bob } = cast('receipts-io');

/** A stopped node's data folder holding three receipts. */
async function folderWithReceipts(): Promise<string> {
  const dir = folder();
  const g = mint(alice, bob, 'tools', ['read'], 10_000n, rng);
  const a = await liveNode({}, {}, dir);
  const c = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: bob });
  for (let i = 0; i < 3; i++) await c.call({ chain: [g], action: 'read', payload: { i }, cost: { uj: 5n, provenance: 'Estimator' } });
  await c.close();
  await a.close();
  return dir;
}

describe('jcp receipts: an operating-system error opening the log', { timeout: 60_000 }, () => {
  const CASES: Array<[errno: string, strerror: string, advice: RegExp]> = [
    ['ENOSPC', 'No space left on device', /free disk space/],
    ['EDQUOT', 'Disk quota exceeded', /quota/],
    ['EACCES', 'Permission denied', /permissions/],
    ['EROFS', 'Read-only file system', /writable/],
    ['EIO', 'Input/output error', /disk/],
    ['EMFILE', 'Too many open files', /open-file limit/],
  ];

  test.each(CASES)(
    '%s / verify says io with advice to fix the cause and retry, never repair; afterwards verify finds every receipt',
    async (errno, strerror, advice) => {
      const dir = await folderWithReceipts();
      fault.text = `IO error: ${path.join(dir, 'receipts', '000007.log')}: ${strerror}`;
      try {
        const r = await runJcpInProcess(['receipts', 'verify', dir]);
        expect(r.code).toBe(1);
        expect(r.out).toBe('');
        expect(r.err).toMatch(/^jcp receipts: error \[io\]: /);
        expect(r.err).toContain(strerror);
        expect(r.err).toContain(`(${errno})`);
        expect(r.err).toMatch(advice);
        expect(r.err).toMatch(/retry/);
        expect(r.err).not.toMatch(/log-corrupt|jcp receipts repair|Repair it/);
        expect(r.err.trimEnd().split('\n')).toHaveLength(1);
        // The node's path (ReceiptLog.open) gets the same coded failure: `jcp node start` prints it as io.
        const e = await ReceiptLog.open(dir, { steward: readDataMeta(dir)!.steward, mustExist: true, nowS: 0 }).catch((x: unknown) => x);
        expect(e).toBeInstanceOf(IoError);
        expect(e).toMatchObject({ code: 'io', errno });
      } finally {
        fault.text = undefined;
      }
      const again = await runJcpInProcess(['receipts', 'verify', dir]);
      expect(again.code).toBe(0);
      expect(JSON.parse(again.out)).toMatchObject({ receipts: 3, good: 3, bad: 0 });
    },
  );

  test.each([
    ['node.json', 'EACCES', /permissions/],
    ['head', 'EIO', /disk/],
  ])('%s unreadable (%s) / io with the advice to fix the cause, not log-corrupt', async (file, errno, advice) => {
    const dir = await folderWithReceipts();
    fault.open = file;
    fault.errno = errno;
    try {
      const r = await runJcpInProcess(['receipts', 'verify', dir]);
      expect(r.code).toBe(1);
      expect(r.err).toMatch(/^jcp receipts: error \[io\]: /);
      expect(r.err).toContain(path.join(dir, file));
      expect(r.err).toContain(errno);
      expect(r.err).toMatch(advice);
      expect(r.err).not.toMatch(/log-corrupt|repair/i);
    } finally {
      fault.open = undefined;
    }
    const again = await runJcpInProcess(['receipts', 'verify', dir]);
    expect(again.code).toBe(0);
  });

  test.each([
    ['EROFS', 'Read-only file system', /writable/],
    ['EACCES', 'Permission denied', /permissions/],
  ])(
    '%s on the LOCK file / io, not log-locked (a reviewer saw "in use by another process" on a read-only disk)',
    async (errno, strerror, advice) => {
      const dir = await folderWithReceipts();
      fault.text = `IO error: ${path.join(dir, 'receipts', 'LOCK')}: ${strerror}`;
      try {
        const r = await runJcpInProcess(['receipts', 'verify', dir]);
        expect(r.code).toBe(1);
        expect(r.err).toMatch(/^jcp receipts: error \[io\]: /);
        expect(r.err).toContain(`(${errno})`);
        expect(r.err).toMatch(advice);
        expect(r.err).not.toMatch(/log-locked|another process/);
      } finally {
        fault.text = undefined;
      }
    },
  );

  test('log-locked / a log another process holds is still log-locked', async () => {
    const dir = await folderWithReceipts();
    fault.text = `IO error: lock ${path.join(dir, 'receipts', 'LOCK')}: Resource temporarily unavailable`;
    try {
      const r = await runJcpInProcess(['receipts', 'verify', dir]);
      expect(r.code).toBe(1);
      expect(r.err).toMatch(/^jcp receipts: error \[log-locked\]: /);
    } finally {
      fault.text = undefined;
    }
  });

  test('log-corrupt / a damaged log keeps its code and the advice to repair', async () => {
    const dir = await folderWithReceipts();
    writeFileSync(path.join(dir, 'receipts', 'CURRENT'), 'MANIFEST-999999\n');
    const r = await runJcpInProcess(['receipts', 'verify', dir]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/^jcp receipts: error \[log-corrupt\]: .*Repair it with 'jcp receipts repair /);
  });
});
