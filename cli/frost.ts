/**
 * `jcp frost`: threshold actors (spec §2.2). Sub-verbs: `deal` (trusted dealer share files),
 * `participant` (run one participant over NATS), `dkg` (start a dealer-free key generation among
 * running participants), `sign` (coordinate a signing session). See docs/frost.md.
 */
import { existsSync, statSync } from 'node:fs';
import { join, resolve, sep } from 'node:path';
import type { ParseArgsConfig } from 'node:util';
import { randomBytes } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import { fromHex, parseDid, toHex, verify } from '../core/index.ts';
import {
  allowAllApprover,
  type Approver,
  APPROVE_REQUIRED_MESSAGE,
  deal,
  DEFAULT_APPROVE_TIMEOUT_MS,
  describeCulprits,
  FrostError,
  FrostErrorCodes,
  natsBus,
  natsRegistry,
  Participant,
  promptApprover,
  type ReadDecision,
  readDecisionFile,
  readDecisionStream,
  readIdentityFile,
  rulesApprover,
  runDkg,
  shareRecord,
  signWithGroup,
  readWebhookSecret,
  webhookApprover,
  writeShareFile,
} from '../frost/index.ts';
import { type Command, parse, UsageError } from './command.ts';
import { errnoOf, fromSystemError, ioError, IoError, makeDirs, READ_CAPS, readFileCapped } from '../io/index.ts';
import { NatsLink } from '../natsio/index.ts';

/** How long a verb waits for its NATS connection before it fails with `frost-transport` (ms). */
const CONNECT_MS = 5_000;

