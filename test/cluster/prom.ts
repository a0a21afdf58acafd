/**
 * Test support: a node's `/metrics` parsed by `parse-prometheus-text-format` (a parser of its own,
 * so the exposition is checked as Prometheus reads it, not as prom-client writes it).
 */
import parsePrometheusTextFormat, { type PromFamily } from 'parse-prometheus-text-format';

/** Fetches `http://127.0.0.1:<port>/metrics` and parses it. @throws Error on a non-200 or unparsable exposition. */
export async function scrape(port: number): Promise<PromFamily[]> {
  const r = await fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(5_000) });
  if (!r.ok) throw new Error(`/metrics answered ${r.status}`);
  return parsePrometheusTextFormat(await r.text());
}

/** The value of the sample of `name` whose labels include `labels` (NaN when none matches). */
export function sample(families: readonly PromFamily[], name: string, labels: Record<string, string> = {}): number {
  const f = families.find((x) => x.name === name);
  const m = f?.metrics.find((s) => Object.entries(labels).every(([k, v]) => s.labels?.[k] === v));
  if (m === undefined) return Number.NaN;
  return promNumber(m.value ?? m.count ?? 'NaN');
}

/** A Prometheus float (`+Inf`, `-Inf`, `NaN` included) as a number. */
export function promNumber(t: string): number {
  if (t === '+Inf') return Number.POSITIVE_INFINITY;
  if (t === '-Inf') return Number.NEGATIVE_INFINITY;
  return Number(t);
}

/** The family `name`, or undefined. */
export function family(families: readonly PromFamily[], name: string): PromFamily | undefined {
  return families.find((x) => x.name === name);
}
