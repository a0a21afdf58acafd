/**
 * `jcp standing policy|serve`: standing grants (spec §4.6, C20) from the command line — author a
 * signed mint policy, and serve webhooks that fire it (node/standing.ts; docs/standing.md).
 */
import { randomBytes } from 'node:crypto';
import { existsSync, statSync, writeFileSync } from 'node:fs';
import {
  authorPolicy,
  decode,
  encode,
  ErrorCodes,
  fromHex,
  grantId,
  isContentId,
  JcpError,
  mintPolicyId,
  readSignedMintPolicy,
  type SignedMintPolicy,
  signedMintPolicyToCbor,
  toHex,
} from '../core/index.ts';
import { eventClassOf, isLoopbackHost, readKeyFile, StandingError, StandingServerCodes, startStandingServer } from '../node/index.ts';
import { chainFileText, readChainFile, writeChainFile } from '../client/index.ts';
import { didArg, expiryArg, hostPortArg, ujArg } from './args.ts';
import { CliError, type Command, UsageError, parse, untilSignal } from './command.ts';
import { ioError, IoError, READ_CAPS, readFileCapped } from '../io/index.ts';
import { checkFileView } from './steerfile.ts';

const help = `Usage:
  jcp standing policy --chain standing.json --key issuer.key (--source s --kind k | --event-class cid)
                 --per-firing uj --max-firings n --out policy.json
  jcp standing serve --chain standing.json --policy policy.json --key holder.key --agent did|keyfile
                 --ledger mint-ledger.jsonl (--out-dir dir | --callback url)
                 [--listen 127.0.0.1:0] [--allow-non-loopback] [--child-expiry 0|unix|+secs]

policy  the standing grant's issuer signs a mint policy (§4.6): the event class allowed to fire
        it (the content id of {source, kind}), the budget of each child (µJ, at most the
        grant's) and the most firings. An amplifying policy is refused (amplification), and so
        is one by anyone but the issuer (wrong-signer). Prints the policy id.
serve   the standing grant's subject receives webhooks over HTTP: POST /events/<source> with a
        JSON body whose "kind" is text. Each event of the policy's class mints one child for the
        agent through the attenuation path and hands it over (a chain file in --out-dir, or a
        POST of the chain file to --callback). The mint ledger (firings, cumulative µJ) is a
        file fsync'd before a child is handed out, so a restart never resets the rate limit.
        Refusals answer JSON {error: {code, message}, ledger}: wrong-event-class (403),
        firings-exhausted / budget-exhausted (429), event-invalid (400). GET /ledger shows it.
        Listens on loopback only unless --allow-non-loopback; prints {"listening": "host:port"}.
Exit status of serve: 0 after SIGINT/SIGTERM; 1 when it cannot start.`;

/** The `type` tag of a mint policy file. */
export const POLICY_FILE_TYPE = 'jcp-mint-policy';

function need(v: string | undefined, flag: string): string {
  if (v === undefined) throw new UsageError(`${flag} is required`);
  return v;
}

/** Writes a policy file `{type, id, cbor, policy}` (never overwriting). @throws JcpError `refused`, IoError `io`. */
export function writePolicyFile(file: string, sp: SignedMintPolicy, source?: { source: string; kind: string }): void {
  const body = {
    type: POLICY_FILE_TYPE,
    id: mintPolicyId(sp),
    cbor: toHex(encode(signedMintPolicyToCbor(sp))),
    policy: policyView(sp, source),
  };
  try {
    writeFileSync(file, `${JSON.stringify(body, null, 2)}\n`, { flag: 'wx' });
  } catch (e) {
    if ((e as { code?: string }).code === 'EEXIST')
      throw new JcpError(ErrorCodes.REFUSED, `${file} exists: refusing to overwrite a policy file`, { file });
    throw ioError(e, 'write policy file', file);
  }
}

