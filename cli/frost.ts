/**
 * `jcp frost`: threshold actors (spec §2.2). Sub-verbs: `deal` (trusted dealer share files),
 * `participant` (run one participant over NATS), `dkg` (start a dealer-free key generation among
 * running participants), `sign` (coordinate a signing session). See docs/frost.md.
 */
import { existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { fromHex, toHex } from '../core/bytes.ts';
import { parseDid } from '../core/didkey.ts';
import { verify } from '../core/ed25519.ts';
import { natsBus, natsRegistry } from '../frost/bus.ts';
import { signWithGroup } from '../frost/coordinator.ts';
import { deal } from '../frost/dealer.ts';
import { describeCulprits, FrostError, FrostErrorCodes } from '../frost/errors.ts';
import { runDkg } from '../frost/initiator.ts';
import { Participant } from '../frost/participant.ts';
import { readIdentityFile, shareRecord, writeShareFile } from '../frost/sharefile.ts';
import { type Command, parse, UsageError } from './command.ts';

const help = `Usage: jcp frost <deal|participant|dkg|sign> [options]

Threshold actors (spec §2.2): a k-of-n did:key whose private key never exists in one place
(FROST, RFC 9591, Ed25519). The group key is an ordinary did:key; its signatures are ordinary
Ed25519 signatures. Secrets are read from files or environment variables, never from argv.

jcp frost deal --threshold K --participants N --out DIR [--passphrase-env VAR] [--json]
  Trusted dealer: writes DIR/participant-<i>.share (mode 0600) for i = 1..N, each holding the
  share, a fresh Ed25519 identity for its holder and the group package; prints the group did.
  --passphrase-env VAR   seal every file with the passphrase in $VAR (scrypt + AES-256-GCM)

jcp frost participant --keystore DIR --nats URL [--prefix P] [--passphrase-env VAR]
                      [--coordinator DID]... [--initiator DID]...
  Runs one participant until SIGINT/SIGTERM: answers DKG invites and signing sessions for every
  share in DIR (DIR/*.share and DIR/shares/*.share; a new DIR gets an identity.key). Prints one
  JSON event per line on stdout ({"event":"ready",...}, "dkg-complete", "signed", "refused"…).
  --coordinator DID      only sign for these coordinators (repeatable; default any)
  --initiator DID        only join DKGs started by these (repeatable; default any)

jcp frost dkg --threshold K --participants N --nats URL [--prefix P] [--members DID,...]
              [--timeout-ms MS] [--identity FILE [--passphrase-env VAR]] [--json]
  Starts a dealer-free key generation among N running participants (the first N to answer, or
  exactly --members) and prints the group did every participant confirmed. A participant that
  is lost, times out or sends an inconsistent share aborts the session for all; the error names it.
  --timeout-ms MS        per-round deadline (default 5000)
  --identity FILE        sign as this identity (an identity.key; default a fresh one), for
                         participants that only join DKGs of listed --initiator dids

jcp frost sign --group DID --message HEX|FILE --nats URL [--prefix P] [--signers K]
               [--timeout-ms MS] [--retries N] [--identity FILE [--passphrase-env VAR]] [--json]
  Coordinates one signing session: gathers commitments from online holders, sends the signing
  package, verifies every share (naming bad signers), aggregates, and checks the result as an
  ordinary Ed25519 signature under DID. Prints the 64-byte signature in hex.
  --message              hex bytes, or the path of a file whose bytes are signed
  --signers K            how many holders sign (default the threshold)
  --retries N            fresh sessions without blamed participants after a failure (default 1)
  --identity FILE        coordinate as this identity (for participants run with --coordinator)

Common: --prefix P (NATS subject prefix, default jcp.frost), -h/--help.
Exit status: 0 on success; 1 on a protocol failure ("error [code]: …" on stderr, naming the
participants at fault); 2 on a usage error.`;

function passphraseFrom(env: string | undefined): string | undefined {
  if (env === undefined) return undefined;
  const v = process.env[env];
  if (v === undefined || v === '') throw new UsageError(`--passphrase-env ${env}: the variable is empty or unset`);
  return v;
}

function positiveInt(v: string | undefined, name: string, dflt?: number): number {
  if (v === undefined) {
    if (dflt === undefined) throw new UsageError(`--${name} is required`);
    return dflt;
  }
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 0) throw new UsageError(`--${name} must be a non-negative integer`);
  return n;
}

async function connectNats(url: string | undefined): Promise<NatsConnection> {
  if (!url) throw new UsageError('--nats URL is required');
  try {
    return await connect({ servers: url.split(','), name: 'jcp-frost' });
  } catch (e) {
    throw new FrostError(FrostErrorCodes.TRANSPORT, `cannot reach NATS at ${url}: ${(e as Error).message}`);
  }
}

function report(e: FrostError): number {
  process.stderr.write(`jcp frost: error [${e.code}]: ${e.message}\n`);
  if (e.culprits.length) process.stderr.write(`jcp frost: at fault: ${describeCulprits(e.culprits)}\n`);
  return 1;
}

