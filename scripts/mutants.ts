/**
 * `npm run mutants`: the mutation run over the conformance classes. Each mutant is a small, realistic,
 * spec-forbidden change to the product (core/, node/, meter/, …); it is applied to a fresh
 * temporary copy of the repository and the conformance classes (spec §9) it names are run
 * against that copy with `node bin/jcp.mjs conformance --json --class …`. A mutant is killed
 * when any of its classes fails (or the run crashes or times out) and survives when all pass.
 *
 * Lists: every `mutants/<area>.ts` has `export default` an array of {@link Mutant}. `find` must
 * occur exactly once in `file` (0 or more matches fail the run before anything is run, so a list
 * cannot rot silently). A mutant with `equivalent: "why"` is not run and is printed as
 * `dropped <id>: <why>`. A mutant whose mutated file does not compile (TypeScript syntactic or
 * semantic diagnostics of that file, and of the files importing it when its exports' types
 * changed) is an invalid mutant and fails the run: mutants must be compiling code.
 *
 * Usage: npm run mutants -- [--only <id-prefix>]... [--area <file-stem>]... [--json out.json]
 *          [--lists <dir>] [--jobs N] [--timeout S]
 * Exit status: 0 when the baseline passes and no mutant survived or was invalid; 1 otherwise;
 * 2 on a usage error.
 */
import { spawn } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import ts from 'typescript';

/** One mutant, as written in a `mutants/<area>.ts` list (the format is fixed; add, never rename). */
export interface Mutant {
  /** Unique over every list, e.g. `decision-budget-ge`. */
  readonly id: string;
  /** Repository-relative path of the file to mutate, e.g. `core/decision.ts`. */
  readonly file: string;
  /** Text that must occur exactly once in `file`. */
  readonly find: string;
  /** The mutated text put in its place. */
  readonly replace: string;
  /** Conformance class ids (`C1`…`C21`, `C-neg`) run against the mutant. */
  readonly classes: readonly string[];
  /** When set, the mutant is not run: why it cannot be told apart from the product. */
  readonly equivalent?: string;
}

/** The outcome of one mutant. `killedBy` lists the classes that failed (or `crash`/`timeout`). */
export interface MutantResult {
  readonly id: string;
  readonly area: string;
  readonly file: string;
  readonly classes: readonly string[];
  readonly status: 'killed' | 'survived' | 'dropped' | 'invalid';
  readonly killedBy: readonly string[];
  /** Wall time of the mutant's conformance run, seconds (0 for dropped/invalid). */
  readonly seconds: number;
  readonly detail: string;
}

/** The `--json` report. */
export interface MutantsReport {
  readonly baseline: { readonly status: 'pass' | 'fail'; readonly classes: readonly string[]; readonly detail: string };
  readonly mutants: readonly MutantResult[];
  readonly summary: { readonly killed: number; readonly survived: number; readonly dropped: number; readonly invalid: number };
}

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const CLASS_RE = /^(C([1-9]|1[0-9]|2[01])|C-neg)$/;
/** Copied into each temporary tree: everything but these (node_modules is symlinked). */
const SKIP = new Set(['.git', 'node_modules', 'coverage', '.data', '.scratch']);

class ListError extends Error {}

/** Process groups of the class runs under way (each is detached, so a signal to us misses them). */
const running = new Set<number>();

function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

interface Listed extends Mutant {
  readonly area: string;
}