const help = `Usage: jcp frost <deal|participant|dkg|sign|approvals> [options]

Threshold actors (spec §2.2): a k-of-n did:key whose private key never exists in one place
(FROST, RFC 9591, Ed25519). The group key is an ordinary did:key; its signatures are ordinary
Ed25519 signatures. Secrets are read from files or environment variables, never from argv.

jcp frost deal --threshold K --participants N --out DIR [--passphrase-env VAR] [--json]
  Trusted dealer: writes DIR/participant-<i>.share (mode 0600) for i = 1..N, each holding the
  share, a fresh Ed25519 identity for its holder and the group package; prints the group did.
  --passphrase-env VAR   seal every file with the passphrase in $VAR (scrypt + AES-256-GCM)

jcp frost participant --keystore DIR --nats URL --approve POLICY [--prefix P] [--passphrase-env VAR]
                      [--coordinator DID]... [--initiator DID]...
  Runs one participant until SIGINT/SIGTERM: answers DKG invites and signing sessions for every
  share in DIR (DIR/*.share and DIR/shares/*.share; a new DIR gets an identity.key). Prints one
  JSON event per line on stdout ({"event":"ready",...}, "dkg-complete", "signed", "decision"…).
  --approve is required (changed default): without it the participant does not start
  (frost-approve-required, exit 1); --approve allow-all keeps the old sign-anything behaviour.
  --coordinator DID      only sign for these coordinators (repeatable; default any)
  --initiator DID        only join DKGs started by these (repeatable; default any)
  --approve rules FILE   decide each call by a JSON rules file (docs/frost.md "Approvals"); a
                         file that does not parse stops the participant (frost-policy-invalid)
  --approve prompt       ask on this terminal (stdin; the question goes to stderr): y approves
  --approve webhook URL  POST the decoded call as JSON; wait for {"approve": bool, "reason"}
  --webhook-secret-file FILE  with --approve webhook: the shared HMAC secret (≥ 32 bytes; a file
                         group or others can read is refused): each request is signed and an
                         answer without its own valid x-jcp-signature is a refusal (docs/frost.md
                         "Webhook authentication"). --approve webhook needs a secret (changed:
                         frost-webhook-secret-required, exit 1) unless --webhook-unauthenticated
  --webhook-secret-env NAME  the same secret from the environment variable NAME
  --webhook-unauthenticated  with --approve webhook and no secret: accept unsigned answers (anything
                         that answers the URL first can approve; said again on stderr at start)
  --approve-timeout-ms MS  how long a person or webhook has (default 10000); no answer = refuse
  --approve allow-all    sign whatever an allowed coordinator asks: calls, grants, revocations,
                         raw bytes (what a participant without --approve did before approvals)
  --sign-raw             with --approve rules|prompt|webhook: also judge and sign messages that
                         are not jcp/1 wire requests (refused with frost-not-a-request otherwise)
  Every decision, approve or refuse, whatever the policy (allow-all included), is a record signed
  by the holder's identity in DIR/approvals.journal and on the JetStream stream <prefix>_approvals.

jcp frost dkg --threshold K --participants N --nats URL [--prefix P] [--members DID,...]
              [--timeout-ms MS] [--identity FILE [--passphrase-env VAR]] [--json]
  Starts a dealer-free key generation among N running participants (the first N to answer, or
  exactly --members) and prints the group did every participant confirmed. A participant that
  is lost, times out or sends an inconsistent share aborts the session for all; the error names it.
  --timeout-ms MS        per-round deadline, 1..3600000 (default 5000)
  --identity FILE        sign as this identity (an identity.key; default a fresh one), for
                         participants that only join DKGs of listed --initiator dids

jcp frost sign --group DID --message HEX|FILE --nats URL [--prefix P] [--signers K]
               [--timeout-ms MS] [--retries N] [--identity FILE [--passphrase-env VAR]] [--json]
  Coordinates one signing session: gathers commitments from online holders, sends the signing
  package, verifies every share (naming bad signers), aggregates, and checks the result as an
  ordinary Ed25519 signature under DID. Prints the 64-byte signature in hex.
  --message              what to sign, one of:
                           0xHEX        always hex bytes (0x alone: the empty message)
                           a path with '/' (./cafe, /tmp/m.bin): always that file's bytes
                           HEX          hex bytes (an even number of 0-9a-f digits); refused as
                                        ambiguous if a file of that name exists here: write
                                        ./NAME for the file or 0xHEX for the bytes
                           other NAME   that file's bytes (must exist)
  --timeout-ms MS        per-round deadline, 1..3600000 (default 3000)
  --signers K            how many holders sign (default the threshold)
  --retries N            fresh sessions without blamed participants after a failure (default 1)
  --identity FILE        coordinate as this identity (for participants run with --coordinator)

jcp frost approvals (--nats URL [--prefix P] [--group DID] | --journal FILE) [--json]
  Lists the holders' signed approval decisions (from the stream <prefix>_approvals, or one
  keystore's approvals.journal), verifying each signature: holder, decision, request, policy,
  reason. Exit 1 (frost-bad-signature) when any record does not verify.

Common: --prefix P (NATS subject prefix, default jcp.frost), -h/--help. Each option is given at
most once, except those marked repeatable; a value starting with '-' is written --opt=-VALUE.
Exit status: 0 on success; 2 on a usage error (a missing, repeated, unknown or malformed option,
one line "jcp frost: error [usage]: …" on stderr); 1 on any other failure, one line
"jcp frost: error [code]: …" on stderr: a protocol failure (frost-… codes, naming the
participants at fault), a file or folder that cannot be read or created (io), a bad did
(did-invalid).`;

function passphraseFrom(env: string | undefined): string | undefined {
  if (env === undefined) return undefined;
  const v = process.env[env];
  if (v === undefined || v === '') throw new UsageError(`--passphrase-env ${env}: the variable is empty or unset`);
  return v;
}

/** A sub-verb's options: the shared strict parser ({@link parse}), no positionals. */
function parseFlags<T extends NonNullable<ParseArgsConfig['options']>>(argv: string[], options: T) {
  return parse(argv, options, false).values;
}

