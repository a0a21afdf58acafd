/**
 * The node's revocation store (spec §4.3, conformance C6): admitted revocations, enforced on the
 * direct and chained decision paths (the decision checks every link against {@link has}), and
 * persisted in the receipt log's database so they come back on boot.
 *
 * Authority (§4.3) is checked against the revoked grant itself (`RevocationSet.admit`: ids match,
 * revoker is the issuer, signature verifies). A `{revoke}` message carries only the signed
 * revocation, so when the node has not seen the grant yet, the revocation waits: its signature is
 * verified under `revoked_by` at once, and it is admitted — or discarded, when `revoked_by` is not
 * the issuer — the first time a request presents that grant, before that request is decided.
 * A forged revocation therefore never takes effect. Waiting revocations are kept per
 * (grant id, revoked_by), so a stranger's revocation of the same grant id can never replace
 * (and so cancel) the issuer's; at most {@link MAX_WAITING_PER_GRANT} signers wait per grant
 * and `maxPending` in all (`busy` beyond), so a flood of strangers' revocations is bounded.
 */
import {
  asObj,
  type ContentId,
  decode,
  encode,
  err,
  type Grant,
  grantId,
  grantToCbor,
  ok,
  readGrant,
  readSignedRevocation,
  type Result,
  RevocationSet,
  revocationToCbor,
  type SignedGrant,
  type SignedRevocation,
  signedRevocationToCbor,
  verifyBody,
  verifyRevocation,
} from '../core/index.ts';
import type { RevocationRejection, RevocationSink } from './hooks.ts';
import type { IssuerPolicy, RecordRefusal } from './issuerpolicy.ts';

/** Where a revocation came from: a jcp/1 message, or the cluster's stream (a feed). */
export type RecordSource = 'wire' | 'cluster';

/** Options of {@link RevocationStore}. */
export interface RevocationStoreOptions {
  /** Most revocations waiting for their grant (default 10,000). */
  readonly maxPending?: number;
  /** Most grants remembered to check later revocations against (default 100,000). */
  readonly maxKnownGrants?: number;
  /**
   * Most revocations kept, admitted plus waiting (config `abuse.max_revocations`; default
   * 100,000). At the bound a new one is refused `record-limit` unless the policy vouches for its
   * revoker (a trust root, an issuer of a decided grant, a listed issuer); none is evicted.
   */
  readonly maxRevocations?: number;
  /** The record policy (node/issuerpolicy.ts); undefined = every issuer, no size or rate limit. */
  readonly policy?: IssuerPolicy | undefined;
  /** Told of every refusal by the policy or the bound (for `jcp_records_refused_total`). */
  readonly onRefused?: ((source: RecordSource, r: RecordRefusal) => void) | undefined;
}

/** Distinct signers whose revocations may wait for one unseen grant. */
export const MAX_WAITING_PER_GRANT = 8;

/** Where the store persists (the receipt log's `putRevocation`), under the grant id (admitted) or `grantId:revokedBy` (waiting). */
export type PersistRevocation = (grantId: ContentId, bytes: Uint8Array) => Promise<void>;

/** A persisted record's bytes: det-CBOR `{revocation, grant?}` (grant present once admitted). */
export function revocationRecord(sr: SignedRevocation, grant?: Grant): Uint8Array {
  const o: Record<string, unknown> = { revocation: signedRevocationToCbor(sr) };
  if (grant !== undefined) o['grant'] = grantToCbor(grant);
  return encode(o);
}

/** What {@link RevocationStore.load} found on boot. */
export interface RevocationLoad {
  readonly admitted: number;
  readonly pending: number;
  /** Records that failed to decode or verify: counted, never applied. */
  readonly bad: number;
}

/** Admitted and waiting revocations of one node. */
export class RevocationStore implements RevocationSink {
  readonly set = new RevocationSet();
  /** Waiting revocations: grant id → revoked_by → the signed revocation. */
  readonly #pending = new Map<ContentId, Map<string, SignedRevocation>>();
  #pendingCount = 0;
  readonly #known = new Map<ContentId, Grant>();
  readonly #persist: PersistRevocation;
  readonly #maxPending: number;
  readonly #maxKnown: number;
  readonly #maxKept: number;
  readonly #policy: IssuerPolicy | undefined;
  readonly #onRefused: RevocationStoreOptions['onRefused'];
  #admittedCount = 0;
  /** Waiters of {@link taken}: grant id → resolvers. */
  readonly #takenWaiters = new Map<ContentId, Array<() => void>>();

