/**
 * The front door of inspect/: the names other folders use. Siblings and tests import from here
 * (tests may also use internal.ts); files inside inspect/ import each other directly.
 */
export { FaultError, splitSequence } from './input.ts';
export {
  bytesOfContents,
  inspectContents,
  inspectHex,
  type InspectOptions,
  type InspectOutcome,
  parseHex,
  renderFault,
  renderHuman,
} from './inspect.ts';
