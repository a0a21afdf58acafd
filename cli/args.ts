/**
 * The CLI's flag values: dids or key files, action lists, resource names or ids, node addresses,
 * expiries and µJ amounts. Each refuses a malformed value with a UsageError naming the flag (exit 2).
 */
import { type ContentId, isContentId, parseDid } from '../core/index.ts';
import { NodeFault, parseHostPort, readKeyFile, resourceIdOf } from '../node/index.ts';
import { UsageError } from './command.ts';

/** A did:key given directly, or the did of a key file. */
export function didArg(v: string): string {
  if (v.startsWith('did:')) {
    parseDid(v); // throws did-invalid with the reason
    return v;
  }
  return readKeyFile(v).did;
}

/**
 * Action names from a comma-separated list: non-empty, unique.
 * @throws UsageError naming the flag.
 */
export function actionsArg(v: string, flag = '--actions'): string[] {
  const actions = v.split(',').map((a) => a.trim());
  if (actions.some((a) => a.length === 0)) throw new UsageError(`${flag}: empty action name in '${v}'`);
  if (new Set(actions).size !== actions.length) throw new UsageError(`${flag}: repeated action in '${v}'`);
  return actions;
}

/**
 * A resource content id given directly, or the id of a resource name (as the node config derives
 * it; a config refuses an empty name, so an empty one could never match a node's resource).
 * @throws UsageError naming the flag for an empty value.
 */
export function resourceArg(v: string, flag = '--resource'): ContentId {
  if (v.length === 0) throw new UsageError(`${flag}: empty resource name (give a name as the node config names it, or a content id)`);
  return isContentId(v) ? v : resourceIdOf(v);
}

/**
 * A node address `host:port` (IPv6 as `[::1]:port`) given on the command line.
 * @returns the host and the port (0..65535)
 * @throws UsageError naming the flag (a malformed address is a usage mistake, not a config fault).
 */
export function hostPortArg(v: string, flag: string): { host: string; port: number } {
  try {
    return parseHostPort(v, flag);
  } catch (e) {
    if (e instanceof NodeFault) throw new UsageError(e.message.replace(/^config: /, ''));
    throw e;
  }
}

/** Expiry: `0` (never), unix seconds, or `+N` seconds from now. */
export function expiryArg(v: string, nowS: number): number {
  const rel = /^\+(\d+)$/.exec(v);
  if (rel) return nowS + Number(rel[1]);
  if (!/^\d+$/.test(v)) throw new UsageError(`--expiry: expected 0, unix seconds or +N, got ${v}`);
  return Number(v);
}

/** A non-negative integer µJ amount. @throws UsageError naming the flag. */
export function ujArg(v: string, flag: string): bigint {
  if (!/^\d+$/.test(v)) throw new UsageError(`${flag}: expected a non-negative integer (µJ), got ${v}`);
  return BigInt(v);
}
