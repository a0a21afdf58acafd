/**
 * Chain files for the CLI: a delegation chain (§4.2, root first) as JSON,
 * `{"type": "jcp-chain", "chain": [{"id", "cbor", "grant"}]}`. `cbor` is the hex of the signed
 * grant's det-CBOR and is what is read back; `id` and `grant` are for people (`grant` shows the
 * fields, with µJ as decimal strings) and are checked against `cbor` when read.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fromHex, toHex } from '../core/bytes.ts';
import { parseDid } from '../core/didkey.ts';
import { decode, encode } from '../core/cbor.ts';
import { ErrorCodes, JcpError } from '../core/errors.ts';
import { type Grant, type SignedGrant, grantId, readSignedGrant, signedGrantToCbor } from '../core/grant.ts';
import { type ContentId, isContentId } from '../core/hash.ts';
import { readKeyFile, resourceIdOf } from '../node/index.ts';
import { UsageError } from './command.ts';

/** The `type` tag of a chain file. */
export const CHAIN_FILE_TYPE = 'jcp-chain';

/** A grant as people read it in a chain file (µJ as decimal strings, nonce as hex). */
export function grantView(g: Grant): Record<string, unknown> {
  return {
    issuer: g.issuer,
    subject: g.subject,
    capability: { resource: g.capability.resource, actions: [...g.capability.actions] },
    budget_uj: g.budget_uj.toString(),
    expiry: g.expiry,
    ...(g.parent !== undefined ? { parent: g.parent } : {}),
    ...(g.delegate_depth !== undefined ? { delegate_depth: g.delegate_depth } : {}),
    nonce: toHex(g.nonce),
  };
}

/**
 * Writes a chain file (root first). Refuses to overwrite an existing file unless `overwrite`.
 * @throws JcpError `refused` when the file exists.
 */
export function writeChainFile(file: string, chain: readonly SignedGrant[], opts: { overwrite?: boolean } = {}): void {
  const body = {
    type: CHAIN_FILE_TYPE,
    chain: chain.map((sg) => ({ id: grantId(sg.grant), cbor: toHex(encode(signedGrantToCbor(sg))), grant: grantView(sg.grant) })),
  };
  try {
    // 'wx': unless asked, never overwrite an existing chain file (a grant is evidence).
    writeFileSync(file, `${JSON.stringify(body, null, 2)}\n`, { flag: opts.overwrite ? 'w' : 'wx' });
  } catch (e) {
    if ((e as { code?: string }).code === 'EEXIST') {
      throw new JcpError(ErrorCodes.REFUSED, `${file} exists: refusing to overwrite a chain file`, { file });
    }
    throw e;
  }
}

/**
 * Reads a chain file (root first).
 * @throws JcpError `schema` (not a chain file, id mismatch) or the decoder's codes for bad CBOR.
 */
export function readChainFile(file: string): SignedGrant[] {
  let v: { type?: unknown; chain?: unknown };
  try {
    v = JSON.parse(readFileSync(file, 'utf8')) as typeof v;
  } catch (e) {
    throw new JcpError(ErrorCodes.SCHEMA, `${file}: not a readable JSON chain file: ${(e as Error).message}`);
  }
  if (v?.type !== CHAIN_FILE_TYPE || !Array.isArray(v.chain) || v.chain.length === 0) {
    throw new JcpError(ErrorCodes.SCHEMA, `${file}: expected {"type": "${CHAIN_FILE_TYPE}", "chain": [...]} with at least one grant`);
  }
  return v.chain.map((link: { id?: unknown; cbor?: unknown }, i: number) => {
    const sg = readSignedGrant(decode(fromHex(String(link?.cbor), undefined, `chain[${i}].cbor`)), `chain[${i}]`);
    if (link.id !== undefined && link.id !== grantId(sg.grant)) {
      throw new JcpError(ErrorCodes.SCHEMA, `${file}: chain[${i}].id does not match its cbor`);
    }
    return sg;
  });
}

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

/** A resource content id given directly, or the id of a resource name (as the node config derives it). */
export function resourceArg(v: string): ContentId {
  return isContentId(v) ? v : resourceIdOf(v);
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
