/**
 * Benchmark runner: `npm run bench -- <suite> [--json out.json] [--seed N]`.
 *
 * Loads `bench/<suite>.ts`, calls its `run({seed})`, prints the figures as a table and, with
 * `--json`, writes `{"figures": [...]}` to the file. Exit 0 when the suite ran (a missed goal is a
 * figure, not a crash: it shows as MISSED in the table and `"met": false` in the JSON); 2 for bad
 * arguments; 1 when the suite threw.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { type Figure, type Suite, table } from './figures.ts';

const usage = `Usage: npm run bench -- <suite> [--json out.json] [--seed N]

Suites are the files bench/<suite>.ts (e.g. core). Each prints its figures against floors
measured in the same run; --json writes {"figures": [{name, value, unit, floor?, ratio?, goal?, met?}]}.`;

async function main(argv: string[]): Promise<number> {
  let parsed: ReturnType<
    typeof parseArgs<{
      args: string[];
      options: { json: { type: 'string' }; seed: { type: 'string' }; help: { type: 'boolean'; short: 'h' } };
      allowPositionals: true;
      strict: true;
    }>
  >;
  try {
    parsed = parseArgs({
      args: argv,
      options: { json: { type: 'string' }, seed: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
      allowPositionals: true,
      strict: true,
    });
  } catch (e) {
    process.stderr.write(`bench: ${(e as Error).message}\n${usage}\n`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(`${usage}\n`);
    return 0;
  }
  const [suite, ...extra] = positionals;
  if (suite === undefined || extra.length > 0 || !/^[a-z][a-z0-9-]*$/.test(suite) || ['main', 'figures'].includes(suite)) {
    process.stderr.write(`bench: expected one suite name\n${usage}\n`);
    return 2;
  }
  const file = join(dirname(fileURLToPath(import.meta.url)), `${suite}.ts`);
  if (!existsSync(file)) {
    process.stderr.write(`bench: no suite '${suite}' (bench/${suite}.ts)\n`);
    return 2;
  }
  const seed = values.seed === undefined ? 1 : Number(values.seed);
  if (!Number.isSafeInteger(seed) || seed < 0) {
    process.stderr.write(`bench: --seed must be an unsigned integer\n`);
    return 2;
  }
  const mod = (await import(file)) as { run?: Suite };
  if (typeof mod.run !== 'function') {
    process.stderr.write(`bench: bench/${suite}.ts exports no run()\n`);
    return 2;
  }
  const figures: Figure[] = await mod.run({ seed });
  process.stdout.write(`${table(figures)}\n`);
  if (values.json !== undefined) {
    writeFileSync(values.json, `${JSON.stringify({ figures }, null, 2)}\n`);
    process.stdout.write(`wrote ${values.json}\n`);
  }
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    process.stderr.write(`bench: ${(e as Error)?.stack ?? String(e)}\n`);
    process.exitCode = 1;
  },
);
