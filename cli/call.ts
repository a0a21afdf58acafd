/** `jcp call`: one signed jcp/1 call to a node (§11), printing the decision and the receipt as JSON. */
import {
  FRAME_KINDS,
  type FrameKind,
  openReceipt,
  type Provenance,
  PROVENANCES,
  receiptId,
  toHex,
  type Trust,
  TRUST_TAGS,
} from '../core/index.ts';
import { readKeyFile } from '../node/index.ts';
import { CallTimeout, JcpClient, WireErrorReply, resultJson } from '../client/index.ts';
import { readChainFile } from '../client/index.ts';
import { hostPortArg, ujArg } from './args.ts';
import { CliError, type Command, UsageError, connectionError, parse } from './command.ts';
import { ioError, IoError, READ_CAPS, readFileCapped, readStdinCapped } from '../io/index.ts';
import { TLS_FLAGS, TLS_HELP, clientTlsArgs } from './tlsargs.ts';

const help = `Usage: jcp call --node host:port --chain file --key file --action name
                [--payload json | --payload-file file|-] [--timeout-s 30]
                [--cost uj] [--provenance Estimator|ModelBased] [--kind tool-call] [--trust control]
                [--ca file [--cert file --client-key file]]

Signs a WireRequest as the key's actor (the caller, §11) with the chain's leaf as the grant and
sends it to the node. The payload is sent as the exact UTF-8 bytes given (what the request's
payload hash and the receipt cover); it must be JSON, and every number in it must be one the node
reads exactly (a number JavaScript would round, such as 1e400 or 12345678901234567890123, is
refused: write it as a string). Prints {"decision", "receipt": {"id", "core", "cbor"}, "result"} as JSON;
the result (the endpoint's output, data only, §6) is shown parsed when it is JSON.

--payload-file reads the payload from a file, or from standard input with -, for payloads too
large for a command line (at most 64 MiB read; a node refuses a request above its frame cap,
1 MiB by default, with frame-too-large). The file's bytes are sent exactly, under the same JSON
and exact-number rules as --payload.

--timeout-s S (default 30): seconds to wait for the connection and then for the reply; past it
the call fails with error [timeout]. The node may still have decided the request: running the
same call again within the same second re-sends the same request, which the node answers from
its log without debiting it twice.

TLS (docs/tls.md), for a node started with --tls-cert/--tls-key:
${TLS_HELP}

An allowed call the endpoint could not run (its server down, timed out, failed) prints the
node's error in the result (\`jcp_error\`, with \`refunded_uj\` when the debit was reversed) and one
line "jcp call: allowed, but the endpoint failed [code]: …" on stderr; it still exits 0 (the
decision and its receipt stand).

Exit status: 0 allow, 3 deny, 1 an error reply (no decision, no receipt: the reply {"error": {code,
message}} on stdout, and one line "jcp call: error [code]: …" on stderr) or a failure.`;

const utf8 = new TextEncoder();

/** The exact decimal value of a JSON number literal, as `[-]digits e exponent` (`0` for zero). */
function exactDecimal(literal: string): string {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(literal);
  if (!m) return literal;
  const fraction = m[3] ?? '';
  let digits = `${m[2]}${fraction}`.replace(/^0+/, '');
  let exp = BigInt(m[4] ?? '0') - BigInt(fraction.length);
  const zeros = /0+$/.exec(digits)?.[0].length ?? 0;
  digits = digits.slice(0, digits.length - zeros);
  exp += BigInt(zeros);
  return digits === '' ? '0' : `${m[1]}${digits}e${exp}`;
}

/** The number literals of a valid JSON text, in order (strings are skipped). */
function numberLiterals(text: string): string[] {
  const out: string[] = [];
  const num = /-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
  for (let i = 0; i < text.length; ) {
    const c = text[i]!;
    if (c === '"') {
      for (i++; i < text.length && text[i] !== '"'; i += text[i] === '\\' ? 2 : 1);
      i++;
    } else if (c === '-' || (c >= '0' && c <= '9')) {
      num.lastIndex = i;
      const lit = num.exec(text)![0];
      out.push(lit);
      i += lit.length;
    } else i++;
  }
  return out;
}

