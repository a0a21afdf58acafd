/**
 * The tree's layout rules (docs/design.md "Folders and layers"), checked on every source file:
 * - a file imports another folder only through its front door, `<folder>/index.ts` (tests and
 *   mutant lists may also use `<folder>/internal.ts`); files inside a folder import each other
 *   directly;
 * - folders form no cycle, and each imports only folders below it in {@link LAYERS};
 * - nothing outside cli/ imports cli/ and nothing in a product folder imports testkit/ or a job
 *   folder (demo/, conformance/, vectors/, chaos/, inspect/).
 * Imports are read with the TypeScript parser (static imports, `export … from`, `import()`).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '..');

/** Product folders, bottom first; a folder may import only folders of a lower rank. */
const LAYERS: Readonly<Record<string, number>> = {
  core: 0,
  io: 1,
  meter: 2,
  natsio: 2,
  channel: 3,
  shards: 4,
  frost: 4,
  node: 5,
  client: 6,
  bridge: 7,
  testkit: 8,
  conformance: 9,
  chaos: 9,
  vectors: 10,
  inspect: 11,
  console: 11,
  demo: 9,
  cli: 12,
};
/** Folders that consume the product and have no front door of their own. */
const LEAVES = new Set(['test', 'bench', 'scripts', 'mutants']);
const JOBS = new Set(['demo', 'conformance', 'vectors', 'chaos', 'inspect']);

function sourceFiles(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (['node_modules', 'dist', '.git', '.scratch', 'v1'].includes(e.name) || e.name.startsWith('.')) continue;
    const p = path.join(dir, e.name);
    if (e.isDirectory()) sourceFiles(p, out);
    else if (e.name.endsWith('.ts')) out.push(path.relative(ROOT, p));
  }
  return out;
}

