/** `jcp conformance`: runs the spec §9 conformance classes and prints a table or JSON. */
import { CLASS_IDS, type ClassId, runConformance } from '../conformance/index.ts';
import { type Command, parse, UsageError } from './command.ts';

const help = `Usage: jcp conformance [--json] [--class CN]...

Runs every JCP v0.3 conformance class (C1–C18, C20, C21, C-neg; the spec defines no C19) with
real checks and prints a table: class, checks run, pass/fail, first failure.

Options:
  --json        print {"classes": {"C1": {"status", "checks", "detail"}, ...}}
  --class CN    run only class CN (repeatable)
  -h, --help    show this help

Exit status: 0 only if every class run passes; 1 otherwise.`;

/** The `jcp conformance` command. */
export const command: Command = {
  name: 'conformance',
  summary: 'run the spec §9 conformance classes (table or --json)',
  help,
  async run(argv) {
    const { values } = parse(argv, { json: { type: 'boolean' }, class: { type: 'string', multiple: true } }, false);
    const ids = (values.class ?? [...CLASS_IDS]).map((c) => {
      const id = c.toUpperCase() === 'C-NEG' ? 'C-neg' : c.toUpperCase();
      if (!(CLASS_IDS as readonly string[]).includes(id)) throw new UsageError(`unknown class ${c}`);
      return id as ClassId;
    });
    const classes = await runConformance(ids);
    if (values.json) {
      process.stdout.write(`${JSON.stringify({ classes }, null, 2)}\n`);
    } else {
      process.stdout.write(`${'class'.padEnd(7)}${'checks'.padStart(7)}  result  first failure\n`);
      for (const [id, r] of Object.entries(classes)) {
        process.stdout.write(`${id.padEnd(7)}${String(r.checks).padStart(7)}  ${r.status.padEnd(6)}  ${r.detail}\n`);
      }
      const failed = Object.values(classes).filter((r) => r.status === 'fail').length;
      process.stdout.write(`${Object.keys(classes).length - failed} passed, ${failed} failed\n`);
    }
    return Object.values(classes).every((r) => r.status === 'pass') ? 0 : 1;
  },
};
