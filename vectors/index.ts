/**
 * The front door of vectors/: the names other folders use. Siblings and tests import from here
 * (tests may also use internal.ts); files inside vectors/ import each other directly.
 */
export { cborJson } from './fixtures.ts';
export { hex, type Json, type JsonObj } from './json.ts';
export { DEFAULT_VECTOR_DIR, verifyVectors, writeVectors } from './vectors.ts';
