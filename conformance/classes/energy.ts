/**
 * Conformance class C9 (spec §5, §9): energy honesty. The ladder always yields a figure, and its
 * provenance is internally consistent: HwShunt carries a measured figure, Estimator none, and a
 * figure whose hardware reading failed half-way never claims HwShunt. The hardware rungs run on
 * fakes (a powercap folder in a temp dir, a scripted NVML); the probe runs on this machine.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Cost, costToCbor, provenanceProblem, provenanceRank, readCost } from '../../core/index.ts';
import {
  createMeter,
  FaultyFs,
  fakeNvml,
  type Meter,
  NvmlReturn,
  RUNG_PROVENANCE,
  setFakeEnergy,
  writeFakePowercap,
} from '../../meter/index.ts';
import type { Checker } from '../checker.ts';
import type { ConformanceClass } from '../runner.ts';

const NO_RAPL = '/nonexistent/jcp-powercap';
const noNvml = () => Promise.reject(new Error('no NVML in this check'));

function consistent(t: Checker, cost: Cost, label: string): void {
  t.eq(provenanceProblem(cost), undefined, `${label}: provenance consistent`);
  t.eq(readCost(costToCbor(cost)), cost, `${label}: cost round-trips through readCost`);
}

async function busy(meter: Meter, action: string): Promise<Cost> {
  const { cost } = await meter.measure(action, () => {
    let x = 0;
    for (let i = 0; i < 200_000; i++) x += Math.sqrt(i);
    return x;
  });
  return cost;
}

/** C9: the metering ladder always yields a figure and its provenance is internally consistent. */
export const C9: ConformanceClass = {
  id: 'C9',
  title: 'energy honesty',
  async run(t) {
    await checkThisMachine(t);
    checkWireProvenance(t);
    await checkNoInterface(t);
    await checkFakeRapl(t);
    await checkFakeNvml(t);
  },
};

/** C9 on this machine, default settings and with a configured active power of 10 W: probe and figure agree. */
async function checkThisMachine(t: Checker): Promise<void> {
  for (const config of [{}, { activeWatts: 10 }]) {
    const meter = createMeter(config);
    const p = await meter.probe();
    const label = `this machine (${p.rung})`;
    t.eq(p.provenance, RUNG_PROVENANCE[p.rung], `${label}: probe provenance matches its rung`);
    t.ok(
      p.skipped.every((s) => provenanceRank(RUNG_PROVENANCE[s.rung]) <= provenanceRank(p.provenance)),
      `${label}: only better rungs are listed as skipped`,
    );
    t.ok(
      p.skipped.every((s) => s.detail.length > 0),
      `${label}: every skip says why`,
    );
    const cost = await busy(meter, 'probe');
    consistent(t, cost, label);
    t.ok(cost.uj >= meter.estimateUj('probe'), `${label}: figure not below the action estimate`);
    t.ok(provenanceRank(cost.provenance) >= provenanceRank(p.provenance), `${label}: figure no better than the probed rung`);
    meter.close();
  }
}

/** The provenance rules themselves (§5), on costs as they arrive on the wire: `schema` for a bad `measured`. */
function checkWireProvenance(t: Checker): void {
  const refused = (c: unknown) => {
    try {
      readCost(c);
      return 'accepted';
    } catch (e) {
      return (e as { code?: string }).code ?? 'untyped';
    }
  };
  t.eq(refused({ uj: 5n, provenance: 'HwShunt' }), 'schema', 'HwShunt without measured is refused');
  for (const measured of [0n, 1n, 5n, 500n]) {
    t.eq(refused({ uj: 5n, provenance: 'Estimator', measured }), 'schema', `Estimator with measured ${measured} µJ is refused`);
    t.eq(refused({ uj: 5n, provenance: 'HwShunt', measured }), 'accepted', `HwShunt with measured ${measured} µJ is accepted`);
    t.eq(refused({ uj: 5n, provenance: 'ModelBased', measured }), 'accepted', `ModelBased may carry measured ${measured} µJ`);
  }
  t.eq(refused({ uj: 5n, provenance: 'ModelBased' }), 'accepted', 'ModelBased may omit measured');
}

/** No interface at all: still a figure, Estimator, without measured. */
async function checkNoInterface(t: Checker): Promise<void> {
  const meter = createMeter({ estimatesUj: { call: 1_234n } }, { powercapRoot: NO_RAPL, nvml: noNvml });
  const cost = await busy(meter, 'call');
  t.eq(cost, { uj: 1_234n, provenance: 'Estimator' }, 'no interface: Estimator constant, no measured');
}

