/**
 * RAPL through Linux powercap sysfs (spec §5 rung 1 → HwShunt).
 *
 * Reads the package domains only (`intel-rapl:N` whose `name` starts with `package`; subdomains
 * such as `intel-rapl:0:0` core or dram are inside the package figure already, and `psys` is a
 * different scope). Each `energy_uj` is a free-running counter that wraps at
 * `max_energy_range_uj`; a delta whose second reading is below the first is corrected as
 * `max_energy_range_uj − before + after`. The kernel's counter steps by one energy unit
 * (≈15–61 µJ), so one corrected wrap may under-count by at most one unit; a call longer than a
 * full wrap period (minutes at full load) cannot be told from a short one and is not supported.
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
import type { Uj } from '../core/energy.ts';
import { err, ok, type Result } from '../core/result.ts';
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

/** One package domain. */
export interface RaplDomain {
  /** The domain's folder, e.g. `/sys/class/powercap/intel-rapl:0`. */
  readonly dir: string;
  /** Its `name`, e.g. `package-0`. */
  readonly name: string;
  /** The counter's range (µJ): it wraps back to 0 after this. */
  readonly maxRangeUj: Uj;
}

/** A snapshot of every package counter (µJ), in domain order. */
export type RaplSnapshot = readonly Uj[];

const PACKAGE_DIR = /^intel-rapl:(\d+)$/;
const COUNTER = /^\d+$/;

/** Reads RAPL package counters from a powercap folder. Construct it with {@link openRapl}. */
export class RaplSource {
  readonly domains: readonly RaplDomain[];
  readonly #fs: MeterFs;

  constructor(domains: readonly RaplDomain[], fs: MeterFs) {
    this.domains = domains;
    this.#fs = fs;
  }

  /** Reads every package's `energy_uj`. Fails with the errno's reason, or `read-failed` for a garbled counter. */
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
   * The energy (µJ) between two snapshots, summed over packages, wraparound corrected.
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
      if (!r.ok) return err({ reason: 'failed-mid-reading', detail: `${d.name}: ${r.error}` });
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
 * Finds the package domains under `root` and takes one trial reading (spec §5, rung 1).
 * Fails `absent` (no folder, no package domain), `permission-denied` (energy_uj is root-only on
 * most kernels since 2020), or `read-failed` (EIO, a garbled counter or range).
 */
export function openRapl(root: string, fs: MeterFs): Result<RaplSource, Failure> {
  let names: string[];
  try {
    names = fs.readdir(root);
  } catch (e) {
    return err({ reason: reasonOfErrno(e), detail: `${root}: ${messageOf(e)}` });
  }
  const packages = names
    .map((n) => ({ n, m: PACKAGE_DIR.exec(n) }))
    .filter((x) => x.m !== null)
    .sort((a, b) => Number(a.m![1]) - Number(b.m![1]));
  const domains: RaplDomain[] = [];
  for (const { n } of packages) {
    const dir = join(root, n);
    let name: string;
    try {
      name = fs.readFile(join(dir, 'name')).trim();
    } catch (e) {
      return err({ reason: reasonOfErrno(e), detail: `${join(dir, 'name')}: ${messageOf(e)}` });
    }
    if (!name.startsWith('package')) continue;
    const max = readCounter(fs, join(dir, 'max_energy_range_uj'));
    if (!max.ok) return max;
    if (max.value === 0n) return err({ reason: 'read-failed', detail: `${join(dir, 'max_energy_range_uj')}: range is 0` });
    domains.push({ dir, name, maxRangeUj: max.value });
  }
  if (domains.length === 0) return err({ reason: 'absent', detail: `${root}: no intel-rapl package domain` });
  const source = new RaplSource(domains, fs);
  const trial = source.read();
  if (!trial.ok) return trial;
  return ok(source);
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
