/**
 * Mutants of revocation (spec §4.3, C6) and trust roots (§7, C15): the authority checks of core,
 * the node's revocation store (waiting revocations, boot load), and the decision's revocation and
 * trust-root checks on the direct and chained paths. Format: see `scripts/mutants.ts`.
 */
import type { Mutant } from '../scripts/mutants.ts';

export default [
  {
    id: 'revocation-holder-may-revoke',
    file: 'core/revocation.ts',
    find: 'if (sr.body.revoked_by !== grant.issuer) {',
    replace: 'if (sr.body.revoked_by !== grant.issuer && sr.body.revoked_by !== grant.subject) {',
    classes: ['C6'],
  },
  {
    id: 'revocation-signature-unchecked',
    file: 'core/revocation.ts',
    find: 'if (!verifyBody({ body: revocationToCbor(sr.body), signature: sr.signature }, sr.body.revoked_by)) {',
    replace:
      'if (!verifyBody({ body: revocationToCbor(sr.body), signature: sr.signature }, sr.body.revoked_by) && sr.signature.length !== 64) {',
    classes: ['C6'],
  },
  {
    id: 'revocation-parent-id-accepted',
    file: 'core/revocation.ts',
    find: 'if (sr.body.grant_id !== grantId(grant)) {',
    replace: 'if (sr.body.grant_id !== grantId(grant) && sr.body.grant_id !== grant.parent) {',
    classes: ['C6'],
  },
  {
    id: 'revocation-chained-leaf-only',
    file: 'core/decision.ts',
    find: '  for (let i = 0; i < n; i++) {\n    if (state.revoked.has(ids[i]!)) {',
    replace: '  for (let i = n - 1; i < n; i++) {\n    if (state.revoked.has(ids[i]!)) {',
    classes: ['C6'],
  },
  {
    id: 'revocation-chained-root-skipped',
    file: 'core/decision.ts',
    find: '  for (let i = 0; i < n; i++) {\n    if (state.revoked.has(ids[i]!)) {',
    replace: '  for (let i = 1; i < n; i++) {\n    if (state.revoked.has(ids[i]!)) {',
    classes: ['C6'],
  },
  {
    id: 'revocation-direct-path-unchecked',
    file: 'core/decision.ts',
    find: "if (state.revoked.has(id)) return { reason: DenyReasons.REVOKED, link: 0, why: 'the grant is revoked' };",
    replace: '',
    classes: ['C6'],
  },
  {
    id: 'revocation-node-waiting-first-signer',
    file: 'node/revocations.ts',
    find: 'const byIssuer = waiting.get(sg.grant.issuer);',
    replace: 'const byIssuer = waiting.values().next().value;',
    classes: ['C6'],
  },
  {
    id: 'revocation-node-waiting-unverified',
    file: 'node/revocations.ts',
    find: "    if (!verifyBody({ body: revocationToCbor(sr.body), signature: sr.signature }, sr.body.revoked_by)) {\n      return err({ code: 'revocation-refused'",
    replace: "    if (sr.signature.length !== 64) {\n      return err({ code: 'revocation-refused'",
    classes: ['C6'],
  },
  {
    id: 'revocation-node-known-grant-ignored',
    file: 'node/revocations.ts',
    find: 'const grant = this.#known.get(id) ?? presented;',
    replace: 'const grant = presented;',
    classes: ['C6'],
  },
  {
    id: 'revocation-node-boot-not-applied',
    file: 'node/revocations.ts',
    find: 'if (this.set.admit(sr, grant).ok) {',
    replace: 'if (new RevocationSet().admit(sr, grant).ok) {',
    classes: ['C6'],
  },
  {
    id: 'trust-empty-list-open',
    file: 'core/trust.ts',
    find: 'return listed === undefined || listed.has(rootIssuer);',
    replace: 'return listed === undefined || listed.size === 0 || listed.has(rootIssuer);',
    classes: ['C15'],
  },
  {
    id: 'trust-chained-leaf-issuer',
    file: 'core/decision.ts',
    find: 'if (!state.trust.allows(f.resource, chain[0]!.grant.issuer)) {',
    replace: 'if (!state.trust.allows(f.resource, chain[chain.length - 1]!.grant.issuer)) {',
    classes: ['C15'],
  },
  {
    id: 'trust-direct-subject-compared',
    file: 'core/decision.ts',
    find: 'if (!state.trust.allows(f.resource, g.issuer)) {',
    replace: 'if (!state.trust.allows(f.resource, g.subject)) {',
    classes: ['C15'],
  },
  {
    id: 'trust-config-empty-dropped',
    file: 'node/config.ts',
    find: 'for (const r of cfg.resources) if (r.trustRoots !== undefined) out[r.id] = [...r.trustRoots];',
    replace: 'for (const r of cfg.resources) if (r.trustRoots?.length) out[r.id] = [...r.trustRoots];',
    classes: ['C15'],
  },
] satisfies Mutant[];
