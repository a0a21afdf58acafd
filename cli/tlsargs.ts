/** The client TLS flags of `jcp call` and `jcp bridge` (docs/tls.md): `--ca`, `--cert`, `--key`. */
import type { ClientTlsOptions } from '../client/index.ts';
import { UsageError } from './command.ts';
import { READ_CAPS, readFileCapped } from '../io/index.ts';

/** The flag definitions, for `parse`. */
export const TLS_FLAGS = {
  ca: { type: 'string' },
  cert: { type: 'string' },
  // `--key` is the caller's signing key in both commands, so the client key is `--client-key`.
  'client-key': { type: 'string' },
} as const;

/** One line of help for the flags. */
export const TLS_HELP = `  --ca file       connect over TLS, verifying the node's certificate against this PEM CA bundle
  --cert f, --client-key f
                  a PEM client certificate and key for a node that asks for one (never a
                  substitute for the signature every request carries)`;

/**
 * Reads `--ca` and `--cert`/`--client-key` (PEM files, at most 1 MiB each). Undefined when none is
 * given (plain TCP). `--cert` without `--client-key` (or the other way round) is a usage error.
 * @throws UsageError; IoError `io-…` when a file cannot be read.
 */
export function clientTlsArgs(values: {
  ca?: string | undefined;
  cert?: string | undefined;
  'client-key'?: string | undefined;
}): ClientTlsOptions | undefined {
  const { ca, cert } = values;
  const key = values['client-key'];
  if ((cert === undefined) !== (key === undefined)) throw new UsageError('--cert and --client-key go together');
  if (ca === undefined && cert === undefined) return undefined;
  const read = (f: string) => readFileCapped(f, READ_CAPS.grantFile, 'PEM file');
  return {
    ...(ca !== undefined ? { ca: read(ca) } : {}),
    ...(cert !== undefined ? { cert: read(cert), key: read(key!) } : {}),
  };
}
