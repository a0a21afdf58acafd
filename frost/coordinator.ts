/**
 * The signing coordinator (spec §2.2; `jcp frost sign`): turns "sign this message as group G"
 * into an ordinary Ed25519 signature, or an error naming who stood in the way.
 *
 * 1. Looks up G's public package in the registry (checked against G's did:key).
 * 2. `sign-request` to every holder; gathers signed commitments from the online ones: each must
 *    come from the roster identity of its identifier, name the same package digest, and hold
 *    valid elements. Proceeds with the first `signers` (default the threshold).
 * 3. Sends each chosen signer the signed `sign-package`; gathers shares (or refusals).
 * 4. Verifies every share (RFC 9591 §5.4) before aggregating, naming each bad signer; aggregates;
 *    checks the result as an Ed25519 signature with `core/ed25519.ts` `verify`.
 * 5. `sign-done` lets the holders drop unused commitments.
 *
 * A failed attempt (a signer lost, refusing, or sending a bad share) is retried up to `retries`
 * times with a fresh session and without the participants it blamed.
 */
import { randomBytes } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import { type Actor, actorFromSeed, bytesEqual, type Did } from '../core/index.ts';
import { type Bus, DEFAULT_PREFIX, type GroupRegistry, natsBus, natsRegistry, subjects } from './bus.ts';
import { type Culprit, describeCulprits, FrostError, FrostErrorCodes } from './errors.ts';
import { type GroupPublic, groupDigest, IDENTITY_ENCODING, type SigningCommitment } from './group.ts';
import { expectMessage, openMessage, sealMessage } from './message.ts';
import { aggregatePlanned, planAggregate, type SigningPackage } from './sign.ts';
import { packagePayload, readCommitment, readRefusal, readShare } from './sign-wire.ts';

/** Options for {@link signWithGroup}. */
export interface SignOpts {
  readonly bus: Bus;
  readonly registry: GroupRegistry;
  readonly prefix?: string;
  /** The threshold group (its did:key). */
  readonly group: Did;
  readonly message: Uint8Array;
  /** How many signers to use (min..max; default the threshold). */
  readonly signers?: number;
  /** Deadline of each round (ms, default 3000). */
  readonly timeoutMs?: number;
  /** Fresh attempts after a failure, without the blamed participants (default 1). */
  readonly retries?: number;
  /** The coordinator's identity (default: {@link processCoordinator}, one per process). */
  readonly actor?: Actor;
  /** Identifiers never to ask. */
  readonly exclude?: readonly number[];
  /**
   * Round one done ahead (RFC 9591 §5.1 preprocessing): when given, the session uses the
   * commitments this prefetch drew after the previous session, if they are fresh and enough,
   * so it takes one round trip instead of two; and it draws the next ones when it ends. For
   * long-lived signers (a coordinator service, {@link thresholdSigner}), not one-shot commands.
   */
  readonly prefetch?: CommitmentPrefetch;
}

/** A finished signing session. */
export interface SignResult {
  /** 64-byte Ed25519 signature (R ‖ S) that verifies under the group did:key. */
  readonly signature: Uint8Array;
  readonly session: string;
  readonly signers: readonly Culprit[];
  readonly attempts: number;
}

const RETRYABLE = new Set<string>([
  FrostErrorCodes.PARTICIPANT_LOST,
  FrostErrorCodes.REFUSED,
  FrostErrorCodes.BAD_SIGNATURE_SHARE,
  FrostErrorCodes.NONCE_USED,
  FrostErrorCodes.NONCE_UNKNOWN,
  FrostErrorCodes.BAD_PACKAGE,
  FrostErrorCodes.BAD_MESSAGE,
  FrostErrorCodes.TRANSPORT,
]);

/** Refusal codes that are a holder's decision on the call (approval policy), not a fault. */
const APPROVAL_CODES = new Set<string>([FrostErrorCodes.NOT_APPROVED, FrostErrorCodes.NOT_A_REQUEST, FrostErrorCodes.APPROVAL_MISMATCH]);

let ownIdentity: Actor | undefined;

/**
 * The identity this process coordinates with when the caller gives none: a fresh Ed25519 key
 * made on first use and kept in memory for the life of the process. Participants that restrict
 * coordinators (`Participant` `coordinators`) need a stable identity: pass `actor` instead.
 */
