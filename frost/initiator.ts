/**
 * Starting a DKG session among running participants (spec §2.2, C18; `jcp frost dkg`). The
 * initiator holds no secret and does no arithmetic: it invites, fixes the roster, and watches.
 *
 * 1. `dkg-invite` on `<p>.dkg.invite` with a reply inbox, repeated every `inviteEveryMs` until
 *    `max` participants (or every listed member) have answered with a signed `dkg-hello`
 *    carrying their session X25519 key; fewer by the deadline is `frost-not-enough-participants`.
 * 2. `dkg-start` on the session's broadcast subject: threshold, per-round timeout, and the
 *    roster of hellos sorted by did (identifier `i` is `roster[i − 1]`).
 * 3. Waits until every participant has confirmed the same group package, or until one aborts
 *    or complains (the error names whom they blamed), or the deadline passes (the error names
 *    who never confirmed, and the initiator broadcasts an abort so nobody keeps a key).
 */
import { randomBytes } from 'node:crypto';
import { type Actor, actorFromSeed, bytesEqual, type Did } from '../core/index.ts';
import { type Bus, DEFAULT_PREFIX, subjects } from './bus.ts';
import { readAbort } from './dkg-wire.ts';
import { type Culprit, describeCulprits, FrostError, FrostErrorCodes } from './errors.ts';
import { checkThreshold, type GroupPublic, groupBytes, groupDid, readGroup, type Threshold } from './group.ts';
import { expectMessage, type Opened, openMessage, sealMessage } from './message.ts';

/** Options for {@link runDkg}. */
export interface DkgOpts extends Threshold {
  readonly bus: Bus;
  readonly prefix?: string;
  /** Exactly these participants (by did); otherwise the first `max` to answer. */
  readonly members?: readonly Did[];
  /** Per-round deadline participants apply (ms, default 5000). */
  readonly timeoutMs?: number;
  /** How long to gather participants (ms, default `timeoutMs`). */
  readonly inviteMs?: number;
  /** Interval between repeated invites (ms, default 250). */
  readonly inviteEveryMs?: number;
  /** The initiator's identity (default: a fresh one). */
  readonly actor?: Actor;
  /** Progress callback (`invited`, `started`, `confirmed`). */
  readonly onProgress?: (stage: 'invited' | 'started' | 'confirmed', detail: Record<string, unknown>) => void;
}

/** A finished DKG as the initiator saw it. */
export interface DkgDone {
  readonly did: Did;
  readonly group: GroupPublic;
  readonly session: string;
  readonly roster: readonly Did[];
  /** Wall time from the first invite to the last confirmation (ms). */
  readonly elapsedMs: number;
}

/**
 * Step 1: publishes the dkg-invite (repeated every `inviteEveryMs`, default 250 ms) until
 * `max` hellos for `session` arrived (only from `members` when given) or `inviteMs` ms passed.
 * Returns the hellos by sender. @throws FrostError `frost-not-enough-participants` (the silent members).
 */
async function gatherHellos(opts: DkgOpts, me: Actor, session: string, timeoutMs: number, inviteMs: number): Promise<Map<Did, Opened>> {
  const bus = opts.bus;
  const sub = subjects(opts.prefix ?? DEFAULT_PREFIX);
  const hellos = new Map<Did, Opened>();
  const inbox = bus.inbox();
  let enough: () => void = () => {};
  const gathered = new Promise<void>((resolve) => {
    enough = resolve;
  });
  const unsubHello = bus.subscribe(inbox, (m) => {
    const o = openMessage(m.data);
    if (!o.ok) return;
    if (!expectMessage(o.value, { kind: 'dkg-hello', session, round: 0, to: me.did }).ok) return;
    const from = o.value.body.from;
    if (opts.members && !opts.members.includes(from)) return;
    if (hellos.size >= opts.max && !hellos.has(from)) return;
    hellos.set(from, o.value);
    if (hellos.size >= opts.max) enough();
  });
  const invite = sealMessage(
    {
      kind: 'dkg-invite',
      session,
      round: 0,
      payload: { min: opts.min, max: opts.max, timeout_ms: timeoutMs, ...(opts.members ? { members: [...opts.members] } : {}) },
    },
    me,
  );
  const every = setInterval(() => bus.publish(sub.dkgInvite, invite, inbox), opts.inviteEveryMs ?? 250);
  bus.publish(sub.dkgInvite, invite, inbox);
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([gathered, new Promise<void>((r) => (timer = setTimeout(r, inviteMs)))]);
  clearInterval(every);
  clearTimeout(timer);
  unsubHello();
  if (hellos.size < opts.max) {
    const missing = opts.members ? opts.members.filter((d) => !hellos.has(d)).map((did) => ({ did })) : [];
    throw new FrostError(
      FrostErrorCodes.NOT_ENOUGH_PARTICIPANTS,
      `only ${hellos.size} of ${opts.max} participants answered within ${inviteMs} ms${missing.length ? ` (silent: ${describeCulprits(missing)})` : ''}`,
      missing,
      { session },
    );
  }
  return hellos;
}

