/**
 * One NATS connection as the cluster uses it (`@nats-io/transport-node` v3): {@link NatsLink}.
 *
 * The connection is opened in the background and retried forever with backoff: a process that
 * starts while NATS is down (or partitioned) still serves everything that needs no NATS; every
 * operation waits for the connection up to its deadline and then fails with `nats-unavailable`
 * (naming the reason of the last attempt). Each attempt first checks that the servers greet as
 * NATS (natsio/reach.ts), so a listener that is not NATS costs no leaked socket and is named in
 * the error. Once connected, the client reconnects forever to the urls given (never to gossiped
 * ones: a node behind a proxy must not bypass it). Disconnects, reconnects and slow consumers
 * are reported as {@link NatsEvent}s and counted.
 *
 * A link can also wrap a connection its caller owns ({@link NatsLink.over}); then it never
 * closes it.
 */
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection, TlsOptions } from '@nats-io/transport-node';
import { setTimeout as sleep } from 'node:timers/promises';
import { jetStreamLib, transportLib } from './lib.ts';
import { greetingServers } from './reach.ts';
import { backoffMs, retryUntil, withDeadline } from './retry.ts';

/** Events a link reports so that nothing fails silently (logged and counted by the caller). */
export type NatsEvent =
  | { readonly type: 'slow-consumer'; readonly detail: string }
  | { readonly type: 'disconnect' | 'reconnect'; readonly detail: string }
  | { readonly type: 'consumer-reset'; readonly detail: string }
  | { readonly type: 'publish-retry'; readonly detail: string };

/** Options of a {@link NatsLink}. Times in milliseconds. */
export interface NatsLinkOpts {
  /** Client name shown by the server (`connz`). Default `jcp`. */
  readonly name?: string;
  /** TLS options handed to the client unchanged (`tls://` urls; CA, client cert, `rejectUnauthorized`). */
  readonly tls?: TlsOptions & { readonly rejectUnauthorized?: boolean };
  /** Timeout of one request (connect, publish ack, message get, stream info). Default 2,000 ms. */
  readonly requestTimeoutMs?: number;
  /** How long one operation keeps retrying (across reconnects) before it fails. Default 5,000 ms. */
  readonly deadlineMs?: number;
  /** Client pings: interval (default 5,000 ms) and how many may go unanswered before a reconnect (default 2). */
  readonly pingIntervalMs?: number;
  readonly maxPingOut?: number;
  /** Pause between reconnect attempts. Default 250 ms. */
  readonly reconnectTimeWaitMs?: number;
}

/** Counters of a link, for metrics and the chaos report. */
export interface NatsCounts {
  slowConsumers: number;
  disconnects: number;
  reconnects: number;
  consumerResets: number;
  publishRetries: number;
}

/** The servers of `servers` (one url, comma-separated urls, or a list), trimmed, empties dropped. */
export function serverList(servers: string | readonly string[]): string[] {
  return (typeof servers === 'string' ? servers.split(',') : [...servers]).map((s) => s.trim()).filter(Boolean);
}

/** A NATS connection opened and kept by the layer. See the module docs. */
export class NatsLink {
  readonly #servers: string[];
  readonly #opts: NatsLinkOpts;
  readonly #owned: boolean;
  readonly #listeners: ((e: NatsEvent) => void)[] = [];
  readonly #closers = new Set<() => Promise<void>>();
  #nc: NatsConnection | undefined;
  #js: JetStreamClient | undefined;
  #jsm: JetStreamManager | undefined;
  readonly #ready: Promise<NatsConnection>;
  #closed = false;
  /** Stops the connection attempts (probes, pauses) on close. */
  readonly #abort = new AbortController();
  /** Why the link is not connected yet (the last failed attempt), for the error a caller sees. */
  #problem: string | undefined;
  /** Counters for metrics and the chaos report. */
  readonly counts: NatsCounts = { slowConsumers: 0, disconnects: 0, reconnects: 0, consumerResets: 0, publishRetries: 0 };

