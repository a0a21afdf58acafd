/**
 * Mutants of energy honesty (spec §5; core/energy.ts, meter/): the provenance rules weakened,
 * a degraded figure keeping the hardware's provenance, wraparound and unit errors, the
 * estimate floor dropped.
 */
import type { Mutant } from '../scripts/mutants.ts';

export default [
  {
    id: 'energy-hwshunt-measured-zero-only',
    file: 'core/energy.ts',
    find: "if (c.provenance === 'HwShunt' && c.measured === undefined) return",
    replace: "if (c.provenance === 'HwShunt' && c.measured === 0n) return",
    classes: ['C9'],
  },
  {
    id: 'energy-estimator-measured-above-only',
    file: 'core/energy.ts',
    find: "if (c.provenance === 'Estimator' && c.measured !== undefined) return",
    replace: "if (c.provenance === 'Estimator' && c.measured !== undefined && c.measured > c.uj) return",
    classes: ['C9'],
  },
  {
    id: 'meter-degraded-keeps-hw-rung',
    file: 'meter/meter.ts',
    find: "      rung = 'cpu-time';\n",
    replace: "      rung = source?.rung ?? 'cpu-time';\n",
    classes: ['C9'],
  },
  {
    id: 'meter-floor-dropped',
    file: 'meter/meter.ts',
    find: 'const uj = rawUj !== undefined && rawUj > floorUj ? rawUj : floorUj;',
    replace: 'const uj = rawUj ?? floorUj;',
    classes: ['C9'],
  },
  {
    id: 'rapl-wrap-as-zero',
    file: 'meter/rapl.ts',
    find: '  if (after >= before) return ok(after - before);\n  return ok(maxRangeUj - before + after);',
    replace: '  return ok(after >= before ? after - before : 0n);',
    classes: ['C9'],
  },
  {
    id: 'nvml-millijoules-as-microjoules',
    file: 'meter/nvml.ts',
    find: 'return ok({ uj: mj * 1000n, reset });',
    replace: 'return ok({ uj: mj, reset });',
    classes: ['C9'],
  },
] satisfies Mutant[];