/**
 * Step 4: checks that every participant of `roster` confirmed the same group package and did, and
 * that the package's key is that did and its roster this one. Returns the group and its did.
 * @throws FrostError `frost-group-mismatch` (naming a participant that confirmed another group).
 */
function confirmedGroup(confirms: ReadonlyMap<Did, Opened>, roster: readonly Did[], session: string): { group: GroupPublic; did: Did } {
  const first = confirms.get(roster[0]!)!;
  const group = readGroup(first.body.payload['package']);
  const bytes = groupBytes(group);
  for (const [d, m] of confirms) {
    let same = false;
    try {
      same = m.body.payload['group'] === first.body.payload['group'] && bytesEqual(groupBytes(readGroup(m.body.payload['package'])), bytes);
    } catch {
      same = false;
    }
    if (!same) throw new FrostError(FrostErrorCodes.GROUP_MISMATCH, `${d} confirmed a different group`, [{ did: d }], { session });
  }
  // Every participant checked the algebra before confirming; the initiator checks that they all
  // confirmed one package, for this roster, whose key is the did they name.
  const did = groupDid(group);
  if (did !== first.body.payload['group'] || group.roster.join() !== roster.join()) {
    throw new FrostError(FrostErrorCodes.GROUP_MISMATCH, 'the confirmed package does not match its did or the roster', [], { session });
  }
  return { group, did };
}

/**
 * The threshold and `--members` of a DKG request.
 * @throws FrostError `frost-bad-params` (or the threshold's own code) when they do not fit
 */
function checkDkgParams(opts: DkgOpts): void {
  const c = checkThreshold(opts);
  if (!c.ok) throw FrostError.of(c.error);
  if (opts.members && (opts.members.length !== opts.max || new Set(opts.members).size !== opts.max)) {
    throw new FrostError(FrostErrorCodes.BAD_PARAMS, `--members must list exactly ${opts.max} distinct dids`);
  }
}

/**
 * What one broadcast message from a roster member means for the session: an abort or complaint
 * ends it with a {@link FrostError} (`frost-aborted`, `frost-inconsistent-share`, blaming by
 * identifier = roster index + 1); a round-3 confirm is recorded in `confirms`, and the last one
 * returns `'all-confirmed'`; anything else returns undefined.
 */
function broadcastVerdict(
  o: Opened,
  roster: readonly Did[],
  session: string,
  confirms: Map<Did, Opened>,
): FrostError | 'all-confirmed' | undefined {
  const b = o.body;
  const culprit = (d: Did): Culprit => ({ identifier: roster.indexOf(d) + 1, did: d });
  if (b.kind === 'dkg-abort') {
    try {
      const a = readAbort(b.payload);
      return new FrostError(FrostErrorCodes.ABORTED, `${b.from} aborted: [${a.code}] ${a.why}`, a.culprits.map(culprit), {
        session,
        reason: a.code,
      });
    } catch {
      return new FrostError(FrostErrorCodes.ABORTED, `${b.from} aborted`, [], { session });
    }
  }
  if (b.kind === 'dkg-complaint') {
    const accused = typeof b.payload['accused'] === 'string' ? (b.payload['accused'] as Did) : undefined;
    return new FrostError(
      FrostErrorCodes.INCONSISTENT_SHARE,
      `${b.from} complained that ${accused ?? '?'} sent a bad share`,
      accused ? [culprit(accused)] : [],
      { session },
    );
  }
  if (b.kind === 'dkg-confirm' && b.round === 3) {
    confirms.set(b.from, o);
    if (confirms.size === roster.length) return 'all-confirmed';
  }
  return undefined;
}

