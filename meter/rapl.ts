/**
 * RAPL through Linux powercap sysfs (spec §5 rung 1 → HwShunt).
 *
 * Which domains are summed. Powercap shows each RAPL domain as a zone: top-level zones
 * `intel-rapl:N` (one per package, named `package-N`, and on client platforms one named `psys`)
 * and sub-zones `intel-rapl:N:M` under a package (`core`, `uncore`, `dram`). A figure is the sum
 * of the zones whose energy is not already inside another summed zone:
 * - `package-N`: summed (the socket: cores, caches, uncore, integrated GPU);
 * - `dram` (a sub-zone, or a top-level zone on platforms that list it so): summed. DRAM is its
 *   own RAPL domain (MSR_DRAM_ENERGY_STATUS) and is not part of the package figure, so leaving
 *   it out under-charges memory-bound work;
 * - `core` (PP0) and `uncore` (PP1) sub-zones: not summed, they are inside their package;
 * - `psys` (the platform domain, Skylake and newer): not summed. It covers the whole SoC
 *   platform, package and DRAM included, so adding it to them would count the same joules
 *   twice; we keep the finer package + DRAM figure, whose domains each say what they cover;
 * - `intel-rapl-mmio:N`: not summed, the same package counter again through MMIO;
 * - any other name: not summed, listed as unknown (a figure never includes a zone whose
 *   overlap with the others we cannot state).
 * {@link RaplSource.domains} lists the summed zones, {@link RaplSource.excluded} the others with
 * why; the meter puts both in its probe and the summed ones in each reading.
 *
 * Wraparound. Each `energy_uj` is a free-running counter that wraps at that zone's own
 * `max_energy_range_uj` (DRAM and package ranges differ); a delta whose second reading is below
 * the first is corrected as `max_energy_range_uj − before + after`. The kernel's counter steps by
 * one energy unit (≈15–61 µJ), so one corrected wrap may under-count by at most one unit; a call
 * longer than a full wrap period (minutes at full load) cannot be told from a short one and is
 * not supported.
 *
 * Attribution: the counters are system-wide. A figure is the package energy over the call's wall
 * interval, all of it, whoever spent it. Under concurrency (other calls, other processes) this
 * over-counts: two overlapping calls are each charged the whole package energy. We take that
 * side on purpose: a budget is never under-charged. The alternative, apportioning the package
 * energy by this process's share of busy CPU time, would under-charge work done by child
 * processes and idle-power effects, and would turn a hardware reading into a model.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { err, ok, type Result, type Uj } from '../core/index.ts';
import { type Failure, messageOf, reasonOfErrno } from './ladder.ts';

/** The two file operations the RAPL reader needs; injectable so tests drive a fake sysfs (and inject read errors). */
export interface MeterFs {
  /** Names in a directory. Throws a Node-style error with `code` (ENOENT, EACCES…). */
  readdir(path: string): string[];
  /** A file's text. Throws a Node-style error with `code` (ENOENT, EACCES, EIO…). */
  readFile(path: string): string;
}

/** The real file system. */
export const nodeFs: MeterFs = {
  readdir: (p) => readdirSync(p),
  readFile: (p) => readFileSync(p, 'utf8'),
};

/** Where powercap lives on Linux. */
export const DEFAULT_POWERCAP_ROOT = '/sys/class/powercap';

/** One summed RAPL domain (a package, or a DRAM domain). */
export interface RaplDomain {
  /** The domain's folder, e.g. `/sys/class/powercap/intel-rapl:0`. */
  readonly dir: string;
  /** Its `name`, e.g. `package-0` or `dram`. */
  readonly name: string;
  /** How reports name it: `package-0`, or for a sub-zone its name and the package it sits under, `dram (package-0)`. */
  readonly label: string;
  /** The counter's range (µJ): it wraps back to 0 after this. */
  readonly maxRangeUj: Uj;
}

/** A powercap zone that is not summed, and why (inside its package, overlaps the package, a duplicate, unknown). */
export interface RaplExcluded {
  /** Its label, as {@link RaplDomain.label}, e.g. `core (package-0)`, `psys`. */
  readonly label: string;
  /** Why it is left out of the sum. */
  readonly why: string;
}

/** A snapshot of every summed counter (µJ), in domain order. */
export type RaplSnapshot = readonly Uj[];

const ZONE_DIR = /^intel-rapl:(\d+)(?::(\d+))?$/;
const MMIO_DIR = /^intel-rapl-mmio:/;
const COUNTER = /^\d+$/;

/** Reads the summed RAPL counters (packages and DRAM) from a powercap folder. Construct it with {@link openRapl}. */
export class RaplSource {
  /** The summed domains, packages in index order, each followed by its DRAM domain when there is one. */
  readonly domains: readonly RaplDomain[];
  /** The zones found and not summed, with why. */
  readonly excluded: readonly RaplExcluded[];
  readonly #fs: MeterFs;

  constructor(domains: readonly RaplDomain[], fs: MeterFs, excluded: readonly RaplExcluded[] = []) {
    this.domains = domains;
    this.excluded = excluded;
    this.#fs = fs;
  }

