/**
 * NVML total GPU energy (spec §5 rung 2 → HwShunt), through koffi over `libnvidia-ml.so.1`.
 *
 * `nvmlDeviceGetTotalEnergyConsumption` reports millijoules since the driver was loaded, as a
 * 64-bit counter that does not wrap; it exists on Volta and newer GPUs (older ones answer
 * NVML_ERROR_NOT_SUPPORTED and are left out). A figure is the sum over every supporting GPU of
 * the energy over the call's wall interval; like RAPL it is device-wide, so concurrent work on
 * the same GPU is counted in full (see rapl.ts for why we over-count rather than apportion).
 *
 * A counter that goes backwards between the two readings of a call means the driver was
 * reloaded during the call (the counter restarts from 0 at load). Its second reading is then
 * the energy since the reload: a hardware figure for the tail of the call, a lower bound of the
 * whole. {@link NvmlSource.delta} counts that (HwShunt: it is a reading, not a model) and names
 * the GPU in `reset`, which the meter copies into the reading so an auditor sees that the figure
 * misses the energy spent before the reload. When the second reading fails (the handle is lost
 * with the old driver), the readings allow nothing and the figure degrades as for any failed read.
 */
import { err, ok, type Result, type Uj } from '../core/index.ts';
import { type Failure, messageOf } from './ladder.ts';

/**
 * The NVML calls the meter makes, shaped exactly as koffi binds them: each returns an
 * `nvmlReturn_t` (0 = success) and writes its output into element 0 of the array it is given.
 * Tests pass a fake with the same shape.
 */
export interface NvmlBinding {
  nvmlInit_v2(): number;
  nvmlDeviceGetCount_v2(count: unknown[]): number;
  nvmlDeviceGetHandleByIndex_v2(index: number, device: unknown[]): number;
  /** Writes the device's total energy in millijoules (number or bigint) into `energyMj[0]`. */
  nvmlDeviceGetTotalEnergyConsumption(device: unknown, energyMj: unknown[]): number;
  nvmlShutdown(): number;
  nvmlErrorString?(result: number): string;
}

/** The `nvmlReturn_t` values the meter tells apart (nvml.h). */
export const NvmlReturn = {
  SUCCESS: 0,
  ERROR_UNINITIALIZED: 1,
  ERROR_NOT_SUPPORTED: 3,
  ERROR_NO_PERMISSION: 4,
  ERROR_NOT_FOUND: 6,
  ERROR_DRIVER_NOT_LOADED: 9,
  ERROR_LIBRARY_NOT_FOUND: 12,
  ERROR_FUNCTION_NOT_FOUND: 13,
  ERROR_GPU_IS_LOST: 15,
  ERROR_UNKNOWN: 999,
} as const;

/** The library the default loader opens. */
export const NVML_LIBRARY = 'libnvidia-ml.so.1';

/**
 * Binds the NVML functions with koffi (an `nvmlDevice_t` is an opaque pointer, bound as
 * `void *`; koffi hands it over as a bigint address). Throws when the library or one of the symbols is missing
 * (the caller reports that as `absent`).
 */
export async function loadNvml(library: string = NVML_LIBRARY): Promise<NvmlBinding> {
  const koffi = await import('koffi');
  let lib: ReturnType<typeof koffi.load>;
  try {
    lib = koffi.load(library);
  } catch (e) {
    throw new Error(`${library}: ${messageOf(e)}`, { cause: e });
  }
  const init = lib.func('int nvmlInit_v2()');
  const count = lib.func('int nvmlDeviceGetCount_v2(_Out_ unsigned int *deviceCount)');
  const handle = lib.func('int nvmlDeviceGetHandleByIndex_v2(unsigned int index, _Out_ void **device)');
  const energy = lib.func('int nvmlDeviceGetTotalEnergyConsumption(void *device, _Out_ unsigned long long *energy)');
  const shutdown = lib.func('int nvmlShutdown()');
  const errorString = lib.func('const char *nvmlErrorString(int result)');
  return {
    nvmlInit_v2: () => init() as number,
    nvmlDeviceGetCount_v2: (out) => count(out) as number,
    nvmlDeviceGetHandleByIndex_v2: (i, out) => handle(i, out) as number,
    nvmlDeviceGetTotalEnergyConsumption: (d, out) => energy(d, out) as number,
    nvmlShutdown: () => shutdown() as number,
    nvmlErrorString: (r) => errorString(r) as string,
  };
}

