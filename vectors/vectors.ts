/**
 * The published cross-implementation vectors (`conformance/v1/`, spec §9): generation from fixed
 * seeds and re-verification against this implementation.
 *
 * {@link generateVectors} builds every file in memory — deterministic, byte for byte, because
 * keys and nonces come from `seededRng` and the decision time is fixed — and
 * {@link writeVectors} writes them with the README that describes their shapes.
 * {@link verifyVectors} reads the files back and re-checks every vector against the
 * implementation: it decodes the hex, recomputes ids, signatures, decisions, receipts and
 * refusals from each vector's inputs, and compares. It never regenerates and diffs, so a vector
 * edited by hand (or written by another implementation) is checked on its own terms.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Checker } from '../conformance/index.ts';
import * as chains from './chains.ts';
import * as decisions from './decisions.ts';
import * as grants from './grants.ts';
import { J, type JsonObj } from './json.ts';
import { README } from './readme.ts';
import * as receipts from './receipts.ts';
import * as revocations from './revocations.ts';
import * as rotation from './rotation.ts';
import * as shards from './shards.ts';
import * as standing from './standing.ts';
import * as statements from './statements.ts';
import * as wire from './wire.ts';

/** Where `jcp vectors gen|verify` read and write by default, relative to the working folder. */
export const DEFAULT_VECTOR_DIR = 'conformance/v1';

/** One vector file: how to build it and how to re-check it. */
interface VectorModule {
  generate(): JsonObj;
  verify(doc: J, t: Checker): void;
}

/** Every vector file, in the order they are generated and verified. */
const MODULES: ReadonlyArray<readonly [string, VectorModule]> = [
  ['grants.json', grants],
  ['chains.json', chains],
  ['decisions.json', decisions],
  ['receipts.json', receipts],
  ['wire.json', wire],
  ['rotation.json', rotation],
  ['statements.json', statements],
  ['standing.json', standing],
  ['shards.json', shards],
  ['revocations.json', revocations],
];

/** The vector file names, in order. */
export const VECTOR_FILES: readonly string[] = MODULES.map(([f]) => f);

/** The text of a vector file: 2-space JSON and a final newline. */
function render(doc: JsonObj): string {
  return `${JSON.stringify(doc, null, 2)}\n`;
}

/**
 * Builds every file in memory: file name → contents (the JSON files and `README.md`).
 * Pure apart from CPU: no clock, no ambient randomness; two calls return identical text.
 */
export function generateVectors(): Map<string, string> {
  const out = new Map<string, string>();
  for (const [file, m] of MODULES) out.set(file, render(m.generate()));
  out.set('README.md', README);
  return out;
}

/** Writes every file into `dir` (created if needed). Returns the paths written. */
export function writeVectors(dir: string): string[] {
  mkdirSync(dir, { recursive: true });
  const written: string[] = [];
  for (const [file, text] of generateVectors()) {
    const p = path.join(dir, file);
    writeFileSync(p, text);
    written.push(p);
  }
  return written;
}

/** The outcome of re-checking one vector file. */
export interface FileReport {
  readonly file: string;
  readonly checks: number;
  /** One line per failed check, each naming `file/section/vector: what`. */
  readonly failures: string[];
}

/** The outcome of {@link verifyVectors}. */
export interface VerifyReport {
  readonly checks: number;
  readonly failures: number;
  readonly files: FileReport[];
}

/**
 * Reads every vector file from `dir` and re-checks each vector against this implementation.
 * A missing or unparsable file counts as one failed check naming it. Never throws for bad files.
 */
export function verifyVectors(dir: string): VerifyReport {
  const files: FileReport[] = [];
  for (const [file, m] of MODULES) {
    const t = new Checker();
    let doc: unknown;
    try {
      doc = JSON.parse(readFileSync(path.join(dir, file), 'utf8'));
    } catch (e) {
      t.ok(false, `${file}: cannot read: ${(e as Error).message}`);
    }
    if (doc !== undefined) {
      try {
        m.verify(new J(doc, file.replace(/\.json$/, '')), t);
      } catch (e) {
        t.ok(false, `${file}: ${(e as Error).message}`);
      }
    }
    files.push({ file, checks: t.checks, failures: t.failures });
  }
  return {
    checks: files.reduce((n, f) => n + f.checks, 0),
    failures: files.reduce((n, f) => n + f.failures.length, 0),
    files,
  };
}
