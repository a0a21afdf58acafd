/**
 * The chaos runner's plot: the overdraft (total spend − budget, µJ) over time against the bound
 * (`Σ_{j≠k} W_j`, core `overdraftBound`; docs/design.md "Budget channels: the bound we prove"), with the
 * faults marked. The y axis is the overdraft, so the budget is the zero line and the bound a line
 * above it, never drawn on top of each other.
 *
 * One series per region, stacked: until the budget is used up every line is the total overdraft
 * (negative: budget left); from then on region r's line is the overdraft less what the regions
 * after r spent since, so the top line is the total overdraft and the band between two lines is
 * one region's share of it. The y range starts a little below zero (the earlier part of the run
 * is clipped), so the band between the budget and the bound fills the plot. Labels are laid out so they never overprint: series labels
 * at the right end, pushed apart vertically; fault labels in as many lanes above the plot as their
 * widths need. Plain SVG, no dependencies. Times in seconds, amounts in µJ.
 */

/** One fault span on the plot. */
export interface PlotFault {
  readonly kind: string;
  readonly target: string;
  readonly fromS: number;
  readonly toS: number;
}

/** One region's spend over time: (seconds, cumulative µJ acknowledged) samples, in time order. */
export interface PlotSeries {
  readonly name: string;
  readonly spend: readonly (readonly [number, number])[];
}

/** What {@link overdraftPlot} draws. */
export interface OverdraftPlot {
  readonly title: string;
  /** One per region, in stacking order (region a first). */
  readonly regions: readonly PlotSeries[];
  readonly budgetUj: number;
  /** The overdraft bound Σ_{j≠k} W_j (0 in shards mode: spend may never pass the budget). */
  readonly boundUj: number;
  readonly faults: readonly PlotFault[];
  readonly durationS: number;
}

const FAULT_COLORS: Record<string, string> = {
  kill: '#d62728',
  pause: '#ff7f0e',
  partition: '#9467bd',
  'region-cut': '#e377c2',
  'nats-restart': '#8c564b',
};
const SERIES_COLORS = ['#1f77b4', '#2ca02c', '#17becf', '#bcbd22', '#7f7f7f', '#9edae5'];

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
/** Width (px) of a label at font size 11, sans-serif (a safe over-estimate). */
const textWidth = (s: string) => s.length * 6.5 + 4;

/**
 * Places labels wanting vertical positions `want` (px) so that any two are at least `gap` apart,
 * moving each as little as it can; returns the positions in the input order.
 */
export function spreadLabels(want: readonly number[], gap: number): number[] {
  const order = want.map((y, i) => ({ y, i })).sort((a, b) => a.y - b.y);
  const placed = order.map((o) => o.y);
  for (let k = 1; k < placed.length; k++) if (placed[k]! < placed[k - 1]! + gap) placed[k] = placed[k - 1]! + gap;
  const out = new Array<number>(want.length);
  order.forEach((o, k) => {
    out[o.i] = placed[k]!;
  });
  return out;
}

/** Assigns each span `[x, x + width)` the first lane where it overlaps no earlier label. */
export function laneLabels(spans: readonly { x: number; width: number }[]): number[] {
  const laneEnds: number[] = [];
  return spans.map((s) => {
    let lane = laneEnds.findIndex((end) => end <= s.x);
    if (lane < 0) lane = laneEnds.push(0) - 1;
    laneEnds[lane] = s.x + s.width;
    return lane;
  });
}

/** The value of a step series at time `t` (last sample at or before `t`; 0 before the first). */
function at(series: readonly (readonly [number, number])[], t: number): number {
  let v = 0;
  for (const [s, uj] of series) {
    if (s > t) break;
    v = uj;
  }
  return v;
}

