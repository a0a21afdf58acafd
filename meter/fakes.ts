/**
 * Fakes for the hardware rungs, shared by the meter's tests and conformance class C9: a powercap
 * folder written to a temp dir, a file-system wrapper that injects read errors (file modes do not
 * stop root, so an unreadable file is simulated here), and an NVML binding with scripted counters
 * and failures.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type NvmlBinding, NvmlReturn } from './nvml.ts';
import { type MeterFs, nodeFs } from './rapl.ts';

/** One fake powercap zone: its folder name (e.g. `intel-rapl:0`), `name` and counters (µJ). */
export interface FakeZone {
  readonly dir: string;
  readonly name: string;
  readonly energyUj: bigint;
  readonly maxRangeUj: bigint;
}

/** Writes a powercap folder under `root` with the given zones. */
export function writeFakePowercap(root: string, zones: readonly FakeZone[]): void {
  for (const z of zones) {
    const dir = join(root, z.dir);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'name'), `${z.name}\n`);
    writeFileSync(join(dir, 'energy_uj'), `${z.energyUj}\n`);
    writeFileSync(join(dir, 'max_energy_range_uj'), `${z.maxRangeUj}\n`);
  }
}

/** Sets one fake zone's `energy_uj` counter (µJ). */
export function setFakeEnergy(root: string, dir: string, energyUj: bigint): void {
  writeFileSync(join(root, dir, 'energy_uj'), `${energyUj}\n`);
}

/** A file-system wrapper whose reads of chosen paths throw a Node-style error with `code`; faults can be set at any time. */
export class FaultyFs implements MeterFs {
  readonly faults = new Map<string, string>();
  readonly #inner: MeterFs;

  constructor(inner: MeterFs = nodeFs) {
    this.#inner = inner;
  }

  /** Makes reads of `path` fail with errno `code` (e.g. EACCES, EIO) from now on. */
  fail(path: string, code: string): void {
    this.faults.set(path, code);
  }

  readdir(path: string): string[] {
    this.#throwIfFaulty(path);
    return this.#inner.readdir(path);
  }

  readFile(path: string): string {
    this.#throwIfFaulty(path);
    return this.#inner.readFile(path);
  }

  #throwIfFaulty(path: string): void {
    const code = this.faults.get(path);
    if (code !== undefined) throw Object.assign(new Error(`${code}: injected fault, read '${path}'`), { code });
  }
}

/** A scripted NVML: per-GPU energy counters (mJ) the test moves, and return codes to inject. */
export interface FakeNvml extends NvmlBinding {
  /** Total energy per GPU (mJ); `undefined` marks a GPU without the counter (NOT_SUPPORTED). */
  readonly energyMj: (bigint | undefined)[];
  /** The return code of the next calls of a function (by name), consumed one per call; then SUCCESS. */
  readonly script: Map<string, number[]>;
  /** Number of live nvmlInit_v2 calls not matched by nvmlShutdown. */
  initCount: number;
}

/** Creates a {@link FakeNvml} with the given counters (mJ). */
export function fakeNvml(energyMj: (bigint | undefined)[]): FakeNvml {
  const script = new Map<string, number[]>();
  const next = (fn: string): number => script.get(fn)?.shift() ?? NvmlReturn.SUCCESS;
  const fake: FakeNvml = {
    energyMj,
    script,
    initCount: 0,
    nvmlInit_v2() {
      const r = next('nvmlInit_v2');
      if (r === NvmlReturn.SUCCESS) fake.initCount++;
      return r;
    },
    nvmlDeviceGetCount_v2(out) {
      const r = next('nvmlDeviceGetCount_v2');
      if (r === NvmlReturn.SUCCESS) out[0] = fake.energyMj.length;
      return r;
    },
    nvmlDeviceGetHandleByIndex_v2(i, out) {
      const r = next('nvmlDeviceGetHandleByIndex_v2');
      if (r === NvmlReturn.SUCCESS) out[0] = BigInt(0x1000 + i);
      return r;
    },
    nvmlDeviceGetTotalEnergyConsumption(handle, out) {
      const r = next('nvmlDeviceGetTotalEnergyConsumption');
      if (r !== NvmlReturn.SUCCESS) return r;
      const e = fake.energyMj[Number(handle as bigint) - 0x1000];
      if (e === undefined) return NvmlReturn.ERROR_NOT_SUPPORTED;
      out[0] = e <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(e) : e;
      return r;
    },
    nvmlShutdown() {
      fake.initCount--;
      return NvmlReturn.SUCCESS;
    },
    nvmlErrorString: (r) => `fake NVML error ${r}`,
  };
  return fake;
}
