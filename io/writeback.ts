/**
 * Writing a file's pages back to the disk without a metadata flush: sync_file_range(2) with
 * SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER on one byte
 * range (Linux, glibc; bound through koffi on first use, the call made on koffi's thread pool off
 * the event loop). It is what database engines' `bytes_per_sync` does (RocksDB's is
 * sync_file_range): the dirty pages of a large file go out piece by piece, each piece waited for,
 * so the fsyncs of other files on the same disk (a log's group commit) never wait behind
 * megabytes of them, and, unlike fdatasync, no piece forces a journal commit those fsyncs would
 * wait for too. It makes nothing durable: a file still needs its fsync.
 */

/** SYNC_FILE_RANGE_WAIT_BEFORE (1) | SYNC_FILE_RANGE_WRITE (2) | SYNC_FILE_RANGE_WAIT_AFTER (4). */
const WRITE_AND_WAIT = 1 | 2 | 4;

type SyncFileRange = { async(fd: number, offset: number, nbytes: number, flags: number, done: (err: unknown, rc: number) => void): void };

let bound: Promise<SyncFileRange | undefined> | undefined;

async function bind(): Promise<SyncFileRange | undefined> {
  if (process.platform !== 'linux') return undefined;
  try {
    const koffi = (await import('koffi')).default;
    return koffi.load('libc.so.6').func('int sync_file_range(int fd, int64_t offset, int64_t nbytes, unsigned int flags)') as SyncFileRange;
  } catch {
    return undefined; // no glibc (musl, another system): the caller flushes another way
  }
}

/**
 * Writes back bytes `[offset, offset + length)` of the open file `fd` and waits until they are on
 * the disk's queue and written (sync_file_range(2), see the module docs); nothing of the file's
 * metadata is flushed and nothing is made durable.
 * @returns true when done; false where sync_file_range is not available or failed (the caller
 *   falls back to fdatasync). Never rejects.
 */
export async function writeBackRange(fd: number, offset: number, length: number): Promise<boolean> {
  bound ??= bind();
  const f = await bound;
  if (f === undefined) return false;
  return new Promise<boolean>((resolve) => {
    try {
      f.async(fd, offset, length, WRITE_AND_WAIT, (err, rc) => resolve(err == null && rc === 0));
    } catch {
      resolve(false);
    }
  });
}
