/**
 * Reads the third-party test vectors the repository carries in `test/vectors/third-party/`, one
 * folder per source, each with a `SOURCE` file (origin, commit, licence, SHA-256 of every file)
 * and the source's licence files. `$JCP_VECTORS_DIR` points the tests at another copy laid out
 * the same way. `test/vectors/third-party.test.ts` checks the folder against the `SOURCE` files.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** The folder of the repository's own copy of the third-party vectors. */
export const REPO_VECTORS_DIR: URL = new URL('./third-party/', import.meta.url);

/**
 * The folder holding the third-party vectors: `$JCP_VECTORS_DIR` when set, else the repository's
 * own copy, {@link REPO_VECTORS_DIR}.
 */
export const VECTORS_DIR: URL = process.env['JCP_VECTORS_DIR']
  ? pathToFileURL(`${process.env['JCP_VECTORS_DIR'].replace(/\/+$/, '')}/`)
  : REPO_VECTORS_DIR;

/** Reads one vector file as text. @throws Error naming the expected path when it is absent. */
export function vectorText(path: string): string {
  const url = new URL(path, VECTORS_DIR);
  if (!existsSync(url)) {
    throw new Error(
      `third-party vector file missing: ${fileURLToPath(url)} (the repository carries them in test/vectors/third-party/; JCP_VECTORS_DIR overrides)`,
    );
  }
  return readFileSync(url, 'utf8');
}

/** Reads and parses one JSON vector file. */
export function vectorJson<T>(path: string): T {
  return JSON.parse(vectorText(path)) as T;
}

/** Bytes of a hex string (vector data is trusted to be hex; a bad vector fails the test). */
export function hex(h: string): Uint8Array {
  if (!/^(?:[0-9a-fA-F]{2})*$/.test(h)) throw new Error(`vector field is not hex: ${h.slice(0, 40)}`);
  return new Uint8Array(Buffer.from(h, 'hex'));
}
