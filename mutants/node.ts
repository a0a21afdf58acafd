/**
 * Mutants of the node's ledger and receipt log (node/enforcer.ts, node/receiptlog.ts): a deny
 * that debits, a chain whose ancestors are not debited, a replayed request debited twice,
 * denials left out of the log, the caller signature checked under the wrong key.
 */
import type { Mutant } from '../scripts/mutants.ts';

export default [
  {
    id: 'enforcer-debit-on-deny',
    file: 'node/enforcer.ts',
    find: "if (d.verdict === 'allow') this.#d.ledger.debit(d.chainIds, cost.uj);",
    replace: 'this.#d.ledger.debit(d.chainIds, cost.uj);',
    classes: ['C3', 'C-neg'],
  },
  {
    id: 'enforcer-debit-leaf-only',
    file: 'node/enforcer.ts',
    find: "if (d.verdict === 'allow') this.#d.ledger.debit(d.chainIds, cost.uj);",
    replace: "if (d.verdict === 'allow') this.#d.ledger.debit(d.chainIds.slice(-1), cost.uj);",
    classes: ['C3', 'C7'],
  },
  {
    id: 'enforcer-debit-root-only',
    file: 'node/enforcer.ts',
    find: "if (d.verdict === 'allow') this.#d.ledger.debit(d.chainIds, cost.uj);",
    replace: "if (d.verdict === 'allow') this.#d.ledger.debit(d.chainIds.slice(0, 1), cost.uj);",
    classes: ['C7', 'C16'],
  },
  {
    id: 'enforcer-debit-on-budget-policy-deny',
    file: 'node/enforcer.ts',
    find: "if (d.verdict === 'allow') this.#d.ledger.debit(d.chainIds, cost.uj);",
    replace: "if (d.verdict === 'allow' || d.deny.reason === 'budget-exceeded') this.#d.ledger.debit(d.chainIds, cost.uj);",
    classes: ['C3'],
  },
  {
    id: 'enforcer-request-index-not-kept',
    file: 'node/enforcer.ts',
    find: '      this.#d.requests.set(rid, seq, req.now);\n',
    replace: '',
    classes: ['C8'],
  },
  {
    id: 'enforcer-denials-not-logged',
    file: 'node/enforcer.ts',
    find: 'const durable = this.#d.log.appendReceipt(seq, receipt);',
    replace: "const durable = d.verdict === 'allow' ? this.#d.log.appendReceipt(seq, receipt) : Promise.resolve();",
    classes: ['C-neg', 'C3'],
  },
  {
    id: 'enforcer-caller-key-from-leaf',
    file: 'node/enforcer.ts',
    find: 'return verify(parseDid(req.caller), signed, req.signature);',
    replace: 'return verify(parseDid(req.chain[req.chain.length - 1]?.grant.subject ?? req.caller), signed, req.signature);',
    classes: ['C-neg'],
  },
  {
    id: 'receiptlog-get-off-by-one',
    file: 'node/receiptlog.ts',
    find: 'return await this.#db.get(receiptKey(seq));',
    replace: 'return await this.#db.get(receiptKey(seq + 1));',
    classes: ['C8'],
  },
] satisfies Mutant[];
