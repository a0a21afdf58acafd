/**
 * The published vectors (`conformance/v1/`): regeneration is byte-identical to the committed
 * files, `verify` passes on them, and it fails — naming the vector — when one field is tampered.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { generateVectors, VECTOR_FILES, verifyVectors, writeVectors } from '../../vectors/internal.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const COMMITTED = path.join(ROOT, 'conformance/v1');
const temps: string[] = [];

function tempDir(): string {
  const d = mkdtempSync(path.join(tmpdir(), 'jcp-vectors-'));
  temps.push(d);
  return d;
}

afterAll(() => {
  for (const d of temps) rmSync(d, { recursive: true, force: true });
});

/** A copy of the committed files with `edit` applied to the parsed JSON of `file`. */
function tampered(file: string, edit: (doc: Record<string, unknown>) => void): string {
  const dir = tempDir();
  cpSync(COMMITTED, dir, { recursive: true });
  const p = path.join(dir, file);
  const doc = JSON.parse(readFileSync(p, 'utf8')) as Record<string, unknown>;
  edit(doc);
  writeFileSync(p, JSON.stringify(doc, null, 2));
  return dir;
}

type Vec = Record<string, unknown> & { name: string };
const section = (doc: Record<string, unknown>, name: string) => doc[name] as Vec[];
const byName = (doc: Record<string, unknown>, sec: string, name: string) => {
  const v = section(doc, sec).find((x) => x.name === name);
  if (!v) throw new Error(`no vector ${sec}/${name}`);
  return v;
};
const flipLastHex = (s: string) => s.slice(0, -1) + (s.endsWith('0') ? '1' : '0');
const failuresOf = (dir: string) => verifyVectors(dir).files.flatMap((f) => f.failures);

describe('vectors / generation', () => {
  it('regenerating into a fresh folder gives byte-identical files to conformance/v1', () => {
    const dir = tempDir();
    writeVectors(dir);
    const generated = readdirSync(dir).sort();
    expect(readdirSync(COMMITTED).sort()).toEqual(generated);
    for (const f of generated) {
      expect(readFileSync(path.join(dir, f), 'utf8'), `${f} differs from the committed file: run \`jcp vectors gen\``).toBe(
        readFileSync(path.join(COMMITTED, f), 'utf8'),
      );
    }
  });

  it('two generations in one process are identical (no clock, no ambient randomness)', () => {
    expect([...generateVectors()]).toEqual([...generateVectors()]);
  });

  it('every file names its format, itself, the decision time and its actors', () => {
    for (const f of VECTOR_FILES) {
      const doc = JSON.parse(readFileSync(path.join(COMMITTED, f), 'utf8')) as Record<string, unknown>;
      expect(doc['format']).toBe('jcp-conformance-vectors/1');
      expect(doc['file']).toBe(f);
      expect(typeof doc['now_s']).toBe('number');
      expect(Object.keys(doc['actors'] as object).length).toBeGreaterThan(0);
    }
  });
});

describe('vectors / verify', () => {
  it('pass / every committed vector re-checks against the implementation', () => {
    const r = verifyVectors(COMMITTED);
    expect(r.files.flatMap((f) => f.failures)).toEqual([]);
    for (const f of r.files) expect(f.checks, `${f.file} ran no checks`).toBeGreaterThan(0);
    expect(r.checks).toBe(r.files.reduce((n, f) => n + f.checks, 0));
  });

  it('pass / the files are read, not diffed: re-indented JSON still verifies', () => {
    const dir = tempDir();
    cpSync(COMMITTED, dir, { recursive: true });
    for (const f of VECTOR_FILES) {
      const p = path.join(dir, f);
      writeFileSync(p, JSON.stringify(JSON.parse(readFileSync(p, 'utf8'))));
    }
    expect(failuresOf(dir)).toEqual([]);
  });

  it('decisions cover every deny reason on the chained path and all but the chain reasons on the direct path', () => {
    const doc = JSON.parse(readFileSync(path.join(COMMITTED, 'decisions.json'), 'utf8')) as Record<string, unknown>;
    const cov = doc['coverage'] as { direct: string[]; chained: string[] };
    expect(cov.chained).toHaveLength(12);
    expect(cov.direct).toHaveLength(10);
    expect(cov.direct).not.toContain('chain-broken');
  });
});

