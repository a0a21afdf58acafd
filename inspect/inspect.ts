/**
 * `jcp inspect`: a user's debugging tool that decodes any JCP object — grant, signed grant,
 * revocation, frame, receipt (COSE_Sign1), jcp/1 request/response/error/revoke messages (with
 * or without the 4-byte length prefix), statement, key event, mint policy, checkpoint,
 * amendment, overdraft proof, or a CBOR sequence of receipts — to JSON, says which kind it
 * detected, and whether its signature verifies under which did:key.
 *
 * Errors are precise: a stable code (the core's `ErrorCodes`, or `bad-hex`, `empty-input`,
 * `unknown-shape`), the field that failed, the item of a sequence, and the byte offset in the
 * input when known. Every decoder used is the core's strict one, so inspect refuses exactly what
 * a node would refuse.
 */
import { majorOf, type SignedGrant } from '../core/index.ts';
import { bytesOfContents, FaultError, type InspectFault, type Item, parseHex, splitFrames, splitSequence } from './input.ts';
import { describe, type ObjectReport, type SignatureReport } from './kinds.ts';

export { bytesOfContents, InputCodes, type InspectFault, parseHex } from './input.ts';
export { KINDS, type Kind, type ObjectReport, type SignatureReport } from './kinds.ts';

/** What inspect found in one input. */
export interface InspectReport {
  readonly input: {
    /** Input length in bytes (after hex decoding). */
    readonly bytes: number;
    /** True when the input was one or more jcp/1 length-prefixed frames. */
    readonly framed: boolean;
    readonly items: number;
  };
  /** The kind of the single item, or `sequence` for several (a CBOR sequence or a run of frames). */
  readonly kind: string;
  readonly items: ObjectReport[];
}

/** The outcome of {@link inspectBytes}: a report, or the fault that stopped decoding. */
export type InspectOutcome = { readonly ok: true; readonly report: InspectReport } | { readonly ok: false; readonly fault: InspectFault };

/** Options of {@link inspectBytes}: who may have signed bodies that name no signer. */
export interface InspectOptions {
  /** did:keys to try on a mint policy, checkpoint or amendment. */
  readonly signers?: readonly string[];
  /** The grant such a body is bound to (its issuer or subject is the expected signer). */
  readonly grant?: SignedGrant;
}

/**
 * Decodes `bytes` (raw, not hex): jcp/1 frames when the input starts with a length prefix (see
 * {@link isFramed}), else a CBOR sequence (RFC 8742) of one or more items.
 * Never throws: faults are returned.
 */
export function inspectBytes(bytes: Uint8Array, opts: InspectOptions = {}): InspectOutcome {
  try {
    if (bytes.length === 0) return { ok: false, fault: { code: 'empty-input', message: 'the input is empty' } };
    if (looksLikeJson(bytes)) {
      return {
        ok: false,
        fault: {
          code: 'not-cbor',
          message: "the input is JSON text, not CBOR or hex (a chain file? try 'jcp grant show --chain <file>')",
          offset: 0,
        },
      };
    }
    const framed = isFramed(bytes);
    const items: Item[] = framed ? splitFrames(bytes) : splitSequence(bytes);
    if (!framed && items.length > 1) {
      const stray = items.findIndex((it, i) => i > 0 && !isObjectHead(it.bytes[0]));
      if (stray > 0) {
        const prev = items[stray - 1]!;
        return {
          ok: false,
          fault: {
            code: 'cbor-malformed',
            message: `${bytes.length - items[stray]!.offset} trailing byte(s) after the CBOR item that ends at byte ${prev.offset + prev.bytes.length}`,
            offset: items[stray]!.offset,
            item: stray,
          },
        };
      }
    }
    const hints = { signers: opts.signers ?? [], ...(opts.grant !== undefined ? { grant: opts.grant } : {}) };
    const reports: ObjectReport[] = [];
    for (const [i, it] of items.entries()) {
      try {
        reports.push(describe(it, hints));
      } catch (e) {
        if (e instanceof FaultError) return { ok: false, fault: items.length > 1 ? { ...e.fault, item: i } : e.fault };
        throw e;
      }
    }
    return {
      ok: true,
      report: {
        input: { bytes: bytes.length, framed, items: reports.length },
        kind: reports.length === 1 ? reports[0]!.kind : 'sequence',
        items: reports,
      },
    };
  } catch (e) {
    if (e instanceof FaultError) return { ok: false, fault: e.fault };
    return { ok: false, fault: { code: 'cbor-malformed', message: `unreadable input: ${(e as Error)?.message ?? String(e)}` } };
  }
}

