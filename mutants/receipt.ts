/**
 * Mutants of receipts and replay (spec §8, §8.1; core/receipt.ts, core/replay.ts): chain_ids
 * missing a link, the steward (kid) check weakened, fields sealed from the wrong source, replay
 * debiting only the leaf or debiting denials, a tampered receipt counted at the wrong place, a
 * signature left unchecked where the caller vouched for nothing.
 */
import type { Mutant } from '../scripts/mutants.ts';

export default [
  {
    id: 'receipt-chain-ids-without-root',
    file: 'core/receipt.ts',
    find: '...(ids.length > 1 ? { chain_ids: [...ids] } : {}),',
    replace: '...(ids.length > 1 ? { chain_ids: ids.slice(1) } : {}),',
    classes: ['C16'],
  },
  {
    id: 'receipt-steward-format-only',
    file: 'core/receipt.ts',
    find: 'if (expectedSteward !== undefined && stewardDid !== expectedSteward) {',
    replace: "if (expectedSteward !== undefined && !stewardDid.startsWith('did:key:')) {",
    classes: ['C5'],
  },
  {
    id: 'receipt-remaining-without-spend',
    file: 'core/receipt.ts',
    find: 'budget_remaining_uj: decision.remainingUj,',
    replace: 'budget_remaining_uj: leaf.budget_uj - req.cost.uj,',
    classes: ['C5'],
  },
  {
    id: 'receipt-deny-cost-zero',
    file: 'core/receipt.ts',
    find: 'cost_uj: req.cost.uj,',
    replace: "cost_uj: decision.verdict === 'allow' ? req.cost.uj : 0n,",
    classes: ['C5'],
  },
  {
    id: 'replay-debits-leaf-only',
    file: 'core/replay.ts',
    find: 'return core.chain_ids ?? [core.grant_id];',
    replace: 'return [core.grant_id];',
    classes: ['C16', 'C14'],
  },
  {
    id: 'replay-debits-denials',
    file: 'core/replay.ts',
    find: "    if (core.verdict === 'allow') {\n      ledger.debit(debitedIds(core), core.cost_uj);",
    replace: "    ledger.debit(debitedIds(core), core.cost_uj);\n    if (core.verdict === 'allow') {",
    classes: ['C14', 'C16', 'C3'],
  },
  {
    id: 'replay-rejected-index-off-by-one',
    file: 'core/replay.ts',
    find: 'rejected.push({ index, code: opened.error.code, why: opened.error.why });',
    replace: 'rejected.push({ index: index + 1, code: opened.error.code, why: opened.error.why });',
    classes: ['C14'],
  },
  {
    id: 'replay-attribution-counts-cost-of-denials',
    file: 'core/replay.ts',
    find: '      a.refused++;\n',
    replace: '      a.refused++;\n      a.uj += core.cost_uj;\n',
    classes: ['C14'],
  },
  {
    id: 'node-replay-rejected-seq-is-slice-index',
    file: 'node/replay.ts',
    find: 'rejected: r.rejected.map((x) => ({ ...x, seq: job.seqs[x.index]! })),',
    replace: 'rejected: r.rejected.map((x) => ({ ...x, seq: x.index })),',
    classes: ['C14'],
  },
  {
    id: 'node-replay-attribution-overwritten',
    file: 'node/replay.ts',
    find: 'm.allowed += a.allowed;',
    replace: 'm.allowed = a.allowed;',
    classes: ['C14'],
  },
  {
    id: 'node-replay-slice-start-off-by-one',
    file: 'node/replay.ts',
    find: 'nextStart = seqs[seqs.length - 1]! + 1;',
    replace: 'nextStart = seqs[seqs.length - 1]!;',
    classes: ['C14'],
  },
  {
    id: 'node-replay-debits-first-slice-only',
    file: 'node/replay.ts',
    find: 'for (const [id, uj] of r.debits) ledger.debit([id], uj);',
    replace: 'for (const [id, uj] of r.debits) if (ledger.spent(id) === 0n) ledger.debit([id], uj);',
    classes: ['C14', 'C16'],
  },
  {
    id: 'receipt-core-steward-length-only',
    file: 'core/receipt.ts',
    find: 'if (core.steward !== stewardDid) {',
    replace: 'if (core.steward.length !== stewardDid.length) {',
    classes: ['C5'],
  },
  {
    id: 'receipt-signature-checked-over-payload',
    file: 'core/receipt.ts',
    find: 'if (checkSignature && !verify(pub, sigStructure(msg.protectedBytes, msg.payload), msg.signature)) {',
    replace: 'if (checkSignature && !verify(pub, sigStructure(new Uint8Array(0), msg.payload), msg.signature)) {',
    classes: ['C5'],
  },
  {
    id: 'receipt-open-skips-signature',
    file: 'core/receipt.ts',
    find: 'return openWith(bytes, expectedSteward, readReceiptCore, true);',
    replace: 'return openWith(bytes, expectedSteward, readReceiptCore, false);',
    classes: ['C5', 'C14'],
  },
  {
    id: 'replay-vouched-by-default',
    file: 'core/replay.ts',
    find: 'opts.vouched !== true ? openReceipt : steward',
    replace: 'opts.vouched === false ? openReceipt : steward',
    classes: ['C14'],
  },
] satisfies Mutant[];
