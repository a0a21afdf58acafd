/**
 * The spend ledger (spec §7 check 9, §4.2 conservation, §8.1 replay): cumulative µJ allowed per
 * grant id. The decision reads it; only an Allow debits it, and it debits every link of the chain.
 */
import type { Uj } from './energy.ts';
import type { ContentId } from './hash.ts';

/** Read access to spend per grant id (µJ). */
export interface LedgerView {
  /** Cumulative µJ debited from `grantId` (0n when never debited). */
  spent(grantId: ContentId): Uj;
}

/** A mutable in-memory ledger. */
export class Ledger implements LedgerView {
  readonly #spent = new Map<ContentId, Uj>();

  /** Cumulative µJ debited from `grantId`. */
  spent(grantId: ContentId): Uj {
    return this.#spent.get(grantId) ?? 0n;
  }

  /** Debits `costUj` from every id in `chainIds` (root first). Callers debit only on Allow (§7). */
  debit(chainIds: readonly ContentId[], costUj: Uj): void {
    for (const id of chainIds) this.#spent.set(id, this.spent(id) + costUj);
  }

  /**
   * Reverses a debit of `costUj` on every id in `chainIds` (a steward-signed reversal: the
   * endpoint could not run the call, so nothing is charged for it; node/outcome.ts). All or
   * nothing: when any id has less than `costUj` spent, nothing changes.
   * @returns false (and changes nothing) when the credit would take a grant's spend below zero.
   */
  credit(chainIds: readonly ContentId[], costUj: Uj): boolean {
    for (const id of chainIds) if (this.spent(id) < costUj) return false;
    for (const id of chainIds) {
      const left = this.spent(id) - costUj;
      if (left === 0n) this.#spent.delete(id);
      else this.#spent.set(id, left);
    }
    return true;
  }

  /** Every (grant id, µJ spent) pair. */
  entries(): IterableIterator<[ContentId, Uj]> {
    return this.#spent.entries();
  }

  /** Number of grants with any spend. */
  get size(): number {
    return this.#spent.size;
  }
}
