#!/usr/bin/env node
// The `jcp` command. Sources are TypeScript run through tsx's loader, so no build step is needed.
import { register } from 'tsx/esm/api';

register();
// A closed pipe (`jcp … | head`) ends the command quietly instead of crashing it.
process.stdout.on('error', (e) => {
  if (e.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw e;
});
// A process started by a supervisor that sets JCP_EXIT_WITH_PARENT=1 (the demo, the chaos runner)
// stops itself, gracefully, when that supervisor dies, even by SIGKILL: no orphaned nodes.
if (process.env.JCP_EXIT_WITH_PARENT === '1') {
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) process.kill(process.pid, 'SIGTERM');
  }, 500).unref();
}
const { main } = await import('../cli/main.ts');
process.exitCode = await main(process.argv.slice(2));
