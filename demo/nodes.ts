/**
 * The demo's enforcement nodes: `jcp node start` child processes on loopback, each with its own
 * folder (`<dir>/<name>/`: `node.json` config, `node.log`, `data/` with the steward key and the
 * LevelDB receipt log, `memory.jsonl` for its memory server). With NATS a node joins the cluster
 * (revocation stream, budget channels: docs/cluster.md); without, it runs alone.
 *
 * Unlike `testkit/cluster.ts` this launcher also runs nodes with no NATS at all (the demo's
 * single-node fallback) and never removes the folders: the receipt logs are the demo's evidence.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Actor, ContentId, Did } from '../core/index.ts';
import { writeKeyFile } from '../node/index.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort, JCP_BIN, stopChild, track } from '../testkit/index.ts';

/** What one node needs to start. */
export interface DemoNodeSpec {
  readonly name: string;
  /** The node's folder (created). */
  readonly dir: string;
  readonly steward: Actor;
  /** Config `resources` (docs/node.md). */
  readonly resources: readonly unknown[];
  /** Config `meter` section. */
  readonly meter: Record<string, unknown>;
  /** NATS url; absent = no cluster hooks. */
  readonly nats?: string;
  /** The cluster's subject root on NATS (default `jcp`; the demo's own per run on a user's NATS). */
  readonly subjectRoot?: string;
  /** Budget channels this node serves as a point (only with NATS). */
  readonly channels?: readonly { readonly grantId: ContentId; readonly windowUj: bigint; readonly points: readonly Did[] }[];
}

/** A running demo node. */
export interface DemoNode {
  readonly name: string;
  readonly did: Did;
  readonly host: string;
  readonly port: number;
  readonly metricsPort: number;
  readonly dir: string;
  readonly dataDir: string;
  readonly logFile: string;
  readonly child: ChildProcess;
}

/** Writes the node's key and config, starts it, and waits until `/healthz` answers 200. @throws Error with the log's tail. */
export async function startNode(spec: DemoNodeSpec, timeoutMs = 90_000): Promise<DemoNode> {
  const dataDir = join(spec.dir, 'data');
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  writeKeyFile(join(dataDir, 'steward.key'), spec.steward);
  const port = await freePort();
  const metricsPort = await freePort();
  const config = {
    listen: `127.0.0.1:${port}`,
    data_dir: dataDir,
    metrics: `127.0.0.1:${metricsPort}`,
    log_level: 'warn',
    resources: spec.resources,
    meter: spec.meter,
    ...(spec.nats !== undefined
      ? {
          nats: spec.nats,
          cluster: {
            subject_root: spec.subjectRoot ?? 'jcp',
            replicas: 1,
            settle_interval_ms: 200,
            revocation_catch_up_ms: 2_000,
            channels: (spec.channels ?? []).map((c) => ({ grant_id: c.grantId, window_uj: c.windowUj.toString(), points: [...c.points] })),
          },
        }
      : {}),
  };
  const configFile = join(spec.dir, 'node.json');
  writeFileSync(configFile, `${JSON.stringify(config, null, 2)}\n`);
  const logFile = join(spec.dir, 'node.log');
  const fd = openSync(logFile, 'a');
  const child = spawn(process.execPath, [JCP_BIN, 'node', 'start', '--config', configFile], {
    stdio: ['ignore', fd, fd],
    env: { ...process.env, NODE_ENV: 'production' },
  });
  closeSync(fd);
  track(child);
  const node: DemoNode = {
    name: spec.name,
    did: spec.steward.did,
    host: '127.0.0.1',
    port,
    metricsPort,
    dir: spec.dir,
    dataDir,
    logFile,
    child,
  };
  try {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null)
        throw new Error(`node ${spec.name} exited (code ${child.exitCode ?? child.signalCode})`);
      if (await healthy(node)) break;
      if (Date.now() > deadline)
        throw new Error(`node ${spec.name} did not answer /healthz on 127.0.0.1:${metricsPort} within ${timeoutMs} ms`);
      await sleep(100);
    }
  } catch (e) {
    await stopChild(child, 2_000);
    throw new Error(`${(e as Error).message}\n--- last lines of ${logFile} ---\n${tail(logFile, 15)}`);
  }
  return node;
}

/** True when the node answers `/healthz` with 200. */
export async function healthy(n: Pick<DemoNode, 'metricsPort'>): Promise<boolean> {
  try {
    const r = await fetch(`http://127.0.0.1:${n.metricsPort}/healthz`, { signal: AbortSignal.timeout(1_000) });
    await r.arrayBuffer();
    return r.ok;
  } catch {
    return false;
  }
}

/** The node's `/metrics` text, or '' when it does not answer. */
export async function metricsText(n: Pick<DemoNode, 'metricsPort'>): Promise<string> {
  try {
    const r = await fetch(`http://127.0.0.1:${n.metricsPort}/metrics`, { signal: AbortSignal.timeout(2_000) });
    return r.ok ? await r.text() : '';
  } catch {
    return '';
  }
}

/** Stops a node gracefully (SIGTERM: it settles its channels once more and closes its log); SIGKILL after `graceMs`. */
export async function stopNode(n: DemoNode, graceMs = 15_000): Promise<void> {
  await stopChild(n.child, graceMs);
}

/** The last `lines` lines of a file ('' when unreadable). */
export function tail(file: string, lines: number): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}
