/**
 * Names of cli/ that only the tests reach (beside the front door, index.ts, which this
 * re-exports). Product code never imports this file.
 */
export * from './index.ts';
export { readMessage } from './frost.ts';
export { main } from './main.ts';
export { COMMANDS } from './commands.ts';
export { readPolicyFile } from './standing.ts';
export { readAmendmentFile, readCheckpointFile } from './steerfile.ts';
export { command as keyCommand } from './key.ts';
export { command as nodeCommand } from './node.ts';
export { jcpInvocation, shellWord } from './init.ts';
