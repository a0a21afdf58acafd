/**
 * The audit console's front door (docs/console.md): the data it shows and its read-only server.
 */
export { ConsoleData, type ConsoleSources } from './data.ts';
export { type RunningConsole, serveConsole } from './server.ts';