  constructor(persist: PersistRevocation, opts: RevocationStoreOptions = {}) {
    this.#persist = persist;
    this.#maxPending = opts.maxPending ?? 10_000;
    this.#maxKnown = opts.maxKnownGrants ?? 100_000;
    this.#maxKept = opts.maxRevocations ?? 100_000;
    this.#policy = opts.policy;
    this.#onRefused = opts.onRefused;
  }

  /** Revocations admitted (in force). */
  get admittedCount(): number {
    return this.#admittedCount;
  }

  /** True when a revocation of `id` has been admitted (§4.3). */
  has(id: ContentId): boolean {
    return this.set.has(id);
  }

  /** Revocations waiting for their grant. */
  get pendingCount(): number {
    return this.#pendingCount;
  }

  #dropWaiting(id: ContentId): void {
    const waiting = this.#pending.get(id);
    if (waiting === undefined) return;
    this.#pending.delete(id);
    this.#pendingCount -= waiting.size;
  }

  #wait(sr: SignedRevocation): 'waiting' | 'full' {
    const id = sr.body.grant_id;
    let byRevoker = this.#pending.get(id);
    if (byRevoker?.has(sr.body.revoked_by)) return 'waiting';
    if (this.#pendingCount >= this.#maxPending || (byRevoker?.size ?? 0) >= MAX_WAITING_PER_GRANT) return 'full';
    if (!byRevoker) {
      byRevoker = new Map();
      this.#pending.set(id, byRevoker);
    }
    byRevoker.set(sr.body.revoked_by, sr);
    this.#pendingCount++;
    return 'waiting';
  }

  /**
   * Remembers the grants of a presented chain and admits any waiting revocation of them, before
   * the request is decided. Persisting an admission is queued on the log ahead of the receipt
   * that follows, so it is durable no later than that receipt.
   */
  noteChain(chain: readonly SignedGrant[]): void {
    for (const sg of chain) {
      const id = grantId(sg.grant);
      if (this.#pendingCount > 0) {
        const waiting = this.#pending.get(id);
        if (waiting !== undefined) {
          this.#pending.delete(id);
          this.#pendingCount -= waiting.size;
          // Only the issuer's revocation is admitted; strangers' are dropped (§4.3).
          const byIssuer = waiting.get(sg.grant.issuer);
          if (byIssuer !== undefined && this.set.admit(byIssuer, sg.grant).ok) {
            this.#admittedCount++;
            void this.#persist(id, revocationRecord(byIssuer, sg.grant)).catch(() => undefined);
          }
        }
      }
      if (this.#known.size < this.#maxKnown && !this.#known.has(id)) this.#known.set(id, sg.grant);
    }
  }

  /**
   * Resolves once a revocation of `id` has been taken by this store (admitted, or verified and
   * waiting for its grant, and durable), whichever way it came (jcp/1 or a feed); at once when it
   * was taken before. Event-driven: for operators' tooling and tests that must know a
   * revocation arrived without polling.
   */
  taken(id: ContentId): Promise<void> {
    if (this.set.has(id) || this.#pending.has(id)) return Promise.resolve();
    return new Promise((resolve) => {
      const list = this.#takenWaiters.get(id);
      if (list === undefined) this.#takenWaiters.set(id, [resolve]);
      else list.push(resolve);
    });
  }

  #notifyTaken(id: ContentId): void {
    const list = this.#takenWaiters.get(id);
    if (list === undefined) return;
    this.#takenWaiters.delete(id);
    for (const f of list) f();
  }

  /**
   * Verifies, records and persists a revocation (§4.3); see {@link RevocationSink.submit}. With a
   * policy, the revoker must pass it (`issuer-refused`, `record-limit` for size or rate) and, at
   * `maxRevocations`, be vouched for (`record-limit`); `source` labels the refusal.
   */
  async submit(
    sr: SignedRevocation,
    presented?: Grant,
    source: RecordSource = 'wire',
  ): Promise<Result<{ grantId: ContentId; admitted: boolean }, RevocationRejection>> {
    const r = await this.#submit(sr, presented, source);
    if (r.ok) this.#notifyTaken(r.value.grantId);
    return r;
  }

  /** The policy's refusal of `sr` before its authority is checked (policy, size, bound), counted. */
  #refusal(sr: SignedRevocation, source: RecordSource): RecordRefusal | undefined {
    const by = sr.body.revoked_by;
    let r = this.#policy?.refuses(by, revocationRecord(sr).length);
    if (r === undefined && this.#admittedCount + this.#pendingCount >= this.#maxKept && this.#policy?.vouched(by) !== true) {
      r = {
        reason: 'full',
        why: `the node keeps at most ${this.#maxKept} revocations (abuse.max_revocations) and does not vouch for ${by}`,
      };
    }
    if (r !== undefined) this.#onRefused?.(source, r);
    return r;
  }

  /** The policy's charge of the revoker's bucket for a verified revocation, counted when refused. */
  #charged(sr: SignedRevocation, source: RecordSource): RecordRefusal | undefined {
    const r = this.#policy?.charge(sr.body.revoked_by);
    if (r !== undefined) this.#onRefused?.(source, r);
    return r;
  }

  async #submit(
    sr: SignedRevocation,
    presented: Grant | undefined,
    source: RecordSource,
  ): Promise<Result<{ grantId: ContentId; admitted: boolean }, RevocationRejection>> {
    const id = sr.body.grant_id;
    if (this.set.has(id)) return ok({ grantId: id, admitted: true });
    if (presented !== undefined && grantId(presented) !== id) {
      return err({ code: 'revocation-refused', why: 'wrong-grant: the grant sent with the revocation is not the one it revokes' });
    }
    const refused = this.#refusal(sr, source);
    if (refused !== undefined) return err({ code: refused.reason === 'issuer' ? 'issuer-refused' : 'record-limit', why: refused.why });
    const grant = this.#known.get(id) ?? presented;
    if (grant !== undefined) {
      const v = verifyRevocation(sr, grant);
      if (!v.ok) return err({ code: 'revocation-refused', why: `${v.error.code}: ${v.error.why}` });
      const limited = this.#charged(sr, source);
      if (limited !== undefined) return err({ code: 'record-limit', why: limited.why });
      this.set.admit(sr, grant);
      this.#admittedCount++;
      if (this.#known.size < this.#maxKnown && !this.#known.has(id)) this.#known.set(id, grant);
      this.#dropWaiting(id);
      await this.#persist(id, revocationRecord(sr, grant));
      return ok({ grantId: id, admitted: true });
    }
    if (!verifyBody({ body: revocationToCbor(sr.body), signature: sr.signature }, sr.body.revoked_by)) {
      return err({ code: 'revocation-refused', why: 'bad-signature: the revocation signature does not verify under revoked_by' });
    }
    const limited = this.#charged(sr, source);
    if (limited !== undefined) return err({ code: 'record-limit', why: limited.why });
    if (this.#wait(sr) === 'full') {
      return err({
        code: 'busy',
        why: `too many revocations already wait for their grants (${this.#maxPending} in all, ${MAX_WAITING_PER_GRANT} per grant)`,
      });
    }
    // Keyed by (grant, revoker): a waiting revocation never overwrites another signer's.
    await this.#persist(`${id}:${sr.body.revoked_by}`, revocationRecord(sr));
    return ok({ grantId: id, admitted: false });
  }

  /** Restores persisted records on boot, re-verifying each; bad records are counted, never applied. */
  load(records: readonly Uint8Array[]): RevocationLoad {
    let admitted = 0;
    let pending = 0;
    let bad = 0;
    for (const bytes of records) {
      try {
        const o = asObj(decode(bytes), 'revocation_record', ['revocation'], ['grant']);
        const sr = readSignedRevocation(o['revocation'], 'revocation_record.revocation');
        if (o['grant'] !== undefined) {
          const grant = readGrant(o['grant'], 'revocation_record.grant');
          if (this.set.admit(sr, grant).ok) {
            admitted++;
            this.#admittedCount++;
            if (this.#known.size < this.#maxKnown) this.#known.set(grantId(grant), grant);
          } else bad++;
        } else if (verifyBody({ body: revocationToCbor(sr.body), signature: sr.signature }, sr.body.revoked_by)) {
          if (!this.set.has(sr.body.grant_id) && this.#wait(sr) === 'waiting') pending++;
        } else bad++;
      } catch {
        bad++;
      }
    }
    return { admitted, pending, bad };
  }
}
