/**
 * The front door of conformance/: the names other folders use. Siblings and tests import from here
 * (tests may also use internal.ts); files inside conformance/ import each other directly.
 */
export { Checker } from './checker.ts';
export { CLASS_IDS, type ClassId, runConformance } from './runner.ts';
