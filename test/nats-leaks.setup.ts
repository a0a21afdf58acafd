/**
 * Vitest global setup (vitest.config.ts `globalSetup`): the whole run leaves the shared NATS on
 * 127.0.0.1:4222 as it found it (RULES: tests "leave no state (streams, KV buckets, keys) in a
 * shared server"; the demo's own before/after check, test/demo/nats-cleanup.test.ts, made
 * suite-wide).
 *
 * Before the run it lists every JetStream stream (a KV bucket is the stream `KV_<bucket>`, so
 * buckets are covered and named as buckets) with its creation time; after the run it lists them
 * again and fails the run naming every stream or bucket that was created during the run and is
 * still there. A stream of the cluster's default names (`JCP_STATEMENTS`, `JCP_REVOCATIONS`,
 * `JCP_SHARDS`, `JCP_TLOG`) that is new is named as such: a test ran a node or a bus without a
 * test-specific subject root.
 *
 * The server is shared by everyone on the machine: a stream another process made while this run
 * was going, and removes a moment later, would be counted, so leftovers are re-listed for up to
 * `LEAK_GRACE_MS` before the run is failed. Without NATS on 4222 the check says so and does
 * nothing. `JCP_NATS_LEAK_CHECK=off` turns it off (e.g. two suites at once on one server).
 */
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';

const SERVER = '127.0.0.1:4222';
/**
 * How long leftovers are re-listed before they count as leaks (ms; `JCP_NATS_LEAK_GRACE_MS`,
 * default 30,000). Only spent when something is left: a clean run ends at once. Other suites on
 * the same server keep their streams until their file ends (a FROST file's KV buckets live for
 * tens of seconds), hence the generous default.
 */
const LEAK_GRACE_MS = Number(process.env['JCP_NATS_LEAK_GRACE_MS'] ?? 30_000);
/** Stream names of the cluster's default subject root `jcp`. */
const DEFAULT_STREAMS = new Set(['JCP_STATEMENTS', 'JCP_REVOCATIONS', 'JCP_SHARDS', 'JCP_TLOG']);

/** Stream name → creation time (ISO) of every stream on the server; undefined without NATS. */
async function streams(): Promise<Map<string, string> | undefined> {
  let nc: NatsConnection;
  try {
    nc = await connect({ servers: SERVER, reconnect: false, timeout: 2_000 });
  } catch {
    return undefined;
  }
  try {
    const jsm = await jetstreamManager(nc, { timeout: 5_000 });
    const out = new Map<string, string>();
    for await (const s of jsm.streams.list()) out.set(s.config.name, s.created);
    return out;
  } catch {
    return undefined;
  } finally {
    await nc.close().catch(() => undefined);
  }
}

/** A stream's name as a person reads it: `KV bucket x` for `KV_x`, `default stream X` for the cluster's defaults. */
function label(name: string): string {
  if (name.startsWith('KV_')) return `KV bucket ${name.slice(3)}`;
  return DEFAULT_STREAMS.has(name) ? `default stream ${name} (a test used subject root 'jcp')` : `stream ${name}`;
}

let before: Map<string, string> | undefined;
const off = process.env['JCP_NATS_LEAK_CHECK'] === 'off';

/** Lists the streams and buckets before the run. */
export async function setup(): Promise<void> {
  if (off) return;
  before = await streams();
  if (before === undefined) process.stderr.write(`nats-leaks: no NATS with JetStream on ${SERVER}; not checking what the run leaves\n`);
}

/** Fails the run (exit status 1) when streams or buckets made during it are still on the server. @throws Error naming them. */
export async function teardown(): Promise<void> {
  if (off || before === undefined) return;
  const was = before;
  const end = Date.now() + LEAK_GRACE_MS;
  let left: string[] = [];
  for (;;) {
    const now = await streams();
    if (now === undefined) return;
    left = [...now.keys()].filter((n) => !was.has(n)).sort();
    if (left.length === 0 || Date.now() >= end) break;
    await new Promise((r) => setTimeout(r, 1_000));
  }
  if (left.length > 0) {
    // Vitest reports an error thrown here but still exits 0: set the exit status as well.
    process.exitCode = 1;
    throw new Error(
      `nats-leaks: the run left ${left.length} new stream(s)/bucket(s) on ${SERVER}: ${left.map(label).join('; ')}. ` +
        'Give every test its own subject root or prefix and delete what it made (JCP_NATS_LEAK_CHECK=off skips this check).',
    );
  }
}