/**
 * The bytes of `--payload`: exactly the UTF-8 of `text` as typed, never re-serialized, so the
 * payload hash the caller signs and the receipt cover what the user wrote. `text` must be JSON,
 * and every number in it must be read exactly by the node (node/enforcer.ts parses the payload
 * with JSON.parse before handing it to the tool): one that JSON.parse would turn into another
 * value (out of range such as 1e400, or rounded such as 12345678901234567890123) is refused, so
 * the tool never gets a value other than the one signed.
 * @returns the UTF-8 bytes of `text`
 * @throws UsageError naming `--payload`: not JSON, or the first number that is not exact.
 */
export function payloadArg(text: string, flag = '--payload'): Uint8Array {
  try {
    JSON.parse(text);
  } catch (e) {
    throw new UsageError(`${flag}: not JSON: ${(e as Error).message}`);
  }
  for (const lit of numberLiterals(text)) {
    const read = Number(lit);
    if (!Number.isFinite(read) || exactDecimal(String(read)) !== exactDecimal(lit)) {
      const shown = lit.length > 40 ? `${lit.slice(0, 37)}...` : lit;
      throw new UsageError(
        `${flag}: the number ${shown} cannot be represented exactly (a JSON reader gets ${read}); write it as a string to send it as typed`,
      );
    }
  }
  return utf8.encode(text);
}

/**
 * The stderr line for an allowed call whose endpoint did not run it (the result carries the
 * node's `jcp_error`, node/endpoint.ts): `jcp call: allowed, but the endpoint failed [code]:
 * message`, with `; refunded N µJ` when the node reversed the debit (a reversal record, node/outcome.ts). The decision and its
 * receipt stand, so the exit status stays 0; the line keeps a person from reading the allow as done.
 * @param result the printed `result` (parsed JSON, or text)
 * @returns the line, or undefined when the result is the endpoint's own answer
 */
export function endpointFailure(result: unknown): string | undefined {
  if (typeof result !== 'object' || result === null) return undefined;
  const e = (result as { jcp_error?: unknown }).jcp_error;
  if (typeof e !== 'object' || e === null) return undefined;
  const { code, message, refunded_uj } = e as { code?: unknown; message?: unknown; refunded_uj?: unknown };
  if (typeof code !== 'string') return undefined;
  const text = typeof message === 'string' ? oneLine(message) : '';
  const refund = typeof refunded_uj === 'string' ? `; refunded ${refunded_uj} µJ` : '';
  return `jcp call: allowed, but the endpoint failed [${code}]: ${text}${refund}`;
}

/** `text` on one line: each line break, with the spaces around it, becomes one space. */
const oneLine = (text: string): string => text.replace(/\s*\n\s*/g, ' ');

/** The default of `--timeout-s`, in seconds. */
export const DEFAULT_CALL_TIMEOUT_S = 30;

/**
 * The payload of `--payload-file`: the bytes of `file`, or of standard input for `-`, read up to
 * {@link READ_CAPS}.payloadFile (64 MiB), then checked as {@link payloadArg} checks `--payload`.
 * @throws IoError `io` (unreadable, larger than 64 MiB); UsageError naming `--payload-file` (not
 *   UTF-8, not JSON, an inexact number).
 */
export async function payloadFileArg(file: string): Promise<Uint8Array> {
  let bytes: Buffer;
  try {
    bytes =
      file === '-' ? await readStdinCapped(READ_CAPS.payloadFile, 'payload') : readFileCapped(file, READ_CAPS.payloadFile, 'payload file');
  } catch (e) {
    if (e instanceof IoError) throw e;
    throw ioError(e, 'read payload file', file);
  }
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new UsageError(`--payload-file ${file}: not UTF-8 text`);
  }
  return payloadArg(text, '--payload-file');
}

/** `--timeout-s`: seconds, a number > 0 (at most a day). @throws UsageError. */
function timeoutArg(v: string | undefined): number {
  if (v === undefined) return DEFAULT_CALL_TIMEOUT_S;
  const t = Number(v);
  if (!/^\d+(\.\d+)?$/.test(v) || !(t > 0) || t > 86_400) throw new UsageError(`--timeout-s: a number of seconds in (0, 86400], got ${v}`);
  return t;
}

