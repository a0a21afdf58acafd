import { describe, expect, it } from 'vitest';
import { createMeter, fakeNvml, loadNvml, NvmlReturn, openNvml } from '../../meter/index.ts';

const noRapl = '/nonexistent/powercap';

describe('nvml - discovery', () => {
  it('keeps the GPUs whose total-energy counter reads', async () => {
    const nvml = fakeNvml([10n, undefined, 30n]);
    const r = await openNvml(() => nvml);
    expect(r.ok && r.value.deviceIndices).toEqual([0, 2]);
    expect(nvml.initCount).toBe(1);
  });

  it('skip / absent / the library does not load', async () => {
    const r = await openNvml(() => loadNvml('/nonexistent/libnvidia-ml.so.1'));
    expect(!r.ok && r.error.reason).toBe('absent');
  });

  it('skip / absent / driver not loaded', async () => {
    const nvml = fakeNvml([1n]);
    nvml.script.set('nvmlInit_v2', [NvmlReturn.ERROR_DRIVER_NOT_LOADED]);
    const r = await openNvml(() => nvml);
    expect(!r.ok && r.error.reason).toBe('absent');
    expect(!r.ok && r.error.detail).toContain('nvmlInit_v2');
  });

  it('skip / absent / no GPU', async () => {
    const nvml = fakeNvml([]);
    const r = await openNvml(() => nvml);
    expect(!r.ok && r.error.reason).toBe('absent');
    expect(nvml.initCount).toBe(0);
  });

  it('skip / absent / no GPU has an energy counter (pre-Volta)', async () => {
    const nvml = fakeNvml([undefined, undefined]);
    const r = await openNvml(() => nvml);
    expect(!r.ok && r.error).toMatchObject({ reason: 'absent' });
    expect(nvml.initCount).toBe(0);
  });

  it('skip / permission denied / NVML_ERROR_NO_PERMISSION', async () => {
    const nvml = fakeNvml([1n]);
    nvml.script.set('nvmlDeviceGetTotalEnergyConsumption', [NvmlReturn.ERROR_NO_PERMISSION]);
    const r = await openNvml(() => nvml);
    expect(!r.ok && r.error.reason).toBe('permission-denied');
    expect(nvml.initCount).toBe(0);
  });

  it('skip / read failed / an unknown NVML error', async () => {
    const nvml = fakeNvml([1n]);
    nvml.script.set('nvmlDeviceGetCount_v2', [NvmlReturn.ERROR_UNKNOWN]);
    const r = await openNvml(() => nvml);
    expect(!r.ok && r.error.reason).toBe('read-failed');
  });
});

describe('nvml - metering', () => {
  it('HwShunt / millijoules summed over GPUs, reported in µJ', async () => {
    const nvml = fakeNvml([1_000n, 5_000_000_000n]);
    const meter = createMeter({ defaultEstimateUj: 0n }, { powercapRoot: noRapl, nvml: () => nvml });
    const probe = await meter.probe();
    expect(probe).toMatchObject({ rung: 'nvml', provenance: 'HwShunt' });
    expect(probe.skipped.map((s) => [s.rung, s.reason])).toEqual([['rapl', 'absent']]);
    const { cost } = await meter.measure('infer', async () => {
      nvml.energyMj[0] = 1_250n;
      nvml.energyMj[1] = 5_000_000_100n;
    });
    expect(cost).toEqual({ uj: 350_000n, provenance: 'HwShunt', measured: 350_000n });
    meter.close();
    expect(nvml.initCount).toBe(0);
  });

  it('degrades to ModelBased / failed mid-reading / GPU lost at the second read', async () => {
    const nvml = fakeNvml([1_000n]);
    let cpu = 0;
    const meter = createMeter(
      { activeWatts: 3, defaultEstimateUj: 0n },
      { powercapRoot: noRapl, nvml: () => nvml, cpuUsage: () => ({ user: 0, system: cpu }) },
    );
    await meter.probe();
    const { cost, reading } = await meter.measure('infer', () => {
      nvml.energyMj[0] = 9_000n;
      nvml.script.set('nvmlDeviceGetTotalEnergyConsumption', [NvmlReturn.ERROR_GPU_IS_LOST]);
      cpu += 1_000;
    });
    expect(cost).toEqual({ uj: 3_000n, provenance: 'ModelBased' });
    expect(reading.degraded).toEqual([expect.objectContaining({ rung: 'nvml', reason: 'failed-mid-reading' })]);
  });

  it('HwShunt / a counter that went backwards (driver reload) counts the energy since the reload, flagged as reset', async () => {
    const nvml = fakeNvml([1_000n, 2_000n]);
    const meter = createMeter({ estimatesUj: { infer: 77n } }, { powercapRoot: noRapl, nvml: () => nvml });
    await meter.probe();
    const { cost, reading } = await meter.measure('infer', () => {
      nvml.energyMj[0] = 10n;
      nvml.energyMj[1] = 2_500n;
    });
    expect(cost).toEqual({ uj: 510_000n, provenance: 'HwShunt', measured: 510_000n });
    expect(reading.degraded).toEqual([]);
    expect(reading.summed).toEqual(['GPU 0', 'GPU 1']);
    expect(reading.reset).toEqual(['GPU 0: 1000 → 10 mJ']);
    meter.close();
  });

  it('a reading with no restart carries no reset flag', async () => {
    const nvml = fakeNvml([1_000n]);
    const meter = createMeter({}, { powercapRoot: noRapl, nvml: () => nvml });
    await meter.probe();
    const { reading } = await meter.measure('infer', () => {
      nvml.energyMj[0] = 1_001n;
    });
    expect(reading.reset).toBeUndefined();
    meter.close();
  });

  it('calibration refuses a counter that restarted (a partial figure is no power figure)', async () => {
    const nvml = fakeNvml([1_000n]);
    let clock = 0n;
    let cpu = 0;
    const meter = createMeter(
      {},
      {
        powercapRoot: noRapl,
        nvml: () => nvml,
        cpuUsage: () => ({ user: cpu, system: 0 }),
        clockNs: () => {
          clock += 1_000_000n;
          cpu += 1_000;
          if (clock === 5_000_000n) nvml.energyMj[0] = 5n;
          return clock;
        },
      },
    );
    const cal = await meter.calibrate({ busyMs: 10 });
    expect(!cal.ok && cal.error).toMatchObject({ rung: 'nvml', reason: 'failed-mid-reading' });
    meter.close();
  });

  it('concurrent first calls open NVML once', async () => {
    const nvml = fakeNvml([1n]);
    let loads = 0;
    const meter = createMeter(
      {},
      {
        powercapRoot: noRapl,
        nvml: () => {
          loads++;
          return nvml;
        },
      },
    );
    const all = await Promise.all([meter.measure('a', () => 1), meter.measure('b', () => 2), meter.measure('c', () => 3)]);
    expect(all.map((m) => m.cost.provenance)).toEqual(['HwShunt', 'HwShunt', 'HwShunt']);
    expect([loads, nvml.initCount]).toEqual([1, 1]);
    meter.close();
  });
});
