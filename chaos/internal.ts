/**
 * Names of chaos/ that only the tests reach (beside the front door, index.ts, which this
 * re-exports). Product code never imports this file.
 */
export * from './index.ts';
export { faultSchedule, revocationCount } from './chaos.ts';
export { laneLabels, overdraftPlot, spreadLabels } from './plot.ts';
