/**
 * `jcp cluster up --regions N`, and `status`/`down` of such a cluster (testkit/regions.ts,
 * docs/regions.md). The proxies that make the links between regions live in a launcher process:
 * `up` starts it in the background (`up ... --foreground` is that process) and returns once
 * `<dir>/cluster.json` names its control endpoint; `status` asks that endpoint for the links' state,
 * each region's NATS servers (`/gatewayz`) for the gateway connections they hold, and each node's
 * `/healthz`; `cut`/`heal` ask the launcher to cut or heal one link; `down` asks it to stop everything.
 */
import { spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  type ClusterState,
  clusterStatus,
  JCP_BIN,
  type LinkStatus,
  liveLinks,
  type RegionState,
  type RegionStatus,
  startRegions,
  whenInterrupted,
} from '../testkit/index.ts';
import { CliError, UsageError } from './command.ts';

/** The options `up --regions` reads (strings as parsed). */
export interface RegionUpValues {
  readonly regions: string;
  readonly 'nodes-per-region'?: string | undefined;
  readonly 'servers-per-region'?: string | undefined;
  readonly 'rtt-ms'?: string | undefined;
  readonly 'jitter-ms'?: string | undefined;
  readonly channel?: readonly { grant_id: string; window_uj: string }[];
  readonly resource?: readonly string[] | undefined;
  readonly 'subject-root'?: string | undefined;
  readonly foreground?: boolean | undefined;
}

function int(v: string | undefined, name: string, lo: number, hi: number, dflt: number): number {
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!/^\d+$/.test(v) || n < lo || n > hi) throw new UsageError(`--${name}: expected an integer in [${lo}, ${hi}], got ${v}`);
  return n;
}

/** Checks the region options (usage errors, before anything is made). */
export function regionOptions(v: RegionUpValues): {
  regions: number;
  nodesPerRegion: number;
  serversPerRegion: 1 | 3;
  rttMs: number;
  jitterMs: number;
} {
  const regions = int(v.regions, 'regions', 1, 4, 3);
  const nodesPerRegion = int(v['nodes-per-region'], 'nodes-per-region', 0, 16, 2);
  const servers = int(v['servers-per-region'], 'servers-per-region', 1, 3, 1);
  if (servers !== 1 && servers !== 3) throw new UsageError(`--servers-per-region: expected 1 or 3, got ${servers}`);
  return {
    regions,
    nodesPerRegion,
    serversPerRegion: servers,
    rttMs: int(v['rtt-ms'], 'rtt-ms', 0, 10_000, 40),
    jitterMs: int(v['jitter-ms'], 'jitter-ms', 0, 10_000, 0),
  };
}

function readRegionState(dir: string): RegionState | undefined {
  const file = join(dir, 'cluster.json');
  if (!existsSync(file)) return undefined;
  const s = JSON.parse(readFileSync(file, 'utf8')) as { type?: string };
  return s.type === 'jcp-regions' ? (s as RegionState) : undefined;
}

function alive(pid: number | undefined): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * `up --regions`: in the foreground, starts the cluster, serves its control endpoint, writes
 * cluster.json and runs until `down` (or SIGINT/SIGTERM); otherwise starts itself with
 * `--foreground` in the background and waits (up to 120 s) for the cluster.json it writes.
 * @throws UsageError for bad options; CliError if the launcher exits or is not ready in time.
 */
export async function regionsUp(argv: readonly string[], v: RegionUpValues, dir: string): Promise<number> {
  const o = regionOptions(v);
  if (!v.foreground) {
    const log = join(dir, 'launcher.log');
    const fd = openSync(log, 'a');
    const child = spawn(process.execPath, [JCP_BIN, 'cluster', 'up', ...argv, '--dir', dir, '--foreground'], {
      stdio: ['ignore', fd, fd],
      detached: true,
    });
    closeSync(fd);
    child.unref();
    const deadline = Date.now() + 120_000;
    while (Date.now() < deadline) {
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new CliError(
          'launcher-failed',
          `the region launcher exited (${child.exitCode ?? child.signalCode}); see ${log}:\n${readFileSync(log, 'utf8').split('\n').slice(-15).join('\n')}`,
        );
      }
      const s = readRegionState(dir);
      if (s && s.pid === child.pid) {
        printStatus(s, undefined);
        process.stdout.write(`launcher pid ${s.pid} (holds the links), log ${log}; stop with 'jcp cluster down --dir ${dir}'\n`);
        return 0;
      }
      await sleep(200);
    }
    throw new CliError('launcher-failed', `the region launcher did not write ${join(dir, 'cluster.json')} within 120 s; see ${log}`);
  }
  const rc = await startRegions({
    ...o,
    dir,
    ...(v.channel && v.channel.length > 0 ? { channels: v.channel } : {}),
    ...(v.resource ? { resources: v.resource.map((name) => ({ name })) } : {}),
    ...(v['subject-root'] ? { subjectRoot: v['subject-root'] } : {}),
    logLevel: 'info',
  });
  let done!: () => void;
  const stopped = new Promise<void>((r) => {
    done = r;
  });
  const control = await rc.serveControl(() => done());
  whenInterrupted(async () => {
    rmSync(join(dir, 'cluster.json'), { force: true });
    await rc.stop();
  });
  const file = rc.writeState(control.url);
  process.stdout.write(`regions up; state in ${file}, control ${control.url}\n`);
  await stopped;
  rmSync(file, { force: true });
  await rc.stop();
  await control.close();
  process.stdout.write('regions stopped\n');
  return 0;
}

