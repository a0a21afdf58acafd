/**
 * The node side of rebalancing (spec §4.5 baseline): once a revocation is in force at this point,
 * publish a signed close record of this point's final spend on the revoked grant
 * (`shards/close.ts`), so the rebalancer can re-issue exactly what is left.
 */
import { type Actor, type ContentId, type Did, type LedgerView, revocationId, type SignedRevocation } from '../core/index.ts';
import { encodeShardClose, signShardClose } from './close.ts';

/** Where close records go (the channel bus implements it). */
export interface CloseTransport {
  publishClose(grantId: ContentId, point: Did, bytes: Uint8Array): Promise<void>;
}

/** Publishes close records for revocations a node has taken. */
export class ShardCloser {
  readonly #transport: CloseTransport;
  readonly #steward: Actor;
  readonly #ledger: LedgerView;
  /** Close records published, and publications that failed (retried on the next delivery). */
  readonly counts = { published: 0, failed: 0 };

  constructor(transport: CloseTransport, steward: Actor, ledger: LedgerView) {
    this.#transport = transport;
    this.#steward = steward;
    this.#ledger = ledger;
  }

  /**
   * Publishes this point's spend on the revoked grant. Call only once the revocation is in force
   * here (the node's sink took it), so no later decision can add to the figure. Never rejects.
   */
  async closed(sr: SignedRevocation): Promise<void> {
    const sc = signShardClose(
      {
        grant_id: sr.body.grant_id,
        point: this.#steward.did,
        spent_uj: this.#ledger.spent(sr.body.grant_id),
        revocation: revocationId(sr.body),
      },
      this.#steward,
    );
    try {
      await this.#transport.publishClose(sr.body.grant_id, this.#steward.did, encodeShardClose(sc));
      this.counts.published++;
    } catch {
      this.counts.failed++;
    }
  }
}