/** The readable view of a signed policy, as a policy file carries it (the event's source and kind when known). */
function policyView(sp: SignedMintPolicy, source?: { source: string; kind: string }): Record<string, unknown> {
  const p = sp.body;
  return {
    grant_id: p.grant_id,
    event_class: p.event_class,
    ...(source !== undefined ? { event_source: source.source, event_kind: source.kind } : {}),
    per_firing_uj: p.per_firing_uj.toString(),
    max_firings: p.max_firings,
    nonce: toHex(p.nonce),
  };
}

/**
 * Reads a policy file (at most 1 MiB). @throws JcpError `schema`, `chain-file-mismatch` (the
 * `policy` view disagrees with `cbor`, or its event source and kind are not of its class) or the
 * decoder's codes.
 */
export function readPolicyFile(file: string): SignedMintPolicy {
  let v: Record<string, unknown>;
  try {
    v = JSON.parse(readFileCapped(file, READ_CAPS.grantFile, 'policy file').toString('utf8')) as Record<string, unknown>;
  } catch (e) {
    if (e instanceof IoError) throw new JcpError(ErrorCodes.SCHEMA, e.message, { file }, { cause: e });
    throw new JcpError(ErrorCodes.SCHEMA, `${file}: not a readable JSON policy file: ${(e as Error).message}`, { file }, { cause: e });
  }
  if (v?.['type'] !== POLICY_FILE_TYPE)
    throw new JcpError(ErrorCodes.SCHEMA, `${file}: expected a {"type": "${POLICY_FILE_TYPE}", ...} file`, { file });
  const sp = readSignedMintPolicy(decode(fromHex(String(v['cbor']), undefined, 'policy.cbor')), 'policy');
  if (v['id'] !== undefined && v['id'] !== mintPolicyId(sp))
    throw new JcpError(ErrorCodes.SCHEMA, `${file}: id does not match its cbor`, { file });
  const view = v['policy'] as Record<string, unknown> | undefined;
  // The source and kind are not signed (only their class is): taken from the view when both are text.
  const src = view?.['event_source'];
  const kind = view?.['event_kind'];
  const named = typeof src === 'string' && typeof kind === 'string' ? { source: src, kind } : undefined;
  const signed = policyView(sp, named);
  if (named !== undefined && eventClassOf(named.source, named.kind) !== sp.body.event_class)
    signed['event_class'] = `${sp.body.event_class} (not the class of this source and kind)`;
  checkFileView(file, 'policy', view, signed);
  return sp;
}

function policy(argv: string[]): number {
  const { values } = parse(
    argv,
    {
      chain: { type: 'string' },
      key: { type: 'string' },
      source: { type: 'string' },
      kind: { type: 'string' },
      'event-class': { type: 'string' },
      'per-firing': { type: 'string' },
      'max-firings': { type: 'string' },
      out: { type: 'string' },
    },
    false,
  );
  const chain = readChainFile(need(values.chain, '--chain'));
  const issuer = readKeyFile(need(values.key, '--key'));
  let eventClass: string;
  let named: { source: string; kind: string } | undefined;
  if (values['event-class'] !== undefined) {
    if (values.source !== undefined || values.kind !== undefined)
      throw new UsageError('give --event-class or --source with --kind, not both');
    if (!isContentId(values['event-class'])) throw new UsageError('--event-class: expected a content id (64 hex digits)');
    eventClass = values['event-class'];
  } else {
    named = { source: need(values.source, '--source'), kind: need(values.kind, '--kind') };
    if (!/^[A-Za-z0-9._~-]{1,128}$/.test(named.source))
      throw new UsageError('--source: 1 to 128 of A-Z a-z 0-9 . _ ~ - (it is the URL path /events/<source>)');
    if (named.kind.length === 0) throw new UsageError('--kind: empty');
    eventClass = eventClassOf(named.source, named.kind);
  }
  const max = need(values['max-firings'], '--max-firings');
  if (!/^\d{1,15}$/.test(max)) throw new UsageError(`--max-firings: expected a non-negative integer, got ${max}`);
  const out = need(values.out, '--out');
  const r = authorPolicy(
    chain[chain.length - 1]!,
    {
      event_class: eventClass,
      per_firing_uj: ujArg(need(values['per-firing'], '--per-firing'), '--per-firing'),
      max_firings: Number(max),
      nonce: new Uint8Array(randomBytes(16)),
    },
    issuer,
  );
  if (!r.ok) throw new CliError(r.error.code, `policy refused: ${r.error.why}`);
  writePolicyFile(out, r.value, named);
  process.stdout.write(`${mintPolicyId(r.value)}\n`);
  return 0;
}

