/**
 * The demo (`jcp demo`, `npm start`): the main job on real tools — a local enforcement cluster of
 * three nodes in front of real MCP servers, three agent workers, a revocation, a checkpoint and
 * amendment, and a 2-of-3 threshold team — reported from verified receipts. See `jcp demo --help`.
 *
 * - `run.ts` orchestrates; `nodes.ts`, `workers.ts` (+ the process script `worker.ts`), `team.ts`
 *   and `broker.ts` start and stop what it needs; `plan.ts` mints the grants; `actions.ts` is what
 *   the issuer and the team do mid-run; `evidence.ts` reads the receipt logs; `compile.ts` and
 *   `report.ts` build and render the report.
 */
export { DEFAULT_NATS_URL, findBroker, natsAnswers, natsProblem } from './broker.ts';
export { asCoded } from './errors.ts';
export { type DemoReport, renderReport } from './report.ts';
export { runDemo } from './run.ts';
