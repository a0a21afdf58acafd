/**
 * The audit console's page (docs/console.md): one HTML document and its script, both static;
 * every figure comes from `/api/state` (polled every 2 s: live while a cluster runs) and the
 * receipt inspector's `/api/receipt?hex=…`. Charts use Chart.js, served by the console itself
 * from node_modules (`/vendor/chart.umd.min.js`): no CDN. The page has no write action.
 * Figures are put in elements with `data-k` attributes (what a test reads).
 */

/** The HTML document. */
export const PAGE_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>JCP audit console</title>
<meta http-equiv="Content-Security-Policy" content="default-src 'self'; style-src 'self' 'unsafe-inline'">
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}h1{font-size:1.3em}h2{font-size:1.1em;margin-top:1.6em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;font-variant-numeric:tabular-nums}
th{background:#f4f4f4}.mono{font-family:ui-monospace,monospace;font-size:12px}.alarm{color:#b00;font-weight:bold}.ok{color:#070}
.err{color:#b00}canvas{max-width:720px;max-height:260px}textarea{width:100%;max-width:720px;height:5em}pre{background:#f8f8f8;padding:.6em;max-width:900px;overflow:auto}
</style></head><body>
<h1>JCP audit console <span class="mono" id="updated"></span></h1>
<p>Read-only. Figures from the nodes' receipt logs (each receipt verified under its steward's key) and the transparency-log stream.</p>
<section id="view-decisions"><h2>Decisions: allowed and refused by reason</h2>
<table id="nodes"><thead><tr><th>node (steward)</th><th>receipts</th><th>allowed</th><th>refused</th><th>debited µJ</th><th>bad</th></tr></thead><tbody></tbody></table>
<table id="reasons"><thead><tr><th>node</th><th>deny reason</th><th>refused</th></tr></thead><tbody></tbody></table>
<canvas id="chart-reasons"></canvas><canvas id="chart-time"></canvas></section>
<section id="view-attribution"><h2>Per-worker attribution</h2>
<table id="attribution"><thead><tr><th>node</th><th>grant</th><th>worker (subject)</th><th>allowed</th><th>refused</th><th>µJ</th><th>charged µJ</th></tr></thead><tbody></tbody></table></section>
<section id="view-budgets"><h2>Budgets and spend</h2>
<table id="grants"><thead><tr><th>node</th><th>grant</th><th>budget µJ</th><th>spent µJ</th><th>left µJ</th></tr></thead><tbody></tbody></table></section>
<section id="view-grant-tree"><h2>Grant tree: root → delegations, shards, channel points</h2>
<p>Each grant's spend summed over the points that spent on it (µJ, refunds credited back), from the verified receipts' chains; shards from the holders' signed assignments. Budget and left are shown where a receipt or the stream carries the grant's budget.</p>
<table id="grant-tree"><thead><tr><th>grant</th><th>kind</th><th>subject</th><th>budget µJ</th><th>spent µJ</th><th>left µJ</th><th>points (spent µJ / settled µJ)</th></tr></thead><tbody></tbody></table>
<div id="shards-error" class="err"></div></section>
<section id="view-channels"><h2>Budget channels: settled statements, budget and bound</h2>
<p>Each point's latest signed statement on the statement stream (leader reads), verified; the total against the budget and against budget + overdraft bound (Σ windows − the smallest); the overdraft the statements prove. The figures of <span class="mono">jcp channel audit</span>.</p>
<table id="channels"><thead><tr><th>channel grant</th><th>budget µJ</th><th>settled total µJ</th><th>overdraft µJ</th><th>proof</th><th>window µJ</th><th>bound µJ</th><th>budget + bound µJ</th><th>refused</th></tr></thead><tbody></tbody></table>
<table id="channel-points"><thead><tr><th>channel grant</th><th>point</th><th>statement seq</th><th>settled spend µJ</th></tr></thead><tbody></tbody></table>
<canvas id="chart-channels"></canvas></section>
<section id="view-tlog"><h2>Transparency log: checkpoints and cosignatures</h2>
<table id="tlog"><thead><tr><th>log (origin)</th><th>size</th><th>root</th><th>cosigned by</th><th>behind</th></tr></thead><tbody></tbody></table>
<table id="trees"><thead><tr><th>node folder</th><th>tree size</th><th>root (from the receipts)</th></tr></thead><tbody></tbody></table>
<div id="alarms"></div></section>
<section id="view-inspector"><h2>Receipt inspector</h2>
<p>Paste a receipt (its COSE_Sign1 bytes as hex): it is decoded, verified, and its inclusion in its node's log is proven.</p>
<textarea id="receipt-hex" spellcheck="false"></textarea><br><button id="inspect" type="button">Inspect</button>
<pre id="inspect-out" class="mono"></pre></section>
<script src="/vendor/chart.umd.min.js"></script><script src="/console.js"></script>
</body></html>
`;

/** The page's script. */
export const PAGE_JS = `'use strict';
const $ = (s) => document.querySelector(s);
const short = (s) => (s && s.length > 28 ? s.slice(0, 16) + '…' + s.slice(-8) : s);
function cell(text, k, title) { const td = document.createElement('td'); td.textContent = String(text); if (k) td.dataset.k = k; if (title) td.title = title; return td; }
function row(tbody, cells, data) { const tr = document.createElement('tr'); for (const c of cells) tr.append(c); Object.assign(tr.dataset, data || {}); tbody.append(tr); }
let reasonsChart, timeChart, channelChart;
function renderTree(s) {
  const t = $('#grant-tree tbody'); t.replaceChildren();
  for (const g of s.grant_tree || []) {
    const pts = document.createElement('td'); pts.dataset.k = 'points';
    for (const p of g.points) { const d = document.createElement('div'); d.dataset.steward = p.steward; d.title = p.steward; const a = document.createElement('span'); a.dataset.k = 'point-spent'; a.textContent = p.spent_uj; d.append(short(p.steward) + ': ', a); if (p.settled_uj !== undefined) { const b = document.createElement('span'); b.dataset.k = 'point-settled'; b.textContent = p.settled_uj; d.append(' / ', b); } pts.append(d); }
    const name = cell('\u00a0\u00a0'.repeat(g.depth) + (g.depth ? '└ ' : '') + short(g.grant_id), 'grant', g.grant_id); name.className = 'mono';
    const kind = g.kind + (g.shard_point ? ' for ' + short(g.shard_point) : '') + (g.channel ? ' (channel)' : '');
    row(t, [name, cell(kind, 'kind', g.shard_point || ''), cell(g.subject ? short(g.subject) : '', 'subject', g.subject || ''), cell(g.budget_uj === null ? 'unknown' : g.budget_uj, 'budget'), cell(g.spent_uj, 'spent'), cell(g.left_uj === null ? 'unknown' : g.left_uj, 'left'), pts], { grant: g.grant_id, kind: g.kind, depth: String(g.depth), parent: g.parent || '' });
  }
  $('#shards-error').textContent = s.shards_error || '';
}
function renderChannels(s) {
  const t = $('#channels tbody'), pt = $('#channel-points tbody'); t.replaceChildren(); pt.replaceChildren();
  if (s.channels === null || s.channels === undefined) { row(t, [Object.assign(cell('no --nats given: the statement stream is not read'), { colSpan: 9 })]); return; }
  if (s.channels.error) { row(t, [Object.assign(cell(s.channels.error, 'error'), { colSpan: 9, className: 'err' })]); return; }
  if (s.channels.length === 0) row(t, [Object.assign(cell('no budget channel on the statement stream'), { colSpan: 9 })]);
  const labels = [], spent = [], budget = [], max = [];
  for (const c of s.channels) {
    const over = c.overdraft_uj === null ? 'unknown (no budget)' : c.overdraft_uj;
    const proof = c.proof_verifies === null ? '' : c.proof_verifies ? 'verifies (' + c.statements.length + ' statements)' : 'DOES NOT verify';
    const oc = cell(over, 'overdraft'); if (c.overdraft_uj !== null && c.overdraft_uj !== '0') oc.className = 'alarm';
    row(t, [Object.assign(cell(short(c.grant_id), '', c.grant_id), { className: 'mono' }), cell(c.budget_uj === null ? 'unknown' : c.budget_uj + ' (' + c.budget_source + ')', 'budget'), cell(c.total_uj, 'total'), oc, cell(proof, 'proof'), cell(c.window_uj === null ? 'not given' : c.window_uj, 'window'), cell(c.bound_uj === null ? 'unknown' : c.bound_uj, 'bound'), cell(c.max_total_uj === null ? 'unknown' : c.max_total_uj, 'max-total'), cell(c.refused.length, 'refused')], { channel: c.grant_id });
    for (const p of c.points) row(pt, [Object.assign(cell(short(c.grant_id), '', c.grant_id), { className: 'mono' }), cell(short(p.point), '', p.point), cell(p.seq, 'seq'), cell(p.spent_uj, 'spent')], { channel: c.grant_id, point: p.point });
    labels.push(short(c.grant_id)); spent.push(Number(c.total_uj)); budget.push(c.budget_uj === null ? null : Number(c.budget_uj)); max.push(c.max_total_uj === null ? null : Number(c.max_total_uj));
  }
  if (window.Chart) {
    const ds = [{ label: 'settled total µJ', data: spent, backgroundColor: '#36c' }, { label: 'budget µJ', data: budget, backgroundColor: '#9c9' }, { label: 'budget + bound µJ', data: max, backgroundColor: '#e96' }];
    if (!channelChart) channelChart = new Chart($('#chart-channels'), { type: 'bar', data: { labels, datasets: ds }, options: { animation: false } });
    else { channelChart.data.labels = labels; ds.forEach((d, i) => { channelChart.data.datasets[i].data = d.data; }); channelChart.update(); }
  }
}
function render(s) {
  $('#updated').textContent = 'updated ' + new Date(s.at_s * 1000).toISOString();
  const nodes = $('#nodes tbody'), reasons = $('#reasons tbody'), attr = $('#attribution tbody'), grants = $('#grants tbody'), trees = $('#trees tbody');
  for (const t of [nodes, reasons, attr, grants, trees]) t.replaceChildren();
  const reasonTotals = {}; const minutes = {};
  for (const n of s.nodes) {
    const who = n.steward || n.dir;
    if (n.error) { row(nodes, [cell(short(who), '', who), Object.assign(cell('[' + n.error.code + '] ' + n.error.why, 'error'), { colSpan: 5, className: 'err' })], { steward: who }); continue; }
    row(nodes, [cell(short(who), '', who), cell(n.receipts, 'receipts'), cell(n.allowed, 'allowed'), cell(n.refused, 'refused'), cell(n.debited_uj, 'debited'), cell(n.bad, 'bad')], { steward: who });
    for (const [r, c] of Object.entries(n.refused_by_reason)) { row(reasons, [cell(short(who), '', who), cell(r, 'reason'), cell(c, 'count')], { steward: who, reason: r }); reasonTotals[r] = (reasonTotals[r] || 0) + c; }
    for (const a of n.attribution) row(attr, [cell(short(who), '', who), cell(short(a.grant_id), '', a.grant_id), cell(short(a.subject), '', a.subject), cell(a.allowed, 'allowed'), cell(a.refused, 'refused'), cell(a.uj, 'uj'), cell(a.charged_uj, 'charged')], { steward: who, grant: a.grant_id, subject: a.subject });
    for (const g of n.grants) row(grants, [cell(short(who), '', who), cell(short(g.grant_id), '', g.grant_id), cell(g.budget_uj, 'budget'), cell(g.spent_uj, 'spent'), cell(g.left_uj, 'left')], { steward: who, grant: g.grant_id });
    for (const m of n.per_minute) { const e = minutes[m.minute] || (minutes[m.minute] = { allowed: 0, refused: 0 }); e.allowed += m.allowed; e.refused += m.refused; }
    row(trees, [cell(n.dir), cell(n.tree ? n.tree.size : '(archived: not built)', 'size'), cell(n.tree ? n.tree.root : '', 'root')], { steward: who });
  }
  const tl = $('#tlog tbody'); tl.replaceChildren(); const al = $('#alarms'); al.replaceChildren();
  if (s.tlog === null) row(tl, [Object.assign(cell('no --nats given: the stream is not read'), { colSpan: 5 })]);
  else if (s.tlog.error) row(tl, [Object.assign(cell('stream: ' + s.tlog.error, 'error'), { colSpan: 5, className: 'err' })]);
  else {
    for (const l of s.tlog.logs) row(tl, [cell(short(l.origin), '', l.origin), cell(l.size, 'size'), cell(short(l.root), '', l.root), Object.assign(cell(l.cosigned_by.length ? l.cosigned_by.map(short).join(', ') : 'nobody yet', 'cosigners', l.cosigned_by.join(' ')), { className: l.cosigned_by.length ? 'ok' : '' }), cell(l.behind.map((b) => short(b.witness) + ' at ' + b.size).join(', '), 'behind')], { steward: l.steward, cosigners: String(l.cosigned_by.length) });
    for (const a of s.tlog.alarms) { const d = document.createElement('div'); d.className = 'alarm'; d.dataset.k = 'alarm'; d.textContent = 'log-inconsistent: ' + a.origin + ' (witness ' + a.witness + '): ' + a.why; const pre = document.createElement('pre'); pre.textContent = '--- previous\\n' + a.evidence[0] + '--- next\\n' + a.evidence[1]; al.append(d, pre); }
    if (s.tlog.alarms.length === 0) { const d = document.createElement('div'); d.className = 'ok'; d.dataset.k = 'no-alarm'; d.textContent = 'No inconsistency reported by any witness.'; al.append(d); }
  }
  renderTree(s); renderChannels(s);
  if (window.Chart) {
    const labels = Object.keys(reasonTotals), data = Object.values(reasonTotals);
    if (!reasonsChart) reasonsChart = new Chart($('#chart-reasons'), { type: 'bar', data: { labels, datasets: [{ label: 'refused, by deny reason', data, backgroundColor: '#c55' }] }, options: { animation: false } });
    else { reasonsChart.data.labels = labels; reasonsChart.data.datasets[0].data = data; reasonsChart.update(); }
    const ks = Object.keys(minutes).sort((a, b) => a - b), tl2 = ks.map((k) => new Date(k * 1000).toISOString().slice(11, 16));
    const ds = [{ label: 'allowed per minute', data: ks.map((k) => minutes[k].allowed), borderColor: '#393' }, { label: 'refused per minute', data: ks.map((k) => minutes[k].refused), borderColor: '#c33' }];
    if (!timeChart) timeChart = new Chart($('#chart-time'), { type: 'line', data: { labels: tl2, datasets: ds }, options: { animation: false } });
    else { timeChart.data.labels = tl2; timeChart.data.datasets[0].data = ds[0].data; timeChart.data.datasets[1].data = ds[1].data; timeChart.update(); }
  }
  document.body.dataset.loaded = String(Number(document.body.dataset.loaded || 0) + 1);
}
async function poll() {
  try { const r = await fetch('/api/state'); render(await r.json()); } catch (e) { $('#updated').textContent = 'cannot reach the console: ' + e.message; }
  setTimeout(poll, 2000);
}
$('#inspect').addEventListener('click', async () => {
  const out = $('#inspect-out'); out.textContent = 'checking…'; delete out.dataset.ok;
  const r = await fetch('/api/receipt?hex=' + encodeURIComponent($('#receipt-hex').value));
  const j = await r.json();
  out.dataset.ok = String(j.ok); if (j.inclusion) out.dataset.included = String(j.inclusion.included === true);
  out.textContent = j.ok ? 'verifies: signed by ' + j.fields.steward + '\\n' + (j.inclusion.included ? 'included in its log at index ' + j.inclusion.index + ' of ' + j.inclusion.size + ' (root ' + j.inclusion.root + ')' : 'inclusion not proven: ' + j.inclusion.why) + '\\n\\n' + JSON.stringify(j.fields, null, 2) : 'error [' + j.code + ']: ' + j.why;
});
poll();
`;