/** Largest accepted --timeout-ms: one hour (Node timers overflow above 2^31 − 1 ms). */
export const MAX_TIMEOUT_MS = 3_600_000;

/** A decimal integer option in `min..max`; `dflt` when absent, else required. */
function intFlag(v: string | undefined, name: string, range: { min?: number; max?: number; dflt?: number } = {}): number {
  const { min = 0, max = Number.MAX_SAFE_INTEGER, dflt } = range;
  if (v === undefined) {
    if (dflt === undefined) throw new UsageError(`--${name} is required`);
    return dflt;
  }
  const n = /^\d{1,16}$/.test(v) ? Number(v) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    const what =
      max === Number.MAX_SAFE_INTEGER ? (min === 0 ? 'a non-negative integer' : `an integer ≥ ${min}`) : `an integer in ${min}..${max}`;
    throw new UsageError(`--${name} must be ${what}, got '${v}'`);
  }
  return n;
}

async function connectNats(url: string | undefined): Promise<NatsConnection> {
  if (!url) throw new UsageError('--nats URL is required');
  // The NATS layer's connection: a listener that is not NATS is named, not waited on with a leaked socket.
  const link = NatsLink.start(url, { name: 'jcp-frost' });
  try {
    return await link.ready(CONNECT_MS);
  } catch (e) {
    await link.close();
    throw new FrostError(FrostErrorCodes.TRANSPORT, `cannot reach NATS at ${url}: ${(e as Error).message}`, [], undefined, { cause: e });
  }
}

function report(e: FrostError | IoError): number {
  process.stderr.write(`jcp frost: error [${e.code}]: ${e.message}\n`);
  if (e instanceof FrostError && e.culprits.length) process.stderr.write(`jcp frost: at fault: ${describeCulprits(e.culprits)}\n`);
  return 1;
}

async function cmdDeal(argv: string[]): Promise<number> {
  const values = parseFlags(argv, {
    threshold: { type: 'string' },
    participants: { type: 'string' },
    out: { type: 'string' },
    'passphrase-env': { type: 'string' },
    json: { type: 'boolean' },
  });
  const min = intFlag(values.threshold, 'threshold');
  const max = intFlag(values.participants, 'participants');
  if (!values.out) throw new UsageError('--out DIR is required');
  const passphrase = passphraseFrom(values['passphrase-env']);
  const d = deal({ min, max }, (n) => new Uint8Array(randomBytes(n)));
  if (!d.ok) throw FrostError.of(d.error);
  const dir = resolve(values.out);
  const paths = d.value.shares.map((s) => join(dir, `participant-${s.identifier}.share`));
  // Refuse before writing anything, so a refused deal leaves no partial set of files.
  for (const path of paths) if (existsSync(path)) throw new UsageError(`${path} exists; refusing to overwrite a share`);
  makeDirs(dir, 0o700);
  const files: { identifier: number; identity: string; path: string }[] = [];
  d.value.shares.forEach((s, i) => {
    const path = paths[i]!;
    writeShareFile(
      path,
      shareRecord(s.group, s.identifier, s.signingShare, s.identitySeed),
      passphrase !== undefined ? { passphrase } : {},
    );
    files.push({ identifier: s.identifier, identity: s.group.roster[s.identifier - 1]!, path });
  });
  if (values.json) process.stdout.write(`${JSON.stringify({ group: d.value.did, threshold: min, participants: max, files }, null, 2)}\n`);
  else {
    process.stdout.write(`${d.value.did}\n`);
    for (const f of files) process.stderr.write(`wrote ${f.path} (identifier ${f.identifier}, holder ${f.identity})\n`);
  }
  return 0;
}

/**
 * Takes `--approve rules FILE | prompt | webhook URL | allow-all` out of `argv` (its kind and argument are
 * separate words, which the option parser cannot read). @throws UsageError.
 */
