import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createMeter, FaultyFs, openRapl, setFakeEnergy, wrapDelta, writeFakePowercap } from '../../meter/index.ts';

let root: string;
const MAX = 262_143_328_850n;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'jcp-powercap-'));
  writeFakePowercap(root, [
    { dir: 'intel-rapl:0', name: 'package-0', energyUj: 1_000n, maxRangeUj: MAX },
    { dir: 'intel-rapl:0:0', name: 'core', energyUj: 7n, maxRangeUj: MAX },
    { dir: 'intel-rapl:1', name: 'package-1', energyUj: MAX - 100n, maxRangeUj: MAX },
    { dir: 'intel-rapl:2', name: 'psys', energyUj: 9n, maxRangeUj: MAX },
    { dir: 'intel-rapl-mmio:0', name: 'package-0', energyUj: 5n, maxRangeUj: MAX },
  ]);
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

describe('rapl - discovery', () => {
  it('sums package domains in index order; core, psys and the MMIO duplicate are listed as not summed', () => {
    const r = openRapl(root, new FaultyFs());
    expect(r.ok && r.value.domains.map((d) => d.label)).toEqual(['package-0', 'package-1']);
    expect(r.ok && r.value.excluded.map((x) => x.label)).toEqual(['intel-rapl-mmio:0', 'core (package-0)', 'psys']);
  });

  it('sums DRAM domains beside their package; core and uncore are inside it, psys covers the platform', () => {
    const tree = mkdtempSync(join(tmpdir(), 'jcp-powercap-dram-'));
    writeFakePowercap(tree, [
      { dir: 'intel-rapl:0', name: 'package-0', energyUj: 0n, maxRangeUj: MAX },
      { dir: 'intel-rapl:0:0', name: 'core', energyUj: 0n, maxRangeUj: MAX },
      { dir: 'intel-rapl:0:1', name: 'uncore', energyUj: 0n, maxRangeUj: MAX },
      { dir: 'intel-rapl:0:2', name: 'dram', energyUj: 0n, maxRangeUj: 65_532_610_987n },
      { dir: 'intel-rapl:1', name: 'psys', energyUj: 0n, maxRangeUj: MAX },
    ]);
    const r = openRapl(tree, new FaultyFs());
    rmSync(tree, { recursive: true });
    expect(r.ok && r.value.domains.map((d) => [d.label, d.maxRangeUj])).toEqual([
      ['package-0', MAX],
      ['dram (package-0)', 65_532_610_987n],
    ]);
    expect(r.ok && r.value.excluded).toEqual([
      { label: 'core (package-0)', why: 'inside package-0' },
      { label: 'uncore (package-0)', why: 'inside package-0' },
      { label: 'psys', why: 'covers the whole platform, package and DRAM included' },
    ]);
  });

  it('skip / permission denied / a DRAM counter that cannot be read is not silently dropped', () => {
    writeFakePowercap(root, [{ dir: 'intel-rapl:1:0', name: 'dram', energyUj: 3n, maxRangeUj: MAX }]);
    const fs = new FaultyFs();
    fs.fail(join(root, 'intel-rapl:1:0', 'energy_uj'), 'EACCES');
    const r = openRapl(root, fs);
    expect(!r.ok && r.error).toMatchObject({ reason: 'permission-denied' });
  });

  it('skip / absent / no powercap folder', () => {
    const r = openRapl(join(root, 'nope'), new FaultyFs());
    expect(!r.ok && r.error.reason).toBe('absent');
  });

  it('skip / absent / a powercap folder with no package domain', () => {
    const empty = mkdtempSync(join(tmpdir(), 'jcp-powercap-empty-'));
    writeFakePowercap(empty, [{ dir: 'intel-rapl:0', name: 'psys', energyUj: 1n, maxRangeUj: MAX }]);
    const r = openRapl(empty, new FaultyFs());
    rmSync(empty, { recursive: true });
    expect(!r.ok && r.error.reason).toBe('absent');
  });

  it('skip / permission denied / energy_uj unreadable (EACCES)', () => {
    const fs = new FaultyFs();
    fs.fail(join(root, 'intel-rapl:1', 'energy_uj'), 'EACCES');
    const r = openRapl(root, fs);
    expect(!r.ok && r.error).toMatchObject({ reason: 'permission-denied' });
    expect(!r.ok && r.error.detail).toContain('intel-rapl:1');
  });

  it('skip / read failed / a garbled counter', () => {
    setFakeEnergy(root, 'intel-rapl:0', -5n);
    const r = openRapl(root, new FaultyFs());
    expect(!r.ok && r.error.reason).toBe('read-failed');
  });

  it('skip / read failed / EIO on max_energy_range_uj', () => {
    const fs = new FaultyFs();
    fs.fail(join(root, 'intel-rapl:0', 'max_energy_range_uj'), 'EIO');
    const r = openRapl(root, fs);
    expect(!r.ok && r.error.reason).toBe('read-failed');
  });
});

