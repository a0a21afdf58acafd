/**
 * Reads the third-party vectors in `../shared/vectors/` (relative to the repository) at test
 * time. They are never copied into the repository; when the folder is missing, the test fails
 * with a message that says where they were expected.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';

/**
 * The folder holding the third-party vectors: `$JCP_VECTORS_DIR` when set, else
 * `../shared/vectors/` next to the repository.
 */
export const VECTORS_DIR: URL = process.env['JCP_VECTORS_DIR']
  ? pathToFileURL(`${process.env['JCP_VECTORS_DIR'].replace(/\/+$/, '')}/`)
  : new URL('../../../shared/vectors/', import.meta.url);

/** Reads one vector file as text. @throws Error naming the expected path when it is absent. */
export function vectorText(path: string): string {
  const url = new URL(path, VECTORS_DIR);
  if (!existsSync(url)) {
    throw new Error(
      `third-party vector file missing: ${fileURLToPath(url)} (expected ../shared/vectors/ next to the repository, or set JCP_VECTORS_DIR)`,
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