  private constructor(servers: string[], opts: NatsLinkOpts, nc?: NatsConnection) {
    this.#servers = servers;
    this.#opts = opts;
    this.#owned = nc === undefined;
    if (nc !== undefined) {
      this.#nc = nc;
      this.#ready = Promise.resolve(nc);
    } else {
      this.#ready = this.#open();
      // A link that never connects must not crash the process with an unhandled rejection.
      this.#ready.catch(() => {});
    }
  }

  /**
   * Starts a link to `servers` (NATS urls: one, comma-separated, or a list). Returns at once; the
   * connection is opened in the background ({@link ready}).
   */
  static start(servers: string | readonly string[], opts: NatsLinkOpts = {}): NatsLink {
    return new NatsLink(serverList(servers), opts);
  }

  /** A link over a connection the caller owns and closes ({@link close} leaves it open). */
  static over(nc: NatsConnection, opts: NatsLinkOpts = {}): NatsLink {
    return new NatsLink([], opts, nc);
  }

  /** The options given. */
  get opts(): NatsLinkOpts {
    return this.#opts;
  }

  /** Timeout of one request (ms). */
  get requestTimeoutMs(): number {
    return this.#opts.requestTimeoutMs ?? 2_000;
  }

  /** How long one operation is retried (ms). */
  get deadlineMs(): number {
    return this.#opts.deadlineMs ?? 5_000;
  }

  /** The connection, once open. */
  get connection(): NatsConnection | undefined {
    return this.#nc;
  }

  /** True while the connection is open (not closed and not closing). */
  get connected(): boolean {
    return this.#nc !== undefined && !this.#nc.isClosed();
  }

