/**
 * Receipts from a file, for `jcp receipts verify <file | ->`: JCR-1 receipts (spec §8) from any
 * implementation, verified one by one with `openJcr1Receipt` (a receipt carrying only §8's
 * fields verifies; our log extensions `seq`, `prev`, `request_id`, `at` are read when present).
 *
 * Input forms, told apart by content:
 * - a CBOR sequence (RFC 8742): COSE_Sign1 items back to back, as `jcp receipts export --format
 *   cbor` writes them;
 * - hex lines: one receipt per line as hex (an optional `0x`; blank lines and lines starting
 *   with `#` are skipped), the form receipts are pasted or logged in as text.
 * The input is hex lines when it is UTF-8 text whose every other line is hex; otherwise it is
 * read as a CBOR sequence.
 */
import { openJcr1Receipt, receiptId } from '../core/index.ts';
import { FaultError, splitSequence } from '../inspect/index.ts';
import { CliError } from './command.ts';

/** How a receipt file was read. */
export type ReceiptFileForm = 'cbor-sequence' | 'hex-lines';

/** The report of {@link verifyReceiptFile} (printed as JSON by `jcp receipts verify <file>`). */
export interface ReceiptFileReport {
  readonly form: ReceiptFileForm;
  readonly receipts: number;
  readonly good: number;
  readonly bad: number;
  /** The stewards (COSE kid did:keys) of the verified receipts, in first-seen order. */
  readonly stewards: readonly string[];
  /** How many verified receipts carry no log position (`seq`/`at`): §8-only, e.g. another implementation's. */
  readonly without_log_fields: number;
  /** Every receipt: its index in the input (from 0), id, verdict, and the refusal when it did not verify (the first 1000). */
  readonly items: readonly ReceiptFileItem[];
}

/** One receipt of a file. */
export interface ReceiptFileItem {
  readonly item: number;
  /** 1-based line number, for the hex-lines form. */
  readonly line?: number;
  readonly id: string;
  readonly verified: boolean;
  readonly steward?: string;
  readonly verdict?: string;
  readonly seq?: number | null;
  readonly error?: { readonly code: string; readonly why: string };
}

const HEX_LINE = /^(0x)?[0-9a-fA-F]+$/;
const MAX_ITEMS_LISTED = 1000;

/**
 * Splits and verifies the receipts in `bytes` (see the file comment for the forms).
 * @throws CliError `empty-input` (no receipt at all), `bad-hex` (a hex line of odd length), or
 *   the CBOR code of a sequence that does not split (`cbor-malformed`…), naming the byte offset.
 */
export function verifyReceiptFile(bytes: Uint8Array): ReceiptFileReport {
  const hexLines = asHexLines(bytes);
  const form: ReceiptFileForm = hexLines === undefined ? 'cbor-sequence' : 'hex-lines';
  let items: { bytes: Uint8Array; line?: number }[];
  if (hexLines !== undefined) {
    items = hexLines;
  } else {
    try {
      items = splitSequence(bytes).map((it) => ({ bytes: it.bytes }));
    } catch (e) {
      if (e instanceof FaultError) {
        const f = e.fault;
        throw new CliError(
          f.code,
          `not a CBOR sequence of receipts: ${f.message}${f.offset !== undefined ? ` (at byte ${f.offset})` : ''}`,
        );
      }
      throw e;
    }
  }
  if (items.length === 0) throw new CliError('empty-input', 'no receipt in the input');
  const stewards: string[] = [];
  const out: ReceiptFileItem[] = [];
  let good = 0;
  let bare = 0;
  for (const [i, it] of items.entries()) {
    const opened = openJcr1Receipt(it.bytes);
    const base = { item: i, ...(it.line !== undefined ? { line: it.line } : {}), id: receiptId(it.bytes) };
    if (opened.ok) {
      good++;
      const c = opened.value;
      if (!stewards.includes(c.steward)) stewards.push(c.steward);
      if (c.seq === undefined || c.at === undefined) bare++;
      if (out.length < MAX_ITEMS_LISTED) out.push({ ...base, verified: true, steward: c.steward, verdict: c.verdict, seq: c.seq ?? null });
    } else if (out.length < MAX_ITEMS_LISTED) {
      out.push({ ...base, verified: false, error: { code: opened.error.code, why: opened.error.why } });
    }
  }
  return { form, receipts: items.length, good, bad: items.length - good, stewards, without_log_fields: bare, items: out };
}

/** The receipts of a hex-lines input, or undefined when `bytes` is not that form. */
function asHexLines(bytes: Uint8Array): { bytes: Uint8Array; line: number }[] | undefined {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return undefined;
  }
  const out: { bytes: Uint8Array; line: number }[] = [];
  const lines = text.split(/\r?\n/);
  for (const [i, raw] of lines.entries()) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    if (!HEX_LINE.test(line)) return undefined;
    const hex = line.startsWith('0x') ? line.slice(2) : line;
    if (hex.length % 2 !== 0) throw new CliError('bad-hex', `line ${i + 1}: an odd number of hex digits`);
    out.push({ bytes: new Uint8Array(Buffer.from(hex, 'hex')), line: i + 1 });
  }
  return out.length > 0 || text.trim() === '' ? out : undefined;
}
