/**
 * Which issuers' amendments (§4.7) and revocations (§4.3) a node keeps and relays (docs/node.md
 * "Abuse limits"). Any key can mint a self-signed grant and then amend or revoke it; without a
 * policy every node would store and relay such records without end. A record is taken when its
 * issuer (the revoker, the amending issuer) is:
 *
 *  - a trust root of a resource this node serves (config `resources[].trust_roots`),
 *  - an issuer of a link of a chain this node decided whose root a trust root issued and whose
 *    caller signature verified (remembered, at most `abuse.max_issuers`), or
 *  - listed in `abuse.record_issuers`;
 *
 * any issuer when `abuse.record_policy` is `open`, or when the node serves a resource open to
 * any root (no `trust_roots`: every key may anchor a grant for it, so every key may revoke or
 * amend one). Whatever the policy, the revocation set stays bounded (`abuse.max_revocations`:
 * past it only vouched issuers' revocations are taken). Every taken record also passes a size cap
 * (`abuse.record_max_bytes`) and a token bucket per issuer (`abuse.record_burst`,
 * `abuse.record_refill_per_s`). Refusals carry a stable code (`issuer-refused`, `record-limit`)
 * and are counted in `jcp_records_refused_total{kind, reason}`.
 */
import type { Did } from '../core/index.ts';
import type { AbuseConfig } from './config.ts';
import { PeerLimiter } from './ratelimit.ts';

/** Why a record was refused: `issuer` (outside the policy), `size`, `rate` (the issuer's bucket), `full` (revocation bound). */
export type RecordRefusalReason = 'issuer' | 'size' | 'rate' | 'full';

/** A refusal of {@link IssuerPolicy.check}: the reason (the metric label) and a sentence for the error reply. */
export interface RecordRefusal {
  readonly reason: RecordRefusalReason;
  readonly why: string;
}

/** The issuer policy of one node; the clock is in seconds. */
export class IssuerPolicy {
  readonly #cfg: AbuseConfig;
  readonly #roots: ReadonlySet<Did>;
  readonly #listed: ReadonlySet<Did>;
  readonly #decided = new Set<Did>();
  readonly #rate: PeerLimiter;
  readonly #anyRoot: boolean;

  /**
   * @param cfg the `abuse` section (record_* keys, max_issuers).
   * @param roots every trust root of every served resource.
   * @param anyRoot true when some served resource is open to any root (no `trust_roots`).
   */
  constructor(cfg: AbuseConfig, roots: Iterable<Did>, clockS: () => number, anyRoot = false) {
    this.#cfg = cfg;
    this.#anyRoot = anyRoot;
    this.#roots = new Set(roots);
    this.#listed = new Set(cfg.recordIssuers);
    this.#rate = new PeerLimiter({ burst: cfg.recordBurst, refillPerS: cfg.recordRefillPerS, maxPeers: cfg.maxIssuers }, clockS);
  }

  /** Remembers the issuers of a decided chain (root trusted, caller signature good); at most `max_issuers`. */
  noteDecided(issuers: Iterable<Did>): void {
    for (const d of issuers) {
      if (this.#decided.size >= this.#cfg.maxIssuers) return;
      this.#decided.add(d);
    }
  }

  /** True when `issuer` is a trust root, a decided issuer or listed: its revocations are never refused `full`. */
  vouched(issuer: Did): boolean {
    return this.#roots.has(issuer) || this.#decided.has(issuer) || this.#listed.has(issuer);
  }

  /**
   * The count bound of amendments (`abuse.max_amendments`): with `held` in force, a refusal
   * (`full`) for a new one steering a grant of `issuer` unless that issuer is vouched for.
   */
  amendmentsFull(issuer: Did, held: number): RecordRefusal | undefined {
    if (held < this.#cfg.maxAmendments || this.vouched(issuer)) return undefined;
    return { reason: 'full', why: `${held} amendments are in force (abuse.max_amendments); only vouched issuers' are taken` };
  }

  /**
   * The policy and size check of one record of `issuer`, `bytes` long (det-CBOR): undefined when
   * it passes. Takes nothing: call {@link charge} once the record's signature verified, so a
   * forgery naming someone else's key never spends that key's tokens.
   */
  refuses(issuer: Did, bytes: number): RecordRefusal | undefined {
    if (this.#cfg.recordPolicy === 'strict' && !this.#anyRoot && !this.vouched(issuer)) {
      return {
        reason: 'issuer',
        why: `${issuer} is not a trust root of a served resource, an issuer of a grant this node decided, or in abuse.record_issuers`,
      };
    }
    if (bytes > this.#cfg.recordMaxBytes) {
      return { reason: 'size', why: `the record is ${bytes} bytes, more than abuse.record_max_bytes ${this.#cfg.recordMaxBytes}` };
    }
    return undefined;
  }

  /**
   * Takes one token of `issuer`'s bucket for a verified record: undefined when taken, a `rate`
   * refusal when the bucket is empty. Trust roots and listed issuers (the operator's own keys)
   * are not rate-limited.
   */
  charge(issuer: Did): RecordRefusal | undefined {
    if (this.#roots.has(issuer) || this.#listed.has(issuer) || this.#rate.take(issuer)) return undefined;
    return { reason: 'rate', why: `too many records from ${issuer} (abuse.record_burst ${this.#cfg.recordBurst}); retry later` };
  }
}