/** Loads and validates every list in `dir` (`*.ts`), in file order. Throws {@link ListError}. */
async function loadLists(dir: string): Promise<Listed[]> {
  if (!existsSync(dir)) throw new ListError(`no mutant lists: ${dir} does not exist`);
  const out: Listed[] = [];
  const ids = new Set<string>();
  for (const name of readdirSync(dir)
    .filter((f) => f.endsWith('.ts'))
    .sort()) {
    const area = name.slice(0, -3);
    const mod = (await import(pathToFileURL(join(dir, name)).href)) as { default?: unknown };
    if (!Array.isArray(mod.default)) throw new ListError(`${name}: export default is not an array of mutants`);
    for (const [i, m] of (mod.default as Partial<Mutant>[]).entries()) {
      const at = `${name}[${i}]${typeof m?.id === 'string' ? ` (${m.id})` : ''}`;
      for (const k of ['id', 'file', 'find', 'replace'] as const) {
        if (typeof m?.[k] !== 'string' || (k !== 'replace' && m[k] === '')) throw new ListError(`${at}: ${k} must be a non-empty string`);
      }
      if (!Array.isArray(m.classes) || m.classes.length === 0) throw new ListError(`${at}: classes must be a non-empty array`);
      for (const c of m.classes) if (typeof c !== 'string' || !CLASS_RE.test(c)) throw new ListError(`${at}: unknown class ${String(c)}`);
      if (m.equivalent !== undefined && (typeof m.equivalent !== 'string' || m.equivalent === '')) {
        throw new ListError(`${at}: equivalent must be a non-empty string saying why`);
      }
      const mm = m as Mutant;
      if (ids.has(mm.id)) throw new ListError(`${at}: duplicate id ${mm.id}`);
      ids.add(mm.id);
      if (mm.find === mm.replace) throw new ListError(`${at}: replace is the same text as find`);
      const path = join(ROOT, mm.file);
      if (!existsSync(path)) throw new ListError(`${at}: file ${mm.file} does not exist`);
      const n = readFileSync(path, 'utf8').split(mm.find).length - 1;
      if (n !== 1) throw new ListError(`${at}: find occurs ${n} times in ${mm.file} (must be exactly once)`);
      out.push({ ...mm, area });
    }
  }
  return out;
}

/** Makes a fresh copy of the repository (node_modules symlinked, .git skipped). */
function copyTree(into: string): string {
  const dest = mkdtempSync(join(into, 'tree-'));
  for (const entry of readdirSync(ROOT)) {
    if (SKIP.has(entry)) continue;
    cpSync(join(ROOT, entry), join(dest, entry), { recursive: true, verbatimSymlinks: true });
  }
  symlinkSync(join(ROOT, 'node_modules'), join(dest, 'node_modules'), 'dir');
  return dest;
}

/**
 * Type-checks a mutant without running tsc on the whole tree each time: one program of the
 * project is built once, and each mutant's program reuses every unchanged source file; the
 * syntactic and semantic diagnostics of the mutated file decide "invalid", and those of the
 * files that import it too when the types of what it exports changed.
 */
class TypeGate {
  private readonly options: ts.CompilerOptions;
  private readonly rootNames: readonly string[];
  private readonly cache = new Map<string, ts.SourceFile>();
  private readonly base: ts.Program;

  constructor() {
    const cfgPath = join(ROOT, 'tsconfig.json');
    const cfg = ts.readConfigFile(cfgPath, ts.sys.readFile);
    const parsed = ts.parseJsonConfigFileContent(cfg.config, ts.sys, ROOT);
    this.options = parsed.options;
    this.rootNames = parsed.fileNames;
    this.base = this.program();
  }

  private program(override?: { path: string; text: string }, old?: ts.Program): ts.Program {
    const host = ts.createCompilerHost(this.options);
    const plain = host.getSourceFile.bind(host);
    host.getSourceFile = (fileName, lang, onError) => {
      const abs = resolve(fileName);
      if (override && abs === override.path) return ts.createSourceFile(fileName, override.text, lang, true);
      let sf = this.cache.get(abs);
      if (!sf) {
        sf = plain(fileName, lang, onError);
        if (sf) this.cache.set(abs, sf);
      }
      return sf;
    };
    return ts.createProgram({ rootNames: this.rootNames, options: this.options, host, oldProgram: old });
  }