/** The `jcp call` command. */
export const command: Command = {
  name: 'call',
  summary: 'send one signed call to a node and print decision + receipt',
  help,
  async run(argv) {
    const { values } = parse(
      argv,
      {
        node: { type: 'string' },
        chain: { type: 'string' },
        key: { type: 'string' },
        action: { type: 'string' },
        payload: { type: 'string' },
        'payload-file': { type: 'string' },
        'timeout-s': { type: 'string' },
        cost: { type: 'string' },
        provenance: { type: 'string' },
        kind: { type: 'string' },
        trust: { type: 'string' },
        ...TLS_FLAGS,
      },
      false,
    );
    for (const f of ['node', 'chain', 'key', 'action'] as const) if (values[f] === undefined) throw new UsageError(`--${f} is required`);
    const provenance = (values.provenance ?? 'Estimator') as Provenance;
    if (!PROVENANCES.includes(provenance) || provenance === 'HwShunt') throw new UsageError('--provenance: Estimator or ModelBased');
    const kind = (values.kind ?? 'tool-call') as FrameKind;
    if (!FRAME_KINDS.includes(kind)) throw new UsageError(`--kind: one of ${FRAME_KINDS.join('|')}`);
    const trust = (values.trust ?? 'control') as Trust;
    if (!TRUST_TAGS.includes(trust)) throw new UsageError(`--trust: one of ${TRUST_TAGS.join('|')}`);
    if (values.payload !== undefined && values['payload-file'] !== undefined)
      throw new UsageError('give --payload or --payload-file, not both');
    let payload = values.payload === undefined ? undefined : payloadArg(values.payload);
    const timeoutS = timeoutArg(values['timeout-s']);
    // Every usage mistake is found before any file is read or the network is touched.
    const { host, port } = hostPortArg(values.node!, '--node');
    const cost = { uj: ujArg(values.cost ?? '0', '--cost'), provenance };
    if (values['payload-file'] !== undefined) payload = await payloadFileArg(values['payload-file']);
    const chain = readChainFile(values.chain!);
    const actor = readKeyFile(values.key!);
    const tls = clientTlsArgs(values);
    const timedOut = (e: unknown) =>
      e instanceof CallTimeout
        ? new CliError(
            'timeout',
            `node ${values.node} did not answer within ${timeoutS} s (--timeout-s)${e.request !== undefined ? '; it may still decide the request: the same call run again within the same second is answered from its log, never debited twice' : ''}`,
            { cause: e },
          )
        : connectionError(e, `node ${values.node}`);
    let client: JcpClient;
    try {
      client = await JcpClient.connect({
        host,
        port,
        signer: actor,
        reconnectAttempts: 2,
        timeoutS,
        ...(tls !== undefined ? { tls } : {}),
      });
    } catch (e) {
      throw timedOut(e);
    }
    try {
      const r = await client.call({
        chain,
        action: values.action!,
        ...(payload !== undefined ? { payload } : {}),
        cost,
        kind,
        trust,
      });
      const opened = openReceipt(r.receipt);
      const core = opened.ok ? opened.value : { unverifiable: opened.error };
      const out = {
        decision: r.decision,
        request_id: r.requestId,
        receipt: { id: receiptId(r.receipt), core, cbor: toHex(r.receipt) },
        ...(r.result !== undefined ? { result: resultJson(r.result) } : {}),
      };
      process.stdout.write(`${JSON.stringify(out, (_k, v) => (typeof v === 'bigint' ? v.toString() : v), 2)}\n`);
      const failed = endpointFailure(out.result);
      if (failed !== undefined) process.stderr.write(`${failed}\n`);
      return r.decision.verdict === 'allow' ? 0 : 3;
    } catch (e) {
      if (e instanceof WireErrorReply) {
        process.stdout.write(`${JSON.stringify({ error: { code: e.code, message: e.message } }, null, 2)}\n`);
        // And the one line every command's errors are (README): `jcp call: error [code]: …`.
        const why = e.message.startsWith(`${e.code}: `) ? e.message.slice(e.code.length + 2) : e.message;
        process.stderr.write(`jcp call: error [${e.code}]: ${oneLine(why)}\n`);
        return 1;
      }
      throw timedOut(e);
    } finally {
      await client.close();
    }
  },
};
