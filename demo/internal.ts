/**
 * Names of demo/ that only the tests reach (beside the front door, index.ts, which this
 * re-exports). Product code never imports this file.
 */
export * from './index.ts';
export { jcpCommand } from './compile.ts';
export { type CallEvent, chainToHex } from './messages.ts';
export { demoStreams, removeDemoStreams } from './broker.ts';
export { WorkerProc } from './workers.ts';
