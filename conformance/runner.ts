/**
 * The conformance runner (spec §9): runs every class with real checks and reports
 * `{status, checks, detail}` per class. A class that is not built yet reports `fail` with detail
 * `not implemented`, never a skip. The spec defines C1–C18, C20, C21 and C-neg (there is no C19).
 */
import { Checker } from './checker.ts';

/** One conformance class: its id, what it proves, and its checks. */
export interface ConformanceClass {
  readonly id: string;
  readonly title: string;
  run(t: Checker): Promise<void> | void;
}

/** The result of one class. */
export interface ClassResult {
  readonly status: 'pass' | 'fail';
  readonly checks: number;
  readonly detail: string;
}

/** Every class id the spec defines, in report order. */
export const CLASS_IDS = [
  'C1',
  'C2',
  'C3',
  'C4',
  'C5',
  'C6',
  'C7',
  'C8',
  'C9',
  'C10',
  'C11',
  'C12',
  'C13',
  'C14',
  'C15',
  'C16',
  'C17',
  'C18',
  'C20',
  'C21',
  'C-neg',
] as const;

/** A class id. */
export type ClassId = (typeof CLASS_IDS)[number];

/**
 * Where each class lives: `conformance/classes/<file>.ts`, exported under the class id (`C_neg` for
 * C-neg). A module or export that does not exist yet reports `not implemented`.
 */
const HOMES: Record<ClassId, string> = {
  C1: 'grants',
  C2: 'grants',
  C10: 'grants',
  C3: 'budget',
  C4: 'budget',
  'C-neg': 'budget',
  C5: 'receipt',
  C14: 'receipt',
  C16: 'receipt',
  C6: 'revocation',
  C15: 'revocation',
  C7: 'chain',
  C8: 'wire',
  C9: 'energy',
  C11: 'shards',
  C17: 'shards',
  C12: 'rotation',
  C13: 'threshold',
  C18: 'dkg',
  C20: 'standing',
  C21: 'standing',
};

async function load(id: ClassId): Promise<ConformanceClass | undefined> {
  let mod: Record<string, unknown>;
  try {
    mod = (await import(`./classes/${HOMES[id]}.ts`)) as Record<string, unknown>;
  } catch (e) {
    // The build rewrites the import to `.js`: the missing file is named with either extension.
    if (
      (e as { code?: string }).code === 'ERR_MODULE_NOT_FOUND' &&
      /\/classes\/([\w-]+)\.[jt]s\b/.exec(String((e as Error).message))?.[1] === HOMES[id]
    ) {
      return undefined;
    }
    throw e;
  }
  return mod[id.replace('-', '_')] as ConformanceClass | undefined;
}

/** Runs one class; never throws (an exception is a failure with its message as detail). */
export async function runClass(id: ClassId): Promise<ClassResult> {
  const t = new Checker();
  try {
    const cls = await load(id);
    if (!cls) return { status: 'fail', checks: 0, detail: 'not implemented' };
    await cls.run(t);
  } catch (e) {
    t.failures.push(`threw: ${(e as Error)?.message ?? String(e)}`);
  }
  if (t.checks === 0 && t.failures.length === 0) return { status: 'fail', checks: 0, detail: 'ran no checks' };
  if (t.failures.length > 0) {
    return { status: 'fail', checks: t.checks, detail: `${t.failures.length} failed; first: ${t.failures[0]}` };
  }
  return { status: 'pass', checks: t.checks, detail: '' };
}

/** Runs the given classes (default: all) in order. */
export async function runConformance(ids: readonly ClassId[] = CLASS_IDS): Promise<Record<string, ClassResult>> {
  const out: Record<string, ClassResult> = {};
  for (const id of ids) out[id] = await runClass(id);
  return out;
}