  /** The first diagnostics (as text) of `file` mutated to `text`, or '' when it compiles. */
  check(file: string, text: string): string {
    const path = join(ROOT, file);
    const p = this.program({ path, text }, this.base);
    const own = p.getSourceFile(path);
    if (own === undefined) return ''; // not TypeScript of the project (e.g. a .mjs worker)
    let diags: ts.Diagnostic[] = [...p.getSyntacticDiagnostics(own), ...p.getSemanticDiagnostics(own)];
    // The importers can only break when what the file exports changed type; checking them is
    // most of the cost (core/cbor.ts has ~70), so they are checked only then.
    if (diags.length === 0 && this.#surface(p, path) !== this.#baseSurface(path)) {
      diags = this.#importers(p, path).flatMap((sf) => [...p.getSyntacticDiagnostics(sf), ...p.getSemanticDiagnostics(sf)]);
    }
    return diags
      .slice(0, 3)
      .map((d) => {
        const where = d.file ? `${relative(ROOT, d.file.fileName)}:${d.file.getLineAndCharacterOfPosition(d.start ?? 0).line + 1}` : '';
        return `${where} ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`;
      })
      .join('; ');
  }

  readonly #baseSurfaces = new Map<string, string>();

  #baseSurface(path: string): string {
    let s = this.#baseSurfaces.get(path);
    if (s === undefined) {
      s = this.#surface(this.base, path);
      this.#baseSurfaces.set(path, s);
    }
    return s;
  }

  /** The exported names of `path` with their types, as text: what importers can depend on. */
  #surface(p: ts.Program, path: string): string {
    const sf = p.getSourceFile(path);
    if (sf === undefined) return '';
    const checker = p.getTypeChecker();
    const mod = checker.getSymbolAtLocation(sf);
    if (mod === undefined) return '';
    const flags = ts.TypeFormatFlags.NoTruncation | ts.TypeFormatFlags.UseFullyQualifiedType;
    return checker
      .getExportsOfModule(mod)
      .map((sym) => {
        const target = sym.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(sym) : sym;
        const value = target.flags & ts.SymbolFlags.Value ? checker.typeToString(checker.getTypeOfSymbol(target), undefined, flags) : '';
        const type =
          target.flags & ts.SymbolFlags.Type ? checker.typeToString(checker.getDeclaredTypeOfSymbol(target), undefined, flags) : '';
        return `${sym.name}:${value}|${type}`;
      })
      .sort()
      .join('\n');
  }

  /**
   * The project files that import or re-export `path`, through the front doors too: a folder's
   * index.ts or internal.ts that re-exports it passes it on to the files importing that door.
   */
  #importers(p: ts.Program, path: string): ts.SourceFile[] {
    const targets = new Set([path]);
    const found = new Map<string, ts.SourceFile>();
    const files = p.getSourceFiles().filter((sf) => !resolve(sf.fileName).includes('/node_modules/'));
    for (let grew = true; grew; ) {
      grew = false;
      for (const sf of files) {
        const abs = resolve(sf.fileName);
        if (targets.has(abs) && abs !== path && !found.has(abs)) found.set(abs, sf);
        if (found.has(abs) || abs === path) continue;
        const hit = sf.statements.some(
          (s) =>
            (ts.isImportDeclaration(s) || ts.isExportDeclaration(s)) &&
            s.moduleSpecifier !== undefined &&
            ts.isStringLiteral(s.moduleSpecifier) &&
            targets.has(resolve(dirname(abs), s.moduleSpecifier.text)),
        );
        if (!hit) continue;
        found.set(abs, sf);
        if (/\/(index|internal)\.ts$/.test(abs)) {
          targets.add(abs);
          grew = true;
        }
      }
    }
    return [...found.values()];
  }
}

interface ClassRun {
  /** Failed class ids, or `crash`/`timeout`. */
  readonly failed: string[];
  readonly seconds: number;
  readonly detail: string;
}

