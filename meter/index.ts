/** The energy meter (spec §5): the ladder RAPL → NVML → time × calibrated power → per-action constant. */
export { type Probe, RUNG_PROVENANCE } from './ladder.ts';
export { createMeter, type Meter, type MeterConfig, MeteredError, readMeterConfig } from './meter.ts';
export { modelUj } from './model.ts';
export { loadNvml, NvmlReturn, openNvml } from './nvml.ts';
export { openRapl, wrapDelta } from './rapl.ts';
export { FaultyFs, fakeNvml, setFakeEnergy, writeFakePowercap } from './fakes.ts';