  /** Reads every summed domain's `energy_uj`. Fails with the errno's reason, or `read-failed` for a garbled counter. */
  read(): Result<RaplSnapshot, Failure> {
    const out: Uj[] = [];
    for (const d of this.domains) {
      const r = readCounter(this.#fs, join(d.dir, 'energy_uj'));
      if (!r.ok) return r;
      out.push(r.value);
    }
    return ok(out);
  }

  /**
   * The energy (µJ) between two snapshots, summed over the summed domains, each wraparound
   * corrected with its own `max_energy_range_uj`.
   * Fails with `failed-mid-reading` when the snapshots cannot make a delta (a counter past its range).
   */
  deltaUj(before: RaplSnapshot, after: RaplSnapshot): Result<Uj, Failure> {
    if (before.length !== this.domains.length || after.length !== this.domains.length) {
      return err({ reason: 'failed-mid-reading', detail: 'snapshots do not cover the same domains' });
    }
    let total = 0n;
    for (let i = 0; i < this.domains.length; i++) {
      const d = this.domains[i]!;
      const r = wrapDelta(before[i]!, after[i]!, d.maxRangeUj);
      if (!r.ok) return err({ reason: 'failed-mid-reading', detail: `${d.label}: ${r.error}` });
      total += r.value;
    }
    return ok(total);
  }
}

/**
 * The delta of a counter that wraps at `maxRangeUj` (µJ): `after − before`, or
 * `maxRangeUj − before + after` when it wrapped. Errors when a reading lies outside the range.
 */
export function wrapDelta(before: Uj, after: Uj, maxRangeUj: Uj): Result<Uj, string> {
  if (before > maxRangeUj || after > maxRangeUj) {
    return err(`counter reading ${before > maxRangeUj ? before : after} above max_energy_range_uj ${maxRangeUj}`);
  }
  if (after >= before) return ok(after - before);
  return ok(maxRangeUj - before + after);
}

/**
 * Finds the RAPL domains under `root`, sorts them into summed and not summed (see the file
 * comment: packages and DRAM are summed; core, uncore, psys, MMIO duplicates and unknown zones
 * are not) and takes one trial reading (spec §5, rung 1).
 * Fails `absent` (no folder, no package domain), `permission-denied` (energy_uj is root-only on
 * most kernels since 2020), or `read-failed` (EIO, a garbled counter or range) for any summed
 * domain: a figure that silently dropped the DRAM domain would under-charge.
 */
export function openRapl(root: string, fs: MeterFs): Result<RaplSource, Failure> {
  let names: string[];
  try {
    names = fs.readdir(root);
  } catch (e) {
    return err({ reason: reasonOfErrno(e), detail: `${root}: ${messageOf(e)}` });
  }
  const zones: { n: string; top: number; sub: number | undefined }[] = [];
  const excluded: RaplExcluded[] = [];
  for (const n of names) {
    const m = ZONE_DIR.exec(n);
    if (m !== null) zones.push({ n, top: Number(m[1]), sub: m[2] === undefined ? undefined : Number(m[2]) });
    else if (MMIO_DIR.test(n)) excluded.push({ label: n, why: 'the same package counter through MMIO' });
  }
  // Packages in index order, each followed by its sub-zones in index order.
  zones.sort((a, b) => a.top - b.top || (a.sub ?? -1) - (b.sub ?? -1));
  const nameOf = new Map<string, string>();
  const domains: RaplDomain[] = [];
  for (const z of zones) {
    const dir = join(root, z.n);
    let name: string;
    try {
      name = fs.readFile(join(dir, 'name')).trim();
    } catch (e) {
      return err({ reason: reasonOfErrno(e), detail: `${join(dir, 'name')}: ${messageOf(e)}` });
    }
    if (z.sub === undefined) nameOf.set(`${z.top}`, name);
    const parent = z.sub === undefined ? undefined : (nameOf.get(`${z.top}`) ?? `intel-rapl:${z.top}`);
    const label = parent === undefined ? name : `${name} (${parent})`;
    const why = exclusionOf(name, parent);
    if (why !== undefined) {
      excluded.push({ label, why });
      continue;
    }
    const max = readCounter(fs, join(dir, 'max_energy_range_uj'));
    if (!max.ok) return max;
    if (max.value === 0n) return err({ reason: 'read-failed', detail: `${join(dir, 'max_energy_range_uj')}: range is 0` });
    domains.push({ dir, name, label, maxRangeUj: max.value });
  }
  if (!domains.some((d) => d.name.startsWith('package'))) {
    return err({ reason: 'absent', detail: `${root}: no intel-rapl package domain` });
  }
  const source = new RaplSource(domains, fs, excluded);
  const trial = source.read();
  if (!trial.ok) return trial;
  return ok(source);
}

/** Why a zone named `name` (under package `parent`, for a sub-zone) is not summed, or undefined when it is. */
function exclusionOf(name: string, parent: string | undefined): string | undefined {
  if (name === 'dram') return undefined;
  if (parent === undefined) {
    if (name.startsWith('package')) return undefined;
    if (name === 'psys') return 'covers the whole platform, package and DRAM included';
    return 'unknown domain: its overlap with the package is not known';
  }
  if (name === 'core' || name === 'uncore') return `inside ${parent}`;
  return `unknown sub-domain, taken to be inside ${parent}`;
}

function readCounter(fs: MeterFs, path: string): Result<Uj, Failure> {
  let text: string;
  try {
    text = fs.readFile(path).trim();
  } catch (e) {
    return err({ reason: reasonOfErrno(e), detail: `${path}: ${messageOf(e)}` });
  }
  if (!COUNTER.test(text)) return err({ reason: 'read-failed', detail: `${path}: not a counter: ${JSON.stringify(text.slice(0, 40))}` });
  return ok(BigInt(text));
}
