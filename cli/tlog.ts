/**
 * `jcp receipts checkpoint|prove|verify-proof`: the node's receipt log as an RFC 9162 transparency
 * log (docs/tlog.md). `checkpoint` prints a C2SP checkpoint signed by the steward key; `prove`
 * prints an inclusion proof (a seq in a tree size) or a consistency proof (old size → new size);
 * `verify-proof` checks a proof against signed checkpoint(s), the receipt, and cosignatures.
 */
import path from 'node:path';
import {
  addSignatureLines,
  type Did,
  ErrorCodes,
  fromHex,
  type Hash32,
  isDid,
  JcpError,
  leafHash,
  openCheckpoint,
  openReceipt,
  parseDid,
  type SignedLogCheckpoint,
  toHex,
  verifyConsistency,
  verifyCosignature,
  verifyInclusion,
  witness,
} from '../core/index.ts';
import { archiveRecords, readKeyFile, readSegments, ReceiptLog, readDataMeta, withSegments } from '../node/index.ts';
import { buildLogTree, checkAgainstCheckpoint, checkpointOf, originOf } from '../node/index.ts';
import { CliError, UsageError, parse } from './command.ts';
import { READ_CAPS, readFileCapped } from '../io/index.ts';
import { runTlogWitness } from './tlogwitness.ts';

/** The verbs of this module, for `jcp receipts`. */
export const TLOG_VERBS = [
  'checkpoint',
  'prove',
  'verify-proof',
  'cosign',
  'check-witnessed',
  'witness-audit',
  'fleet',
  'verify-fleet',
] as const;

/** Help text lines for `jcp receipts --help`. */
export const TLOG_HELP = `Transparency log (RFC 9162, C2SP tlog-checkpoint; docs/tlog.md):
  checkpoint    print the log's checkpoint (origin, tree size, root hash) as a C2SP signed note,
                signed by the steward (--key, default <data-dir>/steward.key). Leaf i is the
                COSE_Sign1 bytes of receipt seq i; origin jcp/<steward did> unless --origin.
                --json: {"origin", "size", "root", "note"} (root in hex).
  prove         --inclusion SEQ [--size N]: the RFC 9162 inclusion proof of receipt SEQ in the
                tree of N receipts (default: all); --consistency OLD [NEW]: the consistency
                proof from the tree of OLD receipts to NEW (default: all). Text: one hash per
                line; --json: {"type", "origin", "proof": [hex, …], …} (what verify-proof reads).
  verify-proof  --proof FILE (prove --json) --checkpoint FILE (the signed checkpoint of the
                proof's tree) --steward DID [--origin NAME]; inclusion: --receipt FILE (its
                COSE_Sign1 bytes, or hex); consistency: --old-checkpoint FILE. Each
                --cosigner NAME=DID must have cosigned --checkpoint (C2SP tlog-cosignature).
                Exit 0 and {"ok": true, …} when everything verifies; else an error with its code:
                tlog-range, proof-invalid, proof-mismatch, note-unverified, cosignature-invalid.
  cosign        act as a witness by hand: --checkpoint FILE (the log's new checkpoint) --steward
                DID --key witness.key --name NAME [--previous FILE --proof FILE (prove --json
                --consistency from the previous size)]: when the new checkpoint verifies and is
                consistent with --previous (none: trust on first use), prints it with a C2SP
                cosignature/v1 line by NAME added. Not consistent: exit 1, code log-inconsistent,
                and {"ok": false, "why", "previous", "next"} (both notes, as evidence) on stdout.
  check-witnessed  <data-dir> --checkpoint FILE [--cosigner NAME=DID …]: holds the log to a
                checkpoint of it (signed by its steward, cosigned by each --cosigner): a log
                shorter than it, or different below its size, is log-damaged (exit 1), naming it.
  Archived logs: give --archive DIR (the segment folder) to checkpoint, prove and check-witnessed.
  witness-audit [--nats URL] [--subject-root R] [--json]: the transparency-log stream (nodes
                started with --nats publish and cosign there): each node's latest checkpoint and
                who cosigned it, and every log-inconsistent alarm with both checkpoints as
                evidence (exit 1 when there is one).
  fleet         --key root.key [--nats URL] [--subject-root R] [--json]: the fleet record, one
                checkpoint signed by the team root over each node's newest cosigned checkpoint (origin
                jcp-fleet/<root did>); --json adds each member's membership proof.
  verify-fleet  --record FILE (fleet --json) --root DID: checks the record, every member's
                checkpoint and membership proof (proof-invalid, note-unverified).`;