export function takeApprove(argv: readonly string[]): {
  rest: string[];
  approve?: { kind: 'rules' | 'prompt' | 'webhook' | 'allow-all'; arg?: string };
} {
  const rest: string[] = [];
  let approve: { kind: 'rules' | 'prompt' | 'webhook' | 'allow-all'; arg?: string } | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a !== '--approve' && !a.startsWith('--approve=')) {
      rest.push(a);
      continue;
    }
    if (approve) throw new UsageError('--approve is given more than once');
    const kind = a === '--approve' ? argv[++i] : a.slice('--approve='.length);
    if (kind === 'prompt' || kind === 'allow-all') approve = { kind };
    else if (kind === 'rules' || kind === 'webhook') {
      const arg = argv[++i];
      if (arg === undefined || arg === '') throw new UsageError(`--approve ${kind} needs ${kind === 'rules' ? 'a FILE' : 'a URL'}`);
      approve = { kind, arg };
    } else throw new UsageError(`--approve must be 'rules FILE', 'prompt', 'webhook URL' or 'allow-all', got '${kind ?? ''}'`);
  }
  return approve ? { rest, approve } : { rest };
}

async function cmdParticipant(argvIn: string[]): Promise<number> {
  const { rest: argv, approve } = takeApprove(argvIn);
  const values = parseFlags(argv, {
    keystore: { type: 'string' },
    nats: { type: 'string' },
    prefix: { type: 'string' },
    'passphrase-env': { type: 'string' },
    coordinator: { type: 'string', multiple: true },
    initiator: { type: 'string', multiple: true },
    'approve-timeout-ms': { type: 'string' },
    'sign-raw': { type: 'boolean' },
    'webhook-secret-file': { type: 'string' },
    'webhook-secret-env': { type: 'string' },
    'webhook-unauthenticated': { type: 'boolean' },
  });
  if (!values.keystore) throw new UsageError('--keystore DIR is required');
  // Checked before anything is opened or connected: the holder does not start at all.
  if (!approve) throw new FrostError(FrostErrorCodes.APPROVE_REQUIRED, APPROVE_REQUIRED_MESSAGE);
  const approveTimeoutMs = intFlag(values['approve-timeout-ms'], 'approve-timeout-ms', {
    min: 1,
    max: MAX_TIMEOUT_MS,
    dflt: DEFAULT_APPROVE_TIMEOUT_MS,
  });
  const judged = approve.kind !== 'allow-all';
  if (values['sign-raw'] && !judged) throw new UsageError('--sign-raw goes with --approve rules|prompt|webhook');
  if (values['approve-timeout-ms'] !== undefined && !judged)
    throw new UsageError('--approve-timeout-ms goes with --approve rules|prompt|webhook');
  const secretFile = values['webhook-secret-file'];
  const secretEnv = values['webhook-secret-env'];
  if ((secretFile !== undefined || secretEnv !== undefined) && approve.kind !== 'webhook')
    throw new UsageError('--webhook-secret-file/--webhook-secret-env go with --approve webhook');
  if (secretFile !== undefined && secretEnv !== undefined)
    throw new UsageError('give --webhook-secret-file or --webhook-secret-env, not both');
  const webhookSecret =
    secretFile !== undefined || secretEnv !== undefined
      ? readWebhookSecret(secretFile !== undefined ? { file: resolve(secretFile) } : { env: secretEnv! })
      : undefined;
  if (values['webhook-unauthenticated'] && (approve.kind !== 'webhook' || webhookSecret !== undefined))
    throw new UsageError('--webhook-unauthenticated goes with --approve webhook and no webhook secret');
  if (approve.kind === 'webhook' && webhookSecret === undefined && !values['webhook-unauthenticated'])
    throw new FrostError(
      FrostErrorCodes.WEBHOOK_SECRET_REQUIRED,
      '--approve webhook needs --webhook-secret-file FILE or --webhook-secret-env NAME (answers are then HMAC-checked); --webhook-unauthenticated accepts unsigned answers',
    );
  if (approve.kind === 'webhook' && webhookSecret === undefined)
    process.stderr.write(
      'jcp frost participant: warning: webhook answers are not authenticated (no --webhook-secret-file/--webhook-secret-env): anything that can answer the webhook URL first can approve\n',
    );
  const aopts = {
    allowRaw: values['sign-raw'] ?? false,
    timeoutMs: approveTimeoutMs,
    ...(webhookSecret !== undefined ? { webhookSecret } : {}),
  };
  let approver: Approver;
  if (approve.kind === 'rules') approver = rulesApprover(resolve(approve.arg!), aopts);
  else if (approve.kind === 'webhook') approver = webhookApprover(approve.arg!, aopts);
  else if (approve.kind === 'prompt') approver = promptApprover(process.stdin, process.stderr, aopts);
  else approver = allowAllApprover();
  for (const d of [...(values.coordinator ?? []), ...(values.initiator ?? [])]) parseDid(d);
  const passphrase = passphraseFrom(values['passphrase-env']);
  const nc = await connectNats(values.nats);
  const line = (o: unknown) => process.stdout.write(`${JSON.stringify(o)}\n`);
  let p: Participant;
  try {
    p = await Participant.start({
      keystore: resolve(values.keystore),
      nc,
      ...(values.prefix ? { prefix: values.prefix } : {}),
      ...(passphrase !== undefined ? { passphrase } : {}),
      ...(values.coordinator ? { coordinators: values.coordinator } : {}),
      ...(values.initiator ? { initiators: values.initiator } : {}),
      approver,
      onEvent: line,
    });
  } catch (e) {
    await nc.close();
    throw e;
  }
  const stopped = new Promise<void>((resolveStop) => {
    const stop = () => resolveStop();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    void nc.closed().then(stop);
  });
  await stopped;
  await p.stop();
  await nc.close().catch(() => {});
  line({ event: 'stopped' });
  return 0;
}

