/**
 * A shard set (spec §4.5 baseline, C11): the sibling children of one parent grant, one per
 * enforcement point, whose budgets sum to no more than what the parent has left, and the manifest
 * that records them across rebalances (`shards.json`).
 *
 * The manifest keeps what the arithmetic needs: the parent, the live shards (each with its signed
 * grant as det-CBOR hex), and `consumed_uj`, the µJ spent by shards already revoked and closed.
 * New shards are minted with `allocatedUj = consumed_uj`, so core's {@link mintShards} refuses any
 * set that would hand out more than the parent has left.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import {
  type Actor,
  type ContentId,
  decode,
  type Did,
  encode,
  err,
  ErrorCodes,
  fromHex,
  grantId,
  JcpError,
  mintShards,
  ok,
  planSplit,
  readSignedGrant,
  type Result,
  type Rng,
  type ShardRefusal,
  ShardRefusals,
  type SignedGrant,
  signedGrantToCbor,
  toHex,
  type Uj,
} from '../core/index.ts';

/** One slice of a split: a name (usually the point it goes to) and its share in percent. */
export interface SplitEntry {
  readonly name: string;
  readonly percent: number;
}

const NAME_RE = /^[A-Za-z0-9_.-]{1,64}$/;

/**
 * Parses `a=40%,b=30%,c=30%` (the `%` is optional; shares are multiples of 0.01%).
 * @throws JcpError `schema` naming the bad entry (syntax, a repeated name).
 */
export function parseSplit(spec: string): SplitEntry[] {
  const out: SplitEntry[] = [];
  for (const part of spec
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const m = /^([^=]+)=(\d+(?:\.\d+)?)%?$/.exec(part);
    if (!m || !NAME_RE.test(m[1]!)) throw new JcpError(ErrorCodes.SCHEMA, `--split: expected name=NN%, got ${JSON.stringify(part)}`);
    if (out.some((e) => e.name === m[1])) throw new JcpError(ErrorCodes.SCHEMA, `--split: ${m[1]} named twice`);
    out.push({ name: m[1]!, percent: Number(m[2]) });
  }
  if (out.length === 0) throw new JcpError(ErrorCodes.SCHEMA, '--split: no slices');
  return out;
}

/** A live shard: its name, the point it was handed to (if known), and the signed grant. */
export interface Shard {
  readonly name: string;
  readonly grant: SignedGrant;
  /** The enforcement point's did and jcp/1 address, when the shard was handed to a known node. */
  readonly point?: { readonly did: Did; readonly address?: string };
}

/** A revoked, closed shard: what it was given and what was spent on it (µJ). */
export interface ClosedShard {
  readonly name: string;
  readonly id: ContentId;
  readonly generation: number;
  readonly budgetUj: Uj;
  readonly spentUj: Uj;
}

/** The state of a sharded parent across rebalances. */
export interface ShardManifest {
  /** The parent chain, root first (the shards' parent is its leaf). */
  readonly parentChain: readonly SignedGrant[];
  /** 1 for the first mint, +1 per rebalance. */
  readonly generation: number;
  /** µJ spent by shards revoked and closed so far. */
  readonly consumedUj: Uj;
  readonly shards: readonly Shard[];
  readonly closed: readonly ClosedShard[];
}

/** The parent grant of a manifest (the leaf of its chain). */
export function parentOf(m: ShardManifest): SignedGrant {
  const p = m.parentChain[m.parentChain.length - 1];
  if (!p) throw new JcpError(ErrorCodes.SCHEMA, 'shard manifest: empty parent chain');
  return p;
}

/** Options of {@link mintShardSet}. */
export interface MintSetOpts {
  /** Who holds each shard (the agent presenting it); one did for all, or one per slice name. */
  readonly subject: Did | Readonly<Record<string, Did>>;
  /** Where each slice goes, by name (recorded in the manifest). */
  readonly points?: Readonly<Record<string, { did: Did; address?: string }>>;
  /** µJ already consumed by closed shards (default 0). */
  readonly consumedUj?: Uj;
  /** 16-byte nonces. */
  readonly rng: Rng;
}

/**
 * Mints one shard per split entry from the leaf of `parentChain`, as its holder: the slices are
 * the split's shares of what the parent has left (budget − `consumedUj`), rounding dust to the
 * last slice (core {@link planSplit}), and core {@link mintShards} refuses any set that passes the
 * parent. Refusals are core's ({@link ShardRefusals}).
 */
