/**
 * One participant's side of a DKG session over the bus (spec §2.2, C18). It only moves
 * messages: the rounds are `dkg.ts`, the envelope `message.ts`, the share encryption `box.ts`.
 *
 * Phases: hello (answered an invite) → round 1 (broadcast commitment + proof) → round 2 (one
 * encrypted share per peer, on its direct subject) → round 3 (check and sum the shares, broadcast
 * a confirmation carrying the group package) → done once every peer has confirmed the same
 * package. Only then does the participant keep its share: an aborted session leaves no key.
 *
 * Each waiting phase has a deadline (the initiator's `timeout_ms`); when it passes, the session
 * aborts naming the participants whose message is missing, with any messages refused from them
 * (replayed, misrouted) listed in the reason. A share that does not decrypt or does not match
 * its sender's commitment is answered by a complaint carrying the proof (dkg-wire.ts), which every
 * participant re-checks before it blames anyone.
 */
import { randomBytes } from 'node:crypto';
import { type Actor, bytesEqual, type Did, encode, type Obj, type Rng } from '../core/index.ts';
import { type BoxKeyPair, newBoxKey, open, pairKeyFrom, seal, sharedSecret } from './box.ts';
import type { Bus, subjects } from './bus.ts';
import { type DkgState, dkgAbandon, dkgRound1, dkgRound2, dkgRound3, type Round1Package } from './dkg.ts';
import {
  boxContext,
  complaintPayload,
  readAbort,
  readRound1,
  readRound2,
  readStart,
  type RosterEntry,
  type StartInfo,
  verifyComplaint,
} from './dkg-wire.ts';
import { type Culprit, describeCulprits, fault, type FrostErrorCode, FrostErrorCodes, type FrostFault } from './errors.ts';
import { type GroupPublic, groupBytes, groupToCbor, readGroup } from './group.ts';
import { expectMessage, type Kind, type Opened, sealMessage } from './message.ts';
import { type ShareRecord, trustedShareRecord } from './sharefile.ts';

/** How a session ended for this participant. */
export type DkgOutcome =
  | { readonly ok: true; readonly session: string; readonly record: ShareRecord }
  | { readonly ok: false; readonly session: string; readonly fault: FrostFault; readonly inRoster: boolean };

/** Evidence this participant keeps (and publishes) when it blames someone. */
export interface Evidence {
  readonly session: string;
  readonly name: string;
  readonly bytes: Uint8Array;
}

/** What a session needs from its participant. */
export interface DkgSessionDeps {
  readonly bus: Bus;
  readonly subjects: ReturnType<typeof subjects>;
  readonly me: Actor;
  readonly rng: Rng;
  /** Called just before this participant sends each message (logging, fault injection in tests). */
  readonly onPhase?: (kind: Kind, session: string) => void;
  /** Called once when the session ends. */
  readonly onFinish: (o: DkgOutcome) => void;
  /** Called with evidence to keep before a complaint is sent. */
  readonly onEvidence: (e: Evidence) => void;
}

type Phase = 'hello' | 'round1' | 'round2' | 'confirm' | 'done' | 'aborted';

const MIN_TIMEOUT_MS = 100;
const MAX_TIMEOUT_MS = 120_000;

/** The participant side of one DKG session. */
export class DkgSession {
  readonly session: string;
  readonly initiator: Did;
  readonly #deps: DkgSessionDeps;
  readonly #box: BoxKeyPair = newBoxKey();
  /** X25519 shared secret with each peer (by did), computed once at `dkg-start`; zeroed at the end. */
  readonly #shared = new Map<Did, Uint8Array>();
  #phase: Phase = 'hello';
  #timeoutMs: number;
  #timer: NodeJS.Timeout | undefined;
  #start: StartInfo | undefined;
  #startRaw: Uint8Array | undefined;
  #myIndex = -1;
  #state: DkgState | undefined;
  readonly #early: Opened[] = [];
  readonly #r1 = new Map<Did, Opened>();
  readonly #r2 = new Map<Did, Opened>();
  readonly #confirms = new Map<Did, Opened>();
  readonly #refused = new Map<Did, string[]>();
  #group: GroupPublic | undefined;
  #record: ShareRecord | undefined;

