/**
 * Chain files, as agents and the CLI keep them: a delegation chain (§4.2, root first) as JSON,
 * `{"type": "jcp-chain", "chain": [{"id", "cbor", "grant"}]}`. `cbor` is the hex of the signed
 * grant's det-CBOR and is what is read back; `id` and `grant` are for people (`grant` shows the
 * fields, with µJ as decimal strings) and are checked against `cbor` when read: a file whose
 * `grant` view says anything other than what the signed bytes say (a budget, an action, a
 * subject edited by hand) is refused `chain-file-mismatch`, so no one reads one grant and a node
 * enforces another. A link may leave `id` and `grant` out; then only `cbor` counts.
 */
import { writeFileSync } from 'node:fs';
import {
  decode,
  encode,
  ErrorCodes,
  fromHex,
  type Grant,
  grantId,
  JcpError,
  readSignedGrant,
  type SignedGrant,
  signedGrantToCbor,
  toHex,
} from '../core/index.ts';
import { ioError, IoError, READ_CAPS, readFileCapped } from '../io/index.ts';

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

/** The text of a chain file for `chain` (root first): what {@link writeChainFile} writes. */
export function chainFileText(chain: readonly SignedGrant[]): string {
  const body = {
    type: CHAIN_FILE_TYPE,
    chain: chain.map((sg) => ({ id: grantId(sg.grant), cbor: toHex(encode(signedGrantToCbor(sg))), grant: grantView(sg.grant) })),
  };
  return `${JSON.stringify(body, null, 2)}\n`;
}

/**
 * Writes a chain file (root first). Refuses to overwrite an existing file unless `overwrite`.
 * @throws JcpError `refused` when the file exists; IoError `io` (naming the path and the system
 *   code) when it cannot be written (a missing folder, a file in the way, permissions…).
 */
export function writeChainFile(file: string, chain: readonly SignedGrant[], opts: { overwrite?: boolean } = {}): void {
  try {
    // 'wx': unless asked, never overwrite an existing chain file (a grant is evidence).
    writeFileSync(file, chainFileText(chain), { flag: opts.overwrite ? 'w' : 'wx' });
  } catch (e) {
    if ((e as { code?: string }).code === 'EEXIST') {
      throw new JcpError(ErrorCodes.REFUSED, `${file} exists: refusing to overwrite a chain file`, { file });
    }
    throw ioError(e, 'write chain file', file);
  }
}

/**
 * Reads a chain file (root first); at most {@link READ_CAPS}.chainFile (8 MiB) is read.
 * @throws JcpError `schema` (unreadable, a folder, larger than 8 MiB or endless such as
 *   /dev/zero, not a chain file, id mismatch), `chain-file-mismatch` (a link's `grant` view
 *   disagrees with its signed `cbor`; the message names the fields) or the decoder's codes for
 *   bad CBOR.
 */
export function readChainFile(file: string): SignedGrant[] {
  let v: { type?: unknown; chain?: unknown };
  try {
    v = JSON.parse(readFileCapped(file, READ_CAPS.chainFile, 'chain file').toString('utf8')) as typeof v;
  } catch (e) {
    if (e instanceof IoError) throw new JcpError(ErrorCodes.SCHEMA, e.message, { file }, { cause: e });
    throw new JcpError(ErrorCodes.SCHEMA, `${file}: not a readable JSON chain file: ${(e as Error).message}`, { file }, { cause: e });
  }
  if (v?.type !== CHAIN_FILE_TYPE || !Array.isArray(v.chain) || v.chain.length === 0) {
    throw new JcpError(ErrorCodes.SCHEMA, `${file}: expected {"type": "${CHAIN_FILE_TYPE}", "chain": [...]} with at least one grant`);
  }
  return v.chain.map((link: { id?: unknown; cbor?: unknown; grant?: unknown }, i: number) => {
    const sg = readSignedGrant(decode(fromHex(String(link?.cbor), undefined, `chain[${i}].cbor`)), `chain[${i}]`);
    if (link.id !== undefined && link.id !== grantId(sg.grant)) {
      throw new JcpError(ErrorCodes.SCHEMA, `${file}: chain[${i}].id does not match its cbor`);
    }
    if (link.grant !== undefined) {
      const diffs = viewDiffs(link.grant, grantView(sg.grant));
      if (diffs.length > 0) {
        throw new JcpError(
          ErrorCodes.CHAIN_FILE_MISMATCH,
          `${file}: chain[${i}].grant disagrees with its signed cbor at ${diffs.join(', ')}: a node enforces the signed bytes; restore the view or drop it`,
          { file, link: i, fields: diffs.map((d) => d.split(' ')[0]) },
        );
      }
    }
    return sg;
  });
}

/** JSON with object keys sorted (so a view whose keys were reordered still matches); undefined for an absent value. */
function stableJson(v: unknown): string | undefined {
  const sort = (x: unknown): unknown =>
    Array.isArray(x)
      ? x.map(sort)
      : typeof x === 'object' && x !== null
        ? Object.fromEntries(
            Object.keys(x)
              .sort()
              .map((k) => [k, sort((x as Record<string, unknown>)[k])]),
          )
        : x;
  return JSON.stringify(sort(v));
}

/**
 * The fields where a file's readable view (a chain file's `grant`, a steering or policy file's
 * fields) differs from the view of its signed bytes, as `field (view X, signed Y)`.
 */
export function viewDiffs(view: unknown, signed: Record<string, unknown>, what = 'grant'): string[] {
  if (typeof view !== 'object' || view === null || Array.isArray(view)) return [`${what} (not an object)`];
  const out: string[] = [];
  const seen = view as Record<string, unknown>;
  const fields = [...new Set([...Object.keys(signed), ...Object.keys(seen)])];
  for (const f of fields) {
    const a = stableJson(seen[f]);
    const b = stableJson(signed[f]);
    if (a !== b) out.push(`${f} (view ${a ?? 'absent'}, signed ${b ?? 'absent'})`);
  }
  return out;
}
