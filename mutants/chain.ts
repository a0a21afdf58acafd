/**
 * Mutants of attenuation and chain verification (spec §4.1, §4.2, §4.4; core/grant.ts,
 * core/chain.ts): amplifications let through, splices accepted, signatures checked under the
 * wrong key or not on every link.
 */
import type { Mutant } from '../scripts/mutants.ts';

export default [
  {
    id: 'grant-verify-under-subject',
    file: 'core/grant.ts',
    find: 'good = verify(parseDid(sg.grant.issuer), grantBytes(sg.grant), sg.signature);',
    replace: 'good = verify(parseDid(sg.grant.subject), grantBytes(sg.grant), sg.signature);',
    classes: ['C1'],
  },
  {
    id: 'hop-budget-unchecked-under-root',
    file: 'core/grant.ts',
    find: 'if (child.budget_uj > parent.budget_uj) return',
    replace: 'if (child.budget_uj > parent.budget_uj && parent.parent !== undefined) return',
    classes: ['C2'],
  },
  {
    id: 'hop-never-expiring-child',
    file: 'core/grant.ts',
    find: '(child.expiry === 0 || child.expiry > parent.expiry)',
    replace: '(child.expiry > parent.expiry)',
    classes: ['C2'],
  },
  {
    id: 'hop-depth-not-narrowed',
    file: 'core/grant.ts',
    find: 'child.delegate_depth > parent.delegate_depth - 1',
    replace: 'child.delegate_depth > parent.delegate_depth',
    classes: ['C2', 'C10'],
  },
  {
    id: 'hop-first-action-only',
    file: 'core/grant.ts',
    find: 'for (const a of child.capability.actions) {',
    replace: 'for (const a of child.capability.actions.slice(0, 1)) {',
    classes: ['C2'],
  },
  {
    id: 'hop-issuer-wrong-field',
    file: 'core/grant.ts',
    find: 'if (child.issuer !== parent.subject) {',
    replace: 'if (child.issuer !== parent.subject && child.issuer !== parent.issuer) {',
    classes: ['C2', 'C7'],
  },
  {
    id: 'attenuate-issuer-may-delegate',
    file: 'core/grant.ts',
    find: 'if (holder.did !== p.subject) return',
    replace: 'if (holder.did !== p.subject && holder.did !== p.issuer) return',
    classes: ['C2'],
  },
  {
    id: 'chain-parent-presence-only',
    file: 'core/grant.ts',
    find: "if (child.parent !== parentId) return err({ reason: 'chain-broken'",
    replace: "if (child.parent === undefined) return err({ reason: 'chain-broken'",
    classes: ['C7'],
  },
  {
    id: 'chain-root-signature-skipped',
    file: 'core/chain.ts',
    find: 'for (let i = 0; i < n; i++) {\n    if (!verifyGrantSignature(chain[i]!)) {',
    replace: 'for (let i = 1; i < n; i++) {\n    if (!verifyGrantSignature(chain[i]!)) {',
    classes: ['C-neg', 'C7'],
  },
  {
    id: 'chain-root-parent-unchecked',
    file: 'core/chain.ts',
    find: 'if (root.parent !== undefined) {',
    replace: 'if (root.parent !== undefined && n === 1) {',
    classes: ['C7'],
  },
] satisfies Mutant[];