  /** True once {@link close} was called. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * The open connection; waits for it up to `timeoutMs` (default the deadline).
   * @throws NatsUnavailable `nats-unavailable` (with the last attempt's reason) when it is not open in time.
   */
  async ready(timeoutMs = this.deadlineMs): Promise<NatsConnection> {
    return await withDeadline(this.#ready, timeoutMs, 'NATS connection', () => this.#problem);
  }

  /** The JetStream manager and client on the open connection (waits as {@link ready}). */
  async jetstream(timeoutMs = this.deadlineMs): Promise<{ jsm: JetStreamManager; js: JetStreamClient }> {
    const nc = await this.ready(timeoutMs);
    const { jetstream, jetstreamManager } = await jetStreamLib();
    this.#jsm ??= await jetstreamManager(nc, { timeout: this.requestTimeoutMs, checkAPI: false });
    this.#js ??= jetstream(nc, { timeout: this.requestTimeoutMs });
    return { jsm: this.#jsm, js: this.#js };
  }

  /** Resolves with the connection once open, however long that takes. @throws Error when the link is closed first. */
  opened(): Promise<NatsConnection> {
    return this.#ready;
  }

  /** Why the link is not connected yet (the last failed attempt), or undefined. */
  get problem(): string | undefined {
    return this.#problem;
  }

  /**
   * Runs `op` until it succeeds or the link's deadline passes, with backoff, after waiting for
   * the connection (which counts against the same deadline). Each retry is counted and reported
   * as a `publish-retry` event.
   * @throws NatsUnavailable when not connected in time; NatsDeadline `nats-deadline` when every
   *   attempt failed; Error when the link is closed meanwhile.
   */
  async retry<T>(what: string, op: () => Promise<T>): Promise<T> {
    const c = this.#op(what);
    try {
      await this.ready();
      return await retryUntil(what, op, {
        deadlineMs: this.deadlineMs,
        stopped: () => (this.#closed ? 'the link is closed' : this.#nc?.isClosed() ? 'the NATS connection is closed' : undefined),
        onRetry: (e) => {
          this.counts.publishRetries++;
          c.retries++;
          this.emit({ type: 'publish-retry', detail: `${what}: ${(e as Error).message}` });
        },
      });
    } catch (e) {
      c.failures++;
      throw e;
    }
  }

  /**
   * Retries and failures (not connected in time, or the deadline passed) per operation of
   * {@link retry} (`publish statement`, `read statements`, `publish revocation`, …), for `/metrics`.
   */
  readonly opCounts = new Map<string, { retries: number; failures: number }>();

  #op(what: string): { retries: number; failures: number } {
    let c = this.opCounts.get(what);
    if (c === undefined) {
      c = { retries: 0, failures: 0 };
      this.opCounts.set(what, c);
    }
    return c;
  }

  /** Registers a listener for link events (slow consumers, reconnects, consumer resets, retries). */
  onEvent(listener: (e: NatsEvent) => void): void {
    this.#listeners.push(listener);
  }

  /** Reports `e` to every listener (a listener that throws is ignored). */
  emit(e: NatsEvent): void {
    for (const l of this.#listeners) {
      try {
        l(e);
      } catch {
        // a listener's failure is not the link's
      }
    }
  }

  /** Registers a clean-up run by {@link close} before the connection closes (follows, subscriptions); returns its remover. */
  onClose(stop: () => Promise<void>): () => void {
    this.#closers.add(stop);
    return () => this.#closers.delete(stop);
  }

  /** Sleeps `ms`, or less if the link is closed meanwhile. */
  async pause(ms: number): Promise<void> {
    await sleep(ms, undefined, { signal: this.#abort.signal }).catch(() => undefined);
  }

  /** Runs the registered clean-ups and closes the connection if the link opened it. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#abort.abort();
    for (const stop of [...this.#closers]) await stop().catch(() => {});
    this.#closers.clear();
    if (this.#owned && this.#nc && !this.#nc.isClosed()) await this.#nc.close().catch(() => {});
  }

  async #open(): Promise<NatsConnection> {
    let nc: NatsConnection | undefined;
    // The first connection is retried here (not with waitOnFirstConnect) so close() can stop it.
    for (let attempt = 0; nc === undefined; attempt++) {
      if (this.#closed) throw new Error('link closed');
      // connect() leaks its socket when a listener accepts but never speaks NATS (natsio/reach.ts):
      // such a server is left out of this attempt. A server that is down stays in (connect() fails
      // fast there, and the pool keeps it for reconnects).
      const { greeted, usable, problems } = await greetingServers(this.#servers, this.requestTimeoutMs, this.#abort.signal);
      if (this.#closed) throw new Error('link closed');
      if (greeted.length === 0) {
        this.#problem = problems.join('; ') || 'no NATS url given';
        await this.pause(backoffMs(attempt, 50, 1_000));
        continue;
      }
      try {
        const { connect } = await transportLib();
        nc = await connect({
          servers: usable,
          name: this.#opts.name ?? 'jcp',
          maxReconnectAttempts: -1,
          reconnectTimeWait: this.#opts.reconnectTimeWaitMs ?? 250,
          // Only the urls given: a node behind a proxy must not bypass it through gossiped servers.
          ignoreClusterUpdates: true,
          pingInterval: this.#opts.pingIntervalMs ?? 5_000,
          maxPingOut: this.#opts.maxPingOut ?? 2,
          timeout: this.requestTimeoutMs,
          ...(this.#opts.tls !== undefined ? { tls: this.#opts.tls } : {}),
        });
      } catch (e) {
        this.#problem = `${usable.join(',')}: ${(e as Error).message}`;
        await this.pause(backoffMs(attempt, 50, 1_000));
      }
    }
    if (this.#closed) {
      await nc.close();
      throw new Error('link closed');
    }
    this.#nc = nc;
    this.#problem = undefined;
    void this.#watch(nc);
    return nc;
  }

  async #watch(nc: NatsConnection): Promise<void> {
    for await (const s of nc.status()) {
      switch (s.type) {
        case 'slowConsumer':
          this.counts.slowConsumers++;
          this.emit({ type: 'slow-consumer', detail: `subscription ${s.sub.getSubject()} has ${s.pending} pending messages` });
          break;
        case 'error':
          if (/slow consumer/i.test(s.error.message)) {
            this.counts.slowConsumers++;
            this.emit({ type: 'slow-consumer', detail: `server: ${s.error.message}` });
          }
          break;
        case 'disconnect':
          this.counts.disconnects++;
          this.emit({ type: 'disconnect', detail: s.server });
          break;
        case 'reconnect':
          this.counts.reconnects++;
          this.emit({ type: 'reconnect', detail: s.server });
          break;
        default:
          break;
      }
    }
  }
}
