/**
 * Names of vectors/ that only the tests reach (beside the front door, index.ts, which this
 * re-exports). Product code never imports this file.
 */
export * from './index.ts';
export { generateVectors, VECTOR_FILES } from './vectors.ts';
