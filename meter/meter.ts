/**
 * The energy meter (spec §5, docs/design.md "Energy"): walks the ladder RAPL → NVML → time × calibrated
 * power → per-action constant, and meters calls with the best rung that works.
 *
 * Honesty rules kept here:
 * - a figure carries the provenance of the rung that actually produced it (§5): HwShunt only
 *   when two hardware readings made a delta, with that delta as `measured`; when a hardware read
 *   fails at the start or half-way, that figure degrades to the model (ModelBased, no `measured`)
 *   or, with no calibrated power, to the constant (Estimator), and `reading.degraded` says why;
 * - a call is never priced below its per-action estimate: `cost.uj = max(figure, estimateUj(action))`,
 *   while `measured` (HwShunt) keeps the raw hardware delta, so an auditor sees both;
 * - a reading names the counters it summed (`reading.summed`), and an NVML counter that restarted
 *   during the call (driver reload) counts only the energy since the restart and is named in
 *   `reading.reset`: the figure is then a lower bound (see nvml.ts).
 * Hardware counters are system-wide; see rapl.ts for the attribution choice (package energy over
 * the call's wall interval, which over-counts under concurrency rather than under-charging).
 */
import { asArray, asEnum, asObj, asText, asUint, check, type Cost, err, ok, type Result, type Uj } from '../core/index.ts';
import {
  type Failure,
  type ModelInfo,
  type Probe,
  type Reading,
  RUNG_PROVENANCE,
  RUNGS,
  type Rung,
  type Skipped,
  skipped,
  type WattsSource,
} from './ladder.ts';
import { type CpuUsage, checkWatts, cpuDeltaUs, DEFAULT_ESTIMATE_UJ, modelUj } from './model.ts';
import { loadNvml, NVML_LIBRARY, type NvmlBinding, type NvmlSource, openNvml } from './nvml.ts';
import { DEFAULT_POWERCAP_ROOT, type MeterFs, nodeFs, openRapl, type RaplSource } from './rapl.ts';

/** Meter settings (the node's `meter` config section, see {@link readMeterConfig}). */
export interface MeterConfig {
  /** Rungs the meter may use, best first; the estimator is always the last resort. Default: all. */
  readonly rungs?: readonly Rung[];
  /** Calibrated active power of the model, in watts (µJ per µs of time). Without it the model rung is skipped `not-calibrated` until {@link Meter.calibrate} runs. */
  readonly activeWatts?: number;
  /** The model's time: CPU time of the metered work (default) or the call's wall-clock duration. */
  readonly modelBasis?: 'cpu-time' | 'wall-time';
  /** Per-action constants (µJ): the Estimator figure and the floor every call of that action is priced at. */
  readonly estimatesUj?: Readonly<Record<string, Uj>>;
  /** The constant (µJ) for actions not in `estimatesUj`. Default {@link DEFAULT_ESTIMATE_UJ}. */
  readonly defaultEstimateUj?: Uj;
  /** The NVML shared library. Default `libnvidia-ml.so.1`. */
  readonly nvmlLibrary?: string;
}

/** Effects the meter uses, injectable for tests. */
export interface MeterDeps {
  /** File access for RAPL. Default: node:fs. */
  readonly fs?: MeterFs;
  /** The powercap folder. Default `/sys/class/powercap`. */
  readonly powercapRoot?: string;
  /** Loads the NVML binding. Default: koffi over `config.nvmlLibrary`. */
  readonly nvml?: () => NvmlBinding | Promise<NvmlBinding>;
  /** CPU time of the metered work (µs). Default `process.cpuUsage()`. */
  readonly cpuUsage?: () => CpuUsage;
  /** A monotonic clock in ns. Default `process.hrtime.bigint()`. */
  readonly clockNs?: () => bigint;
}

/** A metered call: its result, the cost to debit, and how the figure was obtained. */
export interface Metered<T> {
  readonly result: T;
  readonly cost: Cost;
  readonly reading: Reading;
}

/** Thrown by {@link Meter.measure} when the metered function throws: the energy was still spent, so the cost comes along. `cause` is the original error. */
export class MeteredError extends Error {
  override readonly name = 'MeteredError';
  readonly cost: Cost;
  readonly reading: Reading;

