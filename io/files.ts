/**
 * Filesystem helpers shared by the CLI, the node (node/node.ts, node/keyfile.ts, node/config.ts)
 * and the FROST keystore. Depends on node:fs and node:path only (and koffi, loaded on first use,
 * for io/writeback.ts), so any layer may import it.
 *
 * - {@link readFileCapped} is how every key, config, chain, grant, share and message file is read:
 *   at most its kind's cap (see {@link READ_CAPS}) plus one byte is ever read, so an endless file
 *   (`/dev/zero`, `/dev/urandom`) or a huge one is refused at once, not loaded into memory; a FIFO or
 *   socket is refused without waiting for a writer.
 * - {@link makeDirs} replaces `mkdirSync(dir, {recursive: true})`, which on Node 20 loops forever
 *   at full CPU for paths the kernel refuses oddly (e.g. under /proc: mkdir answers ENOENT for a
 *   parent that exists, and Node's recursive mkdir retries the parent, gets EEXIST, and repeats).
 * - {@link IoError} is the one coded failure for files and folders: code `io`, a message naming
 *   the path and what was wrong, the system code (`ENOENT`, `EACCES`…) kept in `errno`.
 */
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  constants,
  fstatSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { open as openAsync, rename as renameAsync, rm as rmAsync } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { writeBackRange } from './writeback.ts';

/** The stable code of every {@link IoError}. */
export const IO_ERROR_CODE = 'io';

/** A file or folder that could not be read, written or created. `code` is always `io`. */
export class IoError extends Error {
  override readonly name = 'IoError';
  readonly code = IO_ERROR_CODE;
  /** The path at fault. */
  readonly path: string;
  /** The underlying system error code (`ENOENT`, `EACCES`, `EROFS`…), when there was one. */
  readonly errno: string | undefined;

  constructor(path: string, message: string, errno?: string, options?: ErrorOptions) {
    super(message, options);
    this.path = path;
    this.errno = errno;
  }
}

const WHY: Readonly<Record<string, string>> = {
  ENOENT: 'no such file or folder',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EROFS: 'read-only file system',
  ENOTDIR: 'a component of the path is not a folder',
  EISDIR: 'is a folder',
  EEXIST: 'already exists',
  ENOSPC: 'no space left on the device',
  EDQUOT: 'disk quota exceeded',
  ELOOP: 'too many symbolic links',
  ENAMETOOLONG: 'name too long',
  EMFILE: 'too many open files',
  EIO: 'input/output error',
  EBUSY: 'resource busy',
  EFBIG: 'file too large',
};

/** The system error code of `e` (`ENOENT`…), if it is a Node system error. */
export function errnoOf(e: unknown): string | undefined {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^E[A-Z0-9]+$/.test(code) ? code : undefined;
}

/** True when `e` is a Node system error (it has an `E…` code and names a syscall). */
export function isSystemError(e: unknown): e is NodeJS.ErrnoException {
  return e instanceof Error && errnoOf(e) !== undefined && typeof (e as NodeJS.ErrnoException).syscall === 'string';
}

/** "permission denied (EACCES)": a system error in words, with its code. */
export function describeErrno(e: unknown): string {
  const errno = errnoOf(e);
  if (errno === undefined) return (e as Error)?.message ?? String(e);
  return `${WHY[errno] ?? (e as Error).message} (${errno})`;
}

/**
 * Wraps a system error as an {@link IoError}: "cannot `doing` `path`: permission denied (EACCES)".
 * An IoError passes through unchanged.
 */
export function ioError(e: unknown, doing: string, path: string): IoError {
  if (e instanceof IoError) return e;
  return new IoError(path, `cannot ${doing} ${path}: ${describeErrno(e)}`, errnoOf(e), { cause: e });
}