/** Renders the plot as an SVG document (`data-*` attributes name what each element shows). */
export function overdraftPlot(p: OverdraftPlot): string {
  const W = 960;
  const L = 90;
  const R = 150;
  const B = 50;
  const times = [...new Set(p.regions.flatMap((r) => r.spend.map(([s]) => s)))].sort((a, b) => a - b);
  const total = (t: number) => p.regions.reduce((a, q) => a + at(q.spend, t), 0);
  // From the moment the budget is used up, region r's line is Σ_{q≤r} (spend_q − spend_q at that
  // moment): the band under the top line is each region's share of the overdraft.
  const crossed = times.find((t) => total(t) >= p.budgetUj);
  const stacked = p.regions.map((_, r) =>
    times.map((t) => {
      const over = total(t) - p.budgetUj;
      if (crossed === undefined || t <= crossed) return [t, over] as const;
      const below = p.regions.slice(r + 1).reduce((a, q) => a + at(q.spend, t) - at(q.spend, crossed), 0);
      return [t, over - below] as const;
    }),
  );
  const top = stacked[stacked.length - 1] ?? [];
  const maxOver = Math.max(0, ...top.map(([, v]) => v));
  const hi = Math.max(p.boundUj, maxOver, p.budgetUj * 0.02, 1) * 1.15;
  const lo = -Math.max(p.boundUj, maxOver, p.budgetUj * 0.02, 1) * 0.35;
  const maxX = Math.max(p.durationS, ...times, 1);
  const plotW = W - L - R;
  const x = (s: number) => L + (s / maxX) * plotW;
  const faultSpans = p.faults.map((f) => ({ x: x(f.fromS), width: textWidth(`${f.kind} ${f.target}`) }));
  const lanes = laneLabels(faultSpans);
  const laneCount = Math.max(0, ...lanes.map((l) => l + 1));
  const T = 36 + 13 * laneCount + 8;
  const plotH = 320;
  const H = T + plotH + B;
  const y = (uj: number) => T + ((hi - uj) / (hi - lo)) * plotH;
  const clampY = (uj: number) => y(Math.min(hi, Math.max(lo, uj)));
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<defs><clipPath id="plot"><rect x="${L}" y="${T}" width="${plotW}" height="${plotH}"/></clipPath></defs>`,
    `<text x="${W / 2}" y="18" text-anchor="middle" font-size="14">${esc(p.title)}</text>`,
  ];
  p.faults.forEach((f, i) => {
    const c = FAULT_COLORS[f.kind] ?? '#7f7f7f';
    const x0 = x(f.fromS);
    const w = Math.max(1.5, x(f.toS) - x0);
    out.push(
      `<g data-fault="${esc(f.kind)}" data-target="${esc(f.target)}">`,
      `<rect x="${x0.toFixed(1)}" y="${T}" width="${w.toFixed(1)}" height="${plotH}" fill="${c}" fill-opacity="0.13"/>`,
      `<line x1="${x0.toFixed(1)}" x2="${x0.toFixed(1)}" y1="${36 + 13 * lanes[i]! + 3}" y2="${T + plotH}" stroke="${c}" stroke-opacity="0.5"/>`,
      `<text x="${(x0 + 2).toFixed(1)}" y="${36 + 13 * lanes[i]!}" fill="${c}">${esc(`${f.kind} ${f.target}`)}</text>`,
      '</g>',
    );
  });
  for (let i = 0; i <= 6; i++) {
    const v = lo + ((hi - lo) / 6) * i;
    out.push(
      `<line x1="${L}" x2="${L + plotW}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="#eee"/>`,
      `<text x="${L - 6}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end">${Math.round(v).toLocaleString('en')}</text>`,
    );
  }
  const step = Math.max(1, Math.ceil(maxX / 12));
  for (let s = 0; s <= maxX; s += step) out.push(`<text x="${x(s).toFixed(1)}" y="${T + plotH + 16}" text-anchor="middle">${s}s</text>`);
  out.push(
    `<line x1="${L}" x2="${L}" y1="${T}" y2="${T + plotH}" stroke="black"/>`,
    `<line x1="${L}" x2="${L + plotW}" y1="${T + plotH}" y2="${T + plotH}" stroke="black"/>`,
    `<text x="12" y="${T + plotH / 2}" transform="rotate(-90 12 ${T + plotH / 2})" text-anchor="middle">overdraft: spend − budget (µJ)</text>`,
    `<text x="${L + plotW / 2}" y="${H - 10}" text-anchor="middle">time since start (s)</text>`,
  );
  // Right-hand labels: the budget (zero), the bound, and each region's line end; never overprinting.
  const labels: { want: number; text: string; color: string }[] = [
    { want: y(0), text: `budget ${p.budgetUj.toLocaleString('en')} µJ`, color: '#000' },
    { want: y(p.boundUj), text: `bound +${p.boundUj.toLocaleString('en')} µJ`, color: '#d62728' },
  ];
  out.push(
    `<line data-line="budget" x1="${L}" x2="${L + plotW}" y1="${y(0).toFixed(1)}" y2="${y(0).toFixed(1)}" stroke="#000" stroke-width="1.5"/>`,
    `<line data-line="bound" x1="${L}" x2="${L + plotW}" y1="${y(p.boundUj).toFixed(1)}" y2="${y(p.boundUj).toFixed(1)}" stroke="#d62728" stroke-dasharray="6 4" stroke-width="2"/>`,
  );
  stacked.forEach((pts, r) => {
    const name = p.regions[r]!.name;
    const c = SERIES_COLORS[r % SERIES_COLORS.length]!;
    const d = pts.map(([s, v]) => `${x(s).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
    out.push(`<polyline data-series="${esc(name)}" clip-path="url(#plot)" points="${d}" fill="none" stroke="${c}" stroke-width="2"/>`);
    const last = pts[pts.length - 1]?.[1] ?? -p.budgetUj;
    const label =
      p.regions.length === 1
        ? `overdraft ${Math.max(0, last).toLocaleString('en')} µJ`
        : r === stacked.length - 1
          ? `+ region ${name} (total)`
          : `+ region ${name}`;
    labels.push({ want: clampY(last), text: label, color: c });
  });
  const ys = spreadLabels(
    labels.map((l) => l.want),
    13,
  );
  labels.forEach((l, i) => {
    out.push(`<text data-label="${i}" x="${L + plotW + 6}" y="${(ys[i]! + 4).toFixed(1)}" fill="${l.color}">${esc(l.text)}</text>`);
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
