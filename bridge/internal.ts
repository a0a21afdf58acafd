/**
 * Names of bridge/ that only the tests reach (beside the front door, index.ts, which this
 * re-exports). Product code never imports this file.
 */
export * from './index.ts';
export { brokenStreamEnd, OpenRequests } from './a2a.ts';
