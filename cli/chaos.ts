/** `jcp chaos`: the chaos runner (chaos/chaos.ts) — proves the overdraft bound under faults. */
import { writeFileSync } from 'node:fs';
import { ALL_FAULT_KINDS, chaosPlot, chaosTable, FAULT_KINDS, type FaultKind, MULTI_REGION_BUILD, runChaos } from '../chaos/index.ts';
import { type Command, UsageError, parse } from './command.ts';

const help = `Usage: jcp chaos [--nodes 3] [--mode channel|shards] [--faults kill,pause,partition,nats-restart]
                 [--duration 60] [--seed 7] [--nats-cluster 3] [--json out.json] [--svg out.svg]
                 [--regions 3 [--rtt-ms 40] [--jitter-ms 0]] [--revocation-staleness 10]
                 [--cost uj] [--budget uj] [--window uj] [--rate calls/s] [--agents n] [--keep dir] [--quiet]

Starts a local cluster (its own nats-server, or a 3-server JetStream cluster), and agents that
spend against every node on one root grant — a shared budget channel (channel mode) or one
shard per node (shards mode) — while faults drawn from the seed hit it: SIGKILL and restart,
SIGSTOP/SIGCONT, a node cut off from NATS through its TCP proxy, NATS server restarts. Then it
heals everything, settles, stops the nodes and checks, from the receipt logs and the signed
statements:
  1. no allow an agent got a reply for is missing from the logs;
  2. channel mode: spend ≤ budget + bound (printed); shards mode: spend ≤ budget exactly;
  3. the overdraft from the receipts equals the one proven by the signed statements;
  4. every receipt verifies and every chain was debited as §4.2 says;
  5. a second grant, revoked halfway through, is never allowed by a node after the revocation
     reached it, nor anywhere after --revocation-staleness seconds (revoked_allowed_after_reach).
--regions N (2..4) splits the nodes evenly over N regions, each its own NATS cluster, joined by gateways
through proxies adding --rtt-ms round trip; then the faults may include region-cut, and
nats-restart restarts one region's NATS.
Prints a table; --json writes the report, --svg a plot of the overdraft (spend − budget) against
the bound over time, one series per region, with the faults marked (default: next to the JSON).

Exit status: 0 when all five invariants hold, 1 otherwise.`;

/** The `jcp chaos` command. */
export const command: Command = {
  name: 'chaos',
  summary: 'run the chaos runner: faults vs the overdraft bound (jcp chaos --seed 7)',
  help,
  async run(argv) {
    const { values } = parse(
      argv,
      {
        nodes: { type: 'string' },
        mode: { type: 'string' },
        faults: { type: 'string' },
        duration: { type: 'string' },
        seed: { type: 'string' },
        'nats-cluster': { type: 'string' },
        regions: { type: 'string' },
        'rtt-ms': { type: 'string' },
        'jitter-ms': { type: 'string' },
        'revocation-staleness': { type: 'string' },
        json: { type: 'string' },
        svg: { type: 'string' },
        cost: { type: 'string' },
        budget: { type: 'string' },
        window: { type: 'string' },
        rate: { type: 'string' },
        agents: { type: 'string' },
        keep: { type: 'string' },
        quiet: { type: 'boolean' },
      },
      false,
    );
    const int = (v: string | undefined, flag: string, dflt: number, min: number, max: number) => {
      const n = v === undefined ? dflt : Number(v);
      if (!Number.isInteger(n) || n < min || n > max) throw new UsageError(`${flag}: expected an integer in [${min}, ${max}]`);
      return n;
    };
    const uj = (v: string | undefined, flag: string) => {
      if (v === undefined) return undefined;
      if (!/^\d+$/.test(v)) throw new UsageError(`${flag}: expected µJ`);
      return BigInt(v);
    };
    const mode = values.mode ?? 'channel';
    if (mode !== 'channel' && mode !== 'shards') throw new UsageError('--mode: channel or shards');
    const faults = (values.faults ?? FAULT_KINDS.join(',')).split(',').filter(Boolean);
    for (const f of faults) if (!(ALL_FAULT_KINDS as readonly string[]).includes(f)) throw new UsageError(`--faults: unknown fault ${f}`);
    const regions = int(values.regions, '--regions', 1, 1, 4);
    if (regions > 1 && !MULTI_REGION_BUILD) throw new UsageError('--regions: this build has no multi-region launcher (testkit/regions.ts)');
    if (regions === 1 && faults.includes('region-cut')) throw new UsageError('--faults: region-cut needs --regions 2 or more');
    const cost = uj(values.cost, '--cost');
    const budget = uj(values.budget, '--budget');
    const window = uj(values.window, '--window');
    const report = await runChaos({
      nodes: int(values.nodes, '--nodes', 3, 1, 16),
      mode,
      faults: faults as FaultKind[],
      durationS: int(values.duration, '--duration', 60, 8, 3_600),
      seed: values.seed ?? '7',
      natsServers: int(values['nats-cluster'], '--nats-cluster', 1, 1, 3) === 3 ? 3 : 1,
      ...(regions > 1
        ? {
            regions,
            rttMs: int(values['rtt-ms'], '--rtt-ms', 40, 0, 2_000),
            jitterMs: int(values['jitter-ms'], '--jitter-ms', 0, 0, 1_000),
          }
        : {}),
      revocationStalenessS: int(values['revocation-staleness'], '--revocation-staleness', 10, 1, 3_600),
      ...(cost !== undefined ? { costUj: cost } : {}),
      ...(budget !== undefined ? { budgetUj: budget } : {}),
      ...(window !== undefined ? { windowUj: window } : {}),
      ratePerAgent: int(values.rate, '--rate', 20, 1, 10_000),
      agentsPerNode: int(values.agents, '--agents', 2, 1, 64),
      ...(values.keep ? { keepDir: values.keep } : {}),
      ...(values.quiet ? {} : { progress: (l: string) => process.stderr.write(`jcp chaos: ${l}\n`) }),
    });
    process.stdout.write(chaosTable(report));
    if (values.json) writeFileSync(values.json, `${JSON.stringify(report, null, 2)}\n`);
    const svg = values.svg ?? (values.json ? values.json.replace(/\.json$/i, '') + '.svg' : undefined);
    if (svg) writeFileSync(svg, chaosPlot(report));
    return Object.values(report.invariants).every(Boolean) ? 0 : 1;
  },
};