describe('rapl - wraparound', () => {
  it('a counter that wrapped counts max − before + after', () => {
    expect(wrapDelta(MAX - 100n, 50n, MAX)).toEqual({ ok: true, value: 150n });
  });

  it('any advance below one range is recovered exactly (property)', () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: 1n, max: 1n << 40n }),
        fc.bigInt({ min: 0n, max: 1n << 40n }),
        fc.bigInt({ min: 0n, max: 1n << 40n }),
        (max, b, k) => {
          const before = b % max;
          const advance = k % max;
          const after = (before + advance) % max;
          const d = wrapDelta(before, after, max);
          return d.ok && d.value === advance;
        },
      ),
    );
  });

  it('refuses a reading above the counter range', () => {
    expect(wrapDelta(10n, MAX + 1n, MAX).ok).toBe(false);
  });
});

describe('rapl - metering', () => {
  it('HwShunt / package energy summed over packages, one of them wrapping', async () => {
    const meter = createMeter(
      { defaultEstimateUj: 0n },
      { powercapRoot: root, fs: new FaultyFs(), nvml: () => Promise.reject(new Error('no GPU')) },
    );
    expect((await meter.probe()).rung).toBe('rapl');
    const { result, cost, reading } = await meter.measure('read', () => {
      setFakeEnergy(root, 'intel-rapl:0', 31_000n);
      setFakeEnergy(root, 'intel-rapl:1', 400n);
      return 'done';
    });
    expect(result).toBe('done');
    expect(cost).toEqual({ uj: 30_000n + 500n, provenance: 'HwShunt', measured: 30_500n });
    expect(reading.degraded).toEqual([]);
  });

  it('HwShunt / DRAM energy is charged beside the package, each wrapping at its own range, and the reading names both', async () => {
    const DRAM_MAX = 65_532_610_987n;
    const tree = mkdtempSync(join(tmpdir(), 'jcp-powercap-dram-'));
    writeFakePowercap(tree, [
      { dir: 'intel-rapl:0', name: 'package-0', energyUj: 1_000n, maxRangeUj: MAX },
      { dir: 'intel-rapl:0:0', name: 'core', energyUj: 0n, maxRangeUj: MAX },
      { dir: 'intel-rapl:0:1', name: 'dram', energyUj: DRAM_MAX - 2_000n, maxRangeUj: DRAM_MAX },
      { dir: 'intel-rapl:1', name: 'psys', energyUj: 0n, maxRangeUj: MAX },
    ]);
    const meter = createMeter(
      { defaultEstimateUj: 0n },
      { powercapRoot: tree, fs: new FaultyFs(), nvml: () => Promise.reject(new Error('no GPU')) },
    );
    const probe = await meter.probe();
    expect(probe.summed).toEqual(['package-0', 'dram (package-0)']);
    expect(probe.notSummed?.map((x) => x.domain)).toEqual(['core (package-0)', 'psys']);
    const { cost, reading } = await meter.measure('read', () => {
      setFakeEnergy(tree, 'intel-rapl:0', 11_000n);
      setFakeEnergy(tree, 'intel-rapl:0:0', 9_000n);
      setFakeEnergy(tree, 'intel-rapl:0:1', 3_000n);
      setFakeEnergy(tree, 'intel-rapl:1', 99_000n);
    });
    rmSync(tree, { recursive: true });
    expect(cost).toEqual({ uj: 10_000n + 5_000n, provenance: 'HwShunt', measured: 15_000n });
    expect(reading.summed).toEqual(['package-0', 'dram (package-0)']);
  });

  it('degrades to ModelBased / failed mid-reading / EIO on the second read', async () => {
    const fs = new FaultyFs();
    let cpu = 0;
    const meter = createMeter(
      { activeWatts: 10, defaultEstimateUj: 0n },
      { powercapRoot: root, fs, cpuUsage: () => ({ user: cpu, system: 0 }) },
    );
    await meter.probe();
    const { cost, reading } = await meter.measure('read', () => {
      setFakeEnergy(root, 'intel-rapl:0', 99_000n);
      fs.fail(join(root, 'intel-rapl:1', 'energy_uj'), 'EIO');
      cpu += 2_000;
    });
    expect(cost).toEqual({ uj: 20_000n, provenance: 'ModelBased' });
    expect(reading.degraded).toEqual([expect.objectContaining({ rung: 'rapl', reason: 'failed-mid-reading' })]);
  });

  it('degrades to Estimator / failed mid-reading with no calibrated power', async () => {
    const fs = new FaultyFs();
    const meter = createMeter({ estimatesUj: { read: 4_242n } }, { powercapRoot: root, fs });
    await meter.probe();
    const { cost, reading } = await meter.measure('read', () => fs.fail(join(root, 'intel-rapl:0', 'energy_uj'), 'EACCES'));
    expect(cost).toEqual({ uj: 4_242n, provenance: 'Estimator' });
    expect(reading.degraded.map((s) => [s.rung, s.reason])).toEqual([
      ['rapl', 'failed-mid-reading'],
      ['cpu-time', 'not-calibrated'],
    ]);
  });

  it('degrades / a counter past its range at the second read is not a delta', async () => {
    const meter = createMeter({ activeWatts: 1 }, { powercapRoot: root, fs: new FaultyFs() });
    await meter.probe();
    const { cost, reading } = await meter.measure('x', () => setFakeEnergy(root, 'intel-rapl:0', MAX + 1n));
    expect(cost.provenance).toBe('ModelBased');
    expect(cost.measured).toBeUndefined();
    expect(reading.degraded[0]?.reason).toBe('failed-mid-reading');
  });

  it('degrades / read failed / the first reading of a call fails', async () => {
    const fs = new FaultyFs();
    const meter = createMeter({ activeWatts: 5 }, { powercapRoot: root, fs });
    await meter.probe();
    fs.fail(join(root, 'intel-rapl:0', 'energy_uj'), 'EIO');
    const { cost, reading } = await meter.measure('x', () => 1);
    expect(cost.provenance).toBe('ModelBased');
    expect(reading.degraded).toEqual([expect.objectContaining({ rung: 'rapl', reason: 'read-failed' })]);
  });

  it('calibrates the model against the package counter', async () => {
    let cpu = 0;
    let clock = 0n;
    const meter = createMeter(
      {},
      {
        powercapRoot: root,
        fs: new FaultyFs(),
        cpuUsage: () => ({ user: cpu, system: 0 }),
        clockNs: () => {
          clock += 1_000_000n;
          cpu += 1_000;
          if (clock === 50_000_000n) setFakeEnergy(root, 'intel-rapl:0', 1_000n + 12_000n * 60n);
          return clock;
        },
      },
    );
    expect((await meter.probe()).model.watts).toBeUndefined();
    const cal = await meter.calibrate({ busyMs: 100 });
    expect(cal.ok).toBe(true);
    if (!cal.ok) return;
    expect(cal.value.energyUj).toBe(720_000n);
    expect(cal.value.watts).toBeCloseTo(720_000 / cal.value.timeUs, 9);
    expect((await meter.probe()).model).toEqual({ basis: 'cpu-time', watts: cal.value.watts, wattsSource: 'calibrated' });
  });
});
