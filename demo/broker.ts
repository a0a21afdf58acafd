/**
 * Finding NATS for the demo: the server on 127.0.0.1:4222 if it answers with JetStream, else a
 * `nats-server` started here on a free loopback port (testkit/nats.ts), else none — the demo then
 * runs the parts that need no NATS and says how to install it.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { channelNames, natsGreeting, NatsUnavailable } from '../channel/index.ts';
import { shardStreamName } from '../shards/index.ts';
import { tlogStreamName } from '../node/index.ts';
import { isStreamNotFound } from '../natsio/index.ts';
import { findNatsServerBin, loopbackNatsUrlProblem, NatsServer } from '../testkit/index.ts';

/** The default NATS url the demo tries first. */
export const DEFAULT_NATS_URL = 'nats://127.0.0.1:4222';

/** How to get a server, for the message printed when there is none. */
export const NATS_INSTALL_HINT =
  'install nats-server (Debian/Ubuntu: `sudo apt-get install nats-server`; or a release from https://github.com/nats-io/nats-server/releases), or run one with JetStream: `nats-server -js`';

/** The NATS the demo uses. */
export type Broker =
  | { readonly mode: 'external'; readonly url: string }
  | { readonly mode: 'started'; readonly url: string; readonly server: NatsServer; readonly bin: string }
  | { readonly mode: 'none'; readonly why: string };

/**
 * Why `url` is no NATS with JetStream (nothing listens, the listener is not NATS, no JetStream),
 * or undefined when it is one; each step within `timeoutMs`. The url must first greet as NATS
 * (natsio/reach.ts): the NATS client alone leaks a socket that keeps this process alive when a
 * listener accepts but never speaks NATS.
 */
export async function natsProblem(url: string, timeoutMs = 1_500): Promise<string | undefined> {
  const g = await natsGreeting(url, timeoutMs);
  if (!g.ok) return g.why;
  let nc: Awaited<ReturnType<typeof connect>> | undefined;
  try {
    nc = await connect({ servers: url, timeout: timeoutMs, reconnect: false, name: 'jcp-demo-probe' });
    const jsm = await jetstreamManager(nc, { timeout: timeoutMs });
    await jsm.getAccountInfo();
    return undefined;
  } catch (e) {
    return `a NATS server, but ${nc === undefined ? 'the connection failed' : 'without JetStream'}: ${(e as Error)?.message ?? String(e)}`;
  } finally {
    await nc?.close().catch(() => undefined);
  }
}

/** True when `url` answers and has JetStream (within `timeoutMs` per step). */
export async function natsAnswers(url: string, timeoutMs = 1_500): Promise<boolean> {
  return (await natsProblem(url, timeoutMs)) === undefined;
}

/**
 * The broker for a url the user chose: it must be a loopback nats:// url and answer with
 * JetStream. Touches nothing on disk, so the demo checks it before making its folder.
 * @throws Error for a url that is not loopback; {@link NatsUnavailable} (`nats-unavailable`) when it does not answer.
 */
export async function chosenBroker(url: string): Promise<Broker> {
  const bad = loopbackNatsUrlProblem(url, false);
  if (bad !== undefined) throw new Error(`--nats: ${bad}`);
  const why = await natsProblem(url);
  if (why !== undefined) throw new NatsUnavailable(`no NATS with JetStream answers at ${url}: ${why}`);
  return { mode: 'external', url };
}

/** Options of {@link findBroker}. */
export interface BrokerOpts {
  /** A NATS url the user chose: it must answer. */
  readonly url?: string;
  /** Run without NATS on purpose. */
  readonly disabled?: boolean;
  /** Folder for a server started here (config, log, JetStream store). */
  readonly dir: string;
  /** The url tried first (default {@link DEFAULT_NATS_URL}). */
  readonly defaultUrl?: string;
  /** The nats-server binary to start (default {@link findNatsServerBin}); null = act as if none is installed. */
  readonly natsServerBin?: string | null;
}

/**
 * Picks the demo's NATS (see the module docs).
 * @throws Error when the url the user chose is not loopback or does not answer (see {@link chosenBroker}), or a server started here is not ready.
 */
