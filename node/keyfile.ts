/**
 * Key files (spec §2: every actor is an Ed25519 key): the steward's signing key, and any actor's
 * key for the CLI. A key file is JSON `{"type": "jcp-ed25519-seed", "seed": <64 hex>, "did": <did:key>}`,
 * created with mode 0600 and refused when others can read it (as ssh refuses a private key).
 */
import { closeSync, openSync, statSync, writeSync } from 'node:fs';
import path from 'node:path';
import { IoError, makeDirs, READ_CAPS, readFileCapped } from '../io/index.ts';
import { type Actor, actorFromSeed, fromHex, type Rng, toHex } from '../core/index.ts';
import { NodeFault, NodeFaultCodes } from './codes.ts';

/** The `type` tag of a key file. */
export const KEY_FILE_TYPE = 'jcp-ed25519-seed';

function bad(file: string, what: string, cause?: unknown): never {
  throw new NodeFault(NodeFaultCodes.KEY_FILE_INVALID, `key file ${file}: ${what}`, file, cause ? { cause } : undefined);
}

/**
 * Why a secret file of this `mode` (from `stat`) must be refused: group or others may read or
 * write it (any of the 0o077 bits; as ssh refuses a private key), or undefined when only its owner
 * may. Always undefined on Windows (no POSIX modes). Used for key files and bearer token files.
 * @param what what the file holds, for the message (`the key`, `the token`)
 */
export function secretModeProblem(mode: number, what: string): string | undefined {
  if (process.platform === 'win32' || (mode & 0o077) === 0) return undefined;
  return `mode ${(mode & 0o777).toString(8)} lets others read ${what}; chmod 600 it`;
}

/**
 * Reads a bearer token file (a header `{"file": …}` source, `--token-file`): at most
 * {@link READ_CAPS}.configFile bytes, trimmed, refused when group or others may read it.
 * @throws Error naming the file (unreadable, too large, group/world-readable, empty); never the value.
 */
export function readSecretFile(file: string): string {
  const why = secretModeProblem(statSync(file).mode, 'the token');
  if (why !== undefined) throw new Error(why);
  const v = readFileCapped(file, READ_CAPS.configFile, 'token file').toString('utf8').trim();
  if (v.length === 0) throw new Error('the file is empty');
  return v;
}

/**
 * Reads an actor from a key file (at most {@link READ_CAPS}.keyFile = 64 KiB is read), checking
 * first that it is a key file at all, then its permissions, then that its did matches its seed.
 * @throws NodeFault `key-file-invalid` (unreadable, a folder, larger than 64 KiB or endless such as
 *   /dev/zero, not a key file, readable by group/others, did mismatch).
 */
export function readKeyFile(file: string): Actor {
  let mode: number;
  let raw: string;
  try {
    mode = statSync(file).mode;
    raw = readFileCapped(file, READ_CAPS.keyFile, 'key file').toString('utf8');
  } catch (e) {
    if (e instanceof IoError) throw new NodeFault(NodeFaultCodes.KEY_FILE_INVALID, e.message, file, { cause: e });
    bad(file, `cannot read: ${(e as Error).message}`, e);
  }
  // The content first: a chain or config file given as --key is "not a key file", whatever its mode.
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch (e) {
    bad(file, `not a key file (not JSON); expected {"type": "${KEY_FILE_TYPE}", "seed": <64 hex>, "did": <did:key>}`, e);
  }
  const o = v as { type?: unknown; seed?: unknown; did?: unknown };
  if (typeof o !== 'object' || o === null || o.type !== KEY_FILE_TYPE || typeof o.seed !== 'string') {
    bad(file, `not a key file: expected {"type": "${KEY_FILE_TYPE}", "seed": <64 hex>, "did": <did:key>}`);
  }
  const why = secretModeProblem(mode, 'the key');
  if (why !== undefined) bad(file, why);
  let actor: Actor;
  try {
    actor = actorFromSeed(fromHex(o.seed, 32, 'seed'));
  } catch (e) {
    bad(file, `seed: ${(e as Error).message}`, e);
  }
  if (o.did !== undefined && o.did !== actor.did) bad(file, 'did does not match the seed');
  return actor;
}

/**
 * Writes `actor`'s key to a new file with mode 0600 (the folder is created 0700 when missing).
 * Never overwrites: an existing file is an error.
 * @throws NodeFault `key-file-invalid` when the file exists or cannot be written.
 */
export function writeKeyFile(file: string, actor: Actor): void {
  try {
    makeDirs(path.dirname(file), 0o700);
    const fd = openSync(file, 'wx', 0o600);
    try {
      const body = { type: KEY_FILE_TYPE, seed: toHex(actor.key.seed), did: actor.did };
      writeSync(fd, `${JSON.stringify(body, null, 2)}\n`);
    } finally {
      closeSync(fd);
    }
  } catch (e) {
    bad(file, `cannot create: ${(e as Error).message}`, e);
  }
}

/**
 * The steward key (§8: the receipt signer): read from `file`, or created there (0600) from `rng`
 * on first start. Returns the actor and whether it was created now.
 * @throws NodeFault `key-file-invalid`
 */
export function loadOrCreateKey(file: string, rng: Rng): { actor: Actor; created: boolean } {
  let exists = true;
  try {
    statSync(file);
  } catch {
    exists = false;
  }
  if (exists) return { actor: readKeyFile(file), created: false };
  const actor = actorFromSeed(rng(32));
  writeKeyFile(file, actor);
  return { actor, created: true };
}