/** True when `bytes` is UTF-8 text that parses as a JSON object or array. */
function looksLikeJson(bytes: Uint8Array): boolean {
  const first = bytes.find((b) => b !== 0x20 && b !== 0x0a && b !== 0x0d && b !== 0x09);
  if (first !== 0x7b && first !== 0x5b) return false;
  try {
    JSON.parse(Buffer.from(bytes).toString('utf8'));
    return true;
  } catch {
    return false;
  }
}

/**
 * True when `bytes` look like jcp/1 frames rather than bare CBOR: at least a 4-byte prefix, and
 * a first byte that cannot start a JCP object (objects are maps, receipts tag 18 or a 4-array);
 * or a shorter input starting with 0x00 (a cut-off prefix).
 * A length below 2 GiB starts with 0x00–0x7f, which is never a map, tag or array head.
 */
function isFramed(bytes: Uint8Array): boolean {
  const major = majorOf(bytes[0]!);
  return (bytes.length >= 4 || bytes[0] === 0x00) && major !== 4 && major !== 5 && major !== 6;
}

/** True when a first byte can start a JCP object: a map (major 5) or a tag (major 6, receipts). */
function isObjectHead(b: number | undefined): boolean {
  return b !== undefined && (majorOf(b) === 5 || majorOf(b) === 6);
}

/** Decodes hex text and inspects it. Never throws. */
export function inspectHex(text: string, opts: InspectOptions = {}): InspectOutcome {
  try {
    return inspectBytes(parseHex(text), opts);
  } catch (e) {
    if (e instanceof FaultError) return { ok: false, fault: e.fault };
    throw e;
  }
}

/** Inspects file or stdin contents: hex text is decoded, anything else is raw bytes. Never throws. */
export function inspectContents(contents: Uint8Array, opts: InspectOptions = {}): InspectOutcome {
  try {
    return inspectBytes(bytesOfContents(contents), opts);
  } catch (e) {
    if (e instanceof FaultError) return { ok: false, fault: e.fault };
    throw e;
  }
}

/** One line naming a fault: `error [code]: message (item i, field f, at byte n)`. */
export function renderFault(f: InspectFault): string {
  const where = [
    f.item !== undefined ? `item ${f.item}` : undefined,
    f.field !== undefined && !f.message.startsWith(`${f.field}:`) ? `field ${f.field}` : undefined,
    f.offset !== undefined && !f.message.includes(`at byte ${f.offset}`) ? `at byte ${f.offset} of the input` : undefined,
  ].filter((x) => x !== undefined);
  return `error [${f.code}]: ${f.message}${where.length > 0 ? ` (${where.join(', ')})` : ''}`;
}

function signatureLine(s: SignatureReport): string {
  const who = s.signer !== undefined ? ` — ${s.role ?? 'signer'} ${s.signer}` : '';
  const note = s.note !== undefined ? ` (${s.note})` : '';
  if (s.valid === true) return `signature: valid${who}${note}`;
  if (s.valid === false) return `signature: DOES NOT VERIFY${who}${note}`;
  return `signature: not checked${who}${note}`;
}

/** The human-friendly rendering: a few summary lines per item, then its fields as JSON. */
export function renderHuman(r: InspectReport): string {
  const out: string[] = [];
  out.push(
    `input: ${r.input.bytes} bytes${r.input.framed ? ', jcp/1 framed' : ''}${r.items.length > 1 ? `, ${r.items.length} items` : ''}`,
  );
  for (const [i, it] of r.items.entries()) {
    if (r.items.length > 1) out.push('', `── item ${i} at byte ${it.offset} (${it.length} bytes) ──`);
    out.push(`kind: ${it.kind} — ${it.description}`);
    if (it.id !== undefined) out.push(`id: ${it.id}`);
    if (it.signature !== undefined) out.push(signatureLine(it.signature));
    for (const [k, v] of Object.entries(it.checks ?? {})) out.push(`${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`);
    out.push(JSON.stringify(it.value, null, 2));
  }
  return `${out.join('\n')}\n`;
}
