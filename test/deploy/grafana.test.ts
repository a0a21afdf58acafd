/**
 * The Grafana dashboard deploy/grafana/jcp-node.json against a live node's /metrics: every
 * PromQL expression (panel targets and template queries) names only metrics the node exports —
 * the families in the exposition's `# TYPE` lines, with `_bucket`/`_sum`/`_count` for histograms.
 * The check is also shown refusing a copy with a misspelt metric.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { liveNode } from '../node/fixtures.ts';

const DASHBOARD = path.resolve('deploy/grafana/jcp-node.json');
/** PromQL functions, aggregations and keywords the dashboard may use (not metric names). */
const PROMQL_WORDS = new Set([
  'sum',
  'min',
  'max',
  'avg',
  'count',
  'rate',
  'irate',
  'increase',
  'delta',
  'histogram_quantile',
  'topk',
  'bottomk',
  'by',
  'without',
  'on',
  'ignoring',
  'and',
  'or',
  'unless',
  'offset',
  'label_values',
  'instance',
]);

/** Exported sample names: each `# TYPE` family, with its histogram/summary series. */
function exportedNames(exposition: string): Set<string> {
  const out = new Set<string>();
  for (const m of exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const [, name, type] = m as unknown as [string, string, string];
    out.add(name);
    if (type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) out.add(name + s);
    if (type === 'summary') for (const s of ['_sum', '_count']) out.add(name + s);
  }
  return out;
}

/** The metric names an expression uses: identifiers left after removing strings, matchers, ranges and grouping clauses. */
function metricsOf(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring)\s*\([^)]*\)/g, ' ');
  return [...bare.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*/g)].map((m) => m[0]).filter((w) => !PROMQL_WORDS.has(w));
}

type Dashboard = { panels: Array<{ title: string; targets: Array<{ expr: string }> }>; templating: { list: Array<{ query?: unknown }> } };

/** Every (where, metric) the dashboard names that `names` does not hold. */
function unknownMetrics(d: Dashboard, names: Set<string>): string[] {
  const exprs: Array<[string, string]> = [
    ...d.panels.flatMap((p) => p.targets.map((t): [string, string] => [p.title, t.expr])),
    ...d.templating.list.flatMap(
      (v): Array<[string, string]> => (typeof v.query === 'string' && v.query.includes('(') ? [['templating', v.query]] : []),
    ),
  ];
  return exprs.flatMap(([where, e]) =>
    metricsOf(e)
      .filter((m) => !names.has(m))
      .map((m) => `${where}: ${m}`),
  );
}

describe('deploy/grafana dashboard', () => {
  let node: Awaited<ReturnType<typeof liveNode>>;
  let exposition: string;
  beforeAll(async () => {
    node = await liveNode({ metrics: '127.0.0.1:0' });
    exposition = await (await fetch(`http://127.0.0.1:${node.metricsPort}/metrics`)).text();
  }, 30_000);
  afterAll(async () => {
    await node?.cleanup();
  });

  test('every expression names a metric the node exports', () => {
    const d = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as Dashboard;
    const names = exportedNames(exposition);
    expect(names.has('jcp_decisions_total')).toBe(true);
    const used = new Set(d.panels.flatMap((p) => p.targets.flatMap((t) => metricsOf(t.expr))));
    expect(used.size).toBeGreaterThanOrEqual(20);
    expect(unknownMetrics(d, names)).toEqual([]);
    // Every jcp_ metric the node exports has a panel (histograms through their _bucket series).
    const jcp = [...exposition.matchAll(/^# TYPE (jcp_\S+) (\S+)$/gm)].map((m) => (m[2] === 'histogram' ? `${m[1]}_bucket` : m[1]!));
    expect(jcp.filter((m) => !used.has(m))).toEqual([]);
  });

  test('the check refuses a dashboard with a metric the node does not export', () => {
    const d = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as Dashboard;
    d.panels[0]!.targets[0]!.expr = d.panels[0]!.targets[0]!.expr.replace('jcp_decisions_total', 'jcp_decisions_totl');
    expect(unknownMetrics(d, exportedNames(exposition))).toEqual([`${d.panels[0]!.title}: jcp_decisions_totl`]);
  });
});
