/**
 * Mutants of standing grants (§4.6, C20) and steering (§4.7, C21): core/standing.ts,
 * core/checkpoint.ts, and the node code that puts them in force (node/standing.ts: the webhook
 * server and its durable mint ledger; node/amendments.ts, node/enforcer.ts, node/node.ts: an
 * amendment at a node). Each is a small change the spec forbids; `npm run mutants` applies each
 * to a copy and runs its classes, which must fail. Format: scripts/mutants.ts `Mutant`.
 */
import type { Mutant } from '../scripts/mutants.ts';

const mutants: Mutant[] = [
  // core/standing.ts
  {
    id: 'standing-policy-amplify-ge',
    file: 'core/standing.ts',
    find: 'if (p.per_firing_uj > grant.grant.budget_uj) {',
    replace: 'if (p.per_firing_uj >= grant.grant.budget_uj) {',
    classes: ['C20'],
  },
  {
    id: 'standing-policy-amplify-dropped',
    file: 'core/standing.ts',
    find: 'if (p.per_firing_uj > grant.grant.budget_uj) {',
    replace: 'if (p.per_firing_uj > grant.grant.budget_uj * 2n) {',
    classes: ['C20'],
  },
  {
    id: 'standing-policy-signer-holder',
    file: 'core/standing.ts',
    find: 'if (!verifyBody(policy, grant.grant.issuer)) {',
    replace: 'if (!verifyBody(policy, grant.grant.issuer) && !verifyBody(policy, grant.grant.subject)) {',
    classes: ['C20'],
  },
  {
    id: 'standing-firings-off-by-one',
    file: 'core/standing.ts',
    find: 'if (ledger.firings >= p.max_firings) {',
    replace: 'if (ledger.firings > p.max_firings) {',
    classes: ['C20'],
  },
  {
    id: 'standing-budget-checks-previous-spend',
    file: 'core/standing.ts',
    find: 'if (spentAfter > standing.grant.budget_uj) {',
    replace: 'if (ledger.spent_uj > standing.grant.budget_uj) {',
    classes: ['C20'],
  },
  {
    id: 'standing-ledger-count-not-advanced',
    file: 'core/standing.ts',
    find: 'ledger: { firings: ledger.firings + 1, spent_uj: spentAfter }',
    replace: 'ledger: { firings: ledger.firings, spent_uj: spentAfter }',
    classes: ['C20'],
  },
  {
    id: 'standing-event-class-unchecked',
    file: 'core/standing.ts',
    find: 'if (event.event_class !== p.event_class) {',
    replace: 'if (event.event_class.length !== p.event_class.length) {',
    classes: ['C20'],
  },
  {
    // The wrong event class fires the policy when the event carries no event id (an optional field).
    id: 'standing-event-class-only-with-event-id',
    file: 'core/standing.ts',
    find: 'if (event.event_class !== p.event_class) {',
    replace: 'if (event.event_class !== p.event_class && event.event_id !== undefined) {',
    classes: ['C20'],
  },
  // node/standing.ts: the server and its durable mint ledger
  {
    id: 'standing-server-ledger-not-replayed',
    file: 'node/standing.ts',
    find: '} else l.#replay(policyId, standingId);',
    replace: '} else if (created) l.#replay(policyId, standingId);',
    classes: ['C20'],
  },
  {
    id: 'standing-server-source-ignored',
    file: 'node/standing.ts',
    find: 'const eventClass = eventClassOf(source, kind);',
    replace: "const eventClass = eventClassOf('tickets', kind);",
    classes: ['C20'],
  },
  {
    id: 'standing-server-retry-fires-again',
    file: 'node/standing.ts',
    find: 'let record = ledger.firingOf(eventId);',
    replace: 'let record: FiringRecord | undefined;',
    classes: ['C20'],
  },
  {
    id: 'standing-server-refusal-recorded',
    file: 'node/standing.ts',
    find: 'if (!r.ok) {\n      const status',
    replace:
      'if (!r.ok) {\n      ledger.record({ firing: ledger.ledger.firings + 1, spent_uj: ledger.ledger.spent_uj, event_id: eventId, event_class: eventClass, child: standing });\n      const status',
    classes: ['C20'],
  },
  // core/checkpoint.ts
  {
    id: 'checkpoint-any-signer',
    file: 'core/checkpoint.ts',
    find: 'if (!verifyBody(sc, grant.grant.subject)) {',
    replace: 'if (!verifyBody(sc, grant.grant.subject) && !verifyBody(sc, grant.grant.issuer)) {',
    classes: ['C21'],
  },
  {
    id: 'checkpoint-agent-steers-itself',
    file: 'core/checkpoint.ts',
    find: 'if (amender.did === g.subject) {',
    replace: 'if (amender.did === g.subject && amender.did === g.issuer) {',
    classes: ['C21'],
  },
  {
    id: 'checkpoint-self-steering-issuer-clause',
    file: 'core/checkpoint.ts',
    find: 'if (g.issuer === g.subject || verifyBody(amendment, g.subject)) {',
    replace: 'if (verifyBody(amendment, g.subject)) {',
    classes: ['C21'],
  },
  {
    id: 'checkpoint-widening-doubled',
    file: 'core/checkpoint.ts',
    find: 'if (budgetUj > g.budget_uj) {',
    replace: 'if (budgetUj > g.budget_uj * 2n) {',
    classes: ['C21'],
  },
  {
    id: 'checkpoint-widening-ge',
    file: 'core/checkpoint.ts',
    find: 'if (budgetUj > g.budget_uj) {',
    replace: 'if (budgetUj >= g.budget_uj) {',
    classes: ['C21'],
  },
  {
    id: 'checkpoint-binding-length-only',
    file: 'core/checkpoint.ts',
    find: 'if (amendment.body.checkpoint !== checkpointId(checkpoint)) {',
    replace: 'if (amendment.body.checkpoint.length !== checkpointId(checkpoint).length) {',
    classes: ['C21'],
  },
  {
    id: 'checkpoint-continuation-keeps-steered-budget',
    file: 'core/checkpoint.ts',
    find: '    budget_uj: amendment.body.budget_uj,\n    expiry: steered.expiry,',
    replace: '    budget_uj: steered.budget_uj,\n    expiry: steered.expiry,',
    classes: ['C21'],
  },
  // node/: an amendment in force at a node
  {
    id: 'amendment-cap-ignores-spend',
    file: 'node/amendments.ts',
    find: 'const capUj = sa.body.budget_uj < left ? sa.body.budget_uj : left;',
    replace: 'const capUj = sa.body.budget_uj > left ? sa.body.budget_uj : left;',
    classes: ['C21'],
  },
  {
    id: 'amendment-carry-not-read',
    file: 'node/amendments.ts',
    find: 'return { spent: (id) => ledger.spent(id) + this.carried(id) };',
    replace: 'return ledger;',
    classes: ['C21'],
  },
  {
    id: 'amendment-second-overrides',
    file: 'node/amendments.ts',
    find: 'if (before !== undefined) {',
    replace: 'if (before !== undefined && before.amendmentId === aid) {',
    classes: ['C21'],
  },
  {
    id: 'amendment-pair-unverified',
    file: 'node/amendments.ts',
    find: 'const pair = verifyAmendment(sa, cp, grant);\n    if (!pair.ok) return err(pair.error);',
    replace: "const pair = verifyAmendment(sa, cp, grant);\n    if (!pair.ok && pair.error.code !== 'not-issuer') return err(pair.error);",
    classes: ['C21'],
  },
  {
    id: 'amendment-no-soft-revoke',
    file: 'node/enforcer.ts',
    find: 'revoked: { has: (id) => deps.revocations.has(id) || amendments.steered(id) },',
    replace: 'revoked: deps.revocations,',
    classes: ['C21'],
  },
  {
    id: 'amendment-records-not-loaded',
    file: 'node/node.ts',
    find: 'const amd = amendments.load(await log.amendments());',
    replace: 'const amd = amendments.load([]);',
    classes: ['C21'],
  },
];

export default mutants;
