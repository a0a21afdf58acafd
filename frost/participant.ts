/**
 * A threshold participant (spec §2.2): a long-running actor that holds a keystore, answers DKG
 * invites (each session is a `DkgSession`) and signing sessions for every share it holds. It only
 * moves messages; the rules live in the pure rounds (`dkg.ts`, `sign.ts`), and the one-use nonce
 * rule in the journal (`journal.ts`).
 *
 * Signing, for each held share:
 * - `sign-request` (round 1): judge the message by the holder's approval policy (a signed decision
 *   record, docs/frost.md "Approvals"), then draw nonces, record the commitment in the journal,
 *   reply with the signed commitment (a repeated request for the same session gets the same
 *   commitment back); a holder has a policy or does not start (`frost-approve-required`);
 * - `sign-package` (round 2, addressed to this holder): check the package (`checkPackage`), mark
 *   the nonce used durably (fdatasync), then compute and reply with the share; otherwise reply
 *   with a signed refusal carrying the code (`frost-nonce-used` for a replayed package…);
 * - `sign-done`: release the session's unused commitment.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { NatsConnection } from '@nats-io/transport-node';
import { asDid, asObj, asSafeUint, contentIdOfBytes, decode, type Did, type Rng } from '../core/index.ts';
import { type DecisionBody, decodeCall, precheck, sealDecision } from './approval.ts';
import { allowAllApprover, type Approver, DecisionJournal, publishDecision } from './approvers.ts';
import { type Bus, DEFAULT_PREFIX, type GroupRegistry, natsBus, natsRegistry, publishEvidence, subjects } from './bus.ts';
import { type DkgOutcome, DkgSession, type Evidence } from './dkg-session.ts';
import { type Culprit, fault, FrostError, type FrostErrorCode, FrostErrorCodes, type FrostFault, isFrostError } from './errors.ts';
import { groupDigest, warmUp } from './group.ts';
import { Keystore } from './keystore.ts';
import { expectMessage, type Kind, type Opened, openMessage, sealMessage } from './message.ts';
import { checkPackage, commit, signShare } from './sign.ts';
import { commitmentPayload, readPackage, readRequest } from './sign-wire.ts';
import type { ShareRecord } from './sharefile.ts';

/** What a participant reports as it works (the CLI prints these as JSON lines). */
export type ParticipantEvent =
  | { readonly event: 'ready'; readonly did: Did; readonly groups: readonly { group: Did; identifier: number }[] }
  | { readonly event: 'dkg-joined'; readonly session: string; readonly initiator: Did }
  | { readonly event: 'dkg-complete'; readonly session: string; readonly group: Did; readonly identifier: number; readonly path: string }
  | {
      readonly event: 'dkg-aborted';
      readonly session: string;
      readonly code: FrostErrorCode;
      readonly why: string;
      readonly culprits: readonly Culprit[];
    }
  | { readonly event: 'evidence'; readonly session: string; readonly path: string }
  | { readonly event: 'signed'; readonly session: string; readonly group: Did; readonly identifier: number }
  | {
      readonly event: 'decision';
      readonly session: string;
      readonly group: Did;
      readonly identifier: number;
      readonly request: string;
      readonly policy: string;
      readonly policy_kind: string;
      readonly decision: 'approve' | 'refuse';
      readonly reason: string;
    }
  | {
      readonly event: 'refused';
      readonly kind: Kind | 'unknown';
      readonly session: string;
      readonly code: FrostErrorCode;
      readonly why: string;
    }
  | { readonly event: 'error'; readonly code: string; readonly why: string };

