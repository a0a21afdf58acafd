/** `jcp vectors gen|verify [dir]`: writes and re-checks the published vectors (`conformance/v1/`). */
import { DEFAULT_VECTOR_DIR, verifyVectors, writeVectors } from '../vectors/index.ts';
import { type Command, parse, UsageError } from './command.ts';

const help = `Usage: jcp vectors gen [dir]
       jcp vectors verify [dir] [--json]

The cross-implementation vectors of JCP v0.3 (default dir ${DEFAULT_VECTOR_DIR}/; README.md there
describes every file).

Verbs:
  gen       write every vector file (and README.md) from fixed seeds: the same bytes every time.
  verify    read every vector file and re-check each vector against this implementation:
            decode the hex, recompute ids, signatures, decisions and refusals from the inputs.
            Prints the number of checks and failures, naming each failed vector.

Options:
  --json    (verify) print {"checks", "failures", "files": [{"file", "checks", "failures": [...]}]}
  -h, --help

Exit status: 0 on success; 1 when any check fails; 2 on a usage error.`;

/** The `jcp vectors` command. */
export const command: Command = {
  name: 'vectors',
  summary: 'generate or verify the published conformance vectors',
  help,
  async run(argv) {
    const [verb, ...rest] = argv;
    const { values, positionals } = parse(rest, { json: { type: 'boolean' } });
    if (positionals.length > 1) throw new UsageError('expected at most one folder');
    const dir = positionals[0] ?? DEFAULT_VECTOR_DIR;
    if (verb === 'gen') {
      if (values.json) throw new UsageError('--json applies to verify');
      const written = writeVectors(dir);
      process.stdout.write(`wrote ${written.length} files to ${dir}\n`);
      return 0;
    }
    if (verb !== 'verify') {
      throw new UsageError(verb === undefined ? 'expected a verb: gen | verify' : `unknown verb '${verb}'`);
    }
    const report = verifyVectors(dir);
    if (values.json) {
      process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    } else {
      for (const f of report.files) {
        process.stdout.write(`${f.file.padEnd(18)}${String(f.checks).padStart(6)} checks  ${f.failures.length} failed\n`);
        for (const line of f.failures) process.stdout.write(`  FAIL ${line}\n`);
      }
      process.stdout.write(`${report.checks} checks, ${report.failures} failures\n`);
    }
    return report.failures === 0 ? 0 : 1;
  },
};
