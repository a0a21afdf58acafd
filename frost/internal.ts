/**
 * Names of frost/ that only the tests reach (beside the front door, index.ts, which this
 * re-exports). Product code never imports this file.
 */
export * from './index.ts';
export {
  DecisionJournal,
  type HolderDecisionsOpts,
  MAX_DECISIONS_SCANNED,
  MIN_WEBHOOK_SECRET_BYTES,
  publishDecision,
  WEBHOOK_REPLAY_WINDOW_S,
} from './approvers.ts';
export { newBoxKey, open, pairKey, seal } from './box.ts';
export { processCoordinator, withEarlier } from './coordinator.ts';
export { IDENTITY, nobleCurve, sodiumCurve } from './curve.ts';
export { boxContext, readRound1, readStart } from './dkg-wire.ts';
export { Fn, groupToCbor, IDENTITY_ENCODING } from './group.ts';
export { journalKey } from './journal.ts';
export { expectMessage } from './message.ts';
export { packagePayload, readCommitment, readRefusal } from './sign-wire.ts';
export type { BusMsg } from './bus.ts';
