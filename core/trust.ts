/**
 * Trust roots (spec §7 "Trust roots", check 3, conformance C15): per guarded resource, the
 * root-issuer keys an enforcement point honours — the local, pairwise shape of an
 * `authorized_keys` file. did:key is self-certifying, so there is no CA and no hierarchy.
 *
 * Rule: an unconfigured resource is open (any root issuer anchors authority); a configured
 * resource honours only its listed root issuers. A resource configured with an EMPTY list is
 * configured and honours nobody (fail-closed): listing a resource is how an operator locks it.
 */
import type { Did } from './didkey.ts';
import type { ContentId } from './hash.ts';
import { asArray, asCid, asDid } from './schema.ts';

/** The root issuers honoured per resource (§7). Immutable once built. */
export class TrustRoots {
  readonly #roots = new Map<ContentId, ReadonlySet<Did>>();

  /**
   * @param roots resource content id → the did:keys honoured as root issuers for it.
   * @throws JcpError `schema` (a key that is not a content id) / `did-invalid` (a bad did:key),
   *   naming the entry.
   */
  constructor(roots: Readonly<Record<ContentId, readonly Did[]>> = {}) {
    for (const [resource, dids] of Object.entries(roots)) {
      const field = `trust_roots.${resource.slice(0, 64)}`;
      asCid(resource, field);
      this.#roots.set(resource, new Set(asArray(dids, field).map((d, i) => asDid(d, `${field}[${i}]`))));
    }
  }

  /**
   * True when `rootIssuer` may anchor authority over `resource` (§7 check 3): the resource is
   * unconfigured, or `rootIssuer` is one of its listed roots. For a chain, pass the root's issuer.
   */
  allows(resource: ContentId, rootIssuer: Did): boolean {
    const listed = this.#roots.get(resource);
    return listed === undefined || listed.has(rootIssuer);
  }

  /** True when `resource` has a trust-root entry (even an empty one). */
  configured(resource: ContentId): boolean {
    return this.#roots.has(resource);
  }

  /** The listed roots of `resource` (empty when unconfigured — check {@link configured}). */
  rootsOf(resource: ContentId): Did[] {
    return [...(this.#roots.get(resource) ?? [])];
  }

  /** The configuration as a plain record (resource → dids), e.g. for printing. */
  toJSON(): Record<ContentId, Did[]> {
    const out: Record<ContentId, Did[]> = {};
    for (const [r, dids] of this.#roots) out[r] = [...dids];
    return out;
  }
}
