/**
 * The repository carries every third-party vector its tests read (issue: a bare clone has no
 * `../shared/`): each folder of `test/vectors/third-party/` has a `SOURCE` file naming its origin,
 * commit or version and licence, and the SHA-256 of each file in it; nothing in the folder is
 * unlisted, nothing listed is missing or altered, every file is tracked by git, and every vector
 * path a test names is one of them.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { REPO_VECTORS_DIR } from './load.ts';

const ROOT = fileURLToPath(REPO_VECTORS_DIR);
const REPO = fileURLToPath(new URL('../../', import.meta.url));
const sources = readdirSync(ROOT).filter((d) => statSync(join(ROOT, d)).isDirectory());

/** The files a SOURCE lists, with their SHA-256: lines `  NAME [<- PATH]  HEX`. */
function listed(source: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of readFileSync(join(ROOT, source, 'SOURCE'), 'utf8').matchAll(/^ {2}(\S+)(?: <- \S+)? +([0-9a-f]{64})\b/gm)) {
    out.set(m[1]!, m[2]!);
  }
  return out;
}

function testSources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return e.name === 'third-party' ? [] : testSources(p);
    return e.name.endsWith('.ts') ? [p] : [];
  });
}

describe('third-party vectors carried in the repository', () => {
  it('has the sources the suites use', () => {
    expect(sources.sort()).toEqual(
      [
        'blake3',
        'cctv-ed25519',
        'cfrg-frost',
        'cose-wg-examples',
        'did-method-key',
        'ed25519-speccheck',
        'rfc8949-appendix-a',
        'web5-js-ed25519',
        'wycheproof',
        'zcash-frost',
      ].sort(),
    );
  });

  it.each(sources)('%s: SOURCE names origin, commit or version, licence; lists every file with its SHA-256', (source) => {
    const text = readFileSync(join(ROOT, source, 'SOURCE'), 'utf8');
    expect(text).toMatch(/^origin: +\S/m);
    expect(text).toMatch(/^(commit: +[0-9a-f]{40}|version: +\S)/m);
    expect(text).toMatch(/^licence: +\S/m);
    const files = listed(source);
    const present = readdirSync(join(ROOT, source)).filter((f) => f !== 'SOURCE');
    expect([...files.keys()].sort()).toEqual(present.sort());
    for (const [name, sum] of files) {
      expect(
        createHash('sha256')
          .update(readFileSync(join(ROOT, source, name)))
          .digest('hex'),
        name,
      ).toBe(sum);
    }
  });

  it('every file is tracked by git (a clone has it)', () => {
    if (!existsSync(join(REPO, '.git'))) return expect(existsSync(join(REPO, 'package.json'))).toBe(true);
    const tracked = new Set(
      execFileSync('git', ['ls-files', '--', 'test/vectors/third-party'], { cwd: REPO, encoding: 'utf8' }).split('\n'),
    );
    const all = sources.flatMap((s) => readdirSync(join(ROOT, s)).map((f) => `test/vectors/third-party/${s}/${f}`));
    expect(all.filter((f) => !tracked.has(f))).toEqual([]);
  });

  it('every vector file a test names is carried and listed, and nothing reads ../shared', () => {
    const names = new Set<string>();
    const pattern = new RegExp(`\\b(${sources.join('|')})/([\\w.-]+\\.(?:json|txt))`, 'g');
    const self = fileURLToPath(import.meta.url);
    for (const file of testSources(join(REPO, 'test')).filter((f) => f !== self)) {
      const text = readFileSync(file, 'utf8');
      expect(text.includes('shared/vectors'), relative(REPO, file)).toBe(false);
      for (const m of text.matchAll(pattern)) names.add(`${m[1]}/${m[2]}`);
    }
    // The suites name at least these (a pattern that matched nothing would pass vacuously).
    expect(names.size).toBeGreaterThanOrEqual(15);
    for (const name of names) {
      const [source, file] = name.split('/') as [string, string];
      expect(listed(source).has(file), name).toBe(true);
    }
  });
});
