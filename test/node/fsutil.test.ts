/** io/files.ts readFileCapped: the one way key, config and chain files are read — bounded, and never blocked by a pipe. */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { readFileCapped } from '../../io/index.ts';
import { tempDir } from './fixtures.ts';

const t = tempDir('fsutil');
afterAll(() => t.cleanup());

describe('readFileCapped', () => {
  test('a FIFO with no writer is refused at once (io, EINVAL), not waited on', () => {
    const fifo = path.join(t.dir, 'fifo');
    execFileSync('mkfifo', [fifo]);
    // (the old blocking open never returned: the test timed out)
    expect(() => readFileCapped(fifo, 1024, 'key file')).toThrow(expect.objectContaining({ code: 'io', errno: 'EINVAL' }));
  });

  test('an endless character device stops at the cap (io, EFBIG)', () => {
    expect(() => readFileCapped('/dev/zero', 4096, 'config file')).toThrow(expect.objectContaining({ code: 'io', errno: 'EFBIG' }));
  });
});