/**
 * A fake RAPL powercap folder in a temp dir: wraparound corrected, floored at the estimate, a
 * reading failing half-way degrades to ModelBased without `measured`, an unreadable file is skipped.
 */
async function checkFakeRapl(t: Checker): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), 'jcp-c9-'));
  try {
    const max = 262_143_328_850n;
    writeFakePowercap(root, [
      { dir: 'intel-rapl:0', name: 'package-0', energyUj: max - 1_000n, maxRangeUj: max },
      { dir: 'intel-rapl:0:0', name: 'core', energyUj: 0n, maxRangeUj: max },
    ]);
    const fs = new FaultyFs();
    const rapl = createMeter({ activeWatts: 8, defaultEstimateUj: 0n }, { powercapRoot: root, fs });
    t.eq((await rapl.probe()).rung, 'rapl', 'fake RAPL: probed as the top rung');
    const wrapped = await rapl.measure('call', () => setFakeEnergy(root, 'intel-rapl:0', 4_000n));
    t.eq(wrapped.cost, { uj: 5_000n, provenance: 'HwShunt', measured: 5_000n }, 'fake RAPL: wraparound corrected, HwShunt with measured');
    consistent(t, wrapped.cost, 'fake RAPL');
    const floored = createMeter(
      { activeWatts: 8, estimatesUj: { call: 9_000n }, defaultEstimateUj: 0n },
      { powercapRoot: root, fs: new FaultyFs() },
    );
    setFakeEnergy(root, 'intel-rapl:0', 10_000n);
    const low = await floored.measure('call', () => setFakeEnergy(root, 'intel-rapl:0', 12_000n));
    t.eq(
      low.cost,
      { uj: 9_000n, provenance: 'HwShunt', measured: 2_000n },
      'fake RAPL: charged no less than the estimate, the raw reading kept as measured',
    );
    floored.close();
    const half = await rapl.measure('call', () => fs.fail(join(root, 'intel-rapl:0', 'energy_uj'), 'EIO'));
    t.eq(half.cost.provenance, 'ModelBased', 'RAPL failing mid-reading: degrades to the model');
    t.eq(half.cost.measured, undefined, 'RAPL failing mid-reading: no measured figure claimed');
    t.eq(half.reading.degraded[0]?.reason, 'failed-mid-reading', 'RAPL failing mid-reading: says so');
    consistent(t, half.cost, 'degraded RAPL');

    const denied = new FaultyFs();
    denied.fail(join(root, 'intel-rapl:0', 'energy_uj'), 'EACCES');
    const p = await createMeter({}, { powercapRoot: root, fs: denied, nvml: noNvml }).probe();
    t.eq(p.skipped[0]?.reason, 'permission-denied', 'unreadable energy_uj: RAPL skipped as permission-denied');
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

/** A scripted NVML: mJ summed as µJ (HwShunt), a GPU lost mid-reading degrades to Estimator, shut down on close. */
async function checkFakeNvml(t: Checker): Promise<void> {
  const nvml = fakeNvml([100n, 200n]);
  const gpu = createMeter({ defaultEstimateUj: 0n }, { powercapRoot: NO_RAPL, nvml: () => nvml });
  t.eq((await gpu.probe()).rung, 'nvml', 'fake NVML: probed below an absent RAPL');
  const good = await gpu.measure('call', () => {
    nvml.energyMj[0] = 103n;
    nvml.energyMj[1] = 207n;
  });
  t.eq(good.cost, { uj: 10_000n, provenance: 'HwShunt', measured: 10_000n }, 'fake NVML: mJ summed as µJ, HwShunt with measured');
  const lost = await gpu.measure('call', () => {
    nvml.script.set('nvmlDeviceGetTotalEnergyConsumption', [NvmlReturn.SUCCESS, NvmlReturn.ERROR_GPU_IS_LOST]);
  });
  t.eq(lost.cost.provenance, 'Estimator', 'NVML failing mid-reading with no calibrated power: degrades to Estimator');
  t.eq(lost.cost.measured, undefined, 'NVML failing mid-reading: no measured figure claimed');
  consistent(t, lost.cost, 'degraded NVML');
  gpu.close();
  t.eq(nvml.initCount, 0, 'fake NVML: shut down on close');
}