export function mintShardSet(
  parentChain: readonly SignedGrant[],
  holder: Actor,
  split: readonly SplitEntry[],
  opts: MintSetOpts,
): Result<Shard[], ShardRefusal> {
  const parent = parentChain[parentChain.length - 1];
  if (!parent) return err({ code: ShardRefusals.BAD_SLICE, why: 'empty parent chain' });
  const consumed = opts.consumedUj ?? 0n;
  const left = parent.grant.budget_uj > consumed ? parent.grant.budget_uj - consumed : 0n;
  const plan = planSplit(
    left,
    split.map((s) => s.percent),
  );
  if (!plan.ok) return plan;
  const subjectOf = (name: string): Did => (typeof opts.subject === 'string' ? opts.subject : (opts.subject[name] ?? ''));
  for (const s of split) {
    if (!subjectOf(s.name)) return err({ code: ShardRefusals.BAD_SLICE, why: `no subject for slice ${s.name}` });
  }
  const minted = mintShards(
    parent,
    holder,
    split.map((s, i) => ({ subject: subjectOf(s.name), budget_uj: plan.value[i]!, nonce: opts.rng(16) })),
    { allocatedUj: consumed },
  );
  if (!minted.ok) return minted;
  return ok(
    minted.value.map((grant, i) => {
      const name = split[i]!.name;
      const point = opts.points?.[name];
      return { name, grant, ...(point ? { point } : {}) };
    }),
  );
}

const MANIFEST_TYPE = 'jcp-shards';

const hexOf = (sg: SignedGrant) => toHex(encode(signedGrantToCbor(sg)));
const grantOf = (hex: string, field: string) => readSignedGrant(decode(fromHex(hex, undefined, field)), field);

/** The manifest as JSON (µJ as decimal strings, grants as det-CBOR hex with their ids). */
export function manifestToJson(m: ShardManifest): Record<string, unknown> {
  const parent = parentOf(m);
  return {
    type: MANIFEST_TYPE,
    parent_id: grantId(parent.grant),
    parent_budget_uj: parent.grant.budget_uj.toString(),
    generation: m.generation,
    consumed_uj: m.consumedUj.toString(),
    parent_chain: m.parentChain.map(hexOf),
    shards: m.shards.map((s) => ({
      name: s.name,
      id: grantId(s.grant.grant),
      budget_uj: s.grant.grant.budget_uj.toString(),
      cbor: hexOf(s.grant),
      ...(s.point ? { point: s.point } : {}),
    })),
    closed: m.closed.map((c) => ({
      name: c.name,
      id: c.id,
      generation: c.generation,
      budget_uj: c.budgetUj.toString(),
      spent_uj: c.spentUj.toString(),
    })),
  };
}

/**
 * Reads a manifest from its JSON form, checking each grant against its recorded id.
 * @throws JcpError `schema` (or the decoder's codes) naming the bad field.
 */
export function manifestFromJson(v: unknown): ShardManifest {
  const o = v as Record<string, unknown>;
  if (o?.['type'] !== MANIFEST_TYPE) throw new JcpError(ErrorCodes.SCHEMA, `shard manifest: expected type ${MANIFEST_TYPE}`);
  const parentChain = (o['parent_chain'] as string[]).map((h, i) => grantOf(h, `parent_chain[${i}]`));
  const shards = (o['shards'] as Record<string, unknown>[]).map((s, i) => {
    const grant = grantOf(String(s['cbor']), `shards[${i}].cbor`);
    if (grantId(grant.grant) !== s['id']) throw new JcpError(ErrorCodes.SCHEMA, `shard manifest: shards[${i}].id does not match its cbor`);
    const point = s['point'] as Shard['point'] | undefined;
    return { name: String(s['name']), grant, ...(point ? { point } : {}) };
  });
  const closed = ((o['closed'] as Record<string, unknown>[]) ?? []).map((c) => ({
    name: String(c['name']),
    id: String(c['id']),
    generation: Number(c['generation']),
    budgetUj: BigInt(String(c['budget_uj'])),
    spentUj: BigInt(String(c['spent_uj'])),
  }));
  const m: ShardManifest = {
    parentChain,
    generation: Number(o['generation']),
    consumedUj: BigInt(String(o['consumed_uj'])),
    shards,
    closed,
  };
  if (grantId(parentOf(m).grant) !== o['parent_id'])
    throw new JcpError(ErrorCodes.SCHEMA, 'shard manifest: parent_id does not match the chain');
  return m;
}

/** Writes a manifest file. */
export function writeManifest(file: string, m: ShardManifest): void {
  writeFileSync(file, `${JSON.stringify(manifestToJson(m), null, 2)}\n`);
}

/** Reads a manifest file. @throws JcpError `schema` */
export function readManifest(file: string): ShardManifest {
  let v: unknown;
  try {
    v = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new JcpError(ErrorCodes.SCHEMA, `${file}: not a readable shard manifest: ${(e as Error).message}`);
  }
  return manifestFromJson(v);
}