const hashes = (xs: readonly Hash32[]): string[] => xs.map((x) => toHex(x));

function seqArg(v: string | undefined, what: string): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!/^[0-9]+$/.test(v) || !Number.isSafeInteger(n)) throw new UsageError(`${what}: an integer ≥ 0, not ${JSON.stringify(v)}`);
  return n;
}

/** The options of `jcp receipts` for the verbs of this module. */
const TLOG_OPTIONS = {
  key: { type: 'string' },
  origin: { type: 'string' },
  archive: { type: 'string' },
  json: { type: 'boolean' },
  inclusion: { type: 'string' },
  size: { type: 'string' },
  consistency: { type: 'string' },
  proof: { type: 'string' },
  checkpoint: { type: 'string' },
  'old-checkpoint': { type: 'string' },
  receipt: { type: 'string' },
  steward: { type: 'string' },
  cosigner: { type: 'string', multiple: true },
  previous: { type: 'string' },
  name: { type: 'string' },
  nats: { type: 'string' },
  'subject-root': { type: 'string' },
  record: { type: 'string' },
  root: { type: 'string' },
} as const;

/** The parsed options of {@link runTlog}. */
type TlogValues = ReturnType<typeof parse<typeof TLOG_OPTIONS>>['values'];

/** The sizes and sequence numbers a data-folder verb was given (receipt counts / 0-based seqs). */
interface FolderArgs {
  readonly inclusion: number | undefined;
  readonly size: number | undefined;
  readonly oldSize: number | undefined;
  readonly newSize: number | undefined;
}

/**
 * Checks the arguments of `checkpoint`, `prove` and `check-witnessed` (one data folder; `prove`
 * takes `--inclusion SEQ` or `--consistency OLD [NEW]`).
 * @throws UsageError on a missing folder, a bad integer or a wrong combination
 */
function folderArgs(verb: string, positionals: readonly string[], values: TlogValues): FolderArgs {
  if (positionals[0] === undefined) throw new UsageError(`${verb}: expected a data folder`);
  const inclusion = seqArg(values.inclusion, '--inclusion');
  const size = seqArg(values.size, '--size');
  const oldSize = seqArg(values.consistency, '--consistency');
  const newSize = seqArg(positionals[1], 'NEW');
  if ((verb === 'checkpoint' || verb === 'check-witnessed') && positionals.length !== 1)
    throw new UsageError(`${verb}: expected one data folder`);
  if (verb === 'checkpoint' || verb === 'check-witnessed') {
    // A checkpoint is always of the whole log: a proof's sizes would be ignored, not applied.
    const extra = (['size', 'inclusion', 'consistency'] as const).find((k) => values[k] !== undefined);
    if (extra !== undefined) throw new UsageError(`${verb} takes no --${extra} (it is of the whole log); --${extra} is for 'prove'`);
  }
  if (verb === 'check-witnessed' && values.checkpoint === undefined) throw new UsageError('check-witnessed: --checkpoint FILE is required');
  if (verb === 'prove') {
    if ((inclusion === undefined) === (oldSize === undefined))
      throw new UsageError('prove: give --inclusion SEQ or --consistency OLD [NEW]');
    if (inclusion !== undefined && positionals.length !== 1) throw new UsageError('prove --inclusion: expected one data folder');
    if (oldSize !== undefined && (positionals.length > 2 || size !== undefined))
      throw new UsageError('prove --consistency OLD [NEW]: NEW follows the data folder (no --size)');
  }
  return { inclusion, size, oldSize, newSize };
}

/**
 * The Merkle tree of every receipt of `log`, reading archived receipts from `archive` when some are.
 * @throws CliError `archive-needed` (receipts archived, no `--archive`), `archive-damaged`
 */
async function logTree(log: ReceiptLog, archive: string | undefined): Promise<Awaited<ReturnType<typeof buildLogTree>>> {
  const records = await archiveRecords(log);
  let source: ReturnType<typeof withSegments> | undefined;
  if (records.length > 0) {
    if (archive === undefined) {
      throw new CliError(
        'archive-needed',
        `receipts ${records[0]!.first}..${records[records.length - 1]!.last} of this log are archived: give --archive DIR`,
      );
    }
    const seg = readSegments(path.resolve(archive), records);
    const bad = seg.checks.find((c) => !c.ok);
    if (bad !== undefined) throw new CliError('archive-damaged', `${bad.file}: ${bad.ok ? '' : bad.why}`);
    source = withSegments(log, seg.receipts);
  }
  return await buildLogTree(log, source);
}

