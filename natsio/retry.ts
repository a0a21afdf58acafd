/**
 * Retry with capped exponential backoff to a deadline, and a deadline on any promise: how every
 * NATS operation of the cluster survives reconnects and leader elections (docs/cluster.md
 * "Failure handling"). Times in milliseconds.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { NatsDeadline, NatsUnavailable } from './errors.ts';

/** The pause before attempt `attempt + 1`: `baseMs · 2^attempt`, at most `capMs` (ms). */
export function backoffMs(attempt: number, baseMs = 25, capMs = 500): number {
  return Math.min(capMs, baseMs * 2 ** Math.min(Math.max(0, attempt), 16));
}

/** Options of {@link retryUntil}. */
export interface RetryOpts {
  /** How long attempts are made, from the call (ms). At least one attempt is always made. */
  readonly deadlineMs: number;
  /** First pause (ms, default 25); doubled after each failure up to `capMs` (default 500). */
  readonly baseMs?: number;
  readonly capMs?: number;
  /** Called after each failed attempt that will be retried (counts, events). */
  readonly onRetry?: (e: unknown, attempt: number) => void;
  /** Checked before each attempt: a string stops the retries with that message (e.g. the connection closed). */
  readonly stopped?: () => string | undefined;
  /** Aborts the pauses (and then the retries) early. */
  readonly signal?: AbortSignal;
}

/**
 * Runs `op` until it resolves, pausing with {@link backoffMs} between attempts, for at most
 * `deadlineMs`. Resolves with `op`'s value.
 * @throws NatsDeadline `nats-deadline` (`"<what> failed within <ms> ms: <last error>"`, the last
 *   error as `cause`) when the deadline passes; Error `"<what>: <why>"` when `stopped` says so.
 */
export async function retryUntil<T>(what: string, op: () => Promise<T>, opts: RetryOpts): Promise<T> {
  const deadline = Date.now() + opts.deadlineMs;
  let last: unknown;
  let attempt = 0;
  for (; attempt === 0 || Date.now() < deadline; attempt++) {
    const why = opts.stopped?.();
    if (why !== undefined) throw new Error(`${what}: ${why}`);
    if (opts.signal?.aborted) break;
    try {
      return await op();
    } catch (e) {
      last = e;
      const left = deadline - Date.now();
      if (left <= 0) {
        attempt++;
        break;
      }
      opts.onRetry?.(e, attempt);
      const wait = Math.min(backoffMs(attempt, opts.baseMs, opts.capMs), left);
      await sleep(wait, undefined, opts.signal ? { signal: opts.signal } : undefined).catch(() => undefined);
    }
  }
  throw new NatsDeadline(`${what} failed within ${opts.deadlineMs} ms: ${(last as Error | undefined)?.message ?? 'no attempt'}`, attempt, {
    cause: last,
  });
}

/**
 * Same as `p`, but rejects after `ms` milliseconds with a {@link NatsUnavailable}
 * (`nats-unavailable`, `"<what>: not ready within <ms> ms (<why>)"`), `why` giving the reason
 * of the last failed attempt when there is one.
 */
export async function withDeadline<T>(p: Promise<T>, ms: number, what: string, why?: () => string | undefined): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          const reason = why?.();
          reject(new NatsUnavailable(`${what}: not ready within ${ms} ms${reason ? ` (${reason})` : ''}`));
        }, ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