/** Options for {@link Participant.start}. */
export interface ParticipantOpts {
  /** The keystore folder (created with an identity if absent). */
  readonly keystore: string;
  readonly nc: NatsConnection;
  /** Subject prefix (default `jcp.frost`). */
  readonly prefix?: string;
  /** Opens sealed files and seals new shares with it. */
  readonly passphrase?: string;
  /** scrypt cost exponent for new sealed files. */
  readonly logN?: number;
  /** Coordinators whose signing requests are answered (any when absent). */
  readonly coordinators?: readonly Did[];
  /** Initiators whose DKG invites are answered (any when absent). */
  readonly initiators?: readonly Did[];
  /** Randomness for DKG polynomials and signing nonces (default: the OS CSPRNG). */
  readonly rng?: Rng;
  readonly onEvent?: (e: ParticipantEvent) => void;
  /** Called just before each message this participant sends (logging; fault injection in tests). */
  readonly onPhase?: (kind: Kind, session: string) => void;
  /**
   * The holder's approval policy (docs/frost.md "Approvals"): every message is decoded as a
   * jcp/1 request and judged before a nonce is committed (the request carries the message) or,
   * for prefetched round one, before the share is computed; each decision is a signed record in
   * `<keystore>/approvals.journal` and on the stream `<prefix>_approvals`. Required: without it
   * (and without {@link signAll}) {@link Participant.start} throws `frost-approve-required`.
   */
  readonly approver?: Approver;
  /**
   * Without an approver: sign whatever an allowed coordinator asks (the behaviour before
   * approvals; CLI `--approve allow-all`), i.e. run {@link allowAllApprover}, which records every
   * decision like any policy. Ignored with an approver.
   */
  readonly signAll?: boolean;
}

/** The message of the `frost-approve-required` error {@link Participant.start} throws without a policy. */
export const APPROVE_REQUIRED_MESSAGE =
  'a participant needs an approval policy: without one a coordinator alone could get a signature for any call (spec §2.2); ' +
  'start it with --approve rules FILE | prompt | webhook URL, or --approve allow-all to keep signing whatever an allowed coordinator asks ' +
  '(library: Participant.start({approver}) or {signAll: true})';

const osRng: Rng = (n) => new Uint8Array(randomBytes(n));
const FORGET_AFTER_MS = 30_000;

/** A running participant. */
export class Participant {
  readonly keystore: Keystore;
  readonly #opts: ParticipantOpts;
  readonly #bus: Bus;
  readonly #registry: GroupRegistry;
  readonly #subjects: ReturnType<typeof subjects>;
  readonly #prefix: string;
  readonly #rng: Rng;
  readonly #sessions = new Map<string, DkgSession>();
  readonly #unsubs: (() => void)[] = [];
  /** Signing session → the coordinator that opened it (only it may release the session). */
  readonly #digests = new WeakMap<ShareRecord, string>();
  /** The approval policy (the given approver, or allow-all for `signAll`). */
  readonly #approver: Approver;
  /** The decision journal. */
  #decisions!: DecisionJournal;
  /** Sessions (`<group>:<identifier>:<session>`) whose decision is under way. */
  readonly #deciding = new Set<string>();
  #stopped = false;

  private constructor(opts: ParticipantOpts, approver: Approver, keystore: Keystore, registry: GroupRegistry) {
    this.#opts = opts;
    this.#approver = approver;
    this.keystore = keystore;
    this.#registry = registry;
    this.#bus = natsBus(opts.nc);
    this.#prefix = opts.prefix ?? DEFAULT_PREFIX;
    this.#subjects = subjects(this.#prefix);
    this.#rng = opts.rng ?? osRng;
  }

  /**
   * Opens the keystore, publishes each held group's package to the registry, subscribes, and
   * reports `ready`. @throws FrostError `frost-approve-required` (no `approver`, no `signAll`;
   * before the keystore is opened), from the keystore (locked, wrong passphrase, tampered share,
   * corrupt journal) or `frost-transport`.
   */
  static async start(opts: ParticipantOpts): Promise<Participant> {
    const approver = opts.approver ?? (opts.signAll === true ? allowAllApprover() : undefined);
    if (!approver) throw new FrostError(FrostErrorCodes.APPROVE_REQUIRED, APPROVE_REQUIRED_MESSAGE);
    warmUp();
    const ks = Keystore.open(opts.keystore, {
      ...(opts.passphrase !== undefined ? { passphrase: opts.passphrase } : {}),
      ...(opts.logN !== undefined ? { logN: opts.logN } : {}),
    });
    try {
      const registry = await natsRegistry(opts.nc, opts.prefix ?? DEFAULT_PREFIX);
      const p = new Participant(opts, approver, ks, registry);
      p.#decisions = DecisionJournal.open(join(ks.dir, 'approvals.journal'));
      for (const rec of ks.shares) await p.#publishGroup(rec);
      p.#subscribeDkg();
      for (const rec of ks.shares) p.#subscribeSigning(rec);
      await p.#bus.flush();
      p.#emit({ event: 'ready', did: ks.identity.did, groups: ks.shares.map((s) => ({ group: s.did, identifier: s.identifier })) });
      return p;
    } catch (e) {
      ks.close();
      throw e;
    }
  }