describe('vectors / verify refuses tampered files, naming the vector', () => {
  const cases: [string, string, string, (v: Vec) => void][] = [
    ['grants.json', 'grants', 'root-no-expiry', (v) => (v['signature'] = flipLastHex(v['signature'] as string))],
    ['grants.json', 'attenuations', 'budget-over-by-1', (v) => (v['expected'] = { ok: false, reason: 'not-holder' })],
    ['chains.json', 'chains', 'spliced', (v) => ((v['expected'] as Vec)['link'] = 2)],
    [
      'decisions.json',
      'decisions',
      'chained/budget-exceeded-ancestor-by-sibling',
      (v) => ((v['expected'] as Vec)['deny_reason'] = 'budget-exceeded-x'),
    ],
    ['decisions.json', 'decisions', 'direct/allow-exact-fit', (v) => ((v['state'] as Vec)['spent'] = {})],
    ['receipts.json', 'receipts', 'seq2-allow-chained', (v) => ((v['core'] as Vec)['cost_uj'] = '251')],
    ['receipts.json', 'tampered', 'wrong-steward', (v) => (v['code'] = 'signature-invalid')],
    ['wire.json', 'requests', 'direct-with-payload', (v) => (v['request_id'] = flipLastHex(v['request_id'] as string))],
    ['wire.json', 'bad_frames', 'declared-over-cap', (v) => (v['cap'] = 2048)],
    ['rotation.json', 'logs', 'thief-with-current-key', (v) => ((v['expected'] as Vec)['index'] = 1)],
    ['statements.json', 'sequences', 'regressing', (v) => (v['settled_uj'] = '900')],
    [
      'standing.json',
      'firings',
      'budget-exhausted',
      (v) => ((v['firings'] as Vec[])[2]!['expected'] = { ok: false, code: 'firings-exhausted' }),
    ],
    ['shards.json', 'mints', 'over-sum-by-1', (v) => ((v['slices'] as Vec[])[3]!['budget_uj'] = '0')],
    ['revocations.json', 'revocations', 'forged', (v) => (v['expected'] = 'admitted')],
  ];
  for (const [file, sec, name, edit] of cases) {
    it(`fail / ${file} ${sec}/${name} edited`, () => {
      const dir = tampered(file, (doc) => edit(byName(doc, sec, name)));
      const failures = failuresOf(dir);
      expect(failures.length).toBeGreaterThan(0);
      expect(
        failures.every((f) => f.startsWith(`${file}/${sec}/${name}:`)),
        failures.join('\n'),
      ).toBe(true);
    });
  }

  it('fail / a missing file is one named failure', () => {
    const dir = tempDir();
    cpSync(COMMITTED, dir, { recursive: true });
    unlinkSync(path.join(dir, 'wire.json'));
    expect(failuresOf(dir)).toEqual([expect.stringMatching(/^wire\.json: cannot read/)]);
  });

  it('fail / a field that is not hex names its JSON path', () => {
    const dir = tampered('grants.json', (doc) => {
      byName(doc, 'signature_checks', 'forged-by-mallory')['signed_grant_cbor'] = 'zz';
    });
    expect(failuresOf(dir)).toEqual([
      expect.stringContaining(
        'grants.json/signature_checks/forged-by-mallory: grants.signature_checks[1].signed_grant_cbor: expected lowercase hex',
      ),
    ]);
  });

  it('fail / an actor seed that no longer yields its did:key', () => {
    const dir = tampered('chains.json', (doc) => {
      const a = (doc['actors'] as Record<string, Vec>)['bob']!;
      a['seed'] = flipLastHex(a['seed'] as string);
    });
    expect(failuresOf(dir).some((f) => f.startsWith('chains.json/header: actor bob: seed → did:key'))).toBe(true);
  });
});

describe('vectors / the jcp vectors command', () => {
  it('verify exits 1 and names the tampered vector; 0 on the committed files', () => {
    const dir = tampered('wire.json', (doc) => {
      byName(doc, 'impersonations', 'caller-swapped')['caller_signature_valid'] = true;
    });
    const bad = spawnSync(process.execPath, [path.join(ROOT, 'bin/jcp.mjs'), 'vectors', 'verify', dir], { encoding: 'utf8' });
    expect(bad.status).toBe(1);
    expect(bad.stdout).toContain('FAIL wire.json/impersonations/caller-swapped: caller signature verdict');
    const good = spawnSync(process.execPath, [path.join(ROOT, 'bin/jcp.mjs'), 'vectors', 'verify', COMMITTED, '--json'], {
      encoding: 'utf8',
    });
    expect(good.status).toBe(0);
    expect((JSON.parse(good.stdout) as { failures: number }).failures).toBe(0);
  });

  it('an unknown verb is a usage error (exit 2)', () => {
    const r = spawnSync(process.execPath, [path.join(ROOT, 'bin/jcp.mjs'), 'vectors', 'check'], { encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain("unknown verb 'check'");
  });
});
