/**
 * The chaos runner's plot: spend over time against the budget and the bound, with the faults
 * marked as shaded spans. Plain SVG, no dependencies. Times in seconds, amounts in µJ.
 */

/** One fault span on the plot. */
export interface PlotFault {
  readonly kind: string;
  readonly target: string;
  readonly fromS: number;
  readonly toS: number;
}

/** What {@link spendPlot} draws. */
export interface SpendPlot {
  readonly title: string;
  /** (seconds, cumulative µJ) samples, in time order. */
  readonly spend: readonly (readonly [number, number])[];
  readonly budgetUj: number;
  /** budget + bound (channel mode); undefined for shards mode. */
  readonly limitUj?: number;
  readonly faults: readonly PlotFault[];
  readonly durationS: number;
}

const COLORS: Record<string, string> = {
  kill: '#d62728',
  pause: '#ff7f0e',
  partition: '#9467bd',
  'nats-restart': '#8c564b',
};

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** Renders the plot as an SVG document. */
export function spendPlot(p: SpendPlot): string {
  const W = 900;
  const H = 420;
  const L = 80;
  const R = 20;
  const T = 40;
  const B = 50;
  const maxY = Math.max(p.limitUj ?? 0, p.budgetUj, ...p.spend.map(([, y]) => y), 1) * 1.08;
  const maxX = Math.max(p.durationS, ...p.spend.map(([x]) => x), 1);
  const x = (s: number) => L + (s / maxX) * (W - L - R);
  const y = (uj: number) => H - B - (uj / maxY) * (H - T - B);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="20" text-anchor="middle" font-size="14">${esc(p.title)}</text>`,
  ];
  const rows = new Map<string, number>();
  for (const f of p.faults) {
    const row = rows.get(f.target) ?? rows.size;
    rows.set(f.target, row);
    const c = COLORS[f.kind] ?? '#7f7f7f';
    out.push(
      `<rect x="${x(f.fromS).toFixed(1)}" y="${T}" width="${Math.max(1, x(f.toS) - x(f.fromS)).toFixed(1)}" height="${H - T - B}" fill="${c}" fill-opacity="0.12"/>`,
      `<text x="${x(f.fromS).toFixed(1)}" y="${T + 12 + 12 * (row % 6)}" fill="${c}">${esc(`${f.kind} ${f.target}`)}</text>`,
    );
  }
  for (let i = 0; i <= 5; i++) {
    const v = (maxY / 5) * i;
    out.push(
      `<line x1="${L}" x2="${W - R}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="#eee"/>`,
      `<text x="${L - 6}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end">${Math.round(v).toLocaleString('en')}</text>`,
    );
  }
  const step = Math.max(1, Math.ceil(maxX / 12));
  for (let s = 0; s <= maxX; s += step) out.push(`<text x="${x(s).toFixed(1)}" y="${H - B + 16}" text-anchor="middle">${s}s</text>`);
  out.push(
    `<line x1="${L}" x2="${L}" y1="${T}" y2="${H - B}" stroke="black"/>`,
    `<line x1="${L}" x2="${W - R}" y1="${H - B}" y2="${H - B}" stroke="black"/>`,
    `<text x="${L - 60}" y="${T - 8}">µJ</text>`,
    `<line x1="${L}" x2="${W - R}" y1="${y(p.budgetUj).toFixed(1)}" y2="${y(p.budgetUj).toFixed(1)}" stroke="#2ca02c" stroke-width="2"/>`,
    `<text x="${W - R - 4}" y="${(y(p.budgetUj) - 4).toFixed(1)}" text-anchor="end" fill="#2ca02c">budget ${p.budgetUj.toLocaleString('en')} µJ</text>`,
  );
  if (p.limitUj !== undefined) {
    out.push(
      `<line x1="${L}" x2="${W - R}" y1="${y(p.limitUj).toFixed(1)}" y2="${y(p.limitUj).toFixed(1)}" stroke="#d62728" stroke-dasharray="6 4" stroke-width="2"/>`,
      `<text x="${W - R - 4}" y="${(y(p.limitUj) - 4).toFixed(1)}" text-anchor="end" fill="#d62728">budget + bound ${p.limitUj.toLocaleString('en')} µJ</text>`,
    );
  }
  if (p.spend.length > 0) {
    const pts = p.spend.map(([s, uj]) => `${x(s).toFixed(1)},${y(uj).toFixed(1)}`).join(' ');
    out.push(`<polyline points="${pts}" fill="none" stroke="#1f77b4" stroke-width="2"/>`);
    out.push(`<text x="${L + 6}" y="${H - 8}" fill="#1f77b4">spend (allows acknowledged to agents)</text>`);
  }
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
