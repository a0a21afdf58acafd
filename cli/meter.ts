/** `jcp meter probe`: which rung of the energy ladder (spec §5) works on this machine, and why better ones were skipped. */
import { createMeter, type MeterConfig, readMeterConfig } from '../meter/index.ts';
import { type Command, parse, UsageError } from './command.ts';
import { READ_CAPS, readFileCapped } from '../io/index.ts';

const help = `Usage: jcp meter probe [--json] [--config file] [--watts W] [--powercap dir] [--nvml lib]

Probes the energy ladder of spec §5 on this machine, best first: RAPL (powercap package and
DRAM counters) → NVML (GPU total energy) → time × calibrated power → per-action constant, and prints
the rung in use, the provenance its figures carry (HwShunt, ModelBased, Estimator) and, for each
better rung, why it was skipped (absent, permission-denied, read-failed, not-calibrated, disabled).
For a hardware rung it lists the counters a figure sums and, for RAPL, the zones it does not sum
and why (core/uncore are inside their package; psys covers the platform, package and DRAM included).

Options:
  --json           print {"rung", "provenance", "detail", "skipped": [{rung, reason, detail}], "model",
                   and for a hardware rung "summed": [domain…], "notSummed": [{domain, why}]}
  --config file    a JSON file holding a "meter" section (or the section itself): rungs,
                   active_watts, model_basis, estimates_uj, default_estimate_uj, nvml_library
  --watts W        the model's calibrated active power in watts (overrides the config)
  --powercap dir   the powercap folder (default /sys/class/powercap)
  --nvml lib       the NVML library (default libnvidia-ml.so.1)
  -h, --help       show this help

Exit status: 0 when the probe ran (whatever rung it found), 2 for bad options or config.`;

/** The `jcp meter` command. */
export const command: Command = {
  name: 'meter',
  summary: 'probe the energy ladder (§5): the rung in use here and why better ones were skipped',
  help,
  async run(argv) {
    const { values, positionals } = parse(argv, {
      json: { type: 'boolean' },
      config: { type: 'string' },
      watts: { type: 'string' },
      powercap: { type: 'string' },
      nvml: { type: 'string' },
    });
    if (positionals.length !== 1 || positionals[0] !== 'probe') throw new UsageError('expected: jcp meter probe');
    let config: MeterConfig = {};
    if (values.config !== undefined) {
      let raw: unknown;
      try {
        raw = JSON.parse(readFileCapped(values.config, READ_CAPS.configFile, 'config file').toString('utf8'));
      } catch (e) {
        throw new UsageError(`--config ${values.config}: ${(e as Error).message}`);
      }
      const section = typeof raw === 'object' && raw !== null && 'meter' in raw ? (raw as { meter: unknown }).meter : raw;
      config = readMeterConfig(section);
    }
    if (values.watts !== undefined) {
      const w = Number(values.watts);
      if (!Number.isFinite(w) || w <= 0) throw new UsageError(`--watts must be a number of watts > 0, got ${values.watts}`);
      config = { ...config, activeWatts: w };
    }
    if (values.nvml !== undefined) config = { ...config, nvmlLibrary: values.nvml };
    const meter = createMeter(config, values.powercap !== undefined ? { powercapRoot: values.powercap } : {});
    const p = await meter.probe();
    meter.close();
    if (values.json) {
      process.stdout.write(`${JSON.stringify(p, null, 2)}\n`);
      return 0;
    }
    process.stdout.write(`rung in use: ${p.rung} (${p.provenance}): ${p.detail}\n`);
    if (p.summed !== undefined) process.stdout.write(`summed: ${p.summed.join(', ')}\n`);
    for (const x of p.notSummed ?? []) process.stdout.write(`not summed: ${x.domain}: ${x.why}\n`);
    if (p.provenance === 'HwShunt') {
      const m = p.model;
      const power = m.watts === undefined ? 'not calibrated' : `${m.watts} W (${m.wattsSource})`;
      process.stdout.write(`model a failed reading degrades to: ${m.basis} × ${power}\n`);
    }
    if (p.skipped.length === 0) {
      process.stdout.write('no better rung: this is the top of the ladder\n');
    } else {
      process.stdout.write('skipped (better rungs):\n');
      for (const s of p.skipped) process.stdout.write(`  ${s.rung.padEnd(9)} ${s.reason.padEnd(18)} ${s.detail}\n`);
    }
    return 0;
  },
};
