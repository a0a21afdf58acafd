/**
 * The audit console (console/, `jcp console`) in a real browser: Debian's chromium driven by
 * playwright-core. A real run — two nodes on a NATS server of the test's own, witnessing each
 * other, with allowed and refused calls — is stopped, then the console is served over both data
 * folders and the stream. The page's figures must equal `jcp receipts attribute --json` (per
 * grant and worker), the deny reasons counted here from the receipts, and the stream's
 * checkpoints and cosigners; the inspector verifies a pasted receipt with its inclusion proof and
 * refuses input that is not hex or not CBOR. The grant tree (a delegation, two shards bound to
 * their points by a signed assignment, a budget channel spent at both nodes) must show each
 * grant's spend equal to `jcp receipts attribute` summed over its subtree and nodes, and the
 * channel ledger must show `jcp channel audit --json`'s figures; a reversed call (an endpoint
 * that is down) makes "µJ debited" differ from the gross debits. A screenshot of each view is kept
 * under test-artifacts/console/ (not committed).
 */
import { mkdirSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import path from 'node:path';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { actorFromSeed, type ContentId, grantId, mintShards, openReceipt, overdraftBound, type SignedGrant } from '../../core/index.ts';
import { ShardAssignmentStream, signShardAssignment } from '../../shards/index.ts';
import { ConsoleData } from '../../console/index.ts';
import { type RunningConsole, serveConsole } from '../../console/index.ts';
import { NatsServer } from '../../testkit/index.ts';
import { ClusterHooks, readClusterConfig } from '../../node/index.ts';
import { ReceiptLog } from '../../node/index.ts';
import { JcpClient } from '../../client/index.ts';
import { TlogStream } from '../../node/index.ts';
import { cast, liveNode, mint, quiet, tempDir } from '../node/fixtures.ts';
import { runJcpInProcess } from '../support.ts';

const { rng, alice, bob, carol, mallory } = cast('audit-console');
const dave = actorFromSeed(rng(32));
const WINDOW_UJ = 500n;

/** A loopback port nothing listens on (an endpoint that is down: its calls are reversed). */
async function closedPort(): Promise<number> {
  return await new Promise<number>((resolve) => {
    const srv = createServer();
    srv.listen({ port: 0, host: '127.0.0.1' }, () => {
      const { port } = srv.address() as AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}
const ARTIFACTS = path.resolve('test-artifacts/console');
const CHROMIUM = process.env['CHROMIUM'] ?? '/usr/bin/chromium';

async function until<T>(what: string, f: () => Promise<T | undefined>, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('audit console in chromium', () => {
  let nats: NatsServer;
  const root = `cons${process.pid}x${Date.now().toString(36)}`;
  const dirs = [tempDir('console-a'), tempDir('console-b')];
  let probe: ClusterHooks;
  let stream: TlogStream;
  let consoleSrv: RunningConsole;
  let browser: Browser;
  const stewards: string[] = [];
  /** Calls made at node A (its receipts). */
  let aReceipts = 0;
  // The grants: each grant's parent (undefined for a root), for the subtree sums.
  const parentOf = new Map<ContentId, ContentId | undefined>();
  const idOf = (g: SignedGrant) => grantId(g.grant);
  let gd: SignedGrant, gdc: SignedGrant, gs: SignedGrant, gm: SignedGrant, shards: SignedGrant[];

  beforeAll(async () => {
    nats = await NatsServer.start();
    probe = new ClusterHooks(nats.url, readClusterConfig({ subject_root: root }), quiet);
    await probe.bus.ready();
    stream = new TlogStream(probe.bus.connection!, { root });
    // Bob's root with Mallory's delegation under it; Carol's root split into a shard per node for
    // Dave; a budget channel for Carol served by both nodes.
    gd = mint(alice, bob, 'tools', ['read'], 1_000n, rng);
    gdc = mint(bob, mallory, 'tools', ['read'], 400n, rng, { parent: grantId(gd.grant) });
    gs = mint(alice, carol, 'tools', ['read'], 1_000n, rng);
    const minted = mintShards(gs, carol, [
      { subject: dave.did, budget_uj: 300n, nonce: rng(16) },
      { subject: dave.did, budget_uj: 300n, nonce: rng(16) },
    ]);
    if (!minted.ok) throw new Error(minted.error.why);
    shards = minted.value;
    gm = mint(alice, carol, 'tools', ['read'], 5_000n, rng);
    for (const [g, p] of [[gd], [gdc, gd], [gs], [shards[0]!, gs], [shards[1]!, gs], [gm]] as const)
      parentOf.set(idOf(g), p === undefined ? undefined : idOf(p));
    const down = await closedPort();
    const running: Array<{ node: Awaited<ReturnType<typeof liveNode>>; hooks: ClusterHooks }> = [];
    for (const d of dirs) {
      const hooks = new ClusterHooks(
        nats.url,
        readClusterConfig({
          subject_root: root,
          checkpoint_every_ms: 100,
          checkpoint_every_receipts: 1,
          channels: [{ grant_id: idOf(gm), window_uj: Number(WINDOW_UJ) }],
        }),
        quiet,
      );
      const node = await liveNode(
        {
          meter: { default_estimate_uj: 100, rungs: ['estimator'] },
          resources: [{ name: 'tools' }, { name: 'gone', endpoint: { url: `http://127.0.0.1:${down}/mcp` } }],
        },
        { budgetPolicy: hooks.budgetPolicy, revocationFeeds: [hooks.revocationFeed], witnessed: (x) => hooks.witnessed(x) },
        d.dir,
      );
      hooks.attach(node.steward, node.ledger, node.amendments);
      hooks.startWitnessing(node, quiet);
      running.push({ node, hooks });
      stewards.push(node.steward.did);
    }
    const a = running[0]!.node;
    const b = running[1]!.node;
    // Carol binds her shards: the first to A, the second to B; both nodes take the assignment.
    await new ShardAssignmentStream(probe.bus.connection!, { root }).publishAssignment(
      signShardAssignment(
        {
          parent_id: idOf(gs),
          holder: carol.did,
          generation: 1,
          shards: [
            { grant_id: idOf(shards[0]!), point: a.steward.did },
            { grant_id: idOf(shards[1]!), point: b.steward.did },
          ],
        },
        carol,
      ),
    );
    await until('both nodes to take the shard assignment', async () =>
      running.every((r) => r.hooks.shards.inForce().length === 1) ? true : undefined,
    );
    // Bob: 3 allowed within 350 µJ, then budget-exceeded; a write he was not granted; Carol: 2 allowed.
    const gb = mint(alice, bob, 'tools', ['read'], 350n, rng);
    const gc = mint(alice, carol, 'tools', ['read'], 10_000n, rng);
    const gg = mint(alice, bob, 'gone', ['anything'], 1_000n, rng);
    const cb = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: bob });
    const cc = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: carol });
    const ccB = await JcpClient.connect({ host: '127.0.0.1', port: b.port, signer: carol });
    const cm = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: mallory });
    const cd = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: dave });
    const cdB = await JcpClient.connect({ host: '127.0.0.1', port: b.port, signer: dave });
    const allowed = async (p: Promise<{ decision: { verdict: string } }>) => {
      const r = await p;
      if (r.decision.verdict !== 'allow') throw new Error(`expected an allow, got ${JSON.stringify(r.decision)}`);
    };
    for (let i = 0; i < 4; i++) await cb.call({ chain: [gb], action: 'read', payload: { i } });
    await cb.call({ chain: [gb], action: 'write', payload: {} });
    for (let i = 0; i < 2; i++) await allowed(cc.call({ chain: [gc], action: 'read', payload: { i } }));
    // Allowed, but the endpoint is down: the debit is reversed (a refund), so nothing is charged.
    await allowed(cb.call({ chain: [gg], action: 'anything', payload: {} }));
    await allowed(cb.call({ chain: [gd], action: 'read', payload: {} }));
    for (let i = 0; i < 2; i++) await allowed(cm.call({ chain: [gd, gdc], action: 'read', payload: { i } }));
    await allowed(cd.call({ chain: [gs, shards[0]!], action: 'read', payload: {} }));
    await allowed(cdB.call({ chain: [gs, shards[1]!], action: 'read', payload: {} }));
    for (let i = 0; i < 2; i++) await allowed(cc.call({ chain: [gm], action: 'read', payload: { c: i } }));
    await allowed(ccB.call({ chain: [gm], action: 'read', payload: { c: 9 } }));
    aReceipts = 7 + 1 + 1 + 2 + 1 + 2;
    await Promise.all([cb, cc, ccB, cm, cd, cdB].map((c) => c.close()));
    await until(`B to cosign A at ${aReceipts} receipts`, async () =>
      (await stream.newestWitnessed(a.steward.did)).newest?.checkpoint.size === aReceipts ? true : undefined,
    );
    await until('A to cosign B', async () => (await stream.newestWitnessed(b.steward.did)).newest);
    for (const r of running) {
      await r.hooks.close();
      await r.node.close();
    }
    consoleSrv = await serveConsole(
      new ConsoleData(
        dirs.map((d) => d.dir),
        stream,
        {
          statements: probe.bus,
          shards: { nc: probe.bus.connection!, root },
          channels: [{ grant_id: idOf(gm), window_uj: WINDOW_UJ }],
        },
      ),
    );
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu'] });
    mkdirSync(ARTIFACTS, { recursive: true });
  }, 90_000);

  afterAll(async () => {
    await browser?.close().catch(() => undefined);
    await consoleSrv?.close().catch(() => undefined);
    await probe?.close().catch(() => undefined);
    await nats?.dispose();
    for (const d of dirs) d.cleanup();
  });

  test("each view shows the run's figures, equal to the CLI's; the inspector verifies and refuses", async () => {
    const [aDir] = dirs.map((d) => d.dir) as [string];
    const aDid = stewards[0]!;
    const attr = await runJcpInProcess(['receipts', 'attribute', aDir]);
    expect(attr.code).toBe(0);
    const cli = JSON.parse(attr.out) as {
      receipts: number;
      attribution: Array<{
        grant_id: string;
        subject: string;
        allowed: number;
        refused: number;
        uj: string | number;
        charged_uj: string | number;
      }>;
    };
    expect(cli.receipts).toBe(aReceipts);
    // B's figures are read now, before the page opens: the page's live refresh opens each node's
    // log in turn, and a CLI read of a log the console holds at that moment is refused log-locked.
    const attrB = await runJcpInProcess(['receipts', 'attribute', dirs[1]!.dir]);
    expect(attrB.code, attrB.err).toBe(0);
    const cliB = JSON.parse(attrB.out) as typeof cli;

    // Deny reasons, counted here from the receipts themselves.
    const log = await ReceiptLog.open(aDir, { steward: aDid as never, mustExist: true, nowS: 0 });
    const reasons: Record<string, number> = {};
    const receipts: Uint8Array[] = [];
    for await (const c of log.receiptChunks()) {
      for (const [, b] of c) {
        receipts.push(b);
        const r = openReceipt(b);
        if (r.ok && r.value.verdict === 'deny') reasons[r.value.deny_reason!] = (reasons[r.value.deny_reason!] ?? 0) + 1;
      }
    }
    await log.close();
    expect(Object.values(reasons).reduce((x, y) => x + y, 0)).toBe(2);
    const refunds = cli.attribution.reduce((s, r) => s + BigInt((r as { refunded_uj?: string | number }).refunded_uj ?? 0), 0n);
    expect(refunds).toBe(100n); // the reversed call: debited, then handed back

    const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(consoleSrv.url);
    await page.waitForSelector('body[data-loaded]');
    const text = async (sel: string) => (await page.locator(sel).first().textContent()) ?? '';

    // Decisions view.
    const nodeRow = `#nodes tr[data-steward="${aDid}"]`;
    const allowed = cli.attribution.reduce((s, r) => s + r.allowed, 0);
    const refused = cli.attribution.reduce((s, r) => s + r.refused, 0);
    expect(Number(await text(`${nodeRow} [data-k=receipts]`))).toBe(cli.receipts);
    expect(Number(await text(`${nodeRow} [data-k=allowed]`))).toBe(allowed);
    expect(Number(await text(`${nodeRow} [data-k=refused]`))).toBe(refused);
    // µJ debited is net of refunds: Σ charged_uj of `jcp receipts attribute`.
    expect(await text(`${nodeRow} [data-k=debited]`)).toBe(String(cli.attribution.reduce((s, r) => s + BigInt(r.charged_uj), 0n)));
    for (const [reason, n] of Object.entries(reasons)) {
      expect(Number(await text(`#reasons tr[data-steward="${aDid}"][data-reason="${reason}"] [data-k=count]`))).toBe(n);
    }
    expect(await page.locator('#reasons tbody tr').count()).toBe(Object.keys(reasons).length);
    expect(await page.evaluate(() => typeof (globalThis as unknown as { Chart?: unknown }).Chart)).toBe('function');
    await page.locator('#view-decisions').screenshot({ path: path.join(ARTIFACTS, 'decisions.png') });

    // Attribution view: every CLI row, the same numbers.
    expect(await page.locator(`#attribution tr[data-steward="${aDid}"]`).count()).toBe(cli.attribution.length);
    for (const r of cli.attribution) {
      const tr = `#attribution tr[data-grant="${r.grant_id}"][data-subject="${r.subject}"]`;
      expect(Number(await text(`${tr} [data-k=allowed]`))).toBe(r.allowed);
      expect(Number(await text(`${tr} [data-k=refused]`))).toBe(r.refused);
      expect(await text(`${tr} [data-k=uj]`)).toBe(String(r.uj));
      expect(await text(`${tr} [data-k=charged]`)).toBe(String(r.charged_uj));
    }
    await page.locator('#view-attribution').screenshot({ path: path.join(ARTIFACTS, 'attribution.png') });

    // Budgets view: spent = the CLI's charged µJ over the grant's subtree (a parent's ledger
    // carries its delegations' debits); left = budget − spent.
    const subtree = (id: ContentId): Set<ContentId> => {
      const out = new Set<ContentId>([id]);
      for (let grew = true; grew; ) {
        grew = false;
        for (const [g, p] of parentOf)
          if (p !== undefined && out.has(p) && !out.has(g)) {
            out.add(g);
            grew = true;
          }
      }
      return out;
    };
    const chargedIn = (rows: typeof cli.attribution, id: ContentId) =>
      rows.filter((r) => subtree(id).has(r.grant_id as ContentId)).reduce((s, r) => s + BigInt(r.charged_uj), 0n);
    for (const r of cli.attribution) {
      const tr = `#grants tr[data-steward="${aDid}"][data-grant="${r.grant_id}"]`;
      const budget = BigInt(await text(`${tr} [data-k=budget]`));
      const spent = chargedIn(cli.attribution, r.grant_id as ContentId);
      expect(await text(`${tr} [data-k=spent]`)).toBe(String(spent));
      expect(BigInt(await text(`${tr} [data-k=left]`))).toBe(budget > spent ? budget - spent : 0n);
    }
    await page.locator('#view-budgets').screenshot({ path: path.join(ARTIFACTS, 'budgets.png') });

    // Grant tree view: every grant's spend = Σ over both nodes of the CLI's charged µJ in its
    // subtree; kinds, parents, shard points and channel points as the run made them.
    const bDid = stewards[1]!;
    const treeRow = (id: ContentId) => `#grant-tree tr[data-grant="${id}"]`;
    for (const [id, parent] of parentOf) {
      const spent = chargedIn(cli.attribution, id) + chargedIn(cliB.attribution, id);
      expect(await text(`${treeRow(id)} [data-k=spent]`), `spent of ${id}`).toBe(String(spent));
      expect(await page.locator(treeRow(id)).getAttribute('data-parent')).toBe(parent ?? '');
      const budgetText = await text(`${treeRow(id)} [data-k=budget]`);
      if (budgetText !== 'unknown') {
        const budget = BigInt(budgetText);
        expect(await text(`${treeRow(id)} [data-k=left]`)).toBe(String(budget > spent ? budget - spent : 0n));
      }
    }
    expect(await page.locator(treeRow(idOf(gd))).getAttribute('data-kind')).toBe('root');
    expect(await page.locator(treeRow(idOf(gdc))).getAttribute('data-kind')).toBe('delegation');
    expect(await page.locator(treeRow(idOf(gdc))).getAttribute('data-depth')).toBe('1');
    for (const [i, point] of [aDid, bDid].entries()) {
      const tr = treeRow(idOf(shards[i]!));
      expect(await page.locator(tr).getAttribute('data-kind')).toBe('shard');
      expect(await page.locator(`${tr} [data-k=kind]`).getAttribute('title')).toBe(point);
      expect(await text(`${tr} [data-k=budget]`)).toBe('300');
    }
    // Bob's root was a leaf once: its budget is known, and what is left counts Mallory's spend.
    expect(await text(`${treeRow(idOf(gd))} [data-k=left]`)).toBe(String(1_000n - chargedIn(cli.attribution, idOf(gd))));

    // Channel ledger view: the figures of `jcp channel audit --json`.
    const auditRun = await runJcpInProcess(['channel', 'audit', '--grant', idOf(gm), '--nats', nats.url, '--subject-root', root, '--json']);
    expect(auditRun.code).toBe(0);
    const audit = JSON.parse(auditRun.out) as {
      budget_uj: string | null;
      total_uj: string;
      overdraft_uj: string | null;
      proof_verifies: boolean | null;
      points: Array<{ point: string; spent_uj: string; seq: number }>;
      statements: unknown[];
    };
    expect(audit.points.map((p) => p.point).sort()).toEqual([aDid, bDid].sort());
    expect(audit.budget_uj).toBe('5000');
    const chRow = `#channels tr[data-channel="${idOf(gm)}"]`;
    expect(await text(`${chRow} [data-k=budget]`)).toBe(`${audit.budget_uj} (stream)`);
    expect(await text(`${chRow} [data-k=total]`)).toBe(audit.total_uj);
    expect(await text(`${chRow} [data-k=overdraft]`)).toBe(audit.overdraft_uj);
    expect(await text(`${chRow} [data-k=proof]`)).toBe(`verifies (${audit.statements.length} statements)`);
    const bound = overdraftBound([WINDOW_UJ, WINDOW_UJ]);
    expect(await text(`${chRow} [data-k=bound]`)).toBe(String(bound));
    expect(await text(`${chRow} [data-k=max-total]`)).toBe(String(BigInt(audit.budget_uj!) + bound));
    for (const p of audit.points) {
      const pr = `#channel-points tr[data-channel="${idOf(gm)}"][data-point="${p.point}"]`;
      expect(await text(`${pr} [data-k=spent]`)).toBe(p.spent_uj);
      expect(Number(await text(`${pr} [data-k=seq]`))).toBe(p.seq);
      // The tree's channel points: each point's settled statement beside its replayed spend.
      const tp = `${treeRow(idOf(gm))} [data-k=points] [data-steward="${p.point}"]`;
      expect(await text(`${tp} [data-k=point-settled]`)).toBe(p.spent_uj);
      const rows = p.point === aDid ? cli.attribution : cliB.attribution;
      expect(await text(`${tp} [data-k=point-spent]`)).toBe(String(chargedIn(rows, idOf(gm))));
    }
    await page.locator('#view-grant-tree').screenshot({ path: path.join(ARTIFACTS, 'grant-tree.png') });
    await page.locator('#view-channels').screenshot({ path: path.join(ARTIFACTS, 'channels.png') });

    // Transparency log view: A's checkpoint at aReceipts cosigned by B, B's by A, no alarm; the tree from A's folder.
    const cp = await stream.newestWitnessed(aDid as never);
    expect(Number(await text(`#tlog tr[data-steward="${aDid}"] [data-k=size]`))).toBe(aReceipts);
    expect(await page.locator(`#tlog tr[data-steward="${aDid}"]`).getAttribute('data-cosigners')).toBe('1');
    expect(await page.locator(`#tlog tr[data-steward="${aDid}"] [data-k=cosigners]`).getAttribute('title')).toBe(stewards[1]);
    expect(await text(`#trees tr[data-steward="${aDid}"] [data-k=root]`)).toBe(Buffer.from(cp.newest!.checkpoint.root).toString('hex'));
    expect(await page.locator('[data-k=no-alarm]').count()).toBe(1);
    await page.locator('#view-tlog').screenshot({ path: path.join(ARTIFACTS, 'tlog.png') });

    // Inspector: a real receipt verifies with its inclusion proof; not hex, and not CBOR, are refused.
    await page.fill('#receipt-hex', Buffer.from(receipts[3]!).toString('hex'));
    await page.click('#inspect');
    await page.waitForSelector('#inspect-out[data-ok]');
    expect(await page.locator('#inspect-out').getAttribute('data-ok')).toBe('true');
    expect(await page.locator('#inspect-out').getAttribute('data-included')).toBe('true');
    expect(await text('#inspect-out')).toContain(`included in its log at index 3 of ${aReceipts}`);
    await page.locator('#view-inspector').screenshot({ path: path.join(ARTIFACTS, 'inspector.png') });
    for (const [input, code] of [
      ['not a receipt', 'hex-malformed'],
      ['ff00ff', 'cbor'],
    ] as const) {
      await page.fill('#receipt-hex', input);
      await page.click('#inspect');
      await page.waitForSelector('#inspect-out[data-ok="false"]');
      expect(await text('#inspect-out')).toContain(`error [${code}`);
    }
    expect(errors).toEqual([]);

    // Read-only: no method but GET/HEAD.
    expect((await fetch(new URL('/api/state', consoleSrv.url), { method: 'POST' })).status).toBe(405);
    await page.close();
  }, 90_000);
});