  /** This participant's own identity (used for DKG). */
  get did(): Did {
    return this.keystore.identity.did;
  }

  /** Unsubscribes, aborts nothing in flight (peers time out), closes the keystore. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    for (const u of this.#unsubs.splice(0)) u();
    try {
      await this.#bus.flush();
    } catch {
      // connection already closed
    }
    this.#decisions.close();
    this.keystore.close();
  }

  /**
   * Runs a message handler; an unexpected failure (a disk error while journaling, say) is
   * reported as an `error` event and the message is dropped: no share leaves without its journal
   * record, and the participant keeps serving other sessions.
   */
  #guard(fn: () => void): void {
    try {
      fn();
    } catch (e) {
      this.#emit({ event: 'error', code: isFrostError(e) ? e.code : 'internal', why: (e as Error)?.message ?? String(e) });
    }
  }

  #emit(e: ParticipantEvent): void {
    this.#opts.onEvent?.(e);
  }

  async #publishGroup(rec: ShareRecord): Promise<void> {
    try {
      await this.#registry.put(rec.group, rec.did);
    } catch (e) {
      this.#emit({ event: 'error', code: isFrostError(e) ? e.code : FrostErrorCodes.TRANSPORT, why: `registry: ${(e as Error).message}` });
    }
  }

  // ---------------------------------------------------------------- DKG

  #subscribeDkg(): void {
    const me = this.keystore.identity.did;
    this.#unsubs.push(this.#bus.subscribe(this.#subjects.dkgInvite, (m) => this.#guard(() => this.#onInvite(m.data, m.reply))));
    const route = (subject: string, data: Uint8Array, direct: boolean) => {
      const session = subject.slice(this.#prefix.length + 5).split('.')[0] ?? '';
      const o = openMessage(data);
      if (!o.ok) return this.#refused('unknown', session, o.error);
      const s = this.#sessions.get(session);
      if (!s) return;
      const b = o.value.body;
      if (b.session !== session) return s.noteRefused(b.from, `${b.kind} for session ${b.session} sent on session ${session}'s subject`);
      if (direct && b.to !== me) return s.noteRefused(b.from, `${b.kind} addressed to ${b.to ?? 'everyone'} arrived on my subject`);
      s.receive(o.value);
    };
    this.#unsubs.push(this.#bus.subscribe(this.#subjects.dkgAnyBcast, (m) => this.#guard(() => route(m.subject, m.data, false))));
    this.#unsubs.push(this.#bus.subscribe(this.#subjects.dkgAnyDirect(me), (m) => this.#guard(() => route(m.subject, m.data, true))));
  }

  #onInvite(data: Uint8Array, reply: string | undefined): void {
    const o = openMessage(data);
    if (!o.ok || !reply) return;
    const b = o.value.body;
    if (b.kind !== 'dkg-invite' || b.round !== 0) return;
    if (this.#opts.initiators && !this.#opts.initiators.includes(b.from)) {
      this.#refused('dkg-invite', b.session, fault(FrostErrorCodes.REFUSED, `initiator ${b.from} is not allowed`));
      return;
    }
    let timeoutMs: number;
    try {
      const p = asObj(b.payload, 'invite', ['min', 'max', 'timeout_ms'], ['members']);
      asSafeUint(p['min'], 'invite.min');
      asSafeUint(p['max'], 'invite.max');
      timeoutMs = asSafeUint(p['timeout_ms'], 'invite.timeout_ms');
      const members = p['members'] === undefined ? undefined : (p['members'] as unknown[]).map((d, i) => asDid(d, `invite.members[${i}]`));
      if (members && !members.includes(this.did)) return;
    } catch (e) {
      this.#refused('dkg-invite', b.session, fault(FrostErrorCodes.BAD_MESSAGE, (e as Error).message));
      return;
    }
    let s = this.#sessions.get(b.session);
    if (s && s.initiator !== b.from) return;
    if (!s) {
      s = new DkgSession(
        {
          bus: this.#bus,
          subjects: this.#subjects,
          me: this.keystore.identity,
          rng: this.#rng,
          ...(this.#opts.onPhase ? { onPhase: this.#opts.onPhase } : {}),
          onFinish: (x) => this.#onDkgFinish(x),
          onEvidence: (e) => this.#onEvidence(e),
        },
        b.session,
        b.from,
        timeoutMs,
      );
      this.#sessions.set(b.session, s);
      this.#emit({ event: 'dkg-joined', session: b.session, initiator: b.from });
    }
    if (!s.finished) this.#bus.publish(reply, s.hello());
  }

  #onDkgFinish(o: DkgOutcome): void {
    setTimeout(() => this.#sessions.delete(o.session), FORGET_AFTER_MS).unref?.();
    if (!o.ok) {
      if (o.inRoster)
        this.#emit({ event: 'dkg-aborted', session: o.session, code: o.fault.code, why: o.fault.why, culprits: o.fault.culprits });
      return;
    }
    if (this.#stopped) return;
    let path: string;
    try {
      path = this.keystore.addShare(o.record);
    } catch (e) {
      this.#emit({ event: 'error', code: isFrostError(e) ? e.code : 'io', why: `could not store the share: ${(e as Error).message}` });
      return;
    }
    this.#subscribeSigning(o.record);
    void this.#publishGroup(o.record).then(() =>
      this.#emit({ event: 'dkg-complete', session: o.session, group: o.record.did, identifier: o.record.identifier, path }),
    );
  }

  #onEvidence(e: Evidence): void {
    const path = this.keystore.saveEvidence(e.name, e.bytes);
    this.#emit({ event: 'evidence', session: e.session, path });
    publishEvidence(this.#opts.nc, this.#prefix, e.session, e.bytes).catch((x) =>
      this.#emit({ event: 'error', code: FrostErrorCodes.TRANSPORT, why: (x as Error).message }),
    );
  }

  #refused(kind: Kind | 'unknown', session: string, f: FrostFault): void {
    this.#emit({ event: 'refused', kind, session, code: f.code, why: f.why });
  }

  // ---------------------------------------------------------------- signing

  #allowedCoordinator(did: Did): boolean {
    return !this.#opts.coordinators || this.#opts.coordinators.includes(did);
  }

  #subscribeSigning(rec: ShareRecord): void {
    const s = this.#subjects;
    this.#unsubs.push(this.#bus.subscribe(s.signRequest(rec.did), (m) => this.#guard(() => this.#onSignRequest(rec, m.data, m.reply))));
    this.#unsubs.push(
      this.#bus.subscribe(s.signPackage(rec.did, rec.identifier), (m) => this.#guard(() => this.#onSignPackage(rec, m.data, m.reply))),
    );
    this.#unsubs.push(this.#bus.subscribe(s.signDone(rec.did), (m) => this.#guard(() => this.#onSignDone(rec, m.data))));
  }

  #reply(rec: ShareRecord, reply: string, kind: Kind, m: Opened, round: number, payload: Record<string, unknown>): void {
    this.#opts.onPhase?.(kind, m.body.session);
    this.#bus.publish(reply, sealMessage({ kind, session: m.body.session, round, to: m.body.from, payload }, rec.identity));
  }

  #refuse(rec: ShareRecord, reply: string, m: Opened, round: number, f: FrostFault): void {
    this.#refused(m.body.kind, m.body.session, f);
    this.#reply(rec, reply, 'sign-refusal', m, round, { code: f.code, why: f.why.slice(0, 2000) });
  }

  #onSignRequest(rec: ShareRecord, data: Uint8Array, reply: string | undefined): void {
    const o = openMessage(data);
    if (!o.ok || !reply) return;
    const m = o.value;
    const e = expectMessage(m, { kind: 'sign-request', session: m.body.session, round: 1 });
    if (!e.ok) {
      this.#refused(m.body.kind, m.body.session, e.error);
      return;
    }
    if (!this.#allowedCoordinator(m.body.from)) {
      this.#refuse(rec, reply, m, 1, fault(FrostErrorCodes.REFUSED, `coordinator ${m.body.from} is not allowed`));
      return;
    }
    let req: ReturnType<typeof readRequest>;
    try {
      req = readRequest(m.body.payload);
    } catch (x) {
      this.#refuse(rec, reply, m, 1, fault(FrostErrorCodes.BAD_MESSAGE, (x as Error).message));
      return;
    }
    if (req.group !== rec.did) {
      this.#refuse(rec, reply, m, 1, fault(FrostErrorCodes.MISROUTED, `request for ${req.group} on ${rec.did}'s subject`));
      return;
    }
    const message = req.message;
    if (message !== undefined) {
      // The message is known before any nonce is drawn: decide first (spec §2.2).
      const ruled = this.#ruled(rec, m.body.session, message);
      if (ruled === 'pending') return; // the first request's answer is on its way
      if (ruled) {
        if (ruled.ok) this.#issueCommitment(rec, reply, m);
        else this.#refuse(rec, reply, m, 1, ruled.error);
        return;
      }
      void this.#decide(rec, m.body.session, message)
        .then((f) => (f ? this.#refuse(rec, reply, m, 1, f) : this.#guard(() => this.#issueCommitment(rec, reply, m))))
        .catch((e: unknown) =>
          this.#emit({ event: 'error', code: isFrostError(e) ? e.code : 'internal', why: (e as Error)?.message ?? String(e) }),
        );
      return;
    }
    // Prefetched round one (no message yet): the holder decides when the package arrives.
    this.#issueCommitment(rec, reply, m);
  }

  /** Round one proper: the session's commitment (the same one again for a repeated request). */
  #issueCommitment(rec: ShareRecord, reply: string, m: Opened): void {
    const journal = this.keystore.journal(rec);
    const prior = journal.forSession(m.body.session);
    if (prior && prior.coordinator !== undefined && prior.coordinator !== m.body.from) {
      this.#refuse(rec, reply, m, 1, fault(FrostErrorCodes.MISROUTED, `session ${m.body.session} belongs to another coordinator`));
      return;
    }
    let c = prior?.state === 'issued' ? prior.commitment : undefined;
    if (prior && !c) {
      this.#refuse(rec, reply, m, 1, fault(FrostErrorCodes.NONCE_USED, `session ${m.body.session} already used its commitment`));
      return;
    }
    if (!c) {
      const fresh = commit(rec, this.#rng);
      journal.issue(m.body.session, fresh.commitment, fresh.nonces, Date.now(), m.body.from);
      c = fresh.commitment;
    }
    this.#reply(rec, reply, 'sign-commitment', m, 1, commitmentPayload(rec.did, c, this.#digest(rec)));
  }

  /**
   * What this holder already decided for `session`: `undefined` when nothing yet, `'pending'`
   * while a decision is under way, else ok (approved this exact message) or the refusal
   * (`frost-approval-mismatch` for another message than the one decided on, or the earlier refusal).
   */
  #ruled(rec: ShareRecord, session: string, message: Uint8Array): { ok: true } | { ok: false; error: FrostFault } | 'pending' | undefined {
    const k = `${rec.did}:${rec.identifier}:${session}`;
    if (this.#deciding.has(k)) return 'pending';
    const prior = this.#decisions.forSession(rec.did, rec.identifier, session);
    if (!prior) return undefined;
    if (prior.request !== contentIdOfBytes(message)) {
      return {
        ok: false,
        error: fault(FrostErrorCodes.APPROVAL_MISMATCH, `session ${session} was decided for request ${prior.request}, not this message`),
      };
    }
    return prior.approve ? { ok: true } : { ok: false, error: fault(FrostErrorCodes.NOT_APPROVED, prior.reason) };
  }

  /**
   * Decodes `message`, applies the approval policy, journals the signed decision and publishes
   * it. Resolves with the refusal once its record is durable, or undefined when approved: the
   * approval's record is made durable in the background (the commitment it unblocks may leave
   * before; the share waits for it, see {@link #signPackage}).
   */
  async #decide(rec: ShareRecord, session: string, message: Uint8Array): Promise<FrostFault | undefined> {
    const approver = this.#approver;
    const k = `${rec.did}:${rec.identifier}:${session}`;
    this.#deciding.add(k);
    try {
      const subject = decodeCall(message);
      const pre = precheck(subject, { allowRaw: approver.allowRaw, nowS: Math.floor(Date.now() / 1000), maxSkewS: approver.maxSkewS });
      const v = pre ?? (await approver.decide({ ...subject, group: rec.did, holder: rec.identity.did, session }));
      if (this.#stopped) return fault(FrostErrorCodes.REFUSED, 'the participant is stopping');
      const body: DecisionBody = {
        proto: 'jcp-frost-approval/1',
        holder: rec.identity.did,
        group: rec.did,
        identifier: rec.identifier,
        session,
        request: subject.request,
        policy: approver.id,
        policy_kind: approver.kind,
        decision: v.approve ? 'approve' : 'refuse',
        reason: v.reason,
        at_s: Math.floor(Date.now() / 1000),
        action: subject.kind === 'raw' ? '' : subject.action,
        resource: subject.kind === 'raw' ? '' : subject.resource,
      };
      const durable = this.#keepDecision(rec, this.#decisions, body);
      if (v.approve) return undefined;
      await durable;
      return fault(subject.kind === 'raw' && !approver.allowRaw ? FrostErrorCodes.NOT_A_REQUEST : FrostErrorCodes.NOT_APPROVED, v.reason);
    } finally {
      this.#deciding.delete(k);
    }
  }

  /**
   * Seals `body` with the holder's identity key, journals it, reports it as a `decision` event and
   * publishes it on `<prefix>_approvals` (a failed publish is reported as a `frost-transport` error
   * event; the journal keeps the record). Returns the record's durability (its background fdatasync).
   */
  #keepDecision(rec: ShareRecord, journal: DecisionJournal, body: DecisionBody): Promise<void> {
    const record = sealDecision(body, rec.identity);
    const durable = journal.appendSealed(record, body);
    this.#emit({
      event: 'decision',
      session: body.session,
      group: rec.did,
      identifier: rec.identifier,
      request: body.request,
      policy: body.policy,
      policy_kind: body.policy_kind,
      decision: body.decision,
      reason: body.reason,
    });
    // The journal holds the record; the stream copy goes out after the reply this decision
    // unblocks (a commitment or a share), so it does not stand in the session's way.
    setImmediate(() =>
      publishDecision(this.#opts.nc, this.#prefix, rec.did, rec.identifier, record).catch((x) =>
        this.#emit({ event: 'error', code: FrostErrorCodes.TRANSPORT, why: (x as Error).message }),
      ),
    );
    return durable;
  }

  #digest(rec: ShareRecord): string {
    let d = this.#digests.get(rec);
    if (d === undefined) {
      d = groupDigest(rec.group);
      this.#digests.set(rec, d);
    }
    return d;
  }

  #onSignPackage(rec: ShareRecord, data: Uint8Array, reply: string | undefined): void {
    const o = openMessage(data);
    if (!o.ok || !reply) return;
    const m = o.value;
    const e = expectMessage(m, { kind: 'sign-package', session: m.body.session, round: 2, to: rec.identity.did });
    if (!e.ok) {
      this.#refuse(rec, reply, m, 2, e.error);
      return;
    }
    if (!this.#allowedCoordinator(m.body.from)) {
      this.#refuse(rec, reply, m, 2, fault(FrostErrorCodes.REFUSED, `coordinator ${m.body.from} is not allowed`));
      return;
    }
    let parsed: ReturnType<typeof readPackage>;
    try {
      parsed = readPackage(m.body.payload);
    } catch (x) {
      this.#refuse(rec, reply, m, 2, fault(FrostErrorCodes.BAD_PACKAGE, `signing package refused: ${(x as Error).message}`));
      return;
    }
    if (parsed.group !== rec.did) {
      this.#refuse(rec, reply, m, 2, fault(FrostErrorCodes.MISROUTED, `package for ${parsed.group} on ${rec.did}'s subject`));
      return;
    }
    const journal = this.keystore.journal(rec);
    const mine = journal.forSession(m.body.session);
    if (!mine) {
      this.#refuse(rec, reply, m, 2, fault(FrostErrorCodes.NONCE_UNKNOWN, `no commitment was issued for session ${m.body.session}`));
      return;
    }
    // Only the coordinator whose request drew the commitment may spend it (the binding is in the
    // journal, so it holds across restarts): anyone else could otherwise replay the session id
    // with a package of their own.
    if (mine.coordinator !== undefined && mine.coordinator !== m.body.from) {
      this.#refuse(
        rec,
        reply,
        m,
        2,
        fault(FrostErrorCodes.MISROUTED, `the commitment of session ${m.body.session} was issued to another coordinator`),
      );
      return;
    }
    if (mine.state !== 'issued') {
      this.#refuse(
        rec,
        reply,
        m,
        2,
        fault(FrostErrorCodes.NONCE_USED, `the commitment of session ${m.body.session} was already ${mine.state} (replayed package?)`),
      );
      return;
    }
    const c = checkPackage(rec.group, mine.commitment, parsed.pkg);
    if (!c.ok) {
      this.#refuse(rec, reply, m, 2, c.error);
      return;
    }
    const session = m.body.session;
    const ruled = this.#ruled(rec, session, parsed.pkg.message);
    // A refused or mismatched package burns the session: its nonce is dropped, never used. The
    // refusal leaves once the decision records behind it are durable.
    const burn = (f: FrostFault) => {
      journal.release(session);
      this.#decisions
        .settled()
        .then(() => this.#refuse(rec, reply, m, 2, f))
        .catch((e: unknown) =>
          this.#emit({ event: 'error', code: isFrostError(e) ? e.code : 'internal', why: (e as Error)?.message ?? String(e) }),
        );
    };
    if (ruled === 'pending') {
      this.#refuse(rec, reply, m, 2, fault(FrostErrorCodes.REFUSED, `a decision on session ${session} is under way`));
      return;
    }
    if (ruled) {
      if (ruled.ok) this.#signPackage(rec, reply, m, parsed);
      else burn(ruled.error);
      return;
    }
    // Prefetched round one (or a coordinator that did not send the message): decide now.
    void this.#decide(rec, session, parsed.pkg.message)
      .then((f) => (f ? burn(f) : this.#guard(() => this.#signPackage(rec, reply, m, parsed))))
      .catch((e: unknown) =>
        this.#emit({ event: 'error', code: isFrostError(e) ? e.code : 'internal', why: (e as Error)?.message ?? String(e) }),
      );
  }

  /** Round two proper, once the package is checked (and approved): claim the nonce, sign, reply. */
  #signPackage(rec: ShareRecord, reply: string, m: Opened, parsed: ReturnType<typeof readPackage>): void {
    const journal = this.keystore.journal(rec);
    const mine = journal.forSession(m.body.session);
    if (mine?.state !== 'issued') {
      this.#refuse(
        rec,
        reply,
        m,
        2,
        fault(FrostErrorCodes.NONCE_USED, `the commitment of session ${m.body.session} is no longer available`),
      );
      return;
    }
    // The `used` record is written now (a second package is refused at once) and fdatasync'd in
    // the background while the share is computed; the share leaves only once that record and the
    // approval behind it (journaled in round one, its fdatasync in the background) are durable.
    const claimed = journal.claim(m.body.session, mine.commitment, Date.now());
    if (!claimed.ok) {
      this.#refuse(rec, reply, m, 2, claimed.error);
      return;
    }
    const { nonces, durable } = claimed.value;
    const share = signShare(rec.group, rec, nonces, mine.commitment, parsed.pkg);
    const session = m.body.session;
    Promise.all([durable, this.#decisions.settled()])
      .then(() => {
        if (!share.ok) return this.#refuse(rec, reply, m, 2, share.error);
        this.#reply(rec, reply, 'sign-share', m, 2, { group: rec.did, identifier: rec.identifier, share: share.value });
        this.#emit({ event: 'signed', session, group: rec.did, identifier: rec.identifier });
      })
      .catch((e: unknown) =>
        this.#emit({ event: 'error', code: isFrostError(e) ? e.code : 'internal', why: (e as Error)?.message ?? String(e) }),
      );
  }

  #onSignDone(rec: ShareRecord, data: Uint8Array): void {
    // Most holders have nothing to release (they signed, or were never asked): look before
    // paying for the signature check.
    let session: unknown;
    try {
      session = (decode(data) as { body?: { session?: unknown } }).body?.session;
    } catch {
      return;
    }
    if (typeof session !== 'string') return;
    const journal = this.keystore.journal(rec);
    const mine = journal.forSession(session);
    if (mine?.state !== 'issued') return;
    const o = openMessage(data);
    if (!o.ok || o.value.body.kind !== 'sign-done' || o.value.body.session !== session || o.value.body.from !== mine.coordinator) return;
    journal.release(session);
  }
}
