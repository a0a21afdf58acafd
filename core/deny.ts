/**
 * Deny reasons (spec §7, §4.2), spelled exactly as the spec spells them. One const table, as
 * JetStream's API codes are; each refusal carries a typed payload for people and logs.
 */
export const DenyReasons = {
  UNTRUSTED_CONTROL: 'untrusted-control',
  REVOKED: 'revoked',
  UNTRUSTED_ROOT: 'untrusted-root',
  WRONG_RESOURCE: 'wrong-resource',
  WRONG_SUBJECT: 'wrong-subject',
  BAD_SIGNATURE: 'bad-signature',
  EXPIRED: 'expired',
  ACTION_NOT_GRANTED: 'action-not-granted',
  BUDGET_EXCEEDED: 'budget-exceeded',
  CHAIN_BROKEN: 'chain-broken',
  ATTENUATION_VIOLATION: 'attenuation-violation',
} as const;

/** One of the spec's deny-reason strings. */
export type DenyReason = (typeof DenyReasons)[keyof typeof DenyReasons];

/** Every deny reason, in the spec's order of checks (§7) followed by the chain reasons (§4.2). */
export const ALL_DENY_REASONS: readonly DenyReason[] = Object.values(DenyReasons);

/** A refusal: the spec's reason plus a typed payload (which link, by how much…). */
export interface Deny {
  readonly reason: DenyReason;
  /** Index of the chain link that failed (0 = root), when the failure is tied to one link. */
  readonly link?: number;
  /** Human-readable explanation; never parsed. */
  readonly why?: string;
  /** For budget-exceeded: the requested cost and what remained at the failing link (µJ). */
  readonly requestedUj?: bigint;
  readonly remainingUj?: bigint;
  /** For expired: the link's expiry (unix seconds). */
  readonly expiredAtS?: number;
}

/** True when `s` is one of the spec's deny-reason strings. */
export function isDenyReason(s: unknown): s is DenyReason {
  return typeof s === 'string' && (ALL_DENY_REASONS as readonly string[]).includes(s);
}
