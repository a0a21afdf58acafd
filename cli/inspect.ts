/** `jcp inspect <hex | file | ->`: decodes any JCP object and says whether its signature verifies. */
import { existsSync, statSync } from 'node:fs';
import { decode, readSignedGrant } from '../core/index.ts';
import {
  bytesOfContents,
  inspectContents,
  inspectHex,
  type InspectOptions,
  type InspectOutcome,
  parseHex,
  renderFault,
  renderHuman,
} from '../inspect/index.ts';
import { type Command, parse, UsageError } from './command.ts';
import { IoError, READ_CAPS, readFileCapped } from '../io/index.ts';

const help = `Usage: jcp inspect <hex | file | -> [--json] [--grant <hex | file>] [--signer <did:key>]...

Decodes a JCP object and prints it as JSON (bytes as hex, µJ and big integers as decimal
strings), says which kind it is and whether its signature verifies, and under which did:key.

Kinds: signed grant, grant, revocation, frame, receipt (COSE_Sign1), jcp/1 request, response,
error, revoke and revoked messages (with or without the 4-byte length prefix), statement, key
event, mint policy, checkpoint, amendment, overdraft proof, unsigned bodies, and a CBOR sequence
(RFC 8742) of any of these — a receipt log exported with \`jcp receipts export --format cbor\`.
For a wire request it also checks the caller signature, the payload hash and the chain, and
gives the request id; for a receipt, the steward, seq and prev.

Input: a hex string, a file (raw bytes or hex text), or - for stdin.

Options:
  --json              print the report as JSON: {"input", "kind", "items": [...]}
  --grant <hex|file>  the signed grant a mint policy, checkpoint or amendment is bound to
                      (their bodies name no signer: its issuer or subject is the one expected)
  --signer <did:key>  a did:key to try as the signer of such a body (repeatable)
  -h, --help

Errors name the code, the field and the byte offset, e.g.
  error [cbor-non-canonical]: det-CBOR: argument 0 not in its shortest form at byte 5 (at byte 5 of the input)

Exit status: 0 when the input decodes (read "signature" for the verdict), 1 when it does not,
2 on a usage error.`;

/** Standard input, refused (IoError `io`) once it passes {@link READ_CAPS}.inspectInput (64 MiB). */
async function readStdin(): Promise<Uint8Array> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const c of process.stdin) {
    chunks.push(c as Buffer);
    total += (c as Buffer).length;
    if (total > READ_CAPS.inspectInput) {
      process.stdin.destroy();
      throw new IoError(
        '-',
        `input (standard input): larger than ${READ_CAPS.inspectInput >> 20} MiB, the most jcp inspect reads; not read (EFBIG)`,
        'EFBIG',
      );
    }
  }
  return new Uint8Array(Buffer.concat(chunks));
}

/** An argument names a file when one exists at that path; otherwise it must be hex. */
function isFile(arg: string): boolean {
  try {
    return existsSync(arg) && statSync(arg).isFile();
  } catch {
    return false;
  }
}

async function inspectArg(arg: string, opts: InspectOptions): Promise<InspectOutcome> {
  if (arg === '-') return inspectContents(await readStdin(), opts);
  if (isFile(arg)) return inspectContents(new Uint8Array(readFileCapped(arg, READ_CAPS.inspectInput, 'input file')), opts);
  const out = inspectHex(arg, opts);
  if (!out.ok && out.fault.code === 'bad-hex') {
    return { ok: false, fault: { ...out.fault, message: `${JSON.stringify(arg.slice(0, 64))} is no file, and ${out.fault.message}` } };
  }
  return out;
}

function grantArg(arg: string): InspectOptions['grant'] {
  try {
    const bytes = isFile(arg) ? bytesOfContents(new Uint8Array(readFileCapped(arg, READ_CAPS.grantFile, 'grant file'))) : parseHex(arg);
    return readSignedGrant(decode(bytes), 'grant');
  } catch (e) {
    if (e instanceof IoError) throw e; // too large: printed as error [io]
    throw new UsageError(`--grant: not a signed grant: ${(e as Error).message}`);
  }
}

/** The `jcp inspect` command. */
export const command: Command = {
  name: 'inspect',
  summary: 'decode any JCP object (hex, file or stdin) and check its signature',
  help,
  async run(argv) {
    const { values, positionals } = parse(argv, {
      json: { type: 'boolean' },
      grant: { type: 'string' },
      signer: { type: 'string', multiple: true },
    });
    if (positionals.length !== 1) throw new UsageError('expected one input: a hex string, a file, or -');
    const opts: InspectOptions = {
      signers: values.signer ?? [],
      ...(values.grant !== undefined ? { grant: grantArg(values.grant) } : {}),
    };
    const out = await inspectArg(positionals[0]!, opts);
    if (!out.ok) {
      if (values.json) process.stdout.write(`${JSON.stringify({ error: out.fault }, null, 2)}\n`);
      process.stderr.write(`jcp inspect: ${renderFault(out.fault)}\n`);
      return 1;
    }
    process.stdout.write(values.json ? `${JSON.stringify(out.report, null, 2)}\n` : renderHuman(out.report));
    return 0;
  },
};