  constructor(deps: DkgSessionDeps, session: string, initiator: Did, timeoutMs: number) {
    this.#deps = deps;
    this.session = session;
    this.initiator = initiator;
    this.#timeoutMs = Math.min(MAX_TIMEOUT_MS, Math.max(MIN_TIMEOUT_MS, timeoutMs));
    // Not chosen (or the initiator died): forget the session quietly.
    this.#arm(
      () => this.#end({ ok: false, session, fault: fault(FrostErrorCodes.TIMEOUT, 'no dkg-start arrived'), inRoster: false }),
      2 * this.#timeoutMs,
    );
  }

  /** The signed hello answering the invite (carries this session's X25519 key). */
  hello(): Uint8Array {
    this.#deps.onPhase?.('dkg-hello', this.session);
    return sealMessage(
      { kind: 'dkg-hello', session: this.session, round: 0, to: this.initiator, payload: { enc_key: this.#box.public } },
      this.#deps.me,
    );
  }

  /** True once the session ended (completed or aborted). */
  get finished(): boolean {
    return this.#phase === 'done' || this.#phase === 'aborted';
  }

  /** Handles one opened message of this session. */
  receive(m: Opened): void {
    if (this.finished) return;
    const k = m.body.kind;
    try {
      if (k === 'dkg-start') {
        this.#onStart(m);
        return;
      }
      if (!this.#start) {
        if (this.#early.length < 1024) this.#early.push(m);
        return;
      }
      if (k === 'dkg-abort') {
        this.#onAbort(m);
        return;
      }
      if (k === 'dkg-complaint') {
        this.#onComplaint(m);
        return;
      }
      const want = k === 'dkg-round1' ? 1 : k === 'dkg-round2' ? 2 : 3;
      const store = k === 'dkg-round1' ? this.#r1 : k === 'dkg-round2' ? this.#r2 : k === 'dkg-confirm' ? this.#confirms : undefined;
      const e = expectMessage(m, {
        kind: ['dkg-round1', 'dkg-round2', 'dkg-confirm'],
        session: this.session,
        round: want,
        from: this.#peers().map((p) => p.did),
        ...(k === 'dkg-round2' ? { to: this.#deps.me.did } : {}),
      });
      if (!e.ok || !store) {
        this.#refuse(m.body.from, e.ok ? `unexpected ${k}` : e.error.why);
        return;
      }
      const malformed = this.#malformed(m);
      if (malformed !== undefined) {
        this.#abort(FrostErrorCodes.BAD_MESSAGE, `${m.body.from} sent a malformed ${k}: ${malformed}`, [this.#culprit(m.body.from)]);
        return;
      }
      const prev = store.get(m.body.from);
      if (prev) {
        if (bytesEqual(prev.raw, m.raw)) return; // a retransmission
        this.#deps.onEvidence({
          session: this.session,
          name: `${this.session}-equivocation-${k}`,
          bytes: encode({ a: prev.raw, b: m.raw }),
        });
        this.#abort(FrostErrorCodes.EQUIVOCATION, `${m.body.from} sent two different ${k} messages`, [this.#culprit(m.body.from)]);
        return;
      }
      store.set(m.body.from, m);
      this.#advance();
    } catch (x) {
      this.#refuse(m.body.from, `${k}: ${(x as Error).message}`);
    }
  }

  /**
   * Why a signed round message from a roster member is malformed (payload shape, identifier not
   * the sender's roster index), or undefined when it is well-formed. A signed malformed message
   * is its sender's fault, so the session aborts naming it.
   */
  #malformed(m: Opened): string | undefined {
    const want = (this.#start?.roster.findIndex((r) => r.did === m.body.from) ?? -1) + 1;
    try {
      if (m.body.kind === 'dkg-round1') {
        const p = readRound1(m.body.payload);
        if (p.identifier !== want) return `identifier ${p.identifier}, roster says ${want}`;
      } else if (m.body.kind === 'dkg-round2') {
        const p = readRound2(m.body.payload);
        if (p.identifier !== want) return `identifier ${p.identifier}, roster says ${want}`;
      } else {
        readGroup(m.body.payload['package']);
        if (typeof m.body.payload['group'] !== 'string') return 'no group did';
      }
      return undefined;
    } catch (x) {
      return (x as Error).message;
    }
  }

  /** Records a refused message from `from` (reported if the session later times out on them). */
  #refuse(from: Did, why: string): void {
    const list = this.#refused.get(from) ?? [];
    if (list.length < 8) list.push(why);
    this.#refused.set(from, list);
  }

  /** Records a message refused before it could be matched to this session (wrong session id, misrouted). */
  noteRefused(from: Did, why: string): void {
    this.#refuse(from, why);
  }

  #peers(): RosterEntry[] {
    return (this.#start?.roster ?? []).filter((_, i) => i !== this.#myIndex);
  }

  #culprit(did: Did): Culprit {
    const i = this.#start?.roster.findIndex((r) => r.did === did) ?? -1;
    return i >= 0 ? { identifier: i + 1, did } : { did };
  }

  #arm(fn: () => void, ms = this.#timeoutMs): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = setTimeout(fn, ms);
    this.#timer.unref?.();
  }

  #send(kind: Kind, round: number, payload: Obj, to?: RosterEntry): void {
    this.#deps.onPhase?.(kind, this.session);
    const bytes = sealMessage({ kind, session: this.session, round, payload, ...(to ? { to: to.did } : {}) }, this.#deps.me);
    const subject = to ? this.#deps.subjects.dkgDirect(this.session, to.did) : this.#deps.subjects.dkgBcast(this.session);
    this.#deps.bus.publish(subject, bytes);
  }

  #onStart(m: Opened): void {
    if (this.#phase !== 'hello' || m.body.from !== this.initiator || m.body.round !== 0) {
      this.#refuse(m.body.from, 'unexpected dkg-start');
      return;
    }
    const s = readStart(m);
    if (!s.ok) {
      this.#end({ ok: false, session: this.session, fault: s.error, inRoster: false });
      return;
    }
    const idx = s.value.roster.findIndex((r) => r.did === this.#deps.me.did);
    if (idx < 0) {
      this.#end({
        ok: false,
        session: this.session,
        fault: fault(FrostErrorCodes.REFUSED, 'not chosen for this session'),
        inRoster: false,
      });
      return;
    }
    this.#start = s.value;
    this.#startRaw = m.raw;
    this.#myIndex = idx;
    this.#timeoutMs = Math.min(MAX_TIMEOUT_MS, Math.max(MIN_TIMEOUT_MS, s.value.timeoutMs));
    if (!bytesEqual(s.value.roster[idx]!.encKey, this.#box.public)) {
      this.#abort(FrostErrorCodes.BAD_MESSAGE, 'dkg-start carries a session key that is not mine', [{ did: this.initiator }]);
      return;
    }
    const me = s.value.roster[idx]!;
    for (const p of s.value.roster) {
      if (p === me) continue;
      try {
        // Once per peer and session: rounds 2 and 3 derive their keys from it.
        this.#shared.set(p.did, sharedSecret(this.#box.key ?? this.#box.secret, p.encKey, p.did));
      } catch {
        this.#abort(FrostErrorCodes.BAD_MESSAGE, `${p.did} announced an unusable X25519 key`, [this.#culprit(p.did)]);
        return;
      }
    }
    const r = dkgRound1(idx + 1, s.value, this.#deps.rng);
    if (!r.ok) {
      this.#abort(r.error.code, r.error.why, []);
      return;
    }
    this.#state = r.value.state;
    this.#phase = 'round1';
    this.#arm(() => this.#lost(this.#r1, 'round-1 package'));
    const p = r.value.package;
    this.#send('dkg-round1', 1, { identifier: p.identifier, commitment: [...p.commitment], proof: p.proof });
    for (const e of this.#early.splice(0)) this.receive(e);
    this.#advance();
  }

  #onAbort(m: Opened): void {
    const allowed = [this.initiator, ...this.#peers().map((p) => p.did)];
    if (m.body.session !== this.session || !allowed.includes(m.body.from)) {
      this.#refuse(m.body.from, 'dkg-abort from outside the session');
      return;
    }
    const a = readAbort(m.body.payload);
    const culprits = a.culprits.map((d) => this.#culprit(d));
    this.#end({
      ok: false,
      session: this.session,
      fault: fault(FrostErrorCodes.ABORTED, `aborted by ${m.body.from}: [${a.code}] ${a.why}`, culprits),
      inRoster: true,
    });
  }

  #onComplaint(m: Opened): void {
    const e = expectMessage(m, { kind: 'dkg-complaint', session: this.session, round: 3, from: this.#peers().map((p) => p.did) });
    if (!e.ok) {
      this.#refuse(m.body.from, e.error.why);
      return;
    }
    const v = verifyComplaint(m.body.payload, m.body.from, this.session);
    this.#deps.onEvidence({ session: this.session, name: `${this.session}-complaint-by-${m.body.from.slice(-8)}`, bytes: m.raw });
    if (!v.ok) {
      this.#abort(
        v.error.code,
        v.error.why,
        v.error.culprits.map((c) => this.#culprit(c.did!)),
      );
      return;
    }
    this.#end({
      ok: false,
      session: this.session,
      fault: fault(v.value.code, `${v.value.accused} sent ${m.body.from} a bad share (complaint verified)`, [
        this.#culprit(v.value.accused),
      ]),
      inRoster: true,
    });
  }

  #lost(got: Map<Did, Opened>, what: string): void {
    const missing = this.#peers().filter((p) => !got.has(p.did));
    const notes = missing.flatMap((p) => (this.#refused.get(p.did) ?? []).map((w) => `refused from ${p.did}: ${w}`));
    const culprits = missing.map((p) => this.#culprit(p.did));
    const why = `no ${what} from ${describeCulprits(culprits)} within ${this.#timeoutMs} ms${notes.length ? `; ${notes.join('; ')}` : ''}`;
    this.#abort(FrostErrorCodes.PARTICIPANT_LOST, why, culprits);
  }

  #advance(): void {
    const start = this.#start;
    const state = this.#state;
    if (!start || !state) return;
    const peers = this.#peers();
    if (this.#phase === 'round1' && peers.every((p) => this.#r1.has(p.did))) {
      const pkgs: Round1Package[] = [];
      for (const p of peers) pkgs.push(readRound1(this.#r1.get(p.did)!.body.payload));
      const r = dkgRound2(state, pkgs);
      if (!r.ok) {
        this.#abort(r.error.code, r.error.why, this.#toDids(r.error.culprits));
        return;
      }
      this.#phase = 'round2';
      this.#arm(() => this.#lost(this.#r2, 'round-2 share'));
      const me = start.roster[this.#myIndex]!;
      for (const p of peers) {
        const ctx = boxContext(this.session, me, p);
        const nonce = new Uint8Array(randomBytes(12));
        const ct = seal(pairKeyFrom(this.#shared.get(p.did)!, ctx), nonce, ctx, r.value.get(start.roster.indexOf(p) + 1)!);
        this.#send('dkg-round2', 2, { identifier: this.#myIndex + 1, nonce, ciphertext: ct }, p);
      }
    }
    if (this.#phase === 'round2' && peers.every((p) => this.#r2.has(p.did))) {
      const me = start.roster[this.#myIndex]!;
      const received = new Map<number, Uint8Array>();
      const pkgs = peers.map((p) => readRound1(this.#r1.get(p.did)!.body.payload));
      const bad: RosterEntry[] = [];
      for (const p of peers) {
        const sh = readRound2(this.#r2.get(p.did)!.body.payload);
        const ctx = boxContext(this.session, p, me);
        const share = open(pairKeyFrom(this.#shared.get(p.did)!, ctx), sh.nonce, ctx, sh.ciphertext);
        if (share?.length !== 32) bad.push(p);
        else received.set(sh.identifier, share);
      }
      if (bad.length) {
        this.#complain(bad, FrostErrorCodes.UNDECRYPTABLE_SHARE);
        return;
      }
      const r = dkgRound3(state, pkgs, received);
      if (!r.ok) {
        if (r.error.code === FrostErrorCodes.INCONSISTENT_SHARE) {
          this.#complain(
            r.error.culprits.map((c) => start.roster[c.identifier! - 1]!),
            FrostErrorCodes.INCONSISTENT_SHARE,
          );
          return;
        }
        this.#abort(r.error.code, r.error.why, this.#toDids(r.error.culprits));
        return;
      }
      const group: GroupPublic = { ...r.value.public, roster: start.roster.map((e) => e.did) };
      this.#group = group;
      this.#record = trustedShareRecord(group, r.value.secret.identifier, r.value.secret.signingShare, this.#deps.me);
      this.#phase = 'confirm';
      this.#arm(() => this.#lost(this.#confirms, 'confirmation'));
      this.#send('dkg-confirm', 3, { group: this.#record.did, package: groupToCbor(group) });
    }
    if (this.#phase === 'confirm' && this.#group && this.#record && peers.every((p) => this.#confirms.has(p.did))) {
      const mine = groupBytes(this.#group);
      const differ: Culprit[] = [];
      for (const p of peers) {
        const c = this.#confirms.get(p.did)!.body.payload;
        let same = false;
        try {
          same = c['group'] === this.#record.did && bytesEqual(groupBytes(readGroup(c['package'])), mine);
        } catch {
          same = false;
        }
        if (!same) differ.push(this.#culprit(p.did));
      }
      if (differ.length) {
        this.#abort(FrostErrorCodes.GROUP_MISMATCH, `confirmed a different group than ${this.#record.did}`, differ);
        return;
      }
      this.#end({ ok: true, session: this.session, record: this.#record });
    }
  }

  #toDids(cs: readonly Culprit[]): Culprit[] {
    return cs.map((c) => (c.identifier !== undefined && this.#start ? this.#culprit(this.#start.roster[c.identifier - 1]?.did ?? '') : c));
  }

  /** Publishes a complaint with proof against each of `accused`, keeps the evidence, aborts. */
  #complain(accused: readonly RosterEntry[], code: FrostErrorCode): void {
    for (const a of accused) {
      const payload = complaintPayload(a.did, code, this.#startRaw!, this.#r1.get(a.did)!.raw, this.#r2.get(a.did)!.raw, this.#box.secret);
      this.#deps.onEvidence({
        session: this.session,
        name: `${this.session}-complaint-against-${a.did.slice(-8)}`,
        bytes: encode(payload),
      });
      this.#send('dkg-complaint', 3, payload);
    }
    const culprits = accused.map((a) => this.#culprit(a.did));
    this.#end({
      ok: false,
      session: this.session,
      fault: fault(code, `bad round-2 share from ${describeCulprits(culprits)} (complaint sent with proof)`, culprits),
      inRoster: true,
    });
  }

  /** Aborts: tells everyone (code, reason, culprits), forgets all secrets. */
  #abort(code: FrostErrorCode, why: string, culprits: readonly Culprit[]): void {
    if (this.finished) return;
    try {
      this.#send('dkg-abort', this.#round(), { code, why: why.slice(0, 2000), culprits: culprits.flatMap((c) => (c.did ? [c.did] : [])) });
    } catch {
      // best effort: the others time out anyway
    }
    this.#end({ ok: false, session: this.session, fault: fault(code, why, culprits), inRoster: this.#start !== undefined });
  }

  #round(): number {
    return this.#phase === 'round1' ? 1 : this.#phase === 'round2' ? 2 : this.#phase === 'confirm' ? 3 : 0;
  }

  #end(o: DkgOutcome): void {
    if (this.finished) return;
    this.#phase = o.ok ? 'done' : 'aborted';
    if (this.#timer) clearTimeout(this.#timer);
    if (this.#state) dkgAbandon(this.#state);
    this.#box.secret.fill(0);
    for (const k of this.#shared.values()) k.fill(0);
    this.#shared.clear();
    if (!o.ok) this.#record?.signingShare.fill(0);
    this.#deps.onFinish(o);
  }
}
