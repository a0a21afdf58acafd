/**
 * The NATS client libraries (`@nats-io/jetstream`, `@nats-io/transport-node`), loaded at their
 * first use rather than at import: loading them is ~0.13 s of CPU at node start (docs/benchmarks.md
 * "startup: the command, a node, the demo"), and a process that never talks to NATS (a node without `--nats`, most `jcp` commands)
 * must not pay it. Each is loaded once; the promise is shared.
 *
 * The enum-like constants of the library are plain strings (its types are unions of string
 * literals), so configs name them as literals instead of importing the library for them.
 */
import type { StorageType, RetentionPolicy, DiscardPolicy, DeliverPolicy } from '@nats-io/jetstream';

/** `@nats-io/jetstream`. */
export type JetStreamLib = typeof import('@nats-io/jetstream');
/** `@nats-io/transport-node`. */
export type TransportLib = typeof import('@nats-io/transport-node');

let jetStreamModule: Promise<JetStreamLib> | undefined;
let transportModule: Promise<TransportLib> | undefined;

/** `@nats-io/jetstream`, loaded on the first call. */
export function jetStreamLib(): Promise<JetStreamLib> {
  jetStreamModule ??= import('@nats-io/jetstream');
  return jetStreamModule;
}

/** `@nats-io/transport-node`, loaded on the first call. */
export function transportLib(): Promise<TransportLib> {
  transportModule ??= import('@nats-io/transport-node');
  return transportModule;
}

/** `StorageType.File`: a file-stored stream. */
export const STORAGE_FILE: StorageType = 'file';
/** `RetentionPolicy.Limits`: messages kept until a limit drops them. */
export const RETENTION_LIMITS: RetentionPolicy = 'limits';
/** `DiscardPolicy.Old` / `DiscardPolicy.New`. */
export const DISCARD: { readonly old: DiscardPolicy; readonly new: DiscardPolicy } = { old: 'old', new: 'new' };
/** `DeliverPolicy.All` / `DeliverPolicy.LastPerSubject`. */
export const DELIVER: { readonly all: DeliverPolicy; readonly lastPerSubject: DeliverPolicy } = {
  all: 'all',
  lastPerSubject: 'last_per_subject',
};

/** Milliseconds as the nanoseconds JetStream configs count in (`nanos` of the library). */
export function nanos(ms: number): number {
  return ms * 1_000_000;
}
