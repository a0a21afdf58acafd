/**
 * The front door of chaos/: the names other folders use. Siblings and tests import from here
 * (tests may also use internal.ts); files inside chaos/ import each other directly.
 */
export { ALL_FAULT_KINDS, chaosPlot, chaosTable, FAULT_KINDS, type FaultKind, runChaos } from './chaos.ts';
export { MULTI_REGION_BUILD } from './target.ts';
