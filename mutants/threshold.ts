/**
 * Mutants of caller authentication with threshold actors (spec §11, §2.2, C13): the product's
 * FROST rounds (frost/sign.ts), its trusted dealer (frost/dealer.ts), and the node's caller
 * signature check. Format: see `scripts/mutants.ts`.
 */
import type { Mutant } from '../scripts/mutants.ts';

export default [
  {
    id: 'threshold-package-below-min',
    equivalent:
      "noble's signShare refuses a package with fewer than min commitments itself (it throws, and signShare turns that into the same frost-bad-package); the product's check is defence in depth",
    file: 'frost/sign.ts',
    find: 'if (n < pub.min || n > pub.max) return bad(',
    replace: 'if (n < 1 || n > pub.max) return bad(',
    classes: ['C13'],
  },
  {
    id: 'threshold-own-commitment-unchecked',
    equivalent:
      "noble's signShare refuses a package whose commitment for this identifier is not the one made from these nonces (same frost-bad-package through signShare's catch)",
    file: 'frost/sign.ts',
    find: 'if (!bytesEqual(own.hiding, mine.hiding) || !bytesEqual(own.binding, mine.binding)) return bad(',
    replace: 'if (!bytesEqual(own.hiding, own.hiding)) return bad(',
    classes: ['C13'],
  },
  {
    id: 'threshold-duplicate-signer',
    equivalent: "noble refuses a commitment list that repeats an identifier (same frost-bad-package through signShare's catch)",
    file: 'frost/sign.ts',
    find: 'if (seen.has(c.identifier)) return bad(',
    replace: 'if (seen.has(c.identifier) && n > pub.max) return bad(',
    classes: ['C13'],
  },
  {
    id: 'threshold-nonce-reuse',
    file: 'frost/sign.ts',
    find: 'if (isZero(nonces.hiding) || isZero(nonces.binding)) {',
    replace: 'if (isZero(nonces.hiding) && isZero(nonces.binding) && nonces.hiding.length === 0) {',
    classes: ['C13'],
  },
  {
    id: 'threshold-shares-unverified',
    file: 'frost/sign.ts',
    // The aggregate is the one check of the shares now (RFC 9591 §5.3, as frost-rs): returned
    // unverified, a bad share makes a signature that does not verify instead of a refusal.
    find: '  if (verify(parseDid(groupDid(pub)), pkg.message, sig)) return ok(sig);',
    replace: '  if (sig.length === 64 || verify(parseDid(groupDid(pub)), pkg.message, sig)) return ok(sig);',
    classes: ['C13'],
  },
  {
    id: 'threshold-dealer-degree-off-by-one',
    file: 'frost/dealer.ts',
    find: 'const signers = { min: t.min, max: t.max };',
    replace: 'const signers = { min: t.min - 1, max: t.max };',
    classes: ['C13'],
  },
  {
    id: 'threshold-node-caller-signature-ignored',
    file: 'node/enforcer.ts',
    find: '      const sigOk = this.#d.pool ? await this.#d.pool.verify(req.caller, signed, req.signature) : callerSignatureOk(req, signed);',
    replace:
      '      const sigOk = this.#d.pool ? await this.#d.pool.verify(req.caller, signed, req.signature) : callerSignatureOk(req, signed) || req.signature.length === 64;',
    classes: ['C13'],
  },
  {
    id: 'threshold-coordinator-signs-short',
    file: 'frost/coordinator.ts',
    find: 'if (commitments.size < needed) {',
    replace: 'if (commitments.size < Math.min(needed, 1)) {',
    classes: ['C18'],
  },
] satisfies Mutant[];