/** Wraps any Node system error (from fs) as an {@link IoError} naming its syscall and path; other values pass through. */
export function fromSystemError(e: unknown): unknown {
  if (!isSystemError(e)) return e;
  const path = e.path ?? '(unknown path)';
  const doing = {
    open: 'open',
    stat: 'read',
    lstat: 'read',
    read: 'read',
    write: 'write',
    mkdir: 'create folder',
    rename: 'rename',
    unlink: 'remove',
    scandir: 'list folder',
    fsync: 'sync',
    rmdir: 'remove folder',
  }[e.syscall ?? ''];
  return ioError(e, doing ?? e.syscall ?? 'access', path);
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/**
 * Creates folder `dir` and any missing parents, one component at a time with non-recursive
 * `mkdirSync` (new folders get `mode`, less the umask). An existing component is accepted only
 * when it is a folder (or a symbolic link to one); EEXIST from a racing creator is tolerated only
 * then. Never loops: each missing component is tried once.
 * @throws IoError naming the component at fault (a file in the way, permission denied,
 *   read-only file system, a folder that does not accept new entries such as /proc…).
 */
export function makeDirs(dir: string, mode = 0o700): void {
  const target = resolve(dir);
  if (isDirectory(target)) return;
  // The missing components, deepest first; stop at the first entry that exists (or cannot be read).
  const missing: string[] = [];
  let p = target;
  for (;;) {
    let exists = true;
    try {
      statSync(p);
    } catch (e) {
      if (errnoOf(e) !== 'ENOENT') throw ioError(e, 'create folder', target);
      exists = false;
    }
    if (exists) {
      if (!isDirectory(p)) throw new IoError(p, `cannot create folder ${target}: ${p} exists and is not a folder`, 'EEXIST');
      break;
    }
    missing.push(p);
    if (dirname(p) === p) break;
    p = dirname(p);
  }
  for (const m of missing.reverse()) {
    try {
      mkdirSync(m, { mode });
    } catch (e) {
      const errno = errnoOf(e);
      if (errno === 'EEXIST') {
        if (isDirectory(m)) continue; // made by someone else meanwhile
        throw new IoError(m, `cannot create folder ${target}: ${m} exists and is not a folder`, errno, { cause: e });
      }
      if (errno === 'ENOENT' && isDirectory(dirname(m))) {
        // The parent is there but refuses new entries (/proc, /sys and other virtual file systems).
        throw new IoError(m, `cannot create folder ${target}: ${dirname(m)} does not accept new folders (ENOENT)`, errno, { cause: e });
      }
      throw new IoError(m, `cannot create folder ${target}: ${m === target ? '' : `at ${m}: `}${describeErrno(e)}`, errno, { cause: e });
    }
  }
}

/**
 * The most bytes read from each kind of file (see {@link readFileCapped}); each is far above what
 * a valid file of the kind holds.
 * - `keyFile` 64 KiB: an actor key file is about 200 bytes of JSON.
 * - `identityFile` 64 KiB: a FROST identity file (a sealed seed) is under 1 KiB.
 * - `configFile` 4 MiB: a node config (resources, trust roots, meter, cluster channels).
 * - `chainFile` 8 MiB: up to 32 links (core/chain.ts), each as hex CBOR and a readable view; a
 *   chain a node with the default 1 MiB frame cap accepts is well under.
 * - `grantFile` 1 MiB: one signed grant (hex or raw bytes), for `jcp inspect --grant`.
 * - `shareFile` 4 MiB: a FROST share file: the group package for up to 1000 participants.
 * - `messageFile` 64 MiB: a message to threshold-sign; it must fit one NATS message, and NATS
 *   allows at most 64 MiB.
 * - `inspectInput` 64 MiB: any JCP object for `jcp inspect`, including an exported receipt log.
 * - `lockFile` 1 KiB: a keystore's `.lock` (a pid).
 * - `receiptFile` 64 MiB: receipts to verify from a file (`jcp receipts verify <file>`), as large
 *   as an exported log `jcp inspect` reads.
 * - `payloadFile` 64 MiB: a call's payload (`jcp call --payload-file`); a node refuses a request
 *   above its own frame cap (1 MiB by default) with `frame-too-large`.
 */
export const READ_CAPS = {
  keyFile: 64 << 10,
  identityFile: 64 << 10,
  configFile: 4 << 20,
  chainFile: 8 << 20,
  grantFile: 1 << 20,
  shareFile: 4 << 20,
  messageFile: 64 << 20,
  inspectInput: 64 << 20,
  lockFile: 1 << 10,
  receiptFile: 64 << 20,
  payloadFile: 64 << 20,
} as const;

/**
 * Reads standard input to its end, refusing more than `maxBytes` as soon as they are passed.
 * @param maxBytes the most bytes accepted (one of {@link READ_CAPS})
 * @param what what is read, for the message ("payload", "receipts")
 * @throws IoError `io` (`errno` EFBIG) when the input is longer than `maxBytes`.
 */
export async function readStdinCapped(maxBytes: number, what: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const c of process.stdin) {
    const chunk = typeof c === 'string' ? Buffer.from(c) : (c as Buffer);
    chunks.push(chunk);
    total += chunk.length;
    if (total > maxBytes) {
      process.stdin.destroy();
      throw new IoError(
        '-',
        `${what} (standard input): larger than ${bytesInWords(maxBytes)}, the most it may be; not read (EFBIG)`,
        'EFBIG',
      );
    }
  }
  return Buffer.concat(chunks, total);
}