async function cmdDeal(argv: string[]): Promise<number> {
  const { values } = parse(argv, { threshold: { type: 'string' }, participants: { type: 'string' }, out: { type: 'string' }, 'passphrase-env': { type: 'string' }, json: { type: 'boolean' } }, false);
  const min = positiveInt(values.threshold, 'threshold');
  const max = positiveInt(values.participants, 'participants');
  if (!values.out) throw new UsageError('--out DIR is required');
  const passphrase = passphraseFrom(values['passphrase-env']);
  const d = deal({ min, max }, (n) => new Uint8Array(randomBytes(n)));
  if (!d.ok) throw FrostError.of(d.error);
  const dir = resolve(values.out);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const files: { identifier: number; identity: string; path: string }[] = [];
  for (const s of d.value.shares) {
    const path = join(dir, `participant-${s.identifier}.share`);
    if (existsSync(path)) throw new UsageError(`${path} exists; refusing to overwrite a share`);
    writeShareFile(path, shareRecord(s.group, s.identifier, s.signingShare, s.identitySeed), passphrase !== undefined ? { passphrase } : {});
    files.push({ identifier: s.identifier, identity: s.group.roster[s.identifier - 1]!, path });
  }
  if (values.json) process.stdout.write(`${JSON.stringify({ group: d.value.did, threshold: min, participants: max, files }, null, 2)}\n`);
  else {
    process.stdout.write(`${d.value.did}\n`);
    for (const f of files) process.stderr.write(`wrote ${f.path} (identifier ${f.identifier}, holder ${f.identity})\n`);
  }
  return 0;
}

async function cmdParticipant(argv: string[]): Promise<number> {
  const { values } = parse(
    argv,
    {
      keystore: { type: 'string' },
      nats: { type: 'string' },
      prefix: { type: 'string' },
      'passphrase-env': { type: 'string' },
      coordinator: { type: 'string', multiple: true },
      initiator: { type: 'string', multiple: true },
    },
    false,
  );
  if (!values.keystore) throw new UsageError('--keystore DIR is required');
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
  const { values } = parse(
    argv,
    {
      threshold: { type: 'string' },
      participants: { type: 'string' },
      nats: { type: 'string' },
      prefix: { type: 'string' },
      members: { type: 'string' },
      'timeout-ms': { type: 'string' },
      identity: { type: 'string' },
      'passphrase-env': { type: 'string' },
      json: { type: 'boolean' },
    },
    false,
  );
  const min = positiveInt(values.threshold, 'threshold');
  const max = positiveInt(values.participants, 'participants');
  const timeoutMs = positiveInt(values['timeout-ms'], 'timeout-ms', 5000);
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
    if (values.json) process.stdout.write(`${JSON.stringify({ group: r.did, session: r.session, roster: r.roster, elapsed_ms: Math.round(r.elapsedMs) })}\n`);
    else process.stdout.write(`${r.did}\n`);
    return 0;
  } finally {
    await nc.drain().catch(() => {});
  }
}

function readMessage(v: string | undefined): Uint8Array {
  if (v === undefined) throw new UsageError('--message HEX|FILE is required');
  if (existsSync(v) && statSync(v).isFile()) return new Uint8Array(readFileSync(v));
  try {
    return fromHex(v, undefined, 'message');
  } catch {
    throw new UsageError(`--message: ${v} is neither hex nor a readable file`);
  }
}

async function cmdSign(argv: string[]): Promise<number> {
  const { values } = parse(
    argv,
    {
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
    },
    false,
  );
  if (!values.group) throw new UsageError('--group DID is required');
  const actor = values.identity ? readIdentityFile(resolve(values.identity), passphraseFrom(values['passphrase-env'])) : undefined;
  const group = values.group;
  parseDid(group);
  const message = readMessage(values.message);
  const nc = await connectNats(values.nats);
  try {
    const prefix = values.prefix;
    const r = await signWithGroup({
      bus: natsBus(nc),
      registry: await natsRegistry(nc, prefix),
      group,
      message,
      timeoutMs: positiveInt(values['timeout-ms'], 'timeout-ms', 3000),
      retries: positiveInt(values.retries, 'retries', 1),
      ...(prefix ? { prefix } : {}),
      ...(values.signers ? { signers: positiveInt(values.signers, 'signers') } : {}),
      ...(actor ? { actor } : {}),
    });
    // Belt and braces: the coordinator already checked it; a CLI user sees the check made here too.
    if (!verify(parseDid(group), message, r.signature)) throw new FrostError(FrostErrorCodes.BAD_SIGNATURE, 'aggregate does not verify');
    if (values.json) {
      process.stdout.write(`${JSON.stringify({ group, signature: toHex(r.signature), session: r.session, signers: r.signers, attempts: r.attempts })}\n`);
    } else process.stdout.write(`${toHex(r.signature)}\n`);
    return 0;
  } finally {
    await nc.drain().catch(() => {});
  }
}

const VERBS: Record<string, (argv: string[]) => Promise<number>> = { deal: cmdDeal, participant: cmdParticipant, dkg: cmdDkg, sign: cmdSign };

/** The `jcp frost` command. */
export const command: Command = {
  name: 'frost',
  summary: 'threshold actors: deal shares, run participants, DKG, threshold signing (§2.2)',
  help,
  async run(argv) {
    const [verb, ...rest] = argv;
    const fn = verb ? VERBS[verb] : undefined;
    if (!fn) throw new UsageError(verb ? `unknown sub-command '${verb}' (deal|participant|dkg|sign)` : 'a sub-command is required (deal|participant|dkg|sign)');
    try {
      return await fn(rest);
    } catch (e) {
      if (e instanceof FrostError) return report(e);
      throw e;
    }
  },
};