async function serve(argv: string[]): Promise<number> {
  const { values } = parse(
    argv,
    {
      chain: { type: 'string' },
      policy: { type: 'string' },
      key: { type: 'string' },
      agent: { type: 'string' },
      ledger: { type: 'string' },
      'out-dir': { type: 'string' },
      callback: { type: 'string' },
      listen: { type: 'string' },
      'allow-non-loopback': { type: 'boolean' },
      'child-expiry': { type: 'string' },
    },
    false,
  );
  const { host, port } = hostPortArg(values.listen ?? '127.0.0.1:0', '--listen');
  if (!isLoopbackHost(host) && !values['allow-non-loopback']) {
    throw new CliError(
      StandingServerCodes.NON_LOOPBACK,
      `--listen ${host}: not a loopback address; webhooks reach this server unauthenticated, so give --allow-non-loopback to listen there`,
    );
  }
  const outDir = values['out-dir'];
  const callback = values.callback;
  if ((outDir === undefined) === (callback === undefined)) throw new UsageError('give exactly one of --out-dir and --callback');
  if (outDir !== undefined && !(existsSync(outDir) && statSync(outDir).isDirectory()))
    throw new UsageError(`--out-dir ${outDir}: not a folder`);
  if (callback !== undefined && !/^https?:\/\//.test(callback)) throw new UsageError('--callback: expected an http:// or https:// URL');
  const chain = readChainFile(need(values.chain, '--chain'));
  const sp = readPolicyFile(need(values.policy, '--policy'));
  const holder = readKeyFile(need(values.key, '--key'));
  const agent = didArg(need(values.agent, '--agent'));
  const ledgerFile = need(values.ledger, '--ledger');
  const childExpiry = values['child-expiry'] === undefined ? undefined : expiryArg(values['child-expiry'], Math.floor(Date.now() / 1000));
  let server: Awaited<ReturnType<typeof startStandingServer>>;
  try {
    server = await startStandingServer({
      chain,
      policy: sp,
      holder,
      agent,
      ledgerFile,
      handoff: outDir !== undefined ? { dir: outDir } : { callback: callback! },
      writeChain: (file, c) => writeChainFile(file, c),
      chainJson: chainFileText,
      host,
      port,
      ...(childExpiry !== undefined ? { childExpiry } : {}),
    });
  } catch (e) {
    if (e instanceof StandingError) throw new CliError(e.code, e.message);
    if ((e as { syscall?: string }).syscall === 'listen')
      throw new CliError('listen-failed', `cannot listen on ${host}:${port}: ${(e as Error).message}`);
    throw e;
  }
  const l = server.ledger.ledger;
  const signalled = untilSignal();
  process.stdout.write(
    `${JSON.stringify({ listening: `${host.includes(':') ? `[${host}]` : host}:${server.port}`, policy: mintPolicyId(sp), standing: grantId(chain[chain.length - 1]!.grant), firings: l.firings, spent_uj: l.spent_uj.toString() })}\n`,
  );
  await signalled;
  await server.close();
  signalled.off();
  return 0;
}

/** The `jcp standing` command. */
export const command: Command = {
  name: 'standing',
  summary: 'author a mint policy for a standing grant, or serve webhooks that fire it (§4.6)',
  help,
  async run(argv) {
    const [verb, ...rest] = argv;
    switch (verb) {
      case 'policy':
        return policy(rest);
      case 'serve':
        return serve(rest);
      default:
        throw new UsageError(verb === undefined ? 'expected a verb: policy | serve' : `unknown verb '${verb}'`);
    }
  },
};