export function processCoordinator(): Actor {
  ownIdentity ??= actorFromSeed(new Uint8Array(randomBytes(32)));
  return ownIdentity;
}

/**
 * Signs `message` as the threshold group `group`.
 * @throws FrostError `frost-unknown-group`; `frost-not-approved` (`detail.refusals`) when holders'
 *   policies refused so many that the rest cannot make the signers needed;
 *   `frost-not-enough-participants` when too few committed within the round deadline (refusals
 *   that did not by themselves rule the call out are in `detail.refusals`); and after the last
 *   attempt `frost-participant-lost` / `frost-refused` / `frost-nonce-used` /
 *   `frost-bad-signature-share` / `frost-bad-signature`, each naming the participants at fault.
 */
export async function signWithGroup(opts: SignOpts): Promise<SignResult> {
  const g = await opts.registry.get(opts.group);
  if (!g) throw new FrostError(FrostErrorCodes.UNKNOWN_GROUP, `no public package for ${opts.group} in the registry`);
  const want = opts.signers ?? g.min;
  if (!Number.isSafeInteger(want) || want < g.min || want > g.max)
    throw new FrostError(FrostErrorCodes.BAD_PARAMS, `signers must be ${g.min}..${g.max}`);
  const cap = opts.bus.maxPayload?.();
  // The signing package carries the message, every chosen commitment and a signed envelope.
  if (cap !== undefined && opts.message.length + PACKAGE_OVERHEAD_BYTES + 200 * want > cap) {
    throw new FrostError(
      FrostErrorCodes.BAD_PARAMS,
      `the message is ${opts.message.length} bytes, too large for one NATS message here (max_payload ${cap} bytes): sign a digest of it instead`,
    );
  }
  const me = opts.actor ?? processCoordinator();
  const excluded = new Set(opts.exclude ?? []);
  const pre = await opts.prefetch?.take(opts.group, me.did, want, excluded);
  try {
    if (pre) {
      try {
        return { ...(await attemptOnce(opts, g, me, want, excluded, pre)), attempts: 1 };
      } catch (e) {
        // Commitments drawn earlier can be stale (a holder dropped them, or restarted without
        // its journal): fall back to a fresh round one, blaming nobody for the prefetch.
        if (!(e instanceof FrostError)) throw e;
      }
      const r = await signWithRetries(opts, g, me, want, excluded);
      return { ...r, attempts: r.attempts + 1 }; // the failed prefetched attempt counts
    }
    return await signWithRetries(opts, g, me, want, excluded);
  } finally {
    opts.prefetch?.fill(opts.group, me.did, want, () => gatherCommitments(opts, g, me, want, new Set(opts.exclude ?? []), true));
  }
}

async function signWithRetries(opts: SignOpts, g: GroupPublic, me: Actor, want: number, excluded: Set<number>): Promise<SignResult> {
  const retries = opts.retries ?? 1;
  const earlier: FrostError[] = [];
  for (let attempt = 1; ; attempt++) {
    try {
      const r = await attemptOnce(opts, g, me, want, excluded);
      return { ...r, attempts: attempt };
    } catch (e) {
      if (!(e instanceof FrostError)) throw e;
      const last = attempt > retries || !RETRYABLE.has(e.code) || e.culprits.length === 0;
      if (!last) for (const c of e.culprits) if (c.identifier !== undefined) excluded.add(c.identifier);
      if (last || g.max - excluded.size < g.min) throw withEarlier(e, earlier);
      earlier.push(e);
    }
  }
}

/**
 * Commitments drawn ahead of the next signing session (RFC 9591 §5.1: round one does not depend
 * on the message). One entry per group, used once; an entry older than {@link PREFETCH_MAX_AGE_MS}
 * (well inside the holders' 10-minute nonce lifetime), drawn by another coordinator identity,
 * or short of signers is not used. A holder binds each commitment to the coordinator that asked
 * for it (docs/frost.md), so prefetched commitments are no use to anyone else.
 */
export class CommitmentPrefetch {
  readonly #ready = new Map<Did, { readonly atMs: number; readonly coordinator: Did; readonly r1: Gathered }>();
  readonly #filling = new Map<Did, Promise<void>>();

