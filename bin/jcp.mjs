#!/usr/bin/env node
// The `jcp` command. Sources are TypeScript run through tsx's loader, so no build step is needed.
import { register } from 'tsx/esm/api';

register();
// A closed pipe (`jcp … | head`) ends the command quietly instead of crashing it.
process.stdout.on('error', (e) => {
  if (e.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw e;
});
const { main } = await import('../cli/main.ts');
process.exitCode = await main(process.argv.slice(2));
