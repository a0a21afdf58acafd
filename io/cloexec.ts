/**
 * Keeping this process's files out of the processes it spawns: every open descriptor above 2 is
 * marked close-on-exec (fcntl(2) F_SETFD FD_CLOEXEC; Linux, glibc, bound through koffi) right
 * before a spawn. Node's own files, sockets and pipes are opened with O_CLOEXEC already; native
 * add-ons' are not: LevelDB (classic-level) opens the receipt log's LOG, LOCK, write-ahead `.log`
 * and MANIFEST without it, so without this mark every stdio MCP server the node starts inherits
 * them writable and can corrupt the log. A spawn that passes a descriptor on purpose (stdio pipes)
 * dup2s it in the child, which clears the mark there.
 *
 * A file a native add-on opens on its own thread between the mark and the fork (a compaction's
 * new table) can still be inherited: callers mark just before each spawn, which leaves that
 * window only.
 */
import { readdirSync } from 'node:fs';

const F_GETFD = 1;
const F_SETFD = 2;
const FD_CLOEXEC = 1;

type Fcntl = (fd: number, cmd: number, ...rest: unknown[]) => number;

/** undefined: not bound yet; null: not available here. */
let fcntl: Fcntl | null | undefined;

/**
 * Binds fcntl(2) through koffi (once). Resolves to false where it cannot be bound (not Linux, no
 * glibc): {@link markCloseOnExec} then does nothing. Never rejects.
 */
export async function bindCloseOnExec(): Promise<boolean> {
  if (fcntl === undefined) {
    if (process.platform !== 'linux') fcntl = null;
    else {
      try {
        const koffi = (await import('koffi')).default;
        fcntl = koffi.load('libc.so.6').func('int fcntl(int fd, int cmd, ...)') as Fcntl;
      } catch {
        fcntl = null;
      }
    }
  }
  return fcntl !== null;
}

/**
 * Marks every open descriptor of this process above 2 (read from /proc/self/fd) close-on-exec,
 * synchronously, so a spawn that follows passes none of them on.
 * @returns how many descriptors it marked (those not marked before); -1 when fcntl is not bound
 *   ({@link bindCloseOnExec} not awaited yet, or unavailable) or /proc/self/fd cannot be read.
 *   Never throws.
 */
export function markCloseOnExec(): number {
  const f = fcntl;
  if (f == null) return -1;
  let names: string[];
  try {
    names = readdirSync('/proc/self/fd');
  } catch {
    return -1;
  }
  let marked = 0;
  for (const name of names) {
    const fd = Number(name);
    if (!Number.isInteger(fd) || fd <= 2) continue;
    const flags = f(fd, F_GETFD); // -1: the descriptor was the directory listing's own, now closed
    if (flags < 0 || (flags & FD_CLOEXEC) !== 0) continue;
    if (f(fd, F_SETFD, 'int', flags | FD_CLOEXEC) === 0) marked++;
  }
  return marked;
}