/** A snapshot of every device's total energy (mJ), in device order. */
export type NvmlSnapshot = readonly bigint[];

/** A delta over NVML counters: the energy (µJ) and the GPUs whose counter restarted in between. */
export interface NvmlDelta {
  /** Energy in µJ; for a GPU in `reset`, only the energy since its counter restarted. */
  readonly uj: Uj;
  /** The GPUs whose counter went backwards (driver reload), as `GPU i: before → after mJ`. */
  readonly reset: readonly string[];
}

/** Reads NVML energy counters. Construct it with {@link openNvml}. */
export class NvmlSource {
  readonly #nvml: NvmlBinding;
  readonly #devices: readonly { index: number; handle: unknown }[];

  constructor(nvml: NvmlBinding, devices: readonly { index: number; handle: unknown }[]) {
    this.#nvml = nvml;
    this.#devices = devices;
  }

  /** The GPU indices read. */
  get deviceIndices(): number[] {
    return this.#devices.map((d) => d.index);
  }

  /** Reads every device's total energy (mJ). Fails with the NVML return's reason. */
  read(): Result<NvmlSnapshot, Failure> {
    const out: bigint[] = [];
    for (const d of this.#devices) {
      const r = readEnergyMj(this.#nvml, d.handle, d.index);
      if (!r.ok) return r;
      out.push(r.value);
    }
    return ok(out);
  }

  /**
   * The energy (µJ) between two snapshots, summed over devices, requiring every counter to move
   * forward: a counter that went backwards (driver reload) fails `failed-mid-reading`. Used where
   * a partial figure is no use (calibration).
   */
  deltaUj(before: NvmlSnapshot, after: NvmlSnapshot): Result<Uj, Failure> {
    const d = this.delta(before, after);
    if (!d.ok) return d;
    if (d.value.reset.length > 0) {
      return err({ reason: 'failed-mid-reading', detail: `${d.value.reset.join(', ')}: energy counter went backwards (driver reload)` });
    }
    return ok(d.value.uj);
  }

  /**
   * The energy (µJ) between two snapshots, summed over devices. A GPU whose counter went
   * backwards (driver reload during the call) contributes its second reading, the energy since
   * the reload, and is named in `reset` (`GPU 0: 5000 → 120 mJ`): the figure is then a lower
   * bound. Fails `failed-mid-reading` only when the snapshots do not cover the same devices.
   */
  delta(before: NvmlSnapshot, after: NvmlSnapshot): Result<NvmlDelta, Failure> {
    if (before.length !== this.#devices.length || after.length !== this.#devices.length) {
      return err({ reason: 'failed-mid-reading', detail: 'snapshots do not cover the same devices' });
    }
    let mj = 0n;
    const reset: string[] = [];
    for (let i = 0; i < before.length; i++) {
      if (after[i]! < before[i]!) {
        reset.push(`GPU ${this.#devices[i]!.index}: ${before[i]} → ${after[i]} mJ`);
        mj += after[i]!;
      } else {
        mj += after[i]! - before[i]!;
      }
    }
    return ok({ uj: mj * 1000n, reset });
  }

  /** Releases NVML (nvmlShutdown). */
  close(): void {
    this.#nvml.nvmlShutdown();
  }
}

/**
 * Initialises NVML and keeps the GPUs whose total-energy counter reads (spec §5, rung 2).
 * Fails `absent` (no library, no driver, no GPU, none with an energy counter),
 * `permission-denied` (NVML_ERROR_NO_PERMISSION) or `read-failed` (any other NVML error).
 */
export async function openNvml(load: () => NvmlBinding | Promise<NvmlBinding>): Promise<Result<NvmlSource, Failure>> {
  let nvml: NvmlBinding;
  try {
    nvml = await load();
  } catch (e) {
    return err({ reason: 'absent', detail: messageOf(e) });
  }
  let source: NvmlSource | undefined;
  const initRet = call(() => nvml.nvmlInit_v2());
  if (initRet !== NvmlReturn.SUCCESS) return err(failureOf(nvml, initRet, 'nvmlInit_v2'));
  try {
    const countOut: unknown[] = [null];
    const countRet = call(() => nvml.nvmlDeviceGetCount_v2(countOut));
    if (countRet !== NvmlReturn.SUCCESS) return err(failureOf(nvml, countRet, 'nvmlDeviceGetCount_v2'));
    const count = Number(countOut[0]);
    if (!Number.isSafeInteger(count) || count <= 0) return err({ reason: 'absent', detail: 'NVML reports no GPU' });
    const devices: { index: number; handle: unknown }[] = [];
    const unsupported: string[] = [];
    for (let i = 0; i < count; i++) {
      const handleOut: unknown[] = [null];
      const hRet = call(() => nvml.nvmlDeviceGetHandleByIndex_v2(i, handleOut));
      if (hRet !== NvmlReturn.SUCCESS) return err(failureOf(nvml, hRet, `nvmlDeviceGetHandleByIndex_v2(${i})`));
      const trial = readEnergyMj(nvml, handleOut[0], i);
      if (trial.ok) devices.push({ index: i, handle: handleOut[0] });
      else if (trial.error.reason === 'absent') unsupported.push(`GPU ${i}`);
      else return trial;
    }
    if (devices.length === 0)
      return err({ reason: 'absent', detail: `no GPU with a total-energy counter (${unsupported.join(', ')}: not supported)` });
    source = new NvmlSource(nvml, devices);
    return ok(source);
  } finally {
    if (source === undefined) call(() => nvml.nvmlShutdown());
  }
}

function readEnergyMj(nvml: NvmlBinding, handle: unknown, index: number): Result<bigint, Failure> {
  const out: unknown[] = [null];
  const ret = call(() => nvml.nvmlDeviceGetTotalEnergyConsumption(handle, out));
  if (ret !== NvmlReturn.SUCCESS) return err(failureOf(nvml, ret, `nvmlDeviceGetTotalEnergyConsumption(GPU ${index})`));
  const v = out[0];
  if (typeof v === 'bigint' && v >= 0n) return ok(v);
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return ok(BigInt(v));
  return err({ reason: 'read-failed', detail: `GPU ${index}: energy is not a counter: ${String(v)}` });
}

/** Runs one NVML call; a throw (a broken binding) becomes NVML_ERROR_UNKNOWN. */
function call(f: () => number): number {
  try {
    return f();
  } catch {
    return NvmlReturn.ERROR_UNKNOWN;
  }
}

function failureOf(nvml: NvmlBinding, ret: number, what: string): Failure {
  let text = `nvmlReturn ${ret}`;
  try {
    if (nvml.nvmlErrorString) text = `${nvml.nvmlErrorString(ret)} (${ret})`;
  } catch {
    // keep the number
  }
  const detail = `${what}: ${text}`;
  switch (ret) {
    case NvmlReturn.ERROR_NO_PERMISSION:
      return { reason: 'permission-denied', detail };
    case NvmlReturn.ERROR_NOT_SUPPORTED:
    case NvmlReturn.ERROR_NOT_FOUND:
    case NvmlReturn.ERROR_DRIVER_NOT_LOADED:
    case NvmlReturn.ERROR_LIBRARY_NOT_FOUND:
    case NvmlReturn.ERROR_FUNCTION_NOT_FOUND:
      return { reason: 'absent', detail };
    default:
      return { reason: 'read-failed', detail };
  }
}