/**
 * What `status --json` prints for a multi-region cluster: the launcher's status plus each node's
 * health, and every link with its live health (`live`, `gateway_connections`: {@link liveLinks}).
 */
export interface RegionStatusReport extends RegionStatus {
  readonly launcher: { readonly pid: number; readonly control: string; readonly answering: boolean };
  readonly nodes: { readonly id: string; readonly region: string; readonly health: string; readonly address: string }[];
}

/** `status` of a multi-region cluster in `dir`, or undefined when `dir` holds none. Exit 1 if the launcher does not answer. */
export async function regionsStatus(dir: string, json: boolean): Promise<number | undefined> {
  const s = readRegionState(dir);
  if (!s) return undefined;
  let live: RegionStatus | undefined;
  try {
    const r = await fetch(`${s.control}/status`, { signal: AbortSignal.timeout(2_000) });
    if (r.ok) live = (await r.json()) as RegionStatus;
  } catch {
    // not answering: reported below
  }
  // Without an answering launcher nobody knows the links: gone, its proxies (the links) went with it.
  const launcherAlive = live === undefined && alive(s.pid);
  const cur: RegionStatus = live ?? {
    ...s,
    links: s.links.map((l) => ({ ...l, state: launcherAlive ? 'unknown' : 'down', recorded_state: l.state })),
  };
  const nodes = cur.regions.flatMap((r) => r.nodes.map((n) => ({ ...n, region: r.name })));
  const state: ClusterState = {
    type: 'jcp-cluster',
    dir,
    nats: { urls: '', owned: true, pids: [] },
    nodes: nodes.map((n) => ({ name: n.id, did: n.did, address: n.address, metrics: n.metrics, pid: n.pid, data_dir: '', log: '' })),
  };
  const [health, links] = await Promise.all([clusterStatus(state), liveLinks(cur)]);
  const report: RegionStatusReport = {
    ...cur,
    links,
    launcher: { pid: s.pid, control: s.control, answering: live !== undefined },
    nodes: health.map((h, i) => ({ id: h.name, region: nodes[i]!.region, health: h.health, address: h.address })),
  };
  if (json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  else printStatus(report, report);
  if (!live) {
    process.stderr.write(
      launcherAlive
        ? `the region launcher (pid ${s.pid}, running) does not answer on ${s.control}: link states unknown\n`
        : `the region launcher (pid ${s.pid}, gone) does not answer on ${s.control}: the links between regions went with it (down); stop what is left with 'jcp cluster down --dir ${dir}'\n`,
    );
  }
  return live ? 0 : 1;
}

function printStatus(s: RegionStatus, report: RegionStatusReport | undefined): void {
  for (const r of s.regions) {
    const stopped = r.servers.filter((x) => x.running === false).map((x) => x.name);
    process.stdout.write(
      `region ${r.name}${r.name === s.home ? ' (home: the streams live here)' : ''}  NATS ${r.nats_urls.join(',')}${stopped.length > 0 ? `  NATS server(s) not running: ${stopped.join(', ')}` : ''}\n`,
    );
    for (const n of r.nodes) {
      const h = report?.nodes.find((x) => x.id === n.id)?.health;
      process.stdout.write(
        `  ${n.id.padEnd(4)} jcp/1 ${n.address.padEnd(22)} metrics ${n.metrics.padEnd(22)}${h ? ` ${h.padEnd(10)}` : ''} ${n.did}\n`,
      );
    }
  }
  for (const l of s.links)
    process.stdout.write(
      `link ${l.from} -> ${l.to} ${l.kind.padEnd(8)} ${l.state.padEnd(4)} rtt ${l.rttMs} ms${l.jitterMs ? ` jitter ${l.jitterMs} ms` : ''}${liveText(l)}\n`,
    );
}

/** The live part of a link's status line: `  live connected (1/1 gateway connections)  proxy open 1`, or nothing before {@link liveLinks}. */
function liveText(l: LinkStatus): string {
  if (l.live === undefined) return '';
  const g = l.gateway_connections;
  const conns = g
    ? ` (${g.connected}/${g.servers} gateway connection${g.servers === 1 ? '' : 's'}${g.answered < g.servers ? `, ${g.servers - g.answered} server(s) not answering /gatewayz` : ''})`
    : '';
  return `  live ${l.live}${conns}${l.proxy ? `  proxy ${l.proxy.cut ? 'cut' : 'open'}, ${l.proxy.open} connection(s)` : ''}`;
}

/**
 * Parses a link name as `jcp cluster status` prints it: `a-b`, `a->b` (or `a -> b` as one
 * argument). A cut or heal acts on both directions between the two regions.
 * @throws UsageError for anything else.
 */
function parseLinkName(name: string | undefined): { a: string; b: string } {
  const m = /^\s*([a-z])\s*(?:-|->)\s*([a-z])\s*$/.exec(name ?? '');
  if (!m) throw new UsageError(`expected a link as 'jcp cluster status' names it, <region>-<region> (e.g. a-b), got ${name ?? 'nothing'}`);
  return { a: m[1]!, b: m[2]! };
}

/**
 * `cut <link>` / `heal <link>` of the running multi-region cluster in `dir`: asks its launcher to
 * cut (or heal) both directions of every link between the two regions (gateways and client
 * links) and prints those links as the launcher reports them afterwards.
 * @throws UsageError for a bad link name, no multi-region cluster in `dir`, or a region it does not
 * have; CliError `launcher-unreachable` when the launcher does not answer, `link-refused` when it
 * refuses the request.
 */
export async function regionsLink(verb: 'cut' | 'heal', link: string | undefined, dir: string): Promise<number> {
  const { a, b } = parseLinkName(link);
  const s = readRegionState(dir);
  if (!s) throw new UsageError(`no multi-region cluster in ${dir} ('jcp cluster ${verb}' needs 'jcp cluster up --regions')`);
  const names = s.regions.map((r) => r.name);
  for (const r of [a, b]) if (!names.includes(r)) throw new UsageError(`no region ${r} in ${dir} (regions: ${names.join(', ')})`);
  if (a === b) throw new UsageError(`a link joins two regions, got ${a} twice`);
  let r: Response;
  try {
    r = await fetch(`${s.control}/${verb}?a=${a}&b=${b}`, { method: 'POST', signal: AbortSignal.timeout(5_000) });
  } catch (e) {
    throw new CliError(
      'launcher-unreachable',
      `the region launcher (pid ${s.pid}${alive(s.pid) ? ', running' : ', gone'}) does not answer on ${s.control}: ${(e as Error).message}`,
    );
  }
  const body = (await r.json().catch(() => ({}))) as Partial<RegionStatus> & { why?: string };
  if (!r.ok || !body.links)
    throw new CliError('link-refused', `the launcher refused to ${verb} ${a}-${b}: ${body.why ?? `HTTP ${r.status}`}`);
  for (const l of body.links.filter((x) => (x.from === a && x.to === b) || (x.from === b && x.to === a)))
    process.stdout.write(`link ${l.from} -> ${l.to} ${l.kind.padEnd(8)} ${l.state}\n`);
  process.stdout.write(
    `${verb === 'cut' ? 'cut' : 'healed'} ${a}-${b} (both directions); 'jcp cluster status --dir ${dir}' shows the gateways' live state\n`,
  );
  return 0;
}

/** `down` of a multi-region cluster: asks the launcher to stop, then signals whatever still runs. Undefined when `dir` holds none. */
export async function regionsDown(dir: string): Promise<number | undefined> {
  const s = readRegionState(dir);
  if (!s) return undefined;
  try {
    await fetch(`${s.control}/stop`, { method: 'POST', signal: AbortSignal.timeout(2_000) });
  } catch {
    // not answering: signalled below
  }
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline && alive(s.pid)) await sleep(100);
  const pids = [s.pid, ...s.regions.flatMap((r) => [...r.servers.map((x) => x.pid ?? 0), ...r.nodes.map((n) => n.pid ?? 0)])].filter(
    (p) => p > 0 && alive(p),
  );
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone meanwhile
    }
  }
  rmSync(join(dir, 'cluster.json'), { force: true });
  process.stdout.write(
    `stopped the regions in ${dir}${pids.length > 0 ? ` (${pids.length} process(es) killed after the launcher did not stop them)` : ''}\n`,
  );
  return 0;
}
