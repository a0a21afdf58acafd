/**
 * Mutants of budget channels (spec §4.5 profile, C17): core's statement ledger, spending rule,
 * bound and overdraft proof, the settlement that reads statements off the stream, and the audit.
 * Format: see `scripts/mutants.ts`.
 */
import type { Mutant } from '../scripts/mutants.ts';

export default [
  {
    id: 'statement-stale-by-one-accepted',
    file: 'core/statement.ts',
    find: 'if (s.seq <= prev.seq) {',
    replace: 'if (s.seq < prev.seq - 1) {',
    classes: ['C17'],
  },
  {
    id: 'statement-same-seq-accepted',
    file: 'core/statement.ts',
    find: 'if (s.seq <= prev.seq) {',
    replace: 'if (s.seq < prev.seq) {',
    classes: ['C17'],
  },
  {
    id: 'statement-regress-by-one-accepted',
    file: 'core/statement.ts',
    find: 'if (s.spent_uj < prev.spent_uj) {',
    replace: 'if (s.spent_uj + 1n < prev.spent_uj) {',
    classes: ['C17'],
  },
  {
    id: 'statement-membership-unchecked',
    file: 'core/statement.ts',
    find: 'if (this.#members !== undefined && !this.#members.has(s.point)) {',
    replace: 'if (this.#members !== undefined && this.#members.size === 0) {',
    classes: ['C17'],
  },
  {
    id: 'statement-signature-unchecked',
    file: 'core/statement.ts',
    find: '  return verifyBody(ss, ss.body.point);',
    replace: '  return verifyBody(ss, ss.body.point) || ss.signature.length === 64;',
    classes: ['C17'],
  },
  {
    id: 'statement-signed-over-wrong-bytes',
    file: 'core/statement.ts',
    find: '  return signBody(statement, point);',
    replace:
      '  return { body: statement, signature: signBody({ grant_id: statement.grant_id, point: statement.point, seq: statement.seq }, point).signature };',
    classes: ['C17'],
  },
  {
    id: 'statement-settled-max-not-sum',
    file: 'core/statement.ts',
    find: '    for (const ss of this.#latest.values()) total += ss.body.spent_uj;',
    replace: '    for (const ss of this.#latest.values()) if (ss.body.spent_uj > total) total = ss.body.spent_uj;',
    classes: ['C17'],
  },
  {
    id: 'statement-proof-max-not-sum',
    file: 'core/statement.ts',
    find: '    points.add(ss.body.point);\n    total += ss.body.spent_uj;',
    replace: '    points.add(ss.body.point);\n    if (ss.body.spent_uj > total) total = ss.body.spent_uj;',
    classes: ['C17'],
  },
  {
    id: 'statement-proof-duplicate-point',
    file: 'core/statement.ts',
    find: '    if (points.has(ss.body.point)) {',
    // The set looked up by the grant id (never a point, so no repeat is ever found). Through
    // String(): the ContentId brand refuses a content id where a Did is wanted at compile time.
    replace: '    if (points.has(String(ss.body.grant_id))) {',
    classes: ['C17'],
  },
  {
    id: 'statement-proof-budget-unchecked',
    file: 'core/statement.ts',
    find: '    if (grant.budget_uj !== proof.budget) {',
    replace: '    if (grant.budget_uj < proof.budget) {',
    classes: ['C17'],
  },
  {
    id: 'statement-bound-off-by-one-window',
    file: 'core/statement.ts',
    find: '  return sum - min;',
    replace: '  return sum;',
    classes: ['C17'],
  },
  {
    id: 'statement-bound-drops-largest',
    file: 'core/statement.ts',
    find: '    if (w < min) min = w;',
    replace: '    if (w > min) min = w;',
    classes: ['C17'],
  },
  {
    id: 'statement-window-without-cost',
    file: 'core/statement.ts',
    find: '  if (spendAfter - s.mySpentAtLastSettle > s.windowUj) {',
    replace: '  if (s.mySpent - s.mySpentAtLastSettle > s.windowUj) {',
    classes: ['C17'],
  },
  {
    id: 'statement-budget-check-strict',
    file: 'core/statement.ts',
    find: '  if (spendAfter + s.peersSettled > s.budget) {',
    replace: '  if (spendAfter > s.budget) {',
    classes: ['C17'],
  },
  {
    id: 'settlement-misplaced-accepted',
    file: 'channel/settlement.ts',
    find: '    if (pointHash(ss.body.point) !== s.pointHash) {',
    replace: '    if (s.pointHash.length === 0) {',
    classes: ['C17'],
  },
  {
    id: 'settlement-completes-despite-refusals',
    file: 'channel/settlement.ts',
    find: '      if (refused.length > 0) return fail(',
    replace: '      if (refused.length < 0) return fail(',
    classes: ['C17'],
  },
  {
    id: 'settlement-own-spend-counted-as-peers',
    file: 'channel/settlement.ts',
    find: '      this.#peers = this.#ledger.peersSettled(this.self.did);',
    replace: '      this.#peers = this.#ledger.settledSpent() - statement.spent_uj + this.#baseline;',
    classes: ['C17'],
  },
  {
    id: 'settlement-allows-before-first-settle',
    file: 'channel/settlement.ts',
    find: '    if (!this.#settled) {\n      this.counts.refusedSpends++;',
    replace: '    if (!this.#settled && this.#seq < 0) {\n      this.counts.refusedSpends++;',
    classes: ['C17'],
  },
  {
    id: 'audit-forged-merged',
    file: 'channel/audit.ts',
    find: '  const refused = admitStored(ledger, stored);\n  return { ledger, refused };',
    replace: '  const refused = admitStored(ledger, stored).filter((r) => r.code !== "forged");\n  return { ledger, refused };',
    classes: ['C17'],
  },
  {
    id: 'channels-commit-skips-leaf',
    file: 'channel/channels.ts',
    find: 'for (const [i, id] of decision.chainIds.entries()) this.#payer(id, req.chain[i])?.p.commit(req.cost.uj);',
    replace: 'for (const [i, id] of decision.chainIds.entries()) if (i > 0) this.#payer(id, req.chain[i])?.p.commit(req.cost.uj);',
    classes: ['C17'],
  },
  {
    id: 'channels-open-before-attach',
    file: 'channel/channels.ts',
    find: 'if (this.#points.size === 0 && this.#specs.some((s) => s.grantId === id)) {',
    replace: 'if (this.#points.size === 0 && this.#specs.length === 0) {',
    classes: ['C17'],
  },
  {
    id: 'channels-enforcer-never-commits',
    file: 'node/enforcer.ts',
    find: 'this.#d.budgetPolicy?.committed?.(dreq, d, receipt);',
    replace: 'void receipt;',
    classes: ['C17'],
  },
  {
    id: 'channels-enforcer-debits-policy-deny',
    file: 'node/enforcer.ts',
    find: "if (d.verdict === 'allow') this.#d.ledger.debit(d.chainIds, cost.uj);",
    replace: "if (d.verdict === 'allow' || d.deny.reason === 'budget-exceeded') this.#d.ledger.debit(d.chainIds, cost.uj);",
    classes: ['C17'],
  },
] satisfies Mutant[];
