/**
 * Chain verification (spec §4.2, with delegation depth §4.4; conformance C7, C10).
 *
 * A delegation chain is presented root first, leaf last. {@link verifyChain} checks it in two
 * passes, each root first, so the first failing link is the one reported:
 *
 * 1. structure, with no signature work (a malformed chain costs no crypto):
 *    the chain is non-empty and at most {@link MAX_CHAIN_LENGTH} links; the root has no parent;
 *    every later link is a valid hop from the link before it (`checkHop` in `grant.ts`): its
 *    parent is that link's id, it is issued by that link's subject, that link is not leaf-only
 *    (`delegate_depth` 0), and it narrows on every axis (resource, actions, budget, expiry,
 *    depth);
 * 2. signatures: every link's issuer signature verifies (`verifyGrantSignature`, cached).
 *
 * Refusals: `chain-broken` (structure, including a hop under a leaf-only parent — §4.4 maps
 * "delegation forbidden" to `chain-broken` on the wire), `attenuation-violation` (a hop that
 * amplifies), `bad-signature`. A spliced chain (a link taken from another chain) fails the
 * parent-link check and is `chain-broken`.
 */
import type { Deny } from './deny.ts';
import { DenyReasons } from './deny.ts';
import { type SignedGrant, checkHop, grantId, verifyGrantSignature } from './grant.ts';
import type { ContentId } from './hash.ts';
import { type Result, err, ok } from './result.ts';

/** The most links a chain may have (root included); longer chains are `chain-broken`. */
export const MAX_CHAIN_LENGTH = 32;

/**
 * Verifies `chain` (root first) hop by hop (§4.2, §4.4). Returns the grant ids, root first, or
 * the refusal with the failing link's index (0 = root): `chain-broken` | `attenuation-violation`
 * | `bad-signature`. Pure; never throws on well-formed grants.
 */
export function verifyChain(chain: readonly SignedGrant[]): Result<ContentId[], Deny> {
  const n = chain.length;
  if (n === 0) return err({ reason: DenyReasons.CHAIN_BROKEN, why: 'empty chain' });
  if (n > MAX_CHAIN_LENGTH) {
    return err({
      reason: DenyReasons.CHAIN_BROKEN,
      link: MAX_CHAIN_LENGTH,
      why: `chain longer than ${MAX_CHAIN_LENGTH} links`,
    });
  }
  const root = chain[0]!.grant;
  if (root.parent !== undefined) {
    return err({ reason: DenyReasons.CHAIN_BROKEN, link: 0, why: 'the root names a parent' });
  }
  const ids: ContentId[] = [grantId(root)];
  for (let i = 1; i < n; i++) {
    const parent = chain[i - 1]!.grant;
    const child = chain[i]!.grant;
    const hop = checkHop(parent, ids[i - 1]!, child);
    if (!hop.ok) return err({ reason: hop.error.reason, link: i, why: hop.error.why });
    ids.push(grantId(child));
  }
  for (let i = 0; i < n; i++) {
    if (!verifyGrantSignature(chain[i]!)) {
      return err({ reason: DenyReasons.BAD_SIGNATURE, link: i, why: 'issuer signature does not verify' });
    }
  }
  return ok(ids);
}
