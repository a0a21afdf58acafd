/**
 * Mutants of the decision (spec §7, §4.2; core/decision.ts): each of §7's checks weakened or
 * dropped, their order changed, `>` vs `>=` on budget, and the budget of ancestors skipped.
 */
import type { Mutant } from '../scripts/mutants.ts';

export default [
  {
    id: 'decision-direct-budget-ge',
    file: 'core/decision.ts',
    find: 'if (spent + req.cost.uj > g.budget_uj) return budgetDeny(req.cost.uj, g.budget_uj, spent, 0);',
    replace: 'if (spent + req.cost.uj >= g.budget_uj) return budgetDeny(req.cost.uj, g.budget_uj, spent, 0);',
    classes: ['C3'],
  },
  {
    id: 'decision-chained-budget-ge',
    file: 'core/decision.ts',
    find: 'if (spent + req.cost.uj > g.budget_uj) return budgetDeny(req.cost.uj, g.budget_uj, spent, i);',
    replace: 'if (spent + req.cost.uj >= g.budget_uj) return budgetDeny(req.cost.uj, g.budget_uj, spent, i);',
    classes: ['C3', 'C7'],
  },
  {
    id: 'decision-chained-budget-leaf-only',
    file: 'core/decision.ts',
    find: 'for (let i = 0; i < n; i++) {\n    const g = chain[i]!.grant;\n    const spent',
    replace: 'for (let i = n - 1; i < n; i++) {\n    const g = chain[i]!.grant;\n    const spent',
    classes: ['C3', 'C7', 'C16'],
  },
  {
    id: 'decision-direct-control-tool-call-only',
    file: 'core/decision.ts',
    find: "if (f.trust !== 'control') return { reason: DenyReasons.UNTRUSTED_CONTROL",
    replace: "if (f.trust !== 'control' && f.kind === 'tool-call') return { reason: DenyReasons.UNTRUSTED_CONTROL",
    classes: ['C4'],
  },
  {
    id: 'decision-chained-verify-before-control',
    file: 'core/decision.ts',
    find: "  if (f.trust !== 'control') {\n    return denyOf(state, chain, leaf, { reason: DenyReasons.UNTRUSTED_CONTROL, why: 'a data frame cannot exercise a capability' });\n  }\n  const verified = verifyChain(chain);\n  if (!verified.ok) return denyOf(state, chain, leaf, verified.error);\n",
    replace:
      "  const verified = verifyChain(chain);\n  if (!verified.ok) return denyOf(state, chain, leaf, verified.error);\n  if (f.trust !== 'control') {\n    return denyOf(state, chain, leaf, { reason: DenyReasons.UNTRUSTED_CONTROL, why: 'a data frame cannot exercise a capability' });\n  }\n",
    classes: ['C4'],
  },
  {
    id: 'decision-direct-issuer-may-call',
    file: 'core/decision.ts',
    find: 'if (req.caller !== g.subject) return',
    replace: 'if (req.caller !== g.subject && req.caller !== g.issuer) return',
    classes: ['C-neg'],
  },
  {
    id: 'decision-chained-parent-holder-may-call',
    file: 'core/decision.ts',
    find: 'if (req.caller !== leaf.subject) return',
    replace: 'if (req.caller !== leaf.subject && req.caller !== leaf.issuer) return',
    classes: ['C-neg'],
  },
  {
    id: 'decision-direct-expiry-grace-second',
    file: 'core/decision.ts',
    find: 'if (isExpired(g, req.nowS)) return { reason: DenyReasons.EXPIRED, link: 0,',
    replace: 'if (isExpired(g, req.nowS - 1)) return { reason: DenyReasons.EXPIRED, link: 0,',
    classes: ['C-neg'],
  },
  {
    id: 'decision-expired-after-expiry',
    file: 'core/decision.ts',
    find: 'return g.expiry !== 0 && nowS >= g.expiry;',
    replace: 'return g.expiry !== 0 && nowS > g.expiry;',
    classes: ['C-neg'],
  },
  {
    id: 'decision-chained-expiry-root-only',
    file: 'core/decision.ts',
    find: 'for (let i = 0; i < n; i++) {\n    const g = chain[i]!.grant;\n    if (isExpired',
    replace: 'for (let i = 0; i < 1; i++) {\n    const g = chain[i]!.grant;\n    if (isExpired',
    classes: ['C-neg'],
  },
  {
    id: 'decision-action-any-when-nonempty',
    file: 'core/decision.ts',
    find: 'if (!g.capability.actions.includes(f.action)) {',
    replace: 'if (g.capability.actions.length === 0) {',
    classes: ['C5'],
  },
  {
    id: 'decision-resource-by-grant-id',
    file: 'core/decision.ts',
    find: 'if (f.resource !== g.capability.resource) {',
    replace: 'if (f.grant_id !== grantId(g)) {',
    classes: ['C1'],
  },
  {
    id: 'decision-chained-remaining-before-debit',
    file: 'core/decision.ts',
    find: "return { verdict: 'allow', chainIds: ids, leaf, remainingUj: leaf.budget_uj - leafSpent - req.cost.uj };",
    replace: "return { verdict: 'allow', chainIds: ids, leaf, remainingUj: leaf.budget_uj - leafSpent };",
    classes: ['C5'],
  },
  {
    // A delegated grant presented without its chain (a lone grant that names a parent) decided
    // as if it were a root: its ancestors' signatures, revocations and budgets never checked.
    id: 'decision-lone-delegated-as-root',
    file: 'core/decision.ts',
    find: 'if (chain.length === 1 && only.grant.parent === undefined) return decideDirect(req, state, only);',
    replace: 'if (chain.length === 1) return decideDirect(req, state, only);',
    classes: ['C7'],
  },
] satisfies Mutant[];
