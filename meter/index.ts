/** The energy meter (spec §5): the ladder RAPL → NVML → time × calibrated power → per-action constant. */
export {
  type Failure,
  type ModelInfo,
  type Probe,
  type Reading,
  RUNG_PROVENANCE,
  RUNGS,
  type Rung,
  SKIP_REASONS,
  type SkipReason,
  type Skipped,
  type WattsSource,
} from './ladder.ts';
export {
  type Calibration,
  createMeter,
  type Meter,
  type MeterConfig,
  type MeterDeps,
  type Metered,
  MeteredError,
  readMeterConfig,
} from './meter.ts';
export { type CpuUsage, DEFAULT_ESTIMATE_UJ, modelUj } from './model.ts';
export { loadNvml, NVML_LIBRARY, type NvmlBinding, type NvmlDelta, NvmlReturn, NvmlSource, openNvml } from './nvml.ts';
export { DEFAULT_POWERCAP_ROOT, type MeterFs, nodeFs, openRapl, type RaplDomain, type RaplExcluded, RaplSource, wrapDelta } from './rapl.ts';
export { FaultyFs, type FakeNvml, type FakeZone, fakeNvml, setFakeEnergy, writeFakePowercap } from './fakes.ts';