/** Runs `jcp conformance --json --class …` in `tree`; never throws. */
function runClasses(tree: string, classes: readonly string[], timeoutS: number): Promise<ClassRun> {
  const started = process.hrtime.bigint();
  const args = [join(tree, 'bin/jcp.mjs'), 'conformance', '--json', ...classes.flatMap((c) => ['--class', c])];
  return new Promise((done) => {
    const child = spawn(process.execPath, args, { cwd: tree, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const pid = child.pid ?? 0;
    if (pid > 0) running.add(pid);
    let out = '';
    let err = '';
    let timedOut = false;
    child.stdout.on('data', (b: Buffer) => {
      out += b;
    });
    child.stderr.on('data', (b: Buffer) => {
      err += b;
    });
    const timer = setTimeout(() => {
      timedOut = true;
      if (pid > 0) killGroup(pid);
    }, timeoutS * 1000);
    child.on('close', (code) => {
      clearTimeout(timer);
      // Whatever the classes started (nodes, servers) in the child's process group goes too.
      if (pid > 0) killGroup(pid);
      running.delete(pid);
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      if (timedOut) return done({ failed: ['timeout'], seconds, detail: `no answer within ${timeoutS} s` });
      let report: { classes?: Record<string, { status?: string; detail?: string }> } | undefined;
      try {
        report = JSON.parse(out) as typeof report;
      } catch {}
      if (!report?.classes) {
        const last = err.trim().split('\n').slice(-3).join(' | ');
        return done({ failed: ['crash'], seconds, detail: `exit ${String(code)}: ${last || out.trim().slice(0, 200)}` });
      }
      const failed: string[] = [];
      let detail = '';
      for (const c of classes) {
        const r = report.classes[c];
        if (r?.status !== 'pass') {
          failed.push(c);
          if (!detail) detail = `${c}: ${r?.detail ?? 'not reported'}`;
        }
      }
      if (failed.length === 0 && code !== 0)
        return done({ failed: ['crash'], seconds, detail: `exit ${String(code)} with every class passing` });
      done({ failed, seconds, detail });
    });
  });
}

/** Runs `work` over `items` with at most `jobs` at a time, keeping the input order in the result. */
async function pool<T, R>(items: readonly T[], jobs: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await work(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(jobs, items.length)) }, lane));
  return out;
}

function line(r: MutantResult): string {
  const t = `${r.seconds.toFixed(1)} s`;
  switch (r.status) {
    case 'killed':
      return `killed   ${r.id}  by ${r.killedBy.join(',')}  ${t}`;
    case 'survived':
      return `SURVIVED ${r.id}  (${r.file}; ${r.classes.join(',')} all pass)  ${t}`;
    case 'dropped':
      return `dropped ${r.id}: ${r.detail}`;
    case 'invalid':
      return `INVALID  ${r.id}: invalid mutant (does not compile): ${r.detail}`;
  }
}

/**
 * Runs one mutant: dropped when it is listed as equivalent, invalid when the type gate refuses the
 * mutated file, else its classes run on a copy of the tree under `scratch` (at most `timeoutS`
 * seconds) and it is killed when one fails. Prints the line of a mutant that ran.
 */
async function runMutant(m: Listed, gate: TypeGate | undefined, scratch: string, timeoutS: number): Promise<MutantResult> {
  const base = { id: m.id, area: m.area, file: m.file, classes: m.classes };
  if (m.equivalent !== undefined) return { ...base, status: 'dropped', killedBy: [], seconds: 0, detail: m.equivalent };
  const text = readFileSync(join(ROOT, m.file), 'utf8').replace(m.find, () => m.replace);
  const diag = gate?.check(m.file, text) ?? '';
  if (diag) return { ...base, status: 'invalid', killedBy: [], seconds: 0, detail: diag };
  const tree = copyTree(scratch);
  try {
    writeFileSync(join(tree, m.file), text);
    const r = await runClasses(tree, m.classes, timeoutS);
    const res: MutantResult = {
      ...base,
      status: r.failed.length > 0 ? 'killed' : 'survived',
      killedBy: r.failed,
      seconds: r.seconds,
      detail: r.detail,
    };
    process.stdout.write(`${line(res)}\n`);
    return res;
  } finally {
    rmSync(tree, { recursive: true, force: true });
  }
}