/** A data folder's open log: its tree, steward and checkpoint origin. */
interface FolderLog {
  readonly tree: Awaited<ReturnType<typeof buildLogTree>>;
  readonly steward: Did;
  readonly origin: string;
}

/**
 * `check-witnessed`: the tree must match the `--checkpoint` file (signed by the steward, cosigned
 * by every `--cosigner`); prints one JSON line. Returns 0.
 */
function checkWitnessed({ tree, steward, origin }: FolderLog, values: TlogValues): number {
  const cp = readCheckpoint(values.checkpoint!, steward, origin, cosignerArgs(values.cosigner));
  const by = cp.cosigned_by.length > 0 ? `, cosigned by ${cp.cosigned_by.join(', ')}` : ' (no cosigner asked for)';
  checkAgainstCheckpoint(tree, cp, `checkpoint ${cp.origin} size ${cp.size} root ${toHex(cp.root)}${by}`);
  process.stdout.write(
    `${JSON.stringify({ ok: true, origin, size: tree.size, checkpoint_size: cp.size, root: toHex(cp.root), cosigned_by: cp.cosigned_by })}\n`,
  );
  return 0;
}

/**
 * `checkpoint`: signs the tree's checkpoint with `--key` (default `<data>/steward.key`) and prints
 * the note (or JSON with `--json`). Returns 0.
 * @throws CliError `log-steward-mismatch` when the key is not the log's steward
 */
function writeCheckpoint({ tree, steward, origin }: FolderLog, values: TlogValues, dataDir: string): number {
  const actor = readKeyFile(values.key ?? path.join(dataDir, 'steward.key'));
  if (actor.did !== steward)
    throw new CliError('log-steward-mismatch', `${values.key ?? 'steward.key'} is ${actor.did}, not the steward of this log (${steward})`);
  const c = checkpointOf(tree, actor, origin);
  if (values.json) {
    process.stdout.write(`${JSON.stringify({ origin, size: c.checkpoint.size, root: toHex(c.checkpoint.root), note: c.note }, null, 2)}\n`);
  } else process.stdout.write(c.note);
  return 0;
}

/**
 * `prove`: an inclusion proof of seq `inclusion` in the first `size` receipts (default all), or a
 * consistency proof from `oldSize` to `newSize` (default all); printed as JSON with `--json`,
 * else one hex hash a line. Returns 0.
 */
function prove({ tree, origin }: FolderLog, args: FolderArgs, json: boolean | undefined): number {
  const { inclusion, size, oldSize, newSize } = args;
  let out: Record<string, unknown>;
  if (inclusion !== undefined) {
    const n = size ?? tree.size;
    const proof = tree.inclusionProof(inclusion, n);
    out = {
      type: 'inclusion',
      origin,
      index: inclusion,
      size: n,
      leaf_hash: toHex(tree.leafHashAt(inclusion)),
      root: toHex(tree.root(n)),
      proof: hashes(proof),
    };
  } else {
    const n = newSize ?? tree.size;
    const proof = tree.consistencyProof(oldSize!, n);
    out = {
      type: 'consistency',
      origin,
      old_size: oldSize,
      new_size: n,
      old_root: toHex(tree.root(oldSize!)),
      new_root: toHex(tree.root(n)),
      proof: hashes(proof),
    };
  }
  if (json) process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
  else process.stdout.write((out.proof as string[]).map((h) => `${h}\n`).join(''));
  return 0;
}

/**
 * Runs `jcp receipts <verb>` for one of {@link TLOG_VERBS}. Returns the exit code.
 * @throws UsageError (exit 2), CliError / JcpError / NodeFault with their codes (exit 1)
 */
