/**
 * The four `prom-client` classes the node uses (Registry, Counter, Gauge, Histogram), loaded from
 * their own files rather than from the package's front door: `prom-client`'s index also loads the
 * default process metrics, the push gateway, the cluster aggregator and `@opentelemetry/api`,
 * ~0.07 s of module loading at node start for what only `--metrics` serves. The default
 * metrics are loaded by {@link collectDefaults} when the metrics port opens.
 *
 * The classes are the package's own (the same module instances its index hands out). Should a
 * release move a file, the package's front door is used instead: slower to load, same classes.
 */
import { createRequire } from 'node:module';
import type * as PromClient from 'prom-client';

const require = createRequire(import.meta.url);

/** `prom-client/lib/<file>` when it exports the class itself, else the package's `name`. */
function part<K extends 'Registry' | 'Counter' | 'Gauge' | 'Histogram'>(file: string, name: K): (typeof PromClient)[K] {
  try {
    const m = require(`prom-client/lib/${file}`) as unknown;
    if (typeof m === 'function' && m.name === name) return m as (typeof PromClient)[K];
  } catch {
    // moved in a later release: fall through to the front door
  }
  return (require('prom-client') as typeof PromClient)[name];
}

export const Registry = part('registry', 'Registry');
export type Registry = PromClient.Registry;
export const Counter = part('counter', 'Counter');
export type Counter<T extends string = string> = PromClient.Counter<T>;
export const Gauge = part('gauge', 'Gauge');
export type Gauge<T extends string = string> = PromClient.Gauge<T>;
export const Histogram = part('histogram', 'Histogram');
export type Histogram<T extends string = string> = PromClient.Histogram<T>;

/** Registers the default process metrics (`collectDefaultMetrics`) in `registry`; loads them first. */
export async function collectDefaults(registry: Registry): Promise<void> {
  const { collectDefaultMetrics } = await import('prom-client');
  collectDefaultMetrics({ register: registry });
}
