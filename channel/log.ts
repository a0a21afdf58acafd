/**
 * The logging surface channel/ and shards/ need: a pino logger fits it; tests pass
 * {@link silentLogger} or a recorder.
 */

/** Structured logging, pino-shaped: an object of fields, then a message. */
export interface Logger {
  debug(fields: object, msg?: string): void;
  info(fields: object, msg?: string): void;
  warn(fields: object, msg?: string): void;
  error(fields: object, msg?: string): void;
}

/** A logger that drops everything. */
export const silentLogger: Logger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
};