async function cmdDkg(argv: string[]): Promise<number> {
  const values = parseFlags(argv, {
    threshold: { type: 'string' },
    participants: { type: 'string' },
    nats: { type: 'string' },
    prefix: { type: 'string' },
    members: { type: 'string' },
    'timeout-ms': { type: 'string' },
    identity: { type: 'string' },
    'passphrase-env': { type: 'string' },
    json: { type: 'boolean' },
  });
  const min = intFlag(values.threshold, 'threshold');
  const max = intFlag(values.participants, 'participants');
  const timeoutMs = intFlag(values['timeout-ms'], 'timeout-ms', { min: 1, max: MAX_TIMEOUT_MS, dflt: 5000 });
  const members = values.members?.split(',').map((d) => d.trim());
  for (const d of members ?? []) parseDid(d);
  const actor = values.identity ? readIdentityFile(resolve(values.identity), passphraseFrom(values['passphrase-env'])) : undefined;
  const nc = await connectNats(values.nats);
  try {
    const r = await runDkg({
      bus: natsBus(nc),
      min,
      max,
      timeoutMs,
      ...(values.prefix ? { prefix: values.prefix } : {}),
      ...(members ? { members } : {}),
      ...(actor ? { actor } : {}),
    });
    if (values.json)
      process.stdout.write(
        `${JSON.stringify({ group: r.did, session: r.session, roster: r.roster, elapsed_ms: Math.round(r.elapsedMs) })}\n`,
      );
    else process.stdout.write(`${r.did}\n`);
    return 0;
  } finally {
    await nc.drain().catch(() => {});
  }
}

function isRegularFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/**
 * The bytes `--message` names (see the help): `0x…` is always hex, a value with a '/' always a
 * file, bare hex is hex unless a file of that name exists (then ambiguous: a usage error), and
 * anything else a file (at most {@link READ_CAPS}.messageFile, 64 MiB, the most one NATS message
 * can carry). @throws UsageError, IoError (a file that exists but cannot be read, or is larger).
 */