  constructor(cause: unknown, cost: Cost, reading: Reading) {
    super(`metered call failed: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.cost = cost;
    this.reading = reading;
  }
}

/** The outcome of {@link Meter.calibrate}: the model's active power from a hardware reading. */
export interface Calibration {
  /** Active power (W): hardware µJ per µs of model time. */
  readonly watts: number;
  readonly rung: 'rapl' | 'nvml';
  readonly energyUj: Uj;
  readonly timeUs: number;
}

/** The energy meter. */
export interface Meter {
  /** Probes the ladder on this machine (again): the rung in use, its provenance, and why better rungs were skipped. */
  probe(): Promise<Probe>;
  /** Runs `fn` and meters it with the probed rung (probing first if needed). Rethrows a failure of `fn` as {@link MeteredError} carrying the cost. */
  measure<T>(action: string, fn: () => T | Promise<T>): Promise<Metered<T>>;
  /** The per-action constant (µJ): the Estimator figure and the floor every call of `action` is priced at. */
  estimateUj(action: string): Uj;
  /** Calibrates the model's active power against the hardware rung in use (busy loop of `busyMs` ms). Fails when no hardware rung works. */
  calibrate(opts?: { busyMs?: number }): Promise<Result<Calibration, Skipped>>;
  /** Releases NVML if it was opened. */
  close(): void;
}

type Hardware = { rung: 'rapl'; src: RaplSource } | { rung: 'nvml'; src: NvmlSource };
type Snapshot = readonly bigint[];

/**
 * Creates a meter (spec §5). Nothing is read until the first {@link Meter.probe} or
 * {@link Meter.measure}. @throws JcpError `schema` for a bad config (watts ≤ 0, unknown rung).
 */
export function createMeter(config: MeterConfig = {}, deps: MeterDeps = {}): Meter {
  const settings = checkedSettings(config);
  const { enabled, basis, defaultEstimate } = settings;
  let watts = settings.watts;
  let wattsSource: WattsSource | undefined = watts === undefined ? undefined : 'configured';
  const fs = deps.fs ?? nodeFs;
  const root = deps.powercapRoot ?? DEFAULT_POWERCAP_ROOT;
  const loadBinding = deps.nvml ?? (() => loadNvml(config.nvmlLibrary ?? NVML_LIBRARY));
  const cpuUsage = deps.cpuUsage ?? (() => process.cpuUsage());
  const clockNs = deps.clockNs ?? (() => process.hrtime.bigint());

  let hw: Hardware | undefined;
  let probed: Probe | undefined;
  let probing: Promise<Probe> | undefined;
  /** The first probe, shared by concurrent callers (so NVML is opened once). */
  const ensureProbed = (): Promise<Probe> => (probing ??= probe());

  const model = (): ModelInfo => (watts === undefined ? { basis } : { basis, watts, wattsSource: wattsSource! });
  const modelUsable = () => enabled.has('cpu-time') && watts !== undefined;

  function estimateUj(action: string): Uj {
    const table = config.estimatesUj;
    return table !== undefined && Object.hasOwn(table, action) ? table[action]! : defaultEstimate;
  }

  function release(): void {
    if (hw?.rung === 'nvml') hw.src.close();
    hw = undefined;
  }

  async function probe(): Promise<Probe> {
    release();
    const picked = await openFirstRung({ enabled, root, fs, loadBinding, basis, watts, wattsSource, defaultEstimate });
    hw = picked.hw;
    const { rung, detail, skips, extra } = picked;
    probed = { rung, provenance: RUNG_PROVENANCE[rung], detail, skipped: skips, model: model(), ...extra };
    return probed;
  }

  async function measure<T>(action: string, fn: () => T | Promise<T>): Promise<Metered<T>> {
    if (probed === undefined) await ensureProbed();
    const floorUj = estimateUj(action);
    const source = hw;
    const degraded: Skipped[] = [];
    const t0 = clockNs();
    const c0 = cpuUsage();
    const start = source !== undefined ? firstReading(source, degraded) : undefined;
    const outcome = await settled(fn);
    const { hwUj, reset } =
      source !== undefined && start?.ok ? secondReading(source, start.value, degraded) : { hwUj: undefined, reset: [] };
    const c1 = cpuUsage();
    const t1 = clockNs();
    const wallNs = t1 > t0 ? t1 - t0 : 0n;
    const cpuUs = cpuDeltaUs(c0, c1);

    let rung: Rung;
    let rawUj: Uj | undefined;
    if (hwUj !== undefined) {
      rung = source!.rung;
      rawUj = hwUj;
    } else if (modelUsable()) {
      rung = 'cpu-time';
      rawUj = modelUj(basis === 'cpu-time' ? cpuUs : Number(wallNs) / 1000, watts!);
    } else {
      if (source !== undefined && enabled.has('cpu-time')) degraded.push(skipped('cpu-time', notCalibrated()));
      rung = 'estimator';
    }
    const { cost, reading } = costOf(rung, rawUj, floorUj, {
      wallNs,
      cpuUs,
      degraded,
      reset,
      ...(hwUj !== undefined ? { summed: summedOf(source!) } : {}),
    });
    if (!outcome.ok) throw new MeteredError(outcome.error, cost, reading);
    return { result: outcome.value, cost, reading };
  }

  async function calibrate(opts: { busyMs?: number } = {}): Promise<Result<Calibration, Skipped>> {
    if (probed === undefined) await ensureProbed();
    const source = hw;
    if (source === undefined) {
      return err({ rung: 'cpu-time', reason: 'absent', detail: 'calibration needs a working RAPL or NVML rung' });
    }
    const run = calibrationRun(source, opts.busyMs ?? 250, clockNs, cpuUsage, basis);
    if (!run.ok) return run;
    const { d, timeUs } = run.value;
    watts = checkWatts(Number(d.value) / timeUs, 'calibrated watts');
    wattsSource = 'calibrated';
    if (probed !== undefined) probed = { ...probed, model: model() };
    return ok({ watts, rung: source.rung, energyUj: d.value, timeUs });
  }

  return { probe, measure, estimateUj, calibrate, close: release };
}

/**
 * The meter config checked (§5): the enabled rungs, the configured active power (W), the model
 * basis and the default estimate (µJ). @throws JcpError `schema` naming the field (unknown rung,
 * watts ≤ 0, an estimate < 0), in that order.
 */
function checkedSettings(config: MeterConfig): {
  enabled: Set<Rung>;
  watts: number | undefined;
  basis: ModelInfo['basis'];
  defaultEstimate: Uj;
} {
  const enabled = new Set<Rung>(config.rungs ?? RUNGS);
  for (const r of enabled) check((RUNGS as readonly string[]).includes(r), 'meter.rungs', `unknown rung ${String(r)}`);
  const watts = config.activeWatts === undefined ? undefined : checkWatts(config.activeWatts, 'meter.activeWatts');
  const basis = config.modelBasis ?? 'cpu-time';
  const defaultEstimate = config.defaultEstimateUj ?? DEFAULT_ESTIMATE_UJ;
  check(defaultEstimate >= 0n, 'meter.defaultEstimateUj', 'must be ≥ 0');
  for (const [a, v] of Object.entries(config.estimatesUj ?? {})) check(v >= 0n, `meter.estimatesUj.${a}`, 'must be ≥ 0');
  return { enabled, watts, basis, defaultEstimate };
}

/** The hardware reading before a measured call; a failed one is recorded in `degraded` (the call is then priced without it). */
function firstReading(source: Hardware, degraded: Skipped[]): Result<Snapshot, Failure> {
  const start = source.src.read();
  if (!start.ok) {
    const reason = start.error.reason === 'permission-denied' ? 'permission-denied' : 'read-failed';
    degraded.push({ rung: source.rung, reason, detail: `first reading: ${start.error.detail}` });
  }
  return start;
}

/** Runs `fn` to the end: its value, or what it threw (rethrown by the caller once the cost is known). */
async function settled<T>(fn: () => T | Promise<T>): Promise<Result<T, unknown>> {
  try {
    return ok(await fn());
  } catch (e) {
    return err(e);
  }
}

/**
 * A calibration busy loop of `busyMs` ms (at least 1 ns) against the hardware rung: the energy (µJ)
 * and the time (µs, CPU or wall by `basis`). Refuses `read-failed` when either is zero.
 */
function calibrationRun(
  source: Hardware,
  busyMs: number,
  clockNs: () => bigint,
  cpuUsage: () => CpuUsage,
  basis: ModelInfo['basis'],
): Result<{ d: { value: Uj }; timeUs: number }, Skipped> {
  const run = busyRun(source, BigInt(Math.max(1, Math.round(busyMs * 1e6))), clockNs, cpuUsage, basis);
  if (!run.ok) return run;
  const { d, timeUs } = run.value;
  if (!(timeUs > 0) || d.value === 0n) {
    return err({ rung: source.rung, reason: 'read-failed', detail: `no usable calibration: ${d.value} µJ over ${timeUs} µs` });
  }
  return run;
}

/** The skip reason of the CPU-time model without an active power (§5). */
function notCalibrated(): Failure {
  return { reason: 'not-calibrated', detail: 'no active power: configure meter.active_watts, or calibrate against RAPL/NVML' };
}

/** What {@link openFirstRung} tries the rungs with: the enabled set, the hardware sources, the model's power. */
interface RungChoice {
  readonly enabled: ReadonlySet<Rung>;
  readonly root: string;
  readonly fs: MeterFs;
  readonly loadBinding: () => NvmlBinding | Promise<NvmlBinding>;
  readonly basis: ModelInfo['basis'];
  readonly watts: number | undefined;
  readonly wattsSource: WattsSource | undefined;
  readonly defaultEstimate: Uj;
}

/**
 * Tries the rungs in ladder order (§5: RAPL, NVML, the CPU-time model, the Estimator) and stops at
 * the first that works: a disabled rung is skipped as `disabled`, a hardware rung that does not
 * open with its failure, the model without a power as `not-calibrated`. Returns the opened
 * hardware source (none for the model and the Estimator), the rung, its detail text, the skips
 * and, for hardware, what it sums. Never throws.
 */
async function openFirstRung(c: RungChoice): Promise<{
  hw: Hardware | undefined;
  rung: Rung;
  detail: string;
  skips: Skipped[];
  extra: Pick<Probe, 'summed' | 'notSummed'>;
}> {
  const { enabled, root, fs, loadBinding, basis, watts, wattsSource, defaultEstimate } = c;
  let hw: Hardware | undefined;
  const skips: Skipped[] = [];
  let rung: Rung = 'estimator';
  let detail = '';
  let extra: Pick<Probe, 'summed' | 'notSummed'> = {};
  for (const r of RUNGS) {
    if (r === 'estimator') {
      detail = `per-action constant (default ${defaultEstimate} µJ)`;
      break;
    }
    if (!enabled.has(r)) {
      skips.push({ rung: r, reason: 'disabled', detail: 'left out of meter.rungs' });
      continue;
    }
    if (r === 'rapl') {
      const o = openRapl(root, fs);
      if (o.ok) {
        hw = { rung: 'rapl', src: o.value };
        detail = `powercap ${o.value.domains.map((d) => d.label).join(' + ')}`;
        extra = { summed: summedOf(hw), notSummed: o.value.excluded.map((x) => ({ domain: x.label, why: x.why })) };
        rung = r;
        break;
      }
      skips.push(skipped(r, o.error));
    } else if (r === 'nvml') {
      const o = await openNvml(loadBinding);
      if (o.ok) {
        hw = { rung: 'nvml', src: o.value };
        detail = `NVML total energy of GPU ${o.value.deviceIndices.join(', ')}`;
        extra = { summed: summedOf(hw) };
        rung = r;
        break;
      }
      skips.push(skipped(r, o.error));
    } else {
      if (watts !== undefined) {
        detail = `${basis} × ${watts} W (${wattsSource})`;
        rung = r;
        break;
      }
      skips.push(skipped(r, notCalibrated()));
    }
  }
  return { hw, rung, detail, skips, extra };
}

/**
 * A call's cost and reading (§5): `rung`'s provenance, the raw figure (µJ) raised to the action's
 * floor `floorUj`, and for HwShunt the raw figure as `measured`. Never throws.
 */
function costOf(
  rung: Rung,
  rawUj: Uj | undefined,
  floorUj: Uj,
  r: { wallNs: bigint; cpuUs: number; degraded: Skipped[]; reset: readonly string[]; summed?: string[] },
): { cost: Cost; reading: Reading } {
  const provenance = RUNG_PROVENANCE[rung];
  const uj = rawUj !== undefined && rawUj > floorUj ? rawUj : floorUj;
  const cost: Cost = provenance === 'HwShunt' ? { uj, provenance, measured: rawUj! } : { uj, provenance };
  const reading: Reading = {
    rung,
    ...(rawUj !== undefined ? { rawUj } : {}),
    floorUj,
    wallNs: r.wallNs,
    cpuUs: r.cpuUs,
    degraded: r.degraded,
    ...(r.summed !== undefined ? { summed: r.summed } : {}),
    ...(r.reset.length > 0 ? { reset: r.reset } : {}),
  };
  return { cost, reading };
}

/**
 * The end of a hardware-metered call: reads `source` again and returns the call's energy (µJ)
 * from `start` and the counters that reset meanwhile; a failed read (`failed-mid-reading`) or an
 * unusable delta is pushed to `degraded` and leaves `hwUj` undefined. Never throws.
 */
function secondReading(source: Hardware, start: Snapshot, degraded: Skipped[]): { hwUj: Uj | undefined; reset: readonly string[] } {
  const end = source.src.read();
  if (!end.ok) {
    degraded.push({ rung: source.rung, reason: 'failed-mid-reading', detail: `second reading: ${end.error.detail}` });
    return { hwUj: undefined, reset: [] };
  }
  const d = callDeltaOf(source, start, end.value);
  if (!d.ok) {
    degraded.push(skipped(source.rung, d.error));
    return { hwUj: undefined, reset: [] };
  }
  return { hwUj: d.value.uj, reset: d.value.reset };
}

/**
 * A calibration run: a busy loop of `busyNs` ns bracketed by two readings of `source`. Returns the
 * energy (µJ, as `d.value`) and the time (µs: CPU time for the `cpu-time` basis, else wall time).
 * Fails (never throws) with the rung's skip when a reading or the delta fails.
 */
function busyRun(
  source: Hardware,
  busyNs: bigint,
  clockNs: () => bigint,
  cpuUsage: () => CpuUsage,
  basis: ModelInfo['basis'],
): Result<{ d: { value: Uj }; timeUs: number }, Skipped> {
  const t0 = clockNs();
  const c0 = cpuUsage();
  const start = source.src.read();
  if (!start.ok) return err(skipped(source.rung, start.error));
  let x = 0;
  for (let i = 0; clockNs() - t0 < busyNs; i++) x = Math.sqrt(x + i);
  const end = source.src.read();
  const c1 = cpuUsage();
  const t1 = clockNs();
  if (!end.ok) return err({ rung: source.rung, reason: 'failed-mid-reading', detail: end.error.detail });
  const d = deltaOf(source, start.value, end.value);
  if (!d.ok) return err(skipped(source.rung, d.error));
  const timeUs = basis === 'cpu-time' ? cpuDeltaUs(c0, c1) : Number(t1 - t0) / 1000;
  return ok({ d: { value: d.value }, timeUs });
}

function deltaOf(source: Hardware, a: Snapshot, b: Snapshot): Result<Uj, Failure> {
  return source.rung === 'rapl' ? source.src.deltaUj(a, b) : source.src.deltaUj(a, b);
}

/** A call's hardware delta: for NVML a counter restart (driver reload) counts the energy since it, named in `reset`. */
function callDeltaOf(source: Hardware, a: Snapshot, b: Snapshot): Result<{ uj: Uj; reset: readonly string[] }, Failure> {
  if (source.rung === 'nvml') return source.src.delta(a, b);
  const d = source.src.deltaUj(a, b);
  return d.ok ? ok({ uj: d.value, reset: [] }) : d;
}

/** The counters a hardware source sums, as reports name them. */
function summedOf(source: Hardware): string[] {
  return source.rung === 'rapl' ? source.src.domains.map((d) => d.label) : source.src.deviceIndices.map((i) => `GPU ${i}`);
}

/**
 * Reads the `meter` section of a node config (snake_case JSON): `rungs`, `active_watts`,
 * `model_basis`, `estimates_uj` (action → µJ), `default_estimate_uj`, `nvml_library`.
 * @throws JcpError `schema` naming the field.
 */
export function readMeterConfig(v: unknown, field = 'meter'): MeterConfig {
  const o = asObj(v, field, [], ['rungs', 'active_watts', 'model_basis', 'estimates_uj', 'default_estimate_uj', 'nvml_library']);
  const out: {
    -readonly [K in keyof MeterConfig]: MeterConfig[K];
  } = {};
  if (o['rungs'] !== undefined) {
    out.rungs = asArray(o['rungs'], `${field}.rungs`, RUNGS.length).map((r, i) => asEnum(r, `${field}.rungs[${i}]`, RUNGS));
  }
  if (o['active_watts'] !== undefined) out.activeWatts = checkWatts(o['active_watts'] as number, `${field}.active_watts`);
  if (o['model_basis'] !== undefined) out.modelBasis = asEnum(o['model_basis'], `${field}.model_basis`, ['cpu-time', 'wall-time'] as const);
  if (o['estimates_uj'] !== undefined) {
    const e = o['estimates_uj'];
    check(typeof e === 'object' && e !== null && !Array.isArray(e), `${field}.estimates_uj`, 'expected a map of action → µJ');
    const table: Record<string, Uj> = {};
    for (const [a, uj] of Object.entries(e)) table[a] = asUint(uj, `${field}.estimates_uj.${a}`);
    out.estimatesUj = table;
  }
  if (o['default_estimate_uj'] !== undefined) out.defaultEstimateUj = asUint(o['default_estimate_uj'], `${field}.default_estimate_uj`);
  if (o['nvml_library'] !== undefined) out.nvmlLibrary = asText(o['nvml_library'], `${field}.nvml_library`);
  return out;
}