export async function runTlog(verb: (typeof TLOG_VERBS)[number], argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, TLOG_OPTIONS);
  if (verb === 'witness-audit' || verb === 'fleet' || verb === 'verify-fleet') {
    if (positionals.length !== 0) throw new UsageError(`${verb} takes no data folder`);
    return await runTlogWitness(verb, values);
  }
  if (verb === 'cosign') {
    if (positionals.length !== 0) throw new UsageError('cosign takes no data folder: give --checkpoint, --steward, --key, --name');
    return cosignNow(values);
  }
  if (verb === 'verify-proof') {
    if (positionals.length !== 0) throw new UsageError('verify-proof takes no data folder: give --proof, --checkpoint, --steward');
    return verifyProof(values);
  }
  const dataDir = path.resolve(positionals[0] ?? '');
  const args = folderArgs(verb, positionals, values);
  const meta = readDataMeta(dataDir);
  if (meta === undefined) throw new CliError('not-a-data-folder', `${dataDir} is not a node data folder (no node.json)`);
  const origin = values.origin ?? originOf(meta.steward);
  const log = await ReceiptLog.open(dataDir, { steward: meta.steward, mustExist: true, nowS: 0 });
  try {
    const folder: FolderLog = { tree: await logTree(log, values.archive), steward: meta.steward, origin };
    if (verb === 'check-witnessed') return checkWitnessed(folder, values);
    if (verb === 'checkpoint') return writeCheckpoint(folder, values, dataDir);
    return prove(folder, args, values.json);
  } finally {
    await log.close();
  }
}

interface ProofFile {
  readonly type: 'inclusion' | 'consistency';
  readonly index?: number;
  readonly size?: number;
  readonly old_size?: number;
  readonly new_size?: number;
  readonly proof: Hash32[];
}

function proofMalformed(why: string): never {
  throw new CliError('proof-malformed', why);
}

function readProofFile(file: string): ProofFile {
  let v: Record<string, unknown>;
  try {
    v = JSON.parse(readFileCapped(file, READ_CAPS.messageFile, 'proof file').toString('utf8')) as Record<string, unknown>;
  } catch (e) {
    if (e instanceof SyntaxError) proofMalformed(`${file}: not JSON (${e.message})`);
    throw e;
  }
  if (typeof v !== 'object' || v === null) proofMalformed(`${file}: not a JSON object`);
  if (v.type !== 'inclusion' && v.type !== 'consistency') proofMalformed(`${file}: "type" is "inclusion" or "consistency"`);
  if (!Array.isArray(v.proof) || v.proof.some((h) => typeof h !== 'string')) proofMalformed(`${file}: "proof" is an array of hex hashes`);
  const num = (k: string): number => {
    const x = v[k];
    if (typeof x !== 'number' || !Number.isSafeInteger(x) || x < 0) proofMalformed(`${file}: "${k}" is an integer ≥ 0`);
    return x;
  };
  const proof = (v.proof as string[]).map((h, i) => {
    try {
      return fromHex(h, 32, `proof[${i}]`);
    } catch {
      return proofMalformed(`${file}: proof[${i}] is not 32 bytes of hex`);
    }
  });
  return v.type === 'inclusion'
    ? { type: 'inclusion', index: num('index'), size: num('size'), proof }
    : { type: 'consistency', old_size: num('old_size'), new_size: num('new_size'), proof };
}

function readCheckpoint(
  file: string,
  steward: Did,
  origin: string,
  cosigners: Array<[string, Did]>,
): SignedLogCheckpoint & { cosigned_by: string[] } {
  const c = openCheckpoint(readFileCapped(file, READ_CAPS.messageFile, 'checkpoint file'), parseDid(steward), origin);
  for (const [name, did] of cosigners) verifyCosignature(c.note, name, parseDid(did));
  return { ...c, cosigned_by: cosigners.map(([n]) => n) };
}

/** Reads a receipt file: raw COSE_Sign1 bytes, or hex text (whitespace ignored). */
function readReceiptBytes(file: string): Uint8Array {
  const raw = readFileCapped(file, READ_CAPS.receiptFile, 'receipt file');
  const text = raw.toString('latin1').trim();
  return /^[0-9a-fA-F\s]+$/.test(text) && text.length > 0 ? fromHex(text.replace(/\s+/g, ''), undefined, 'receipt') : new Uint8Array(raw);
}

function cosignerArgs(v: string[] | undefined): Array<[string, Did]> {
  return (v ?? []).map((s) => {
    const eq = s.lastIndexOf('=');
    const did = s.slice(eq + 1);
    if (eq <= 0 || !isDid(did)) throw new UsageError(`--cosigner ${s}: NAME=DID (a did:key)`);
    return [s.slice(0, eq), did];
  });
}

function mismatch(why: string): never {
  throw new CliError('proof-mismatch', why);
}