export function readMessage(v: string | undefined): Uint8Array {
  if (v === undefined) throw new UsageError('--message HEX|FILE is required');
  // An empty value is most often an unset shell variable: signing nothing must be asked for (0x).
  if (v === '') throw new UsageError('--message is empty: write 0x to sign the empty message');
  const hex = (h: string) => /^(?:[0-9a-fA-F]{2})*$/.test(h);
  if (/^0[xX]/.test(v)) {
    if (!hex(v.slice(2))) throw new UsageError(`--message ${v}: not hex after 0x (an even number of hex digits)`);
    return fromHex(v.slice(2).toLowerCase(), undefined, 'message');
  }
  const isPath = v.includes('/') || v.includes(sep);
  if (!isPath && hex(v)) {
    if (v !== '' && isRegularFile(v)) {
      throw new UsageError(
        `--message ${v} is both hex and the name of a file here: write ./${v} to sign the file, or 0x${v} to sign the bytes`,
      );
    }
    return fromHex(v.toLowerCase(), undefined, 'message');
  }
  let isFile: boolean;
  try {
    isFile = statSync(v).isFile();
  } catch (e) {
    const errno = errnoOf(e);
    if (errno !== 'ENOENT' && errno !== 'ENOTDIR') throw ioError(e, 'read message file', v);
    throw new UsageError(
      isPath ? `--message ${v}: no such file` : `--message ${v}: neither hex (an even number of hex digits) nor an existing file`,
    );
  }
  if (!isFile) throw new UsageError(`--message ${v}: not a regular file`);
  try {
    return new Uint8Array(readFileCapped(v, READ_CAPS.messageFile, 'message file'));
  } catch (e) {
    throw ioError(e, 'read message file', v);
  }
}

async function cmdSign(argv: string[]): Promise<number> {
  const values = parseFlags(argv, {
    group: { type: 'string' },
    message: { type: 'string' },
    nats: { type: 'string' },
    prefix: { type: 'string' },
    signers: { type: 'string' },
    'timeout-ms': { type: 'string' },
    retries: { type: 'string' },
    identity: { type: 'string' },
    'passphrase-env': { type: 'string' },
    json: { type: 'boolean' },
  });
  if (!values.group) throw new UsageError('--group DID is required');
  const actor = values.identity ? readIdentityFile(resolve(values.identity), passphraseFrom(values['passphrase-env'])) : undefined;
  const group = values.group;
  parseDid(group);
  const message = readMessage(values.message);
  const timeoutMs = intFlag(values['timeout-ms'], 'timeout-ms', { min: 1, max: MAX_TIMEOUT_MS, dflt: 3000 });
  const retries = intFlag(values.retries, 'retries', { dflt: 1 });
  const signers = values.signers === undefined ? undefined : intFlag(values.signers, 'signers', { min: 1 });
  const nc = await connectNats(values.nats);
  try {
    const prefix = values.prefix;
    const r = await signWithGroup({
      bus: natsBus(nc),
      registry: await natsRegistry(nc, prefix, { create: false }),
      group,
      message,
      timeoutMs,
      retries,
      ...(prefix ? { prefix } : {}),
      ...(signers !== undefined ? { signers } : {}),
      ...(actor ? { actor } : {}),
    });
    // Belt and braces: the coordinator already checked it; a CLI user sees the check made here too.
    if (!verify(parseDid(group), message, r.signature)) throw new FrostError(FrostErrorCodes.BAD_SIGNATURE, 'aggregate does not verify');
    if (values.json) {
      process.stdout.write(
        `${JSON.stringify({ group, signature: toHex(r.signature), session: r.session, signers: r.signers, attempts: r.attempts })}\n`,
      );
    } else process.stdout.write(`${toHex(r.signature)}\n`);
    return 0;
  } finally {
    await nc.drain().catch(() => {});
  }
}

