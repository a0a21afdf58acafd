/**
 * The mutation runner itself (scripts/mutants.ts, `npm run mutants`): a killable mutant is
 * reported killed, an equivalent one dropped with its reason, a survivor and a mutant that does
 * not compile fail the run, and a `find` that no longer matches fails before anything runs.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import type { MutantsReport } from '../../scripts/mutants.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** Each case starts the runner (a TypeScript program of the project, then conformance runs): a generous limit on a loaded machine. */
const RUN_LIMIT_MS = 240_000;
const scratch = mkdtempSync(path.join(tmpdir(), 'jcp-mutants-test-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function runner(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((done) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/mutants.ts', ...args], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => {
      out += b;
    });
    child.stderr.on('data', (b: Buffer) => {
      err += b;
    });
    child.on('close', (code) => done({ code, out, err }));
  });
}

/** Writes a one-file list folder holding `mutants` and returns its path. */
function listDir(name: string, mutants: object[]): string {
  const dir = mkdtempSync(path.join(scratch, `${name}-`));
  writeFileSync(path.join(dir, `${name}.ts`), `export default ${JSON.stringify(mutants, null, 2)};\n`);
  return dir;
}

describe('mutants runner', () => {
  it(
    'mutants / a killable mutant is killed by its class and an equivalent one is dropped with its reason',
    async () => {
      const json = path.join(scratch, 'tiny.json');
      const r = await runner(['--lists', 'test/mutants/fixture', '--json', json]);
      expect(r.err).toBe('');
      expect(r.out).toMatch(/^baseline \(no mutant\): pass \[C1\]/m);
      expect(r.out).toMatch(/^killed {3}fixture-scope-dropped {2}by C1 /m);
      expect(r.out).toMatch(/^dropped fixture-comment: a comment: no behaviour changes$/m);
      expect(r.out).toMatch(/^mutants: 1 killed, 0 survived, 1 dropped$/m);
      expect(r.code).toBe(0);
      const report = JSON.parse(readFileSync(json, 'utf8')) as MutantsReport;
      expect(report.summary).toEqual({ killed: 1, survived: 0, dropped: 1, invalid: 0 });
      expect(report.baseline.status).toBe('pass');
      const killed = report.mutants.find((m) => m.id === 'fixture-scope-dropped');
      expect(killed?.status).toBe('killed');
      expect(killed?.killedBy).toEqual(['C1']);
      expect(killed?.detail).toContain('wrong-resource');
      // The mutant was applied to a copy only: the tree itself is untouched.
      expect(readFileSync(path.join(ROOT, 'core/decision.ts'), 'utf8')).toContain('if (f.resource !== g.capability.resource) {');
    },
    RUN_LIMIT_MS,
  );

  it(
    'mutants / a survivor and a mutant that does not compile fail the run; --only selects by id prefix',
    async () => {
      const dir = listDir('bad', [
        // A changed comment that is not marked equivalent: every class passes, so it survives.
        {
          id: 'bad-survivor',
          file: 'core/decision.ts',
          find: '/** §7 check 8: the frame',
          replace: '/** §7 check eight: the frame',
          classes: ['C1'],
        },
        // A type error (a string where a bigint is compared): an invalid mutant, never run.
        {
          id: 'bad-invalid',
          file: 'core/decision.ts',
          find: 'return v < 0n ? 0n : v;',
          replace: "return v < '0' ? 0n : v;",
          classes: ['C1'],
        },
        // The file compiles, its callers do not (an exported signature changed): invalid too.
        {
          id: 'bad-importers',
          file: 'core/decision.ts',
          find: 'export function denied(req: DecisionRequest, state: DecisionState, deny: Deny): Decision {',
          replace: 'export function denied(req: DecisionRequest, state: DecisionState, deny: Deny, why: string): Decision {',
          classes: ['C1'],
        },
        {
          id: 'other-killed',
          file: 'core/decision.ts',
          find: 'if (f.resource !== g.capability.resource) {',
          replace: 'if (false) {',
          classes: ['C1'],
        },
      ]);
      const json = path.join(scratch, 'bad.json');
      const r = await runner(['--lists', dir, '--only', 'bad-', '--json', json]);
      expect(r.out).toMatch(/^SURVIVED bad-survivor /m);
      expect(r.out).toMatch(/^INVALID {2}bad-invalid: invalid mutant \(does not compile\): core\/decision\.ts:\d+ /m);
      expect(r.out).toMatch(
        /^INVALID {2}bad-importers: invalid mutant \(does not compile\): [\w/.-]+\.ts:\d+ Expected 4 arguments, but got 3/m,
      );
      expect(r.out).toMatch(/^mutants: 0 killed, 1 survived, 0 dropped, 2 invalid$/m);
      expect(r.out).not.toContain('other-killed');
      expect(r.code).toBe(1);
      const report = JSON.parse(readFileSync(json, 'utf8')) as MutantsReport;
      expect(report.mutants.map((m) => [m.id, m.status])).toEqual([
        ['bad-survivor', 'survived'],
        ['bad-invalid', 'invalid'],
        ['bad-importers', 'invalid'],
      ]);
    },
    RUN_LIMIT_MS,
  );

  it(
    'mutants / a find that matches nothing, or twice, fails the run before anything runs',
    async () => {
      const none = await runner([
        '--lists',
        listDir('rot', [{ id: 'rot', file: 'core/decision.ts', find: 'no such text in the file', replace: 'x', classes: ['C1'] }]),
      ]);
      expect(none.code).toBe(1);
      expect(none.err).toContain('rot.ts[0] (rot): find occurs 0 times in core/decision.ts (must be exactly once)');
      expect(none.out).not.toContain('baseline');
      const twice = await runner([
        '--lists',
        listDir('two', [
          {
            id: 'two',
            file: 'core/decision.ts',
            find: 'const chain = req.chain;',
            replace: 'const chain = req.chain.slice(1);',
            classes: ['C1'],
          },
        ]),
      ]);
      expect(twice.code).toBe(1);
      expect(twice.err).toMatch(/find occurs [2-9] times in core\/decision\.ts/);
    },
    RUN_LIMIT_MS,
  );
});