/** The command: parses `argv`, runs, prints, returns the exit status. */
export async function main(argv: readonly string[]): Promise<number> {
  let values: { only?: string[]; area?: string[]; json?: string; lists?: string; jobs?: string; timeout?: string };
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        only: { type: 'string', multiple: true },
        area: { type: 'string', multiple: true },
        json: { type: 'string' },
        lists: { type: 'string' },
        jobs: { type: 'string' },
        timeout: { type: 'string' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (e) {
    process.stderr.write(`mutants: ${(e as Error).message}\n`);
    return 2;
  }
  const jobs = Number(values.jobs ?? 2);
  const timeoutS = Number(values.timeout ?? 300);
  if (!Number.isInteger(jobs) || jobs < 1 || !(timeoutS > 0)) {
    process.stderr.write('mutants: --jobs must be a positive integer and --timeout a positive number of seconds\n');
    return 2;
  }
  let all: Listed[];
  try {
    all = await loadLists(resolve(values.lists ?? join(ROOT, 'mutants')));
  } catch (e) {
    if (!(e instanceof ListError)) throw e;
    process.stderr.write(`mutants: ${e.message}\n`);
    return 1;
  }
  const selected = all.filter(
    (m) => (!values.only || values.only.some((p) => m.id.startsWith(p))) && (!values.area || values.area.includes(m.area)),
  );
  if (selected.length === 0) {
    process.stderr.write('mutants: no mutant selected\n');
    return 1;
  }
  const toRun = selected.filter((m) => m.equivalent === undefined);
  const classes = [...new Set(toRun.flatMap((m) => m.classes))];
  const scratch = mkdtempSync(join(tmpdir(), 'jcp-mutants-'));
  // Interrupted: the temporary copies go too (the class runs die with the terminal's signal).
  const interrupted = (signal: NodeJS.Signals) => {
    for (const pid of running) killGroup(pid);
    rmSync(scratch, { recursive: true, force: true });
    process.stderr.write(`mutants: interrupted (${signal}); temporary copies removed\n`);
    process.exit(130);
  };
  process.once('SIGINT', interrupted);
  process.once('SIGTERM', interrupted);
  const results: MutantResult[] = [];
  let baseline: MutantsReport['baseline'] = { status: 'pass', classes, detail: '' };
  try {
    if (classes.length > 0) {
      const tree = copyTree(scratch);
      const b = await runClasses(tree, classes, timeoutS);
      rmSync(tree, { recursive: true, force: true });
      baseline = { status: b.failed.length === 0 ? 'pass' : 'fail', classes, detail: b.detail };
      process.stdout.write(
        `baseline (no mutant): ${baseline.status} [${classes.join(',')}]  ${b.seconds.toFixed(1)} s${b.detail ? `  ${b.detail}` : ''}\n`,
      );
      if (baseline.status === 'fail') {
        process.stdout.write('mutants: the baseline is red; no mutant was run\n');
        if (values.json)
          writeFileSync(
            values.json,
            `${JSON.stringify({ baseline, mutants: [], summary: { killed: 0, survived: 0, dropped: 0, invalid: 0 } }, null, 2)}\n`,
          );
        return 1;
      }
    }
    const gate = toRun.length > 0 ? new TypeGate() : undefined;
    const ran = await pool(selected, jobs, (m) => runMutant(m, gate, scratch, timeoutS));
    for (const r of ran) {
      if (r.status !== 'killed' && r.status !== 'survived') process.stdout.write(`${line(r)}\n`);
      results.push(r);
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  const count = (s: MutantResult['status']): number => results.filter((r) => r.status === s).length;
  const summary = { killed: count('killed'), survived: count('survived'), dropped: count('dropped'), invalid: count('invalid') };
  process.stdout.write(
    `mutants: ${summary.killed} killed, ${summary.survived} survived, ${summary.dropped} dropped${summary.invalid ? `, ${summary.invalid} invalid` : ''}\n`,
  );
  if (values.json)
    writeFileSync(values.json, `${JSON.stringify({ baseline, mutants: results, summary } satisfies MutantsReport, null, 2)}\n`);
  return summary.survived > 0 || summary.invalid > 0 ? 1 : 0;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = await main(process.argv.slice(2));
}
