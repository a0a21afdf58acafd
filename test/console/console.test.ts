/**
 * The audit console (console/, `jcp console`) in a real browser: Debian's chromium driven by
 * playwright-core. A real run — two nodes on a NATS server of the test's own, witnessing each
 * other, with allowed and refused calls — is stopped, then the console is served over both data
 * folders and the stream. The page's figures must equal `jcp receipts attribute --json` (per
 * grant and worker), the deny reasons counted here from the receipts, and the stream's
 * checkpoints and cosigners; the inspector verifies a pasted receipt with its inclusion proof and
 * refuses input that is not hex or not CBOR. A screenshot of each view is kept under
 * test-artifacts/console/ (not committed).
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { openReceipt } from '../../core/index.ts';
import { ConsoleData } from '../../console/index.ts';
import { type RunningConsole, serveConsole } from '../../console/index.ts';
import { NatsServer } from '../../testkit/index.ts';
import { ClusterHooks, readClusterConfig } from '../../node/index.ts';
import { ReceiptLog } from '../../node/index.ts';
import { JcpClient } from '../../client/index.ts';
import { TlogStream } from '../../node/index.ts';
import { cast, liveNode, mint, quiet, tempDir } from '../node/fixtures.ts';
import { runJcpInProcess } from '../support.ts';

const { rng, alice, bob, carol } = cast('audit-console');
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

  beforeAll(async () => {
    nats = await NatsServer.start();
    probe = new ClusterHooks(nats.url, readClusterConfig({ subject_root: root }), quiet);
    await probe.bus.ready();
    stream = new TlogStream(probe.bus.connection!, { root });
    const running: Array<{ node: Awaited<ReturnType<typeof liveNode>>; hooks: ClusterHooks }> = [];
    for (const d of dirs) {
      const hooks = new ClusterHooks(
        nats.url,
        readClusterConfig({ subject_root: root, checkpoint_every_ms: 100, checkpoint_every_receipts: 1 }),
        quiet,
      );
      const node = await liveNode(
        { meter: { default_estimate_uj: 100, rungs: ['estimator'] } },
        { budgetPolicy: hooks.budgetPolicy, revocationFeeds: [hooks.revocationFeed], witnessed: (x) => hooks.witnessed(x) },
        d.dir,
      );
      hooks.attach(node.steward, node.ledger, node.amendments);
      hooks.startWitnessing(node, quiet);
      running.push({ node, hooks });
      stewards.push(node.steward.did);
    }
    const a = running[0]!.node;
    // Bob: 3 allowed within 350 µJ, then budget-exceeded; a write he was not granted; Carol: 2 allowed.
    const gb = mint(alice, bob, 'tools', ['read'], 350n, rng);
    const gc = mint(alice, carol, 'tools', ['read'], 10_000n, rng);
    const cb = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: bob });
    const cc = await JcpClient.connect({ host: '127.0.0.1', port: a.port, signer: carol });
    for (let i = 0; i < 4; i++) await cb.call({ chain: [gb], action: 'read', payload: { i } });
    await cb.call({ chain: [gb], action: 'write', payload: {} });
    for (let i = 0; i < 2; i++) await cc.call({ chain: [gc], action: 'read', payload: { i } });
    await Promise.all([cb.close(), cc.close()]);
    await until('B to cosign A at 7 receipts', async () =>
      (await stream.newestWitnessed(a.steward.did)).newest?.checkpoint.size === 7 ? true : undefined,
    );
    await until('A to cosign B', async () => (await stream.newestWitnessed(running[1]!.node.steward.did)).newest);
    for (const r of running) {
      await r.hooks.close();
      await r.node.close();
    }
    consoleSrv = await serveConsole(
      new ConsoleData(
        dirs.map((d) => d.dir),
        stream,
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
    expect(cli.receipts).toBe(7);

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

    // Budgets view: spent = the CLI's µJ per grant; left = budget − spent.
    for (const r of cli.attribution) {
      const tr = `#grants tr[data-grant="${r.grant_id}"]`;
      const budget = BigInt(await text(`${tr} [data-k=budget]`));
      expect(await text(`${tr} [data-k=spent]`)).toBe(String(r.uj));
      expect(BigInt(await text(`${tr} [data-k=left]`))).toBe(budget - BigInt(r.uj));
    }
    await page.locator('#view-budgets').screenshot({ path: path.join(ARTIFACTS, 'budgets.png') });

    // Transparency log view: A's checkpoint at 7 cosigned by B, B's by A, no alarm; the tree from A's folder.
    const cp = await stream.newestWitnessed(aDid as never);
    expect(Number(await text(`#tlog tr[data-steward="${aDid}"] [data-k=size]`))).toBe(7);
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
    expect(await text('#inspect-out')).toContain('included in its log at index 3 of 7');
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