  /**
   * The prefetched round one for `group`, if usable for `want` signers outside `excluded`
   * (waiting for one still being drawn); undefined otherwise. Each entry is handed out once.
   */
  async take(group: Did, coordinator: Did, want: number, excluded: ReadonlySet<number>): Promise<Gathered | undefined> {
    await this.#filling.get(group);
    const e = this.#ready.get(group);
    this.#ready.delete(group);
    if (!e || e.coordinator !== coordinator || Date.now() - e.atMs > PREFETCH_MAX_AGE_MS) return undefined;
    const usable = [...e.r1.commitments].filter(([id]) => !excluded.has(id));
    if (usable.length < want) return undefined;
    return { session: e.r1.session, commitments: new Map(usable.slice(0, want)), notes: [] };
  }

  /** Resolves once no round one is being drawn for `group` (to start a session when it is ready). */
  async settled(group: Did): Promise<void> {
    await this.#filling.get(group);
  }

  /**
   * Draws the next round one for `group` in the background (once at a time; failures are dropped).
   * The draw starts on a later turn of the event loop, so the session that asked for it hands its
   * signature to the caller first (sealing the requests took ≈ 0.7 ms of that session before).
   */
  fill(group: Did, coordinator: Did, want: number, draw: () => Promise<Gathered>): void {
    if (this.#filling.has(group)) return;
    const p = new Promise<void>((resolve) => setImmediate(resolve))
      .then(draw)
      .then((r1) => {
        if (r1.commitments.size >= want) this.#ready.set(group, { atMs: Date.now(), coordinator, r1 });
      })
      .catch(() => undefined)
      .finally(() => this.#filling.delete(group));
    this.#filling.set(group, p);
  }
}

/** How long prefetched commitments are used (ms); holders drop unused ones after 10 minutes. */
export const PREFETCH_MAX_AGE_MS = 5 * 60_000;

/** Envelope and payload bytes of a `sign-package` besides the message and the commitments. */
const PACKAGE_OVERHEAD_BYTES = 1024;

/**
 * The last attempt's error, also naming what went wrong in the attempts before it (a signer lost
 * in the first attempt is not in the second, and must not vanish from the report).
 */
export function withEarlier(e: FrostError, earlier: readonly FrostError[]): FrostError {
  if (earlier.length === 0) return e;
  const culprits = [...e.culprits];
  for (const x of earlier)
    for (const c of x.culprits) if (!culprits.some((k) => k.identifier === c.identifier && k.did === c.did)) culprits.push(c);
  const before = earlier.map((x, i) => `attempt ${i + 1}: [${x.code}] ${x.message}`).join('; ');
  return new FrostError(e.code, `${e.message} (after ${before})`, culprits, e.detail, { cause: e });
}

/** Round one's outcome: the session id and the commitments gathered under it (by identifier). */
export interface Gathered {
  readonly session: string;
  readonly commitments: ReadonlyMap<number, SigningCommitment>;
  readonly notes: readonly string[];
  /** Holders that refused in round one (an approval policy, a disallowed coordinator…), by identifier. */
  readonly refusals?: ReadonlyMap<number, { readonly code: string; readonly why: string }>;
}

/**
 * Round one (RFC 9591 §5.1) under a fresh session id: asks every holder for a commitment and
 * keeps the first `want` valid ones from holders not `excluded`, or what arrived by the deadline.
 * `background` unrefs the deadline timer (a prefetch must not keep the process alive).
 */
async function gatherCommitments(
  opts: SignOpts,
  g: GroupPublic,
  me: Actor,
  want: number,
  excluded: ReadonlySet<number>,
  background = false,
  message?: Uint8Array,
): Promise<Gathered> {
  const bus = opts.bus;
  const sub = subjects(opts.prefix ?? DEFAULT_PREFIX);
  const session = randomBytes(16).toString('hex');
  const timeoutMs = opts.timeoutMs ?? 3000;
  const digest = groupDigest(g);
  const who = (id: number) => describeCulprits([{ identifier: id, did: g.roster[id - 1]! }]);
  const commitments = new Map<number, SigningCommitment>();
  const notes: string[] = [];
  const inbox = bus.inbox();
  let enough: () => void = () => {};
  const gathered = new Promise<void>((r) => {
    enough = r;
  });
  const online = g.max - excluded.size;
  const refusals = new Map<number, { code: string; why: string }>();
  const unsub = bus.subscribe(inbox, (m) => {
    if (commitments.size >= want) return; // enough already: spare the signature check
    const o = openMessage(m.data);
    if (!o.ok) return;
    const b = o.value.body;
    if (!expectMessage(o.value, { kind: ['sign-commitment', 'sign-refusal'], session, round: 1, to: me.did, from: g.roster }).ok) return;
    const id = g.roster.indexOf(b.from) + 1;
    if (b.kind === 'sign-refusal') {
      let r: { code: string; why: string } = { code: FrostErrorCodes.REFUSED, why: 'refused' };
      try {
        r = readRefusal(b.payload);
      } catch {
        // an unreadable refusal is still a refusal
      }
      notes.push(`${who(id)} refused: [${r.code}] ${r.why}`);
      if (!excluded.has(id) && !commitments.has(id)) refusals.set(id, r);
      // Enough refusals that `want` commitments can no longer arrive: the session ends now.
      if (online - refusals.size < want) enough();
      return;
    }
    try {
      const c = readCommitment(b.payload);
      if (c.group !== opts.group || c.commitment.identifier !== id)
        return void notes.push(`${who(id)} sent a commitment for another group or identifier`);
      if (c.digest !== digest) return void notes.push(`${who(id)} signs under a different group package`);
      // Full element checks (subgroup, canonical) happen once, inside share verification; the
      // identity is refused here because it is cheap to spot (RFC 9591 §3.1).
      if (bytesEqual(c.commitment.hiding, IDENTITY_ENCODING) || bytesEqual(c.commitment.binding, IDENTITY_ENCODING)) {
        return void notes.push(`${who(id)} sent the identity element as a commitment`);
      }
      if (excluded.has(id) || commitments.size >= want) return;
      commitments.set(id, c.commitment);
      if (commitments.size >= want || commitments.size >= online) enough();
    } catch (x) {
      notes.push(`${who(id)}: ${(x as Error).message}`);
    }
  });
  let timer: NodeJS.Timeout | undefined;
  try {
    const payload = message === undefined ? { group: opts.group } : { group: opts.group, message };
    bus.publish(sub.signRequest(opts.group), sealMessage({ kind: 'sign-request', session, round: 1, payload }, me), inbox);
    await Promise.race([
      gathered,
      new Promise<void>((r) => {
        timer = setTimeout(r, timeoutMs);
        if (background) timer.unref();
      }),
    ]);
  } finally {
    clearTimeout(timer);
    unsub();
  }
  return { session, commitments, notes, refusals };
}

/**
 * One signing attempt (RFC 9591 §5): round 1 commitments (gathered here unless `pre` holds a
 * pre-drawn set), round 2 package → shares, then aggregation. Throws {@link FrostError}:
 * NOT_APPROVED / NOT_ENOUGH_PARTICIPANTS (too few commitments), PARTICIPANT_LOST (a chosen signer
 * sent no share within `timeoutMs` ms), the holder's code or REFUSED (a refusal or bad reply),
 * or aggregation's code (a bad share, with culprits).
 */
async function attemptOnce(
  opts: SignOpts,
  g: GroupPublic,
  me: Actor,
  want: number,
  excluded: ReadonlySet<number>,
  pre?: Gathered,
): Promise<Omit<SignResult, 'attempts'>> {
  const bus = opts.bus;
  const sub = subjects(opts.prefix ?? DEFAULT_PREFIX);
  const timeoutMs = opts.timeoutMs ?? 3000;
  const culprit = (id: number): Culprit => ({ identifier: id, did: g.roster[id - 1]! });
  const gathered = pre ?? (await gatherCommitments(opts, g, me, want, excluded, false, opts.message));
  const { session, commitments } = gathered;
  const done = () => bus.publish(sub.signDone(opts.group), sealMessage({ kind: 'sign-done', session, round: 3, payload: {} }, me));
  // An explicit `signers` is a requirement, not a wish: fewer commitments than that is a failure.
  const needed = opts.signers !== undefined ? want : g.min;
  if (commitments.size < needed) {
    done();
    throwShortOfSigners(opts, g, want, excluded, gathered, culprit);
  }

  // Round 2: package → shares.
  const chosen = [...commitments.keys()].slice(0, want);
  const pkg: SigningPackage = { message: opts.message, commitments: chosen.map((id) => commitments.get(id)!) };
  const payload = packagePayload(opts.group, pkg);
  const pending = Promise.allSettled(
    chosen.map(async (id) => {
      const to = g.roster[id - 1]!;
      const raw = await bus.request(
        sub.signPackage(opts.group, id),
        sealMessage({ kind: 'sign-package', session, round: 2, to, payload }, me),
        timeoutMs,
      );
      return { id, raw };
    }),
  );
  // Once the packages are on the wire (the client writes on a microtask), derive what needs
  // only the package — commitment checks, binding factors, group commitment, challenge — while
  // the signers work, so only the sum and one Ed25519 verification are left when shares arrive.
  await new Promise<void>((r) => setImmediate(r));
  const plan = planAggregate(g, pkg);
  const replies = await pending;
  done();
  const shares = readShares(opts, g, me, session, chosen, replies, culprit);
  const sig = aggregatePlanned(g, plan, shares);
  if (!sig.ok) {
    const culprits = sig.error.culprits.map((c) => (c.identifier !== undefined ? culprit(c.identifier) : c));
    throw new FrostError(
      sig.error.code,
      `${sig.error.why}${culprits.length ? `: ${describeCulprits(culprits)}` : ''} (session ${session})`,
      culprits,
      { session },
    );
  }
  return { signature: sig.value, session, signers: chosen.map(culprit) };
}

/**
 * Fails an attempt whose round 1 drew fewer than the needed signers (`want` when `signers` is
 * explicit, else the group's `min`). Throws {@link FrostError} NOT_APPROVED when any holder refused
 * with an approval code (with the refusals), else NOT_ENOUGH_PARTICIPANTS naming the silent holders.
 */
function throwShortOfSigners(
  opts: SignOpts,
  g: GroupPublic,
  want: number,
  excluded: ReadonlySet<number>,
  gathered: Gathered,
  culprit: (id: number) => Culprit,
): never {
  const { session, commitments, notes, refusals } = gathered;
  const timeoutMs = opts.timeoutMs ?? 3000;
  const who = (id: number) => describeCulprits([culprit(id)]);
  const needed = opts.signers !== undefined ? want : g.min;
  const refusers = [...(refusals ?? new Map<number, { code: string; why: string }>())];
  const refusalDetail = refusers.map(([id, r]) => ({ identifier: id, did: g.roster[id - 1]!, code: r.code, why: r.why }));
  // A policy verdict only when the refusals alone leave fewer than `needed` holders who could
  // sign; a refusal beside silent holders who would still have made `needed` is unavailability.
  if (refusers.some(([, r]) => APPROVAL_CODES.has(r.code)) && g.max - excluded.size - refusers.length < needed) {
    // Holders decided against this call: report who and why; no retry changes their minds.
    throw new FrostError(
      FrostErrorCodes.NOT_APPROVED,
      `${refusers.length} of ${g.max} holders refused the call, so ${opts.signers !== undefined ? want : g.min} signers cannot be reached: ` +
        refusers.map(([id, r]) => `${who(id)} refused: [${r.code}] ${r.why}`).join('; '),
      refusers.map(([id]) => culprit(id)),
      { session, refusals: refusalDetail },
    );
  }
  const silent = g.roster.map((_, i) => i + 1).filter((id) => !commitments.has(id) && !excluded.has(id) && !refusals?.has(id));
  throw new FrostError(
    FrostErrorCodes.NOT_ENOUGH_PARTICIPANTS,
    `only ${commitments.size} of the ${opts.signers !== undefined ? want : g.min} signers needed for ${opts.group} answered within ${timeoutMs} ms` +
      (silent.length ? ` (no commitment from ${silent.map(who).join(', ')})` : '') +
      (notes.length ? `; ${notes.join('; ')}` : ''),
    [],
    refusalDetail.length ? { session, refusals: refusalDetail } : { session },
  );
}

/**
 * Reads the round 2 replies of the `chosen` signers (in order) into identifier → signature share.
 * Throws {@link FrostError} PARTICIPANT_LOST when a request failed (no reply within the timeout),
 * else the first refuser's code (REFUSED when it is not a FROST code) when any reply was a
 * refusal, a message for another session/sender, or a share for another group or identifier.
 */
function readShares(
  opts: SignOpts,
  g: GroupPublic,
  me: Actor,
  session: string,
  chosen: readonly number[],
  replies: readonly PromiseSettledResult<{ id: number; raw: Uint8Array }>[],
  culprit: (id: number) => Culprit,
): Map<number, Uint8Array> {
  const timeoutMs = opts.timeoutMs ?? 3000;
  const shares = new Map<number, Uint8Array>();
  const lost: Culprit[] = [];
  const refused: { c: Culprit; code: string; why: string }[] = [];
  for (const [i, r] of replies.entries()) {
    const id = chosen[i]!;
    if (r.status === 'rejected') {
      lost.push(culprit(id));
      continue;
    }
    const o = openMessage(r.value.raw);
    if (
      !o.ok ||
      !expectMessage(o.value, { kind: ['sign-share', 'sign-refusal'], session, round: 2, to: me.did, from: [g.roster[id - 1]!] }).ok
    ) {
      refused.push({
        c: culprit(id),
        code: FrostErrorCodes.BAD_MESSAGE,
        why: o.ok ? 'reply for another session or from another sender' : o.error.why,
      });
      continue;
    }
    try {
      if (o.value.body.kind === 'sign-refusal') {
        const x = readRefusal(o.value.body.payload);
        refused.push({ c: culprit(id), code: x.code, why: x.why });
        continue;
      }
      const s = readShare(o.value.body.payload);
      if (s.group !== opts.group || s.identifier !== id)
        refused.push({ c: culprit(id), code: FrostErrorCodes.BAD_MESSAGE, why: 'share for another group or identifier' });
      else shares.set(id, s.share);
    } catch (x) {
      refused.push({ c: culprit(id), code: FrostErrorCodes.BAD_MESSAGE, why: (x as Error).message });
    }
  }
  if (lost.length) {
    throw new FrostError(
      FrostErrorCodes.PARTICIPANT_LOST,
      `no signature share from ${describeCulprits(lost)} within ${timeoutMs} ms (session ${session})`,
      lost,
      {
        session,
      },
    );
  }
  if (refused.length) {
    const first = refused[0]!;
    const code = (Object.values(FrostErrorCodes) as string[]).includes(first.code)
      ? (first.code as FrostError['code'])
      : FrostErrorCodes.REFUSED;
    throw new FrostError(
      code,
      refused.map((r) => `${describeCulprits([r.c])} refused: [${r.code}] ${r.why}`).join('; '),
      refused.map((r) => r.c),
      { session, refusals: refused.map((r) => ({ identifier: r.c.identifier, did: r.c.did, code: r.code, why: r.why })) },
    );
  }
  return shares;
}

/** A message signer as the rest of JCP takes it (core/wire.ts `signWireRequest`, grants, revocations). */
export type Signer = (msg: Uint8Array) => Promise<Uint8Array>;

/** Options for {@link thresholdSigner}. */
export interface ThresholdSignerOpts extends Omit<SignOpts, 'bus' | 'registry' | 'message'> {
  readonly nc: NatsConnection;
}

/**
 * Turns a threshold group into a signer function `(msg) => Promise<signature>`: each call runs
 * one signing session over NATS ({@link signWithGroup}) and resolves with a plain Ed25519
 * signature under the group's did:key, so a threshold actor can issue and revoke grants and sign
 * jcp/1 wire requests like any other actor (spec §2.2).
 * @throws FrostError (see {@link signWithGroup}) from each call.
 */
export async function thresholdSigner(opts: ThresholdSignerOpts): Promise<Signer> {
  const bus = natsBus(opts.nc);
  const registry = await natsRegistry(opts.nc, opts.prefix ?? DEFAULT_PREFIX, { create: false });
  const g = await registry.get(opts.group);
  if (!g) throw new FrostError(FrostErrorCodes.UNKNOWN_GROUP, `no public package for ${opts.group} in the registry`);
  const prefetch = new CommitmentPrefetch();
  return async (message) => (await signWithGroup({ ...opts, bus, registry, message, prefetch })).signature;
}