/**
 * Tells everyone still waiting that the session failed: a `dkg-abort` on `subject` with the
 * failure's code, message (≤ 2000 chars) and blamed dids (idempotent: participants ignore aborts
 * once finished).
 */
async function publishAbort(bus: Bus, subject: string, session: string, failure: FrostError, me: Actor): Promise<void> {
  bus.publish(
    subject,
    sealMessage(
      {
        kind: 'dkg-abort',
        session,
        round: 0,
        payload: {
          code: failure.code,
          why: failure.message.slice(0, 2000),
          culprits: failure.culprits.flatMap((x) => (x.did ? [x.did] : [])),
        },
      },
      me,
    ),
  );
  await bus.flush();
}

/**
 * Runs one DKG session and resolves with the group everyone confirmed.
 * @throws FrostError `frost-bad-params`, `frost-not-enough-participants`, `frost-aborted` (with
 *   the blamed participants), `frost-participant-lost` (who never confirmed), `frost-group-mismatch`.
 */
export async function runDkg(opts: DkgOpts): Promise<DkgDone> {
  const t0 = performance.now();
  checkDkgParams(opts);
  const bus = opts.bus;
  const sub = subjects(opts.prefix ?? DEFAULT_PREFIX);
  const me = opts.actor ?? actorFromSeed(new Uint8Array(randomBytes(32)));
  const session = randomBytes(16).toString('hex');
  const timeoutMs = opts.timeoutMs ?? 5000;
  const inviteMs = opts.inviteMs ?? timeoutMs;

  // 1. Invite until enough hellos arrived.
  const hellos = await gatherHellos(opts, me, session, timeoutMs, inviteMs);
  const roster = [...hellos.keys()].sort();
  opts.onProgress?.('invited', { session, roster });

  // 2. Start, and 3. watch the broadcast subject.
  const confirms = new Map<Did, Opened>();
  let settle: (e?: FrostError) => void = () => {};
  const finished = new Promise<FrostError | undefined>((resolve) => {
    settle = resolve;
  });
  const unsubBcast = bus.subscribe(sub.dkgBcast(session), (m) => {
    const o = openMessage(m.data);
    if (!o.ok || !roster.includes(o.value.body.from) || o.value.body.session !== session) return;
    const verdict = broadcastVerdict(o.value, roster, session, confirms);
    if (verdict !== undefined) settle(verdict === 'all-confirmed' ? undefined : verdict);
  });
  await bus.flush();
  bus.publish(
    sub.dkgBcast(session),
    sealMessage(
      {
        kind: 'dkg-start',
        session,
        round: 0,
        payload: { min: opts.min, max: opts.max, timeout_ms: timeoutMs, roster: roster.map((d) => hellos.get(d)!.raw) },
      },
      me,
    ),
  );
  opts.onProgress?.('started', { session });
  const deadline = setTimeout(() => {
    const missing = roster.filter((d) => !confirms.has(d)).map((d) => ({ identifier: roster.indexOf(d) + 1, did: d }));
    settle(
      new FrostError(
        FrostErrorCodes.PARTICIPANT_LOST,
        `no confirmation from ${describeCulprits(missing)} within ${4 * timeoutMs} ms`,
        missing,
        { session },
      ),
    );
  }, 4 * timeoutMs);
  const failure = await finished;
  clearTimeout(deadline);
  unsubBcast();
  if (failure) {
    await publishAbort(bus, sub.dkgBcast(session), session, failure, me);
    throw failure;
  }
  const { group, did } = confirmedGroup(confirms, roster, session);
  opts.onProgress?.('confirmed', { session, did });
  return { did, group, session, roster, elapsedMs: performance.now() - t0 };
}