export async function findBroker(opts: BrokerOpts): Promise<Broker> {
  if (opts.disabled) return { mode: 'none', why: 'run with --no-nats' };
  if (opts.url !== undefined) return await chosenBroker(opts.url);
  const first = opts.defaultUrl ?? DEFAULT_NATS_URL;
  if (await natsAnswers(first)) return { mode: 'external', url: first };
  const bin = opts.natsServerBin === null ? undefined : (opts.natsServerBin ?? findNatsServerBin());
  if (bin === undefined) return { mode: 'none', why: `nothing answers on ${first} and no nats-server binary was found` };
  // testkit/nats.ts looks the binary up at each start; point it at the one chosen here.
  process.env['JCP_NATS_SERVER'] = bin;
  const server = await NatsServer.start({ name: 'jcp-demo-nats', dir: opts.dir });
  return { mode: 'started', url: server.url, server, bin };
}

/**
 * The subject root the demo uses on `broker`: on a NATS of the user's (`external`) a root of its
 * own per run (`jcp-demo-<8 hex>`, so streams `JCP_DEMO_<HEX>_STATEMENTS`, `…_REVOCATIONS`,
 * `…_SHARDS`, `…_TLOG`), never the cluster's default `jcp` (a user's own cluster there is left alone and the
 * demo's streams can be removed without touching anything else); on a server it started, `jcp`.
 */
export function demoSubjectRoot(broker: Broker, suffixHex: string): string {
  return broker.mode === 'external' ? `jcp-demo-${suffixHex}` : 'jcp';
}

/** The JetStream streams the demo's nodes and bus create under subject root `root` (channel/names.ts, shards/stream.ts, node/witnessing.ts). */
export function demoStreams(root: string): string[] {
  const n = channelNames(root);
  return [n.statementStream, n.revocationStream, shardStreamName(root), tlogStreamName(root)];
}

/** Options of {@link removeDemoStreams}. */
export interface RemoveStreamsOptions {
  /**
   * After deleting, wait this long (ms) and look again; a stream that is back is deleted again,
   * until a look finds none (at most {@link REMOVE_ROUNDS} rounds). For an interrupted run: a
   * JetStream request sent just before its sender was stopped may still create a stream after the
   * deletion (the server serves requests from different connections in no fixed order). Default 0:
   * one round, no second look.
   */
  readonly settleMs?: number;
}

/** The most deletion rounds {@link removeDemoStreams} makes with `settleMs`. */
export const REMOVE_ROUNDS = 5;

/**
 * Deletes the streams the demo made under `root` on `url` (their consumers go with them); a
 * stream that is not there, or that another removal deletes first, is skipped (two removals at
 * once both resolve). Deleting a whole stream is allowed although the streams
 * are created with `deny_delete` and `deny_purge`: those refuse deleting single messages and
 * purging (the statements and revocations are evidence while a cluster runs), not removing the
 * stream. Run it only once the nodes and the demo's own NATS clients have stopped (a running one
 * would create them again); see {@link RemoveStreamsOptions.settleMs} for requests still in flight.
 * @returns the names of the streams deleted, each once.
 * @throws Error when NATS cannot be reached or refuses a deletion (the caller reports it).
 */
export async function removeDemoStreams(url: string, root: string, opts: RemoveStreamsOptions = {}): Promise<string[]> {
  const settleMs = opts.settleMs ?? 0;
  const nc = await connect({ servers: url, name: 'jcp-demo-cleanup', reconnect: false, timeout: 5_000 });
  try {
    const jsm = await jetstreamManager(nc, { timeout: 5_000 });
    const removed = new Set<string>();
    for (let round = 0; round < (settleMs > 0 ? REMOVE_ROUNDS : 1); round++) {
      if (round > 0) await new Promise((r) => setTimeout(r, settleMs));
      let found = 0;
      for (const name of demoStreams(root)) {
        try {
          await jsm.streams.delete(name);
        } catch (e) {
          // Not there, or deleted meanwhile by another removal (an interrupted run's): done.
          if (!isStreamNotFound(e)) throw e;
          continue;
        }
        removed.add(name);
        found++;
      }
      if (round > 0 && found === 0) break;
    }
    return [...removed];
  } finally {
    await nc.close();
  }
}
