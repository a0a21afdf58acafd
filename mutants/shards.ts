/**
 * Mutants of sharded budgets (spec §4.5 baseline, C11): core's mint arithmetic and split plan, the
 * shards/ mint that rebalances from what is left, and the node-side binding of each shard to its
 * one point. Format: see `scripts/mutants.ts`.
 */
import type { Mutant } from '../scripts/mutants.ts';

export default [
  {
    id: 'shards-sum-skips-last-slice',
    file: 'core/shard.ts',
    find: '  for (const [i, s] of slices.entries()) {\n    if (s.budget_uj < 0n)',
    replace: '  for (const [i, s] of slices.slice(0, -1).entries()) {\n    if (s.budget_uj < 0n)',
    classes: ['C11'],
  },
  {
    id: 'shards-sum-skips-first-slice',
    file: 'core/shard.ts',
    find: '    total += s.budget_uj;',
    replace: '    if (i > 0) total += s.budget_uj;',
    classes: ['C11'],
  },
  {
    id: 'shards-over-by-one-accepted',
    file: 'core/shard.ts',
    find: '  if (total > available) {',
    replace: '  if (total > available + 1n) {',
    classes: ['C11'],
  },
  {
    id: 'shards-allocated-ignored',
    file: 'core/shard.ts',
    find: 'const available = budget > allocated ? budget - allocated : 0n;',
    replace: 'const available = budget;',
    classes: ['C11'],
  },
  {
    id: 'shards-negative-slice-accepted',
    file: 'core/shard.ts',
    find: 'if (s.budget_uj < 0n) return err(',
    replace: 'if (s.budget_uj < 0n && total < 0n) return err(',
    classes: ['C11'],
  },
  {
    id: 'shards-split-past-100-accepted',
    file: 'core/shard.ts',
    find: 'if (sumBps > 10_000n) {',
    replace: 'if (sumBps > 10_001n) {',
    classes: ['C11'],
  },
  {
    id: 'shards-rebalance-ignores-consumed',
    file: 'shards/set.ts',
    find: 'const left = parent.grant.budget_uj > consumed ? parent.grant.budget_uj - consumed : 0n;',
    replace: 'const left = parent.grant.budget_uj;',
    classes: ['C11'],
  },
  {
    id: 'shards-spent-at-another-point',
    file: 'shards/binding.ts',
    find: 'if (assigned === point) continue;',
    replace: 'if (assigned !== undefined) continue;',
    classes: ['C11'],
  },
  {
    id: 'shards-set-looked-up-by-subject',
    file: 'shards/binding.ts',
    find: 'link.grant.issuer}`);',
    replace: 'link.grant.subject}`);',
    classes: ['C11'],
  },
  {
    id: 'shards-forged-assignment-taken',
    file: 'shards/binding.ts',
    find: 'if (!verifyShardAssignment(sa)) {',
    replace: 'if (!verifyShardAssignment(sa) && sa.signature.length !== 64) {',
    classes: ['C11'],
  },
  {
    id: 'shards-unready-only-deep-chains',
    file: 'shards/binding.ts',
    find: 'if (!this.#ready) {',
    replace: 'if (!this.#ready && chain.length > 2) {',
    classes: ['C11'],
  },
] satisfies Mutant[];
