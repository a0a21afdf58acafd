#!/usr/bin/env node
// The `jcp` command. It runs the compiled build (dist/cli/main.js: `npm run build`, which `npm
// install` runs in a checkout; an installed package ships it). In a checkout whose TypeScript
// sources are newer than the build, or that has no build, it runs the sources through tsx (a dev
// dependency) instead, so an edit takes effect at once and a stale build never runs.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = new URL('../', import.meta.url);
const built = new URL('dist/cli/main.js', root);

/** Newest mtime (ms) of the .ts files under `dir`, at least `floor`; stops early once above `limit`. */
function newest(dir, floor, limit) {
  let max = floor;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (max > limit) break;
    const p = `${dir}/${e.name}`;
    if (e.isDirectory()) max = newest(p, max, limit);
    else if (e.name.endsWith('.ts')) max = Math.max(max, statSync(p).mtimeMs);
  }
  return max;
}

/** True when this is a checkout (sources beside the package) whose sources changed after the build, or that has none. */
function runSources() {
  const config = new URL('tsconfig.build.json', root);
  if (!existsSync(new URL('cli/main.ts', root)) || !existsSync(config)) return false;
  if (!existsSync(built)) return true;
  const stamp = statSync(built).mtimeMs;
  const folders = JSON.parse(readFileSync(config, 'utf8')).include ?? [];
  return folders.some((f) => newest(fileURLToPath(new URL(f, root)), 0, stamp) > stamp);
}

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
let entry = built.href;
if (runSources()) {
  let tsx;
  try {
    tsx = await import('tsx/esm/api');
  } catch {
    process.stderr.write(
      'jcp: error [no-build]: dist/ is missing or older than the sources and tsx is not installed: run `npm run build`\n',
    );
    process.exit(1);
  }
  tsx.register();
  entry = new URL('cli/main.ts', root).href;
}
const { main } = await import(entry);
process.exitCode = await main(process.argv.slice(2));
