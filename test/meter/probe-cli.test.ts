/** `jcp meter probe` on a fake powercap tree: which RAPL domains a figure sums, and which not and why. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { main } from '../../cli/internal.ts';
import { writeFakePowercap } from '../../meter/index.ts';

const MAX = 262_143_328_850n;
const root = mkdtempSync(join(tmpdir(), 'jcp-probe-cli-'));
writeFakePowercap(root, [
  { dir: 'intel-rapl:0', name: 'package-0', energyUj: 5n, maxRangeUj: MAX },
  { dir: 'intel-rapl:0:0', name: 'core', energyUj: 5n, maxRangeUj: MAX },
  { dir: 'intel-rapl:0:1', name: 'dram', energyUj: 5n, maxRangeUj: MAX },
  { dir: 'intel-rapl:1', name: 'psys', energyUj: 5n, maxRangeUj: MAX },
]);
afterAll(() => rmSync(root, { recursive: true, force: true }));

async function jcp(...argv: string[]): Promise<{ code: number; out: string }> {
  let out = '';
  const w = vi.spyOn(process.stdout, 'write').mockImplementation((s: string | Uint8Array) => {
    out += String(s);
    return true;
  });
  try {
    return { code: await main(argv), out };
  } finally {
    w.mockRestore();
  }
}

describe('jcp meter probe - RAPL domains', () => {
  it('prints the summed domains and the ones left out with why', async () => {
    const r = await jcp('meter', 'probe', '--powercap', root, '--nvml', '/nonexistent/libnvidia-ml.so.1');
    expect(r.code).toBe(0);
    expect(r.out).toContain('rung in use: rapl (HwShunt): powercap package-0 + dram (package-0)\n');
    expect(r.out).toContain('summed: package-0, dram (package-0)\n');
    expect(r.out).toContain('not summed: core (package-0): inside package-0\n');
    expect(r.out).toContain('not summed: psys: covers the whole platform, package and DRAM included\n');
  });

  it('--json carries summed and notSummed', async () => {
    const r = await jcp('meter', 'probe', '--json', '--powercap', root, '--nvml', '/nonexistent/libnvidia-ml.so.1');
    const p = JSON.parse(r.out) as { summed: string[]; notSummed: { domain: string; why: string }[] };
    expect(p.summed).toEqual(['package-0', 'dram (package-0)']);
    expect(p.notSummed.map((x) => x.domain)).toEqual(['core (package-0)', 'psys']);
  });
});
