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
} from '../core/index.ts';
import type { RevocationRejection, RevocationSink } from './hooks.ts';

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
  /** Waiters of {@link taken}: grant id → resolvers. */
  readonly #takenWaiters = new Map<ContentId, Array<() => void>>();

  constructor(persist: PersistRevocation, opts: { maxPending?: number; maxKnownGrants?: number } = {}) {
    this.#persist = persist;
    this.#maxPending = opts.maxPending ?? 10_000;
    this.#maxKnown = opts.maxKnownGrants ?? 100_000;
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

  /** Verifies, records and persists a revocation (§4.3); see {@link RevocationSink.submit}. */
  async submit(sr: SignedRevocation, presented?: Grant): Promise<Result<{ grantId: ContentId; admitted: boolean }, RevocationRejection>> {
    const r = await this.#submit(sr, presented);
    if (r.ok) this.#notifyTaken(r.value.grantId);
    return r;
  }

  async #submit(sr: SignedRevocation, presented?: Grant): Promise<Result<{ grantId: ContentId; admitted: boolean }, RevocationRejection>> {
    const id = sr.body.grant_id;
    if (this.set.has(id)) return ok({ grantId: id, admitted: true });
    if (presented !== undefined && grantId(presented) !== id) {
      return err({ code: 'revocation-refused', why: 'wrong-grant: the grant sent with the revocation is not the one it revokes' });
    }
    const grant = this.#known.get(id) ?? presented;
    if (grant !== undefined) {
      const r = this.set.admit(sr, grant);
      if (!r.ok) return err({ code: 'revocation-refused', why: `${r.error.code}: ${r.error.why}` });
      if (this.#known.size < this.#maxKnown && !this.#known.has(id)) this.#known.set(id, grant);
      this.#dropWaiting(id);
      await this.#persist(id, revocationRecord(sr, grant));
      return ok({ grantId: id, admitted: true });
    }
    if (!verifyBody({ body: revocationToCbor(sr.body), signature: sr.signature }, sr.body.revoked_by)) {
      return err({ code: 'revocation-refused', why: 'bad-signature: the revocation signature does not verify under revoked_by' });
    }
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