/** "64 KiB", "4 MiB", "100 bytes": a byte count for people. */
function bytesInWords(n: number): string {
  if (n >= 1 << 20 && n % (1 << 20) === 0) return `${n / (1 << 20)} MiB`;
  if (n >= 1 << 10 && n % (1 << 10) === 0) return `${n / (1 << 10)} KiB`;
  return `${n} bytes`;
}

/** Bytes read per `readSync` call by {@link readFileCapped}. */
const READ_CHUNK = 64 << 10;

/**
 * Reads the whole of file `path`, refusing one longer than `maxBytes` after reading at most
 * `maxBytes + 1` bytes: a regular file whose size is already over the cap is refused before any
 * read, and an endless one (`/dev/zero`, `/dev/urandom`) as soon as
 * the cap is passed. Use it for every file read as a key, config, chain, grant, share or message
 * (caps per kind: {@link READ_CAPS}).
 * @param path the file to read
 * @param maxBytes the most bytes the file may hold (a non-negative integer)
 * @param what the kind of file, for the message ("key file", "config file"…)
 * @returns the file's bytes (a Buffer of at most `maxBytes` bytes)
 * @throws the Node system error itself when the file cannot be opened or read (`ENOENT`,
 *   `EACCES`, `EISDIR` for a folder…), exactly as `readFileSync` would throw it, so each caller
 *   keeps its own mapping of those; {@link IoError} (code `io`, `errno` `EFBIG`) when the file is
 *   longer than `maxBytes`: "`what` `path`: larger than 64 KiB, the most a `what` may be (EFBIG)";
 *   {@link IoError} (`errno` `EINVAL`) for a FIFO or a socket.
 */
export function readFileCapped(path: string, maxBytes: number, what = 'file'): Buffer {
  const tooLarge = () =>
    new IoError(
      path,
      `${what} ${path}: larger than ${bytesInWords(maxBytes)}, the most ${/^[aeiou]/i.test(what) ? 'an' : 'a'} ${what} may be; not read (EFBIG)`,
      'EFBIG',
    );
  // Non-blocking open: a FIFO with no writer would otherwise block here forever.
  const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const st = fstatSync(fd);
    if (st.isFIFO() || st.isSocket()) {
      throw new IoError(path, `${what} ${path}: a pipe or socket, not a file; not read`, 'EINVAL');
    }
    if (st.isFile() && st.size > maxBytes) throw tooLarge();
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const want = Math.min(READ_CHUNK, maxBytes + 1 - total);
      const chunk = Buffer.allocUnsafe(want);
      const n = readSync(fd, chunk, 0, want, null);
      if (n === 0) break;
      chunks.push(n === want ? chunk : chunk.subarray(0, n));
      total += n;
      if (total > maxBytes) throw tooLarge();
    }
    return Buffer.concat(chunks, total);
  } finally {
    closeSync(fd);
  }
}

