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
export { findNatsServerBin } from '../testkit/index.ts';
export { type Broker, chosenBroker, DEFAULT_NATS_URL, findBroker, NATS_INSTALL_HINT, natsAnswers, natsProblem } from './broker.ts';
export { asCoded, DemoError, type DemoErrorCode, DemoErrorCodes } from './errors.ts';
export { buildReport, meteredByProvenance, type RunFacts } from './compile.ts';
export { type NodeEvidence, readEvidence } from './evidence.ts';
export { type DemoReport, fmtUj, renderReport, type WorkerLine } from './report.ts';
export { type DemoOptions, runDemo } from './run.ts';
export { BUDGETS, ESTIMATES_UJ, FS_ACTIONS, MEMORY_ACTIONS, SAMPLE_FILES, TEAM_ACTION } from './setup.ts';