function verifyProof(values: Record<string, string | boolean | string[] | undefined>): number {
  const need = (k: string): string => {
    const v = values[k];
    if (typeof v !== 'string') throw new UsageError(`verify-proof: --${k} is required`);
    return v;
  };
  const proofFile = need('proof');
  const cpFile = need('checkpoint');
  const steward = need('steward');
  if (!isDid(steward)) throw new UsageError(`--steward ${steward}: not a did:key`);
  const origin = typeof values.origin === 'string' ? values.origin : originOf(steward);
  const cosigners = cosignerArgs(values.cosigner as string[] | undefined);
  const p = readProofFile(proofFile);
  const cp = readCheckpoint(cpFile, steward, origin, cosigners);
  if (p.type === 'inclusion') {
    if (values['old-checkpoint'] !== undefined) throw new UsageError('verify-proof: --old-checkpoint is for a consistency proof');
    if (p.size !== cp.size) mismatch(`the proof is for a tree of ${p.size} receipts, the checkpoint is of ${cp.size}`);
    const bytes = readReceiptBytes(need('receipt'));
    const r = openReceipt(bytes, steward);
    if (!r.ok) throw new CliError(r.error.code, `the receipt does not verify under ${steward}: ${r.error.why}`);
    if (r.value.seq !== p.index) mismatch(`the receipt is seq ${r.value.seq}, the proof is for seq ${p.index}`);
    if (p.index! >= cp.size)
      throw new JcpError(ErrorCodes.TLOG_RANGE, `seq ${p.index} is past the checkpoint's tree of ${cp.size} receipts`);
    verifyInclusion(leafHash(bytes), p.index!, cp.size, p.proof, cp.root);
    process.stdout.write(
      `${JSON.stringify({ ok: true, type: 'inclusion', origin, seq: p.index, size: cp.size, root: toHex(cp.root), cosigned_by: cp.cosigned_by })}\n`,
    );
    return 0;
  }
  const old = readCheckpoint(need('old-checkpoint'), steward, origin, []);
  if (p.old_size !== old.size || p.new_size !== cp.size) {
    mismatch(`the proof is for ${p.old_size} → ${p.new_size} receipts, the checkpoints are of ${old.size} and ${cp.size}`);
  }
  verifyConsistency(old.size, cp.size, p.proof, old.root, cp.root);
  process.stdout.write(
    `${JSON.stringify({ ok: true, type: 'consistency', origin, old_size: old.size, new_size: cp.size, old_root: toHex(old.root), new_root: toHex(cp.root), cosigned_by: cp.cosigned_by })}\n`,
  );
  return 0;
}

function cosignNow(values: Record<string, string | boolean | string[] | undefined>): number {
  const need = (k: string): string => {
    const v = values[k];
    if (typeof v !== 'string') throw new UsageError(`cosign: --${k} is required`);
    return v;
  };
  const steward = need('steward');
  if (!isDid(steward)) throw new UsageError(`--steward ${steward}: not a did:key`);
  const origin = typeof values.origin === 'string' ? values.origin : originOf(steward);
  const me = readKeyFile(need('key'));
  const name = need('name');
  const next = readFileCapped(need('checkpoint'), READ_CAPS.messageFile, 'checkpoint file').toString('utf8');
  let previous: string | undefined;
  let proof: Hash32[] = [];
  if (values.previous !== undefined) {
    previous = readFileCapped(need('previous'), READ_CAPS.messageFile, 'checkpoint file').toString('utf8');
    const p = readProofFile(need('proof'));
    const sizes = [openCheckpoint(previous, parseDid(steward), origin).size, openCheckpoint(next, parseDid(steward), origin).size];
    if (p.type !== 'consistency' || p.old_size !== sizes[0] || p.new_size !== sizes[1]) {
      mismatch(`the proof is not the consistency proof from ${sizes[0]} to ${sizes[1]} receipts`);
    }
    proof = p.proof;
  } else if (values.proof !== undefined) throw new UsageError('cosign: --proof goes with --previous');
  const v = witness(next, previous, proof, { key: parseDid(steward), origin }, { name, key: me.key, timeS: Math.floor(Date.now() / 1000) });
  if (!v.ok) {
    process.stdout.write(
      `${JSON.stringify({ ok: false, code: v.code, why: v.why, previous: v.evidence[0], next: v.evidence[1] }, null, 2)}\n`,
    );
    throw new CliError(v.code, `${origin}: ${v.why}; both checkpoints are on stdout as evidence`);
  }
  process.stdout.write(addSignatureLines(v.checkpoint.note, [v.cosignature]));
  return 0;
}