/** The temporary file a durable write of `file` goes through: `.<name>.<pid>.<random>.tmp` beside it, one per writer. */
function tempPathFor(file: string): string {
  return join(dirname(file), `.${basename(file)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
}

/** A temporary file of a durable write: `.<name>.<pid>.<random>.tmp` (see {@link tempPathFor}). */
const TEMP_NAME = /^\.(.+)\.(\d+)\.[0-9a-f]+\.tmp$/;

/** The temporary files of {@link writeFileDurablyAsync} calls in progress in this thread (paths). */
const asyncTemps = new Set<string>();

/**
 * Removes from `dir` the temporary files of durable writes ({@link writeFileDurably}) that a crash
 * left (a write cut short, e.g. kill -9) for the target names `of` accepts: every one but those of
 * this thread's writes in progress. The process id in the name is not what tells them apart: a
 * node in a container is PID 1 at every start, so an earlier run's files carry its own pid. Only
 * for folders one process writes at a time (the caller holds a lock). Best effort: a file that
 * cannot be removed is left. Returns the names removed.
 */
export function removeStaleTemps(dir: string, of: (name: string) => boolean): string[] {
  const removed: string[] = [];
  for (const name of readdirSync(dir)) {
    const m = TEMP_NAME.exec(name);
    if (m === null || asyncTemps.has(join(dir, name)) || !of(m[1]!)) continue;
    try {
      unlinkSync(join(dir, name));
      removed.push(name);
    } catch {
      // left for the next time
    }
  }
  return removed;
}

/**
 * Writes `bytes` to `file` so that a crash leaves either the old file or the whole new one: a
 * temporary `.<name>.<pid>.<random>.tmp` beside it (created exclusively with mode `mode`, so two
 * writers never share one), every byte written, fsync, rename over `file`, then the folder
 * fsync'd so the rename itself is durable. A failed write or rename removes the temporary file.
 * @throws the file system error (nothing is renamed into place unless it was fsync'd).
 */
export function writeFileDurably(file: string, bytes: Uint8Array, mode = 0o600): void {
  const dir = dirname(file);
  const tmp = tempPathFor(file);
  const fd = openSync(tmp, 'wx', mode);
  try {
    try {
      for (let off = 0; off < bytes.length; ) off += writeSync(fd, bytes, off, bytes.length - off);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, file);
  } catch (e) {
    try {
      unlinkSync(tmp);
    } catch {
      // already gone
    }
    throw e;
  }
  const dfd = openSync(dir, 'r');
  try {
    fsyncSync(dfd);
  } finally {
    closeSync(dfd);
  }
}

/**
 * {@link writeFileDurably} off the event loop: the same steps and the same file (a temporary
 * `.<name>.<pid>.<random>.tmp` created exclusively, every byte written, fsync, rename, folder
 * fsync), each on the libuv thread pool,
 * so a caller that keeps serving meanwhile is not paused by the fsyncs. Every file handle it opens
 * is closed on every path; when a step fails, the temporary file is removed (best effort) and the
 * first error is the one rejected with (a failing close after it does not hide it).
 *
 * With `syncEveryBytes`, the bytes are written in pieces of that size, each written back to the
 * disk before the next is written (the `bytes_per_sync` of database engines): a large file then
 * never leaves megabytes of dirty pages for one flush, which the fsyncs of other files on the
 * same disk (a log's group commit) would wait behind. A piece is written back with
 * `opts.writeBack` (default {@link writeBackRange}: sync_file_range, no journal commit per
 * piece); where that answers false, with fdatasync.
 * @throws (rejects with) the Node system error of the step that failed (`ENOENT` for a missing
 *   folder, `EISDIR` when `file` is a folder, `ENOSPC`…); nothing is renamed into place unless it
 *   was fsync'd, and `file` is left as it was unless the rename happened.
 */
export async function writeFileDurablyAsync(
  file: string,
  bytes: Uint8Array,
  mode = 0o600,
  opts: {
    readonly syncEveryBytes?: number;
    readonly writeBack?: typeof writeBackRange;
  } = {},
): Promise<void> {
  const dir = dirname(file);
  const tmp = tempPathFor(file);
  const piece = opts.syncEveryBytes !== undefined && opts.syncEveryBytes > 0 ? opts.syncEveryBytes : bytes.length;
  asyncTemps.add(join(dir, basename(tmp)));
  try {
    await writeThrough(tmp, file, dir, bytes, piece, mode, opts.writeBack ?? writeBackRange);
  } finally {
    asyncTemps.delete(join(dir, basename(tmp)));
  }
}

/** The steps of {@link writeFileDurablyAsync} (`piece`: bytes between two write-backs). */
async function writeThrough(
  tmp: string,
  file: string,
  dir: string,
  bytes: Uint8Array,
  piece: number,
  mode: number,
  writeBack: typeof writeBackRange,
): Promise<void> {
  const fh = await openAsync(tmp, 'wx', mode);
  try {
    try {
      for (let off = 0; off < bytes.length; ) {
        const start = off;
        const end = Math.min(bytes.length, off + piece);
        while (off < end) off += (await fh.write(bytes, off, end - off)).bytesWritten;
        if (off < bytes.length && !(await writeBack(fh.fd, start, end - start))) await fh.datasync();
      }
      await fh.sync();
    } catch (e) {
      await fh.close().catch(() => undefined);
      throw e;
    }
    await fh.close();
    await renameAsync(tmp, file);
  } catch (e) {
    await rmAsync(tmp, { force: true }).catch(() => undefined);
    throw e;
  }
  const dh = await openAsync(dir, 'r');
  try {
    await dh.sync();
  } catch (e) {
    await dh.close().catch(() => undefined);
    throw e;
  }
  await dh.close();
}
