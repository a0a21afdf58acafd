/**
 * Filesystem helpers shared by the CLI, the node (node/node.ts, node/keyfile.ts) and the FROST
 * keystore. Depends on node:fs and node:path only, so any layer may import it.
 *
 * - {@link makeDirs} replaces `mkdirSync(dir, {recursive: true})`, which on Node 20 loops forever
 *   at full CPU for paths the kernel refuses oddly (e.g. under /proc: mkdir answers ENOENT for a
 *   parent that exists, and Node's recursive mkdir retries the parent, gets EEXIST, and repeats).
 * - {@link IoError} is the one coded failure for files and folders: code `io`, a message naming
 *   the path and what was wrong, the system code (`ENOENT`, `EACCES`…) kept in `errno`.
 */
import { mkdirSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

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
  const doing = { open: 'open', stat: 'read', lstat: 'read', read: 'read', write: 'write', mkdir: 'create folder', rename: 'rename', unlink: 'remove', scandir: 'list folder', fsync: 'sync', rmdir: 'remove folder' }[e.syscall ?? ''];
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