/** Every relative module specifier of `file` (static and dynamic). */
function specifiers(file: string): string[] {
  const sf = ts.createSourceFile(file, readFileSync(path.join(ROOT, file), 'utf8'), ts.ScriptTarget.Latest, true);
  const out: string[] = [];
  const visit = (n: ts.Node): void => {
    if ((ts.isImportDeclaration(n) || ts.isExportDeclaration(n)) && n.moduleSpecifier && ts.isStringLiteral(n.moduleSpecifier))
      out.push(n.moduleSpecifier.text);
    if (ts.isCallExpression(n) && n.expression.kind === ts.SyntaxKind.ImportKeyword && n.arguments[0] && ts.isStringLiteral(n.arguments[0]))
      out.push(n.arguments[0].text);
    if (ts.isImportTypeNode(n) && ts.isLiteralTypeNode(n.argument) && ts.isStringLiteral(n.argument.literal))
      out.push(n.argument.literal.text);
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return out.filter((s) => s.startsWith('.'));
}

const top = (f: string): string => (f.includes('/') ? f.split('/')[0]! : '.');

/** The violations of the layout rules among `files` (paths relative to the repository). */
function layoutViolations(files: readonly string[], read: (f: string) => string[] = specifiers): string[] {
  const bad: string[] = [];
  const edges = new Map<string, Set<string>>();
  for (const f of files) {
    const from = top(f);
    for (const spec of read(f)) {
      const target = path.normalize(path.join(path.dirname(f), spec));
      const to = top(target);
      if (to === from || !(to in LAYERS)) continue;
      const door = path.relative(to, target);
      const testish = from === 'test' || from === 'mutants';
      if (door !== 'index.ts' && !(testish && door === 'internal.ts')) bad.push(`${f}: imports ${target} past the front door of ${to}/`);
      if (!(from in LAYERS)) continue;
      if (!edges.has(from)) edges.set(from, new Set());
      edges.get(from)!.add(to);
      if (LAYERS[to]! >= LAYERS[from]!) bad.push(`${f}: ${from}/ imports ${to}/, which is not below it`);
      if (to === 'cli') bad.push(`${f}: only cli/ itself imports cli/`);
      if ((to === 'testkit' || JOBS.has(to)) && LAYERS[from]! < LAYERS.testkit!) bad.push(`${f}: product folder ${from}/ imports ${to}/`);
    }
  }
  // Cycles between folders (implied by the ranks, checked on their own so a rank typo cannot hide one).
  const state = new Map<string, 'open' | 'done'>();
  const walk = (n: string, trail: string[]): void => {
    if (state.get(n) === 'done') return;
    if (state.get(n) === 'open') {
      bad.push(`cycle: ${[...trail.slice(trail.indexOf(n)), n].join(' → ')}`);
      return;
    }
    state.set(n, 'open');
    for (const m of edges.get(n) ?? []) walk(m, [...trail, n]);
    state.set(n, 'done');
  };
  for (const n of edges.keys()) walk(n, []);
  return bad;
}

/** Every `docs/<file>.md "<section>"` citation in `files` whose file or section does not exist. */
function brokenCitations(files: readonly string[]): string[] {
  const headings = new Map<string, string[]>();
  const sections = (doc: string): string[] => {
    if (!headings.has(doc)) {
      let text = '';
      try {
        text = readFileSync(path.join(ROOT, doc), 'utf8');
      } catch {
        // a missing file has no sections
      }
      headings.set(
        doc,
        [...text.matchAll(/^#+ (.+)$/gm)].map((m) => m[1]!.trim()),
      );
    }
    return headings.get(doc)!;
  };
  const bad: string[] = [];
  for (const f of files) {
    const text = readFileSync(path.join(ROOT, f), 'utf8');
    for (const m of text.matchAll(/docs\/([\w-]+\.md) "([^"]+)"/g)) {
      const doc = `docs/${m[1]}`;
      const cited = m[2]!.replace(/\s*\n\s*(\*\s*)?/g, ' ');
      if (cited === '…') continue;
      if (!sections(doc).some((h) => h.startsWith(cited))) bad.push(`${f}: cites ${doc} "${cited}", which has no such section`);
    }
  }
  return bad;
}

/** Names a folder's front door exports that no file outside the folder imports (bridge/ and client/library.ts are the npm API). */
function unusedDoorNames(files: readonly string[]): string[] {
  const used = new Map<string, Set<string>>();
  const exported = new Map<string, string[]>();
  for (const f of files) {
    const sf = ts.createSourceFile(f, readFileSync(path.join(ROOT, f), 'utf8'), ts.ScriptTarget.Latest, true);
    const isDoor = /^[a-z]+\/index\.ts$/.test(f);
    // A dynamic import may use any name of the door it loads.
    for (const m of sf.text.matchAll(/import\(\s*'(\.[^']+)'\s*\)/g)) {
      const t = path.normalize(path.join(path.dirname(f), m[1]!)).replace(/internal\.ts$/, 'index.ts');
      if (!used.has(t)) used.set(t, new Set());
      used.get(t)!.add('*');
    }
    for (const st of sf.statements) {
      if (!(ts.isImportDeclaration(st) || ts.isExportDeclaration(st)) || !st.moduleSpecifier || !ts.isStringLiteral(st.moduleSpecifier))
        continue;
      if (isDoor && ts.isExportDeclaration(st) && st.exportClause && ts.isNamedExports(st.exportClause)) {
        exported.set(f, [...(exported.get(f) ?? []), ...st.exportClause.elements.map((el) => el.name.text)]);
      }
      const spec = st.moduleSpecifier.text;
      if (!spec.startsWith('.')) continue;
      const t = path.normalize(path.join(path.dirname(f), spec));
      if (top(t) === top(f) || !/\/(index|internal)\.ts$/.test(t)) continue;
      const door = t.replace(/internal\.ts$/, 'index.ts');
      const names = used.get(door) ?? new Set<string>();
      used.set(door, names);
      const bindings = ts.isImportDeclaration(st) ? st.importClause?.namedBindings : st.exportClause;
      if (bindings && (ts.isNamedImports(bindings) || ts.isNamedExports(bindings)))
        for (const el of bindings.elements) names.add((el.propertyName ?? el.name).text);
      else names.add('*');
    }
  }
  const out: string[] = [];
  for (const [door, names] of exported) {
    if (door === 'bridge/index.ts' || used.get(door)?.has('*')) continue;
    for (const n of names) if (!used.get(door)?.has(n)) out.push(`${door}: ${n}`);
  }
  return out;
}

/** The most lines a function may span: functions that fit on one screen. */
const MAX_FUNCTION_LINES = 100;

/**
 * Functions still over {@link MAX_FUNCTION_LINES}, as `file:name`: not split yet. Empty: every product
 * function fits; a new entry must name a long function (stale entries are refused).
 */
const LONG_FUNCTIONS_ALLOWED: ReadonlySet<string> = new Set<string>([]);

/**
 * Every function, method, accessor or arrow function in `files` that spans more than `max` lines
 * (from its first token to its closing brace), as `file:line name (N lines)`.
 */
function longFunctions(
  files: readonly string[],
  max = MAX_FUNCTION_LINES,
  read = (f: string) => readFileSync(path.join(ROOT, f), 'utf8'),
  allowed: ReadonlySet<string> = LONG_FUNCTIONS_ALLOWED,
): string[] {
  const out: string[] = [];
  for (const f of files) {
    const sf = ts.createSourceFile(f, read(f), ts.ScriptTarget.Latest, true);
    const visit = (n: ts.Node): void => {
      if (ts.isFunctionLike(n) && 'body' in n && n.body !== undefined) {
        const first = sf.getLineAndCharacterOfPosition(n.getStart(sf)).line;
        const lines = sf.getLineAndCharacterOfPosition(n.end).line - first + 1;
        const named = n.name ?? (ts.isVariableDeclaration(n.parent) || ts.isPropertyAssignment(n.parent) ? n.parent.name : undefined);
        const name = named ? named.getText(sf) : '<anonymous>';
        if (lines > max && !allowed.has(`${f}:${name}`)) out.push(`${f}:${first + 1} ${name} (${lines} lines)`);
      }
      ts.forEachChild(n, visit);
    };
    visit(sf);
  }
  return out;
}

/**
 * Entries of `allowed` that name no function over `max` lines in `files` (split, renamed or gone):
 * an exemption must be removed with the long function it excused.
 */
function staleExemptions(
  files: readonly string[],
  allowed: ReadonlySet<string> = LONG_FUNCTIONS_ALLOWED,
  read = (f: string) => readFileSync(path.join(ROOT, f), 'utf8'),
): string[] {
  const long = new Set(longFunctions(files, MAX_FUNCTION_LINES, read, new Set()).map((l) => l.replace(/:\d+ (\S+) \(\d+ lines\)$/, ':$1')));
  return [...allowed].filter((entry) => !long.has(entry));
}

/** The most bytes README.md may hold: what it is, the quick starts, the CLI, the map, the figures (the runs are in docs/benchmarks.md). */
const README_MAX_BYTES = 20 * 1024;

/**
 * Problems with a docs/*.md file's opening: line 1 its `# title`, line 2 blank, line 3 `Covers: …`
 * (what it covers), line 4 `For: …` (who it is for). Empty when the header is there.
 */
function docHeaderProblems(doc: string, text: string): string[] {
  const [title, blank, covers, forWhom] = text.split('\n');
  const bad: string[] = [];
  if (!title?.startsWith('# ')) bad.push(`${doc}: line 1 is not a '# ' title`);
  if (blank !== '') bad.push(`${doc}: line 2 is not blank`);
  if (!/^Covers: \S/.test(covers ?? '')) bad.push(`${doc}: line 3 does not say what it covers ('Covers: …')`);
  if (!/^For: \S/.test(forWhom ?? '')) bad.push(`${doc}: line 4 does not say who it is for ('For: …')`);
  return bad;
}

/**
 * Every relative markdown link (`[text](path)`, an anchor after `#` ignored) and every `docs/<name>.md`
 * named in `text` that names no file, resolved against the repository root and against `file`'s folder.
 */
function brokenLinks(file: string, text: string, exists: (p: string) => boolean = (p) => existsSync(path.join(ROOT, p))): string[] {
  const bad: string[] = [];
  const resolves = (target: string): boolean =>
    exists(path.normalize(target)) || exists(path.normalize(path.join(path.dirname(file), target)));
  for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
    const target = m[1]!.split('#')[0]!;
    if (target === '' || /^[a-z]+:/i.test(target)) continue;
    if (!resolves(target)) bad.push(`${file}: links to ${target}, which does not exist`);
  }
  for (const m of text.matchAll(/(?<![\w/.-])(docs\/[\w-]+\.md)\b/g))
    if (!exists(m[1]!)) bad.push(`${file}: names ${m[1]}, which does not exist`);
  return [...new Set(bad)];
}

/**
 * The README's CLI table (the `| \`jcp <command>…` rows under "## The `jcp` command") against the
 * registry: commands the table names that `jcp --help` does not list, and listed commands the
 * table leaves out.
 */
function cliTableProblems(readme: string, commands: readonly string[]): string[] {
  const start = readme.indexOf('## The `jcp` command');
  if (start < 0) return ['README.md: no "## The `jcp` command" section'];
  const end = readme.indexOf('\n## ', start + 1);
  const section = readme.slice(start, end < 0 ? undefined : end);
  const named = new Set([...section.matchAll(/^\| `jcp ([a-z-]+)/gm)].map((m) => m[1]!));
  const bad = [...named]
    .filter((c) => !commands.includes(c))
    .map((c) => `README.md: the CLI table names jcp ${c}, which jcp --help does not list`);
  for (const c of commands) if (!named.has(c)) bad.push(`README.md: the CLI table leaves out jcp ${c}`);
  return bad;
}

/** The command names cli/commands.ts registers (what `jcp --help` lists), read from its source. */
function registeredCommands(): string[] {
  const text = readFileSync(path.join(ROOT, 'cli/commands.ts'), 'utf8');
  return [...text.matchAll(/\bname: '([a-z-]+)'/g)].map((m) => m[1]!);
}

describe('layout', () => {
  const files = sourceFiles(ROOT);

  it('every source file keeps the layout rules (front doors, layers, no cycles)', () => {
    expect(files.length).toBeGreaterThan(300);
    expect(layoutViolations(files)).toEqual([]);
  });

  it('every name a front door exports is imported by another folder (bridge/, the npm API, aside)', () => {
    expect(unusedDoorNames(files)).toEqual([]);
  });

  it('every top-level folder with code is a product folder or a leaf', () => {
    const tops = new Set(files.map(top).filter((t) => t !== '.'));
    expect([...tops].filter((t) => !(t in LAYERS) && !LEAVES.has(t))).toEqual([]);
  });

  it('the build compiles every product folder (bin/jcp.mjs runs dist/, so a missing one breaks every command) and the package ships no TypeScript source', () => {
    const build = JSON.parse(readFileSync(path.join(ROOT, 'tsconfig.build.json'), 'utf8')) as { include: string[] };
    expect(Object.keys(LAYERS).filter((folder) => !build.include.includes(folder))).toEqual([]);
    expect(build.include.filter((folder) => !(folder in LAYERS))).toEqual([]);
    const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { files: string[] };
    const sources = pkg.files.filter((f) => f in LAYERS || LEAVES.has(f) || f.endsWith('.ts'));
    expect(sources).toEqual([]);
    expect(pkg.files).toContain('dist');
  });

  it('every folder README.md names and every .ts file the docs name exist', () => {
    const missing: string[] = [];
    const docs = ['README.md', ...readdirSync(path.join(ROOT, 'docs')).map((d) => `docs/${d}`)];
    for (const doc of docs) {
      for (const m of readFileSync(path.join(ROOT, doc), 'utf8').matchAll(/`([a-z][\w-]*\/(?:[\w.-]+\/)*(?:[\w.-]+\.ts)?)`/g)) {
        const named = m[1]!;
        const folder = named.endsWith('/') && named.split('/').length === 2;
        if (!(named.endsWith('.ts') || (doc === 'README.md' && folder)) || named.startsWith('node_modules/')) continue;
        if (!existsSync(path.join(ROOT, named)) && !existsSync(path.join(ROOT, path.dirname(doc), named))) missing.push(`${doc}: ${named}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('every docs/<file>.md "<section>" citation names a section that exists, and no comment names an issue number', () => {
    const docs = sourceFiles(ROOT).concat(
      readdirSync(path.join(ROOT, 'docs')).map((d) => `docs/${d}`),
      ['README.md'],
    );
    expect(brokenCitations(docs.filter((f) => f !== 'test/layout.test.ts'))).toEqual([]);
    const numbered = files.filter(
      (f) => f !== 'test/layout.test.ts' && /\b(issue|task) \d+\b/i.test(readFileSync(path.join(ROOT, f), 'utf8')),
    );
    expect(numbered).toEqual([]);
  });

  it("every path in the README's spec map exists", () => {
    const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const table = readme.slice(
      readme.indexOf('### From the spec to the code'),
      readme.indexOf('`test/layout.test.ts` checks that every path in this table exists'),
    );
    const folders = [...Object.keys(LAYERS), 'test'].join('|');
    const paths = [...table.matchAll(new RegExp(`\`((?:${folders})\\/[^\`*]*)\``, 'g'))].map((m) => m[1]!);
    expect(paths.length).toBeGreaterThan(40);
    expect(paths.filter((p) => !existsSync(path.join(ROOT, p)))).toEqual([]);
    // Every product folder is in the map (by itself or by one of its files).
    expect(Object.keys(LAYERS).filter((folder) => !paths.some((p) => p.startsWith(`${folder}/`)))).toEqual([]);
    const globs = [...table.matchAll(/`(test\/[^`]*)\*([^`]*)`/g)];
    for (const g of globs)
      expect(readdirSync(path.join(ROOT, path.dirname(g[1]!))).some((f) => f.startsWith(path.basename(g[1]!)) && f.endsWith(g[2]!))).toBe(
        true,
      );
  });

  it('README.md stays short (at most 20 KB; the runs live in docs/benchmarks.md)', () => {
    const bytes = readFileSync(path.join(ROOT, 'README.md')).length;
    expect(bytes).toBeLessThanOrEqual(README_MAX_BYTES);
  });

  it('every docs/*.md opens with its title, then what it covers and who it is for (two lines)', () => {
    const docs = readdirSync(path.join(ROOT, 'docs')).filter((d) => d.endsWith('.md'));
    expect(docs.length).toBeGreaterThan(10);
    expect(docs.flatMap((d) => docHeaderProblems(`docs/${d}`, readFileSync(path.join(ROOT, 'docs', d), 'utf8')))).toEqual([]);
  });

  it('the header rule bites: a doc without Covers/For lines is reported, one with them is not', () => {
    expect(docHeaderProblems('docs/x.md', '# X\n\nSome prose.\nMore prose.\n')).toEqual([
      "docs/x.md: line 3 does not say what it covers ('Covers: …')",
      "docs/x.md: line 4 does not say who it is for ('For: …')",
    ]);
    expect(docHeaderProblems('docs/y.md', '# Y\n\nCovers: y.\nFor: readers.\n')).toEqual([]);
  });

  it('every relative link and every docs/<name>.md named in README.md, CHANGELOG.md and docs/ exists', () => {
    const files = ['README.md', 'CHANGELOG.md', ...readdirSync(path.join(ROOT, 'docs')).map((d) => `docs/${d}`)];
    expect(files.flatMap((f) => brokenLinks(f, readFileSync(path.join(ROOT, f), 'utf8')))).toEqual([]);
  });

  it('the link rule bites: a dead link and a dead docs/ name are reported, live ones and URLs are not', () => {
    const exists = (p: string): boolean => ['docs/node.md', 'README.md'].includes(p);
    const text = '[n](docs/node.md) [r](../README.md#x) [w](https://example.org/) docs/gone.md [g](docs/gone2.md)';
    expect(brokenLinks('docs/a.md', text, exists)).toEqual([
      'docs/a.md: links to docs/gone2.md, which does not exist',
      'docs/a.md: names docs/gone.md, which does not exist',
      'docs/a.md: names docs/gone2.md, which does not exist',
    ]);
  });

  it("the README's CLI table names every jcp command, and only commands jcp --help lists", () => {
    const commands = registeredCommands();
    expect(commands.length).toBeGreaterThan(15);
    expect(cliTableProblems(readFileSync(path.join(ROOT, 'README.md'), 'utf8'), commands)).toEqual([]);
  });

  it('the CLI table rule bites: a command that does not exist and a command left out are reported', () => {
    const readme = '## The `jcp` command\n\n| `jcp node start` | x |\n| `jcp nosuch` | y |\n\n## Next\n| `jcp call` | z |\n';
    expect(cliTableProblems(readme, ['node', 'call'])).toEqual([
      'README.md: the CLI table names jcp nosuch, which jcp --help does not list',
      'README.md: the CLI table leaves out jcp call',
    ]);
  });

  it('no function in product folders, bench/ or scripts/ spans more than 100 lines (tests exempt)', () => {
    const checked = files.filter((f) => top(f) in LAYERS || top(f) === 'bench' || top(f) === 'scripts');
    expect(checked.length).toBeGreaterThan(200);
    expect(longFunctions(checked)).toEqual([]);
    expect(staleExemptions(checked)).toEqual([]);
  });

  it('a stale exemption bites: an allow-list entry for a short or missing function is reported', () => {
    const body = (n: number): string => `export function big(): number {\n${'  let x = 1;\n'.repeat(n - 3)}  return 1;\n}\n`;
    const fake: Record<string, string> = { 'node/a.ts': body(101), 'node/b.ts': body(100) };
    const allowed = new Set(['node/a.ts:big', 'node/b.ts:big', 'node/a.ts:gone']);
    expect(staleExemptions(Object.keys(fake), allowed, (f) => fake[f]!)).toEqual(['node/b.ts:big', 'node/a.ts:gone']);
  });

  it('the function length rule bites: a 101-line function is reported with file:line and length, a 100-line one is not', () => {
    const body = (n: number): string => `export function big(): number {\n${'  let x = 1;\n'.repeat(n - 3)}  return 1;\n}\n`;
    const fake: Record<string, string> = { 'node/a.ts': `// one\n${body(101)}`, 'node/b.ts': body(100) };
    expect(longFunctions(Object.keys(fake), MAX_FUNCTION_LINES, (f) => fake[f]!)).toEqual(['node/a.ts:2 big (101 lines)']);
  });

  it('a citation of a missing section is reported', () => {
    const probe = 'test/layout.test.ts';
    expect(brokenCitations([probe]).some((l) => l.includes('"No such section here"'))).toBe(true);
    // docs/design.md "No such section here" (the line above cites it on purpose)
  });

  it('the rules bite: a deep import, an upward import, a cycle and a cli/ import are each reported', () => {
    const fake: Record<string, string[]> = {
      'node/a.ts': ['../core/decision.ts', '../client/index.ts'],
      'client/b.ts': ['../node/index.ts'],
      'frost/c.ts': ['../cli/index.ts', '../testkit/index.ts'],
      'test/t.test.ts': ['../core/internal.ts', '../node/index.ts'],
      'bench/b.ts': ['../core/internal.ts'],
    };
    const v = layoutViolations(Object.keys(fake), (f) => fake[f]!);
    expect(v).toContain('node/a.ts: imports core/decision.ts past the front door of core/');
    expect(v).toContain('node/a.ts: node/ imports client/, which is not below it');
    expect(v).toContain('frost/c.ts: only cli/ itself imports cli/');
    expect(v).toContain('frost/c.ts: product folder frost/ imports testkit/');
    expect(v).toContain('bench/b.ts: imports core/internal.ts past the front door of core/');
    expect(v.some((l) => l.startsWith('cycle: '))).toBe(true);
    expect(v.filter((l) => l.startsWith('test/'))).toEqual([]);
  });
});
