/**
 * The chaos report's pure parts: the plot (overdraft against the bound, one series per region,
 * faults marked, labels that do not overprint) and the revoked-grant count.
 */
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { describe, expect, it } from 'vitest';
import { laneLabels, overdraftPlot, revocationCount, spreadLabels } from '../../chaos/internal.ts';

type El = Record<string, unknown>;
const parse = (svg: string): El => new XMLParser({ ignoreAttributes: false, attributeNamePrefix: '' }).parse(svg) as El;
const list = (v: unknown): El[] => (v === undefined ? [] : Array.isArray(v) ? (v as El[]) : [v as El]);

/** A three-region run: budget 100,000 µJ, bound 40,000 µJ, spend crossing the budget at 6 s. */
function plot(): string {
  const region = (perS: number) => Array.from({ length: 21 }, (_, t) => [t / 2, Math.round((perS * t) / 2)] as [number, number]);
  return overdraftPlot({
    title: 'jcp chaos: channel mode, 6 nodes in 3 regions, seed 1',
    regions: [
      { name: 'a', spend: region(6_000) },
      { name: 'b', spend: region(6_000) },
      { name: 'c', spend: region(5_000) },
    ],
    budgetUj: 100_000,
    boundUj: 40_000,
    faults: [
      { kind: 'kill', target: 'n1', fromS: 2, toS: 3 },
      { kind: 'pause', target: 'n2', fromS: 2.1, toS: 4 },
      { kind: 'region-cut', target: 'region b', fromS: 2.2, toS: 5 },
      { kind: 'nats-restart', target: 'nats1', fromS: 7, toS: 8 },
    ],
    durationS: 10,
  });
}

describe('chaos plot', () => {
  it('is well-formed SVG with one series per region, the budget and bound lines, and a mark per fault', () => {
    const svg = plot();
    expect(XMLValidator.validate(svg)).toBe(true);
    const root = parse(svg).svg as El;
    const series = list(root.polyline).map((p) => p['data-series']);
    expect(series).toEqual(['a', 'b', 'c']);
    expect(
      list(root.line)
        .map((l) => l['data-line'])
        .filter(Boolean),
    ).toEqual(['budget', 'bound']);
    const faults = list(root.g).filter((g) => g['data-fault'] !== undefined);
    expect(faults.map((g) => g['data-fault'])).toEqual(['kill', 'pause', 'region-cut', 'nats-restart']);
  });

  it('plots the overdraft: the budget is the zero line and the bound sits above it, apart', () => {
    const root = parse(plot()).svg as El;
    const lines = list(root.line);
    const y = (name: string) => Number(lines.find((l) => l['data-line'] === name)!.y1);
    // SVG y grows downwards: the bound line is above the budget line, by much more than a label's height.
    expect(y('budget') - y('bound')).toBeGreaterThan(100);
    // The top (total) series ends at the overdraft: 8.5 s × 17,000 µJ/s... = 170,000 − 100,000 µJ.
    const total = list(root.polyline).find((p) => p['data-series'] === 'c')!;
    const lastY = Number(String(total.points).trim().split(' ').at(-1)!.split(',')[1]);
    const frac = (y('budget') - lastY) / (y('budget') - y('bound'));
    expect(frac).toBeCloseTo(70_000 / 40_000, 2);
  });

  it('never overprints labels: right-hand labels ≥ 13 px apart, fault labels in separate lanes when they would overlap', () => {
    const root = parse(plot()).svg as El;
    const texts = list(root.text).filter((t) => t['data-label'] !== undefined);
    const ys = texts.map((t) => Number(t.y)).sort((a, b) => a - b);
    expect(ys.length).toBe(5);
    for (let i = 1; i < ys.length; i++) expect(ys[i]! - ys[i - 1]!).toBeGreaterThanOrEqual(13);
    const faultTexts = list(root.g).map((g) => list(g.text)[0]!);
    const ysF = faultTexts.map((t) => Number(t.y));
    // kill, pause and region-cut start within 0.2 s of each other: three lanes; nats-restart fits in the first.
    expect(new Set(ysF.slice(0, 3)).size).toBe(3);
    expect(ysF[3]).toBe(ysF[0]);
    expect(spreadLabels([100, 100, 101, 300], 13)).toEqual([100, 113, 126, 300]);
    expect(
      laneLabels([
        { x: 0, width: 50 },
        { x: 10, width: 5 },
        { x: 60, width: 5 },
      ]),
    ).toEqual([0, 1, 0]);
  });
});

describe('chaos - allows of a revoked grant', () => {
  const deny = (node: number, sentMs: number) => ({ node, sentMs, verdict: 'deny' as const, reason: 'revoked' });
  const allow = (node: number, sentMs: number) => ({ node, sentMs, verdict: 'allow' as const, reason: undefined });

  it('a revoked deny is not taken as reach: a stale node refuses with that reason before the revocation, and allows after it until the limit', () => {
    // node 0: stale before the revocation (deny at 500), allows at 900..1,300 and 10,900 (within the
    // 10 s limit of the revocation at 1,000) and one at 11,200 (past it); node 1 denies at 1,050.
    const r = revocationCount(
      [deny(0, 500), allow(0, 900), allow(0, 1_100), deny(0, 1_200), allow(0, 1_300), allow(0, 10_900), allow(0, 11_200), deny(1, 1_050)],
      1_000,
      10,
      2,
    );
    expect(r).toMatchObject({ revoked_at_s: 1, staleness_s: 10, reached_nodes: 2, allowed_before_reach: 3, allowed_after_reach: 1 });
    expect(r.per_node).toEqual([
      { node: 0, first_revoked_deny_s: 1.2, allowed_after_reach: 1 },
      { node: 1, first_revoked_deny_s: 1.05, allowed_after_reach: 0 },
    ]);
  });

  it('counts an allow at a node it never reached once the staleness limit has passed', () => {
    const r = revocationCount([allow(0, 5_000), allow(0, 11_500)], 1_000, 10, 1);
    expect(r.allowed_before_reach).toBe(1);
    expect(r.allowed_after_reach).toBe(1);
    expect(r.reached_nodes).toBe(0);
  });

  it('counts nothing when no revocation was made', () => {
    expect(revocationCount([allow(0, 5_000)], undefined, 10, 1).allowed_after_reach).toBe(0);
  });
});
