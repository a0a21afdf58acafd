import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { costToCbor, ErrorCodes, JcpError, provenanceProblem, provenanceRank, readCost } from '../../core/index.ts';
import {
  createMeter,
  FaultyFs,
  fakeNvml,
  MeteredError,
  modelUj,
  NvmlReturn,
  RUNG_PROVENANCE,
  readMeterConfig,
  setFakeEnergy,
  writeFakePowercap,
} from '../../meter/index.ts';
import { codeOf } from '../support.ts';

const noRapl = '/nonexistent/powercap';
const noNvml = () => Promise.reject(new Error('libnvidia-ml.so.1: cannot open shared object file'));
const roots: string[] = [];
afterAll(() => {
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

describe('ladder - probe', () => {
  it('Estimator / no hardware and no calibrated power, each better rung says why', async () => {
    const meter = createMeter({}, { powercapRoot: noRapl, nvml: noNvml });
    const p = await meter.probe();
    expect(p).toMatchObject({ rung: 'estimator', provenance: 'Estimator' });
    expect(p.skipped.map((s) => [s.rung, s.reason])).toEqual([
      ['rapl', 'absent'],
      ['nvml', 'absent'],
      ['cpu-time', 'not-calibrated'],
    ]);
    expect(p.skipped[1]?.detail).toContain('libnvidia-ml');
  });

  it('ModelBased / configured active power', async () => {
    const p = await createMeter({ activeWatts: 12.5 }, { powercapRoot: noRapl, nvml: noNvml }).probe();
    expect(p).toMatchObject({ rung: 'cpu-time', provenance: 'ModelBased', model: { watts: 12.5, wattsSource: 'configured' } });
  });

  it('skip / disabled / rungs left out of the configuration', async () => {
    const nvml = fakeNvml([1n]);
    const p = await createMeter({ rungs: ['cpu-time'], activeWatts: 1 }, { powercapRoot: noRapl, nvml: () => nvml }).probe();
    expect(p.rung).toBe('cpu-time');
    expect(p.skipped.map((s) => s.reason)).toEqual(['disabled', 'disabled']);
    expect(nvml.initCount).toBe(0);
  });

  it('refuses a bad configuration naming the field', () => {
    expect(codeOf(() => createMeter({ activeWatts: 0 }))).toBe(ErrorCodes.SCHEMA);
    expect(codeOf(() => createMeter({ activeWatts: Number.NaN }))).toBe(ErrorCodes.SCHEMA);
    expect(codeOf(() => createMeter({ rungs: ['geiger' as 'rapl'] }))).toBe(ErrorCodes.SCHEMA);
    expect(codeOf(() => createMeter({ defaultEstimateUj: -1n }))).toBe(ErrorCodes.SCHEMA);
  });
});

describe('ladder - figures', () => {
  it('ModelBased / ceil(CPU µs × W), no measured figure', async () => {
    let cpu = { user: 100, system: 50 };
    const meter = createMeter({ activeWatts: 2.5, defaultEstimateUj: 0n }, { powercapRoot: noRapl, nvml: noNvml, cpuUsage: () => cpu });
    const { cost, reading } = await meter.measure('a', () => {
      cpu = { user: 1_100, system: 451 };
    });
    expect(reading.cpuUs).toBe(1_401);
    expect(cost).toEqual({ uj: 3_503n, provenance: 'ModelBased' });
  });

  it('ModelBased / wall-time basis charges the wall interval', async () => {
    let t = 0n;
    const meter = createMeter(
      { activeWatts: 4, modelBasis: 'wall-time', defaultEstimateUj: 0n },
      { powercapRoot: noRapl, nvml: noNvml, clockNs: () => (t += 2_000_000n) },
    );
    const { cost, reading } = await meter.measure('a', () => 0);
    expect(reading.wallNs).toBe(2_000_000n);
    expect(cost.uj).toBe(8_000n);
  });

  it('never prices a call below its action estimate, HwShunt keeps the raw delta', async () => {
    const root = mkdtempSync(join(tmpdir(), 'jcp-powercap-'));
    roots.push(root);
    writeFakePowercap(root, [{ dir: 'intel-rapl:0', name: 'package-0', energyUj: 0n, maxRangeUj: 1_000_000n }]);
    const meter = createMeter({ estimatesUj: { write: 5_000n } }, { powercapRoot: root, fs: new FaultyFs() });
    const { cost } = await meter.measure('write', () => setFakeEnergy(root, 'intel-rapl:0', 40n));
    expect(cost).toEqual({ uj: 5_000n, provenance: 'HwShunt', measured: 40n });
    expect(meter.estimateUj('write')).toBe(5_000n);
    expect(meter.estimateUj('constructor')).toBe(100_000n);
  });

  it('a metered function that throws still yields its cost', async () => {
    const meter = createMeter({ estimatesUj: { boom: 9n } }, { powercapRoot: noRapl, nvml: noNvml });
    const e = await meter.measure('boom', () => Promise.reject(new Error('tool crashed'))).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(MeteredError);
    expect((e as MeteredError).cost).toEqual({ uj: 9n, provenance: 'Estimator' });
    expect(((e as MeteredError).cause as Error).message).toBe('tool crashed');
  });

  it('modelUj rounds up and never loses precision on long calls', () => {
    expect(modelUj(1, 0.0001)).toBe(1n);
    expect(modelUj(0, 100)).toBe(0n);
    expect(modelUj(3_600_000_000_000, 250)).toBe(900_000_000_000_000n);
  });

  it('provenance is consistent and never above its rung under any failure script (property)', async () => {
    const root = mkdtempSync(join(tmpdir(), 'jcp-powercap-'));
    roots.push(root);
    const fault = fc.constantFrom(undefined, 'EIO', 'EACCES', 'ENOENT', 'garble', 'past-range');
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          hw: fc.constantFrom('rapl', 'nvml', 'none'),
          watts: fc.option(fc.double({ min: 0.5, max: 500, noNaN: true }), { nil: undefined }),
          startFault: fault,
          endFault: fault,
          advance: fc.bigInt({ min: 0n, max: 2_000_000n }),
          floor: fc.bigInt({ min: 0n, max: 1_000_000n }),
        }),
        async (s) => {
          const max = 1_000_000n;
          writeFakePowercap(root, [{ dir: 'intel-rapl:0', name: 'package-0', energyUj: 999_000n, maxRangeUj: max }]);
          const fs = new FaultyFs();
          const nvml = fakeNvml([5n]);
          const energy = join(root, 'intel-rapl:0', 'energy_uj');
          const inject = (f: string | undefined) => {
            if (f === undefined) return;
            if (s.hw === 'nvml') {
              nvml.script.set('nvmlDeviceGetTotalEnergyConsumption', [
                f === 'EACCES' ? NvmlReturn.ERROR_NO_PERMISSION : NvmlReturn.ERROR_UNKNOWN,
              ]);
            } else if (f === 'garble') setFakeEnergy(root, 'intel-rapl:0', -1n);
            else if (f === 'past-range') setFakeEnergy(root, 'intel-rapl:0', max + 1n);
            else fs.fail(energy, f);
          };
          const meter = createMeter(
            { defaultEstimateUj: s.floor, ...(s.watts !== undefined ? { activeWatts: s.watts } : {}) },
            { powercapRoot: s.hw === 'rapl' ? root : noRapl, fs, nvml: s.hw === 'nvml' ? () => nvml : noNvml },
          );
          const probe = await meter.probe();
          inject(s.startFault);
          const { cost, reading } = await meter.measure('act', () => {
            setFakeEnergy(root, 'intel-rapl:0', (999_000n + s.advance) % max);
            nvml.energyMj[0] = 5n + s.advance;
            inject(s.endFault);
          });
          meter.close();
          expect(provenanceProblem(cost)).toBeUndefined();
          expect(readCost(costToCbor(cost))).toEqual(cost);
          expect(cost.uj >= s.floor).toBe(true);
          expect(provenanceRank(cost.provenance)).toBeGreaterThanOrEqual(provenanceRank(probe.provenance));
          expect(cost.provenance).toBe(RUNG_PROVENANCE[reading.rung]);
          if (s.hw !== 'none' && s.startFault === undefined && s.endFault === undefined) {
            expect(cost.measured).toBe(s.hw === 'rapl' ? s.advance % max : s.advance * 1000n);
          }
          if (cost.provenance === 'HwShunt') expect(reading.degraded).toEqual([]);
          else if (probe.provenance === 'HwShunt') expect(reading.degraded.length).toBeGreaterThan(0);
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('ladder - configuration', () => {
  it('reads the node config section in snake_case', () => {
    expect(
      readMeterConfig({
        rungs: ['rapl', 'cpu-time'],
        active_watts: 15,
        model_basis: 'wall-time',
        estimates_uj: { read: 10, write: 20n },
        default_estimate_uj: 5,
      }),
    ).toEqual({
      rungs: ['rapl', 'cpu-time'],
      activeWatts: 15,
      modelBasis: 'wall-time',
      estimatesUj: { read: 10n, write: 20n },
      defaultEstimateUj: 5n,
    });
  });

  it.each([
    [{ active_watts: -1 }, 'meter.active_watts'],
    [{ rungs: ['rapl', 'ouija'] }, 'meter.rungs[1]'],
    [{ estimates_uj: { read: 1.5 } }, 'meter.estimates_uj.read'],
    [{ watts: 3 }, 'meter.watts'],
  ])('refuses %j naming %s', (cfg, field) => {
    let caught: unknown;
    try {
      readMeterConfig(cfg);
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(JcpError);
    expect((caught as JcpError).detail?.['field']).toBe(field);
  });
});