/** One decision as `approvals` prints it (JSON), with whether its signature verifies. */
function decisionJson(d: ReadDecision, where: Record<string, unknown>): Record<string, unknown> {
  return { ...where, valid: d.valid, id: d.id, ...d.body };
}

async function cmdApprovals(argv: string[]): Promise<number> {
  const values = parseFlags(argv, {
    nats: { type: 'string' },
    prefix: { type: 'string' },
    group: { type: 'string' },
    journal: { type: 'string' },
    json: { type: 'boolean' },
  });
  if ((values.nats === undefined) === (values.journal === undefined))
    throw new UsageError('give exactly one of --nats URL or --journal FILE');
  if (values.group !== undefined) parseDid(values.group);
  const rows: Record<string, unknown>[] = [];
  if (values.journal !== undefined) {
    const path = resolve(values.journal);
    let read: ReturnType<typeof readDecisionFile>;
    try {
      read = readDecisionFile(path);
    } catch (e) {
      throw ioError(e, 'read approvals journal', path);
    }
    for (const m of read) {
      if (!m.record) rows.push({ record: m.seq, valid: false, malformed: m.malformed });
      else if (values.group === undefined || m.record.body.group === values.group) rows.push(decisionJson(m.record, { record: m.seq }));
    }
  } else {
    const nc = await connectNats(values.nats);
    try {
      for (const m of await readDecisionStream(nc, values.prefix ?? 'jcp.frost', values.group)) {
        rows.push(m.record ? decisionJson(m.record, { seq: m.seq }) : { seq: m.seq, valid: false, malformed: m.malformed });
      }
    } finally {
      await nc.drain().catch(() => {});
    }
  }
  for (const r of rows) {
    if (values.json) process.stdout.write(`${JSON.stringify(r)}\n`);
    else if (r['malformed'] !== undefined) process.stdout.write(`#${r['seq'] ?? r['record']} MALFORMED ${r['malformed']}\n`);
    else {
      process.stdout.write(
        `#${r['seq'] ?? r['record']} ${r['valid'] ? 'ok ' : 'BAD-SIGNATURE'} ${r['decision']} by ${r['holder']} (participant ${r['identifier']} of ${r['group']})` +
          ` request ${r['request']} ${r['action'] ? `${r['action']} on ${r['resource']} ` : ''}policy ${r['policy_kind']}:${r['policy']} at ${r['at_s']}: ${r['reason']}\n`,
      );
    }
  }
  const bad = rows.filter((r) => !r['valid']).length;
  if (bad)
    throw new FrostError(FrostErrorCodes.BAD_SIGNATURE, `${bad} of ${rows.length} approval records do not verify (or are not records)`);
  return 0;
}

const VERBS: Record<string, (argv: string[]) => Promise<number>> = {
  deal: cmdDeal,
  participant: cmdParticipant,
  dkg: cmdDkg,
  sign: cmdSign,
  approvals: cmdApprovals,
};

/** The `jcp frost` command. */
export const command: Command = {
  name: 'frost',
  summary: 'threshold actors: deal shares, run participants, DKG, threshold signing (§2.2)',
  help,
  async run(argv) {
    try {
      const [verb, ...rest] = argv;
      const fn = verb ? VERBS[verb] : undefined;
      if (!fn)
        throw new UsageError(
          verb
            ? `unknown sub-command '${verb}' (deal|participant|dkg|sign|approvals)`
            : 'a sub-command is required (deal|participant|dkg|sign|approvals)',
        );
      return await fn(rest);
    } catch (e) {
      if (e instanceof UsageError) throw e; // printed by cli/main.ts: one line `error [usage]`, exit 2
      const err = fromSystemError(e);
      if (err instanceof FrostError || err instanceof IoError) return report(err);
      throw err;
    }
  },
};
