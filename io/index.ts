/**
 * The front door of io/: the names other folders use. Siblings and tests import from here
 * (tests may also use internal.ts); files inside io/ import each other directly.
 */
export {
  errnoOf,
  fromSystemError,
  IO_ERROR_CODE,
  ioError,
  IoError,
  isSystemError,
  makeDirs,
  READ_CAPS,
  readFileCapped,
  readStdinCapped,
  removeStaleTemps,
  writeFileDurably,
  writeFileDurablyAsync,
} from './files.ts';
export { hostName, type ReadOnlyRefusal, readOnlyGuard } from './http.ts';
export {
  BRIDGE_HTTP_LIMITS,
  type BoundedServer,
  createBoundedServer,
  HTTP_LIMITS,
  type HttpConnectionCounts,
  type HttpLimits,
} from './httplimits.ts';
export { peerAddress } from './peer.ts';
export { boundConsoleError } from './stderr.ts';
export { writeBackRange } from './writeback.ts';
export { bindCloseOnExec, markCloseOnExec } from './cloexec.ts';
