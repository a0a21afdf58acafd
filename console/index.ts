/**
 * The audit console's front door (docs/console.md): the data it shows and its read-only server.
 */
export { type AttributionRow, type ConsoleState, ConsoleData, type NodeView } from './data.ts';
export { PAGE_HTML, PAGE_JS } from './page.ts';
export { type RunningConsole, serveConsole } from './server.ts';
