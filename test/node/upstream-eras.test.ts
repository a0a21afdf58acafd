/**
 * The node's upstream client negotiates per server (docs/node.md "Endpoints"): the SDK v2 test
 * server (test/node/v2-server.ts) over stdio and Streamable HTTP answers `server/discover`, so the
 * node speaks the stateless 2026-07-28 revision to it; the paged server (SDK v1, a 2025-only
 * peer) gets the 2025 handshake. Every call tells the upstream who made it in `_meta`
 * (`jcp/caller`, `jcp/grant`, `jcp/receipt`), in both eras. Tool lists honour the 2026-07-28
 * caching hints: a list without `ttlMs` is read again before the next tool check (a tool the
 * server stopped listing is refused `unknown-tool`, no receipt, no debit); a list with a long
 * `ttlMs` is not read again within it.
 */
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { JcpClient, resultJson, type WireErrorReply } from '../../client/index.ts';
import { grantId, receiptId } from '../../core/index.ts';
import { CALLER_META_KEY, GRANT_META_KEY, type McpHttpEndpoint, RECEIPT_META_KEY, type RunningNode } from '../../node/index.ts';
import { cast, liveNode, mint, rid, tempDir } from './fixtures.ts';
import { type Everything, startV2Http, V2_SERVER_STDIO } from './upstreams.ts';

const { rng, alice, bob } = cast('upstream-eras');
const PAGED = path.join(path.dirname(fileURLToPath(import.meta.url)), 'paged-server.mjs');

type Structured = { meta: Record<string, unknown>; envelope?: unknown; headers?: Record<string, string> };
const structured = (bytes: Uint8Array | undefined) => (resultJson(bytes) as { structuredContent: Structured }).structuredContent;
const text = (bytes: Uint8Array | undefined) =>
  ((resultJson(bytes) as { content?: { text?: string }[] }).content ?? []).map((c) => c.text ?? '').join('');

describe('upstream eras: 2026-07-28 where the server answers server/discover, else the 2025 handshake', () => {
  let v2http: Everything;
  let node: RunningNode & { cleanup: () => Promise<void> };
  let client: JcpClient;

  beforeAll(async () => {
    v2http = await startV2Http({ V2_TTL_MS: '60000', V2_SCOPE: 'private' });
    node = await liveNode({
      resources: [
        { name: 'v2stdio', endpoint: V2_SERVER_STDIO },
        { name: 'v2http', endpoint: { url: v2http.url, timeout_ms: 10_000 } },
        { name: 'v1paged', endpoint: { command: process.execPath, args: [PAGED] } },
      ],
    });
    client = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    await client.listTools();
  }, 60_000);
  afterAll(async () => {
    await client?.close();
    await node?.cleanup();
    await v2http?.kill();
  });

  const endpoint = (name: string) => node.endpoints.get(rid(name))!.endpoint;

  test('each upstream is spoken to in its era', () => {
    expect(endpoint('v2stdio').protocol?.()).toEqual({ era: 'modern', version: '2026-07-28' });
    expect(endpoint('v2http').protocol?.()).toEqual({ era: 'modern', version: '2026-07-28' });
    expect(endpoint('v1paged').protocol?.()).toEqual({ era: 'legacy', version: '2025-11-25' });
  });

  test.each(['v2stdio', 'v2http', 'v1paged'])('identity / %s sees the caller did:key, the grant and the receipt in _meta', async (name) => {
    const g = mint(alice, bob, name, ['whoami'], 1_000n, rng);
    const r = await client.call({ chain: [g], action: 'whoami', payload: {} });
    expect(r.decision.verdict).toBe('allow');
    const { meta } = structured(r.result);
    expect(meta[CALLER_META_KEY]).toBe(bob.did);
    expect(meta[GRANT_META_KEY]).toBe(grantId(g.grant));
    expect(meta[RECEIPT_META_KEY]).toBe(receiptId(r.receipt));
    // The node's own bookkeeping mark never leaves it; the arguments carry nothing of this.
    expect(Object.keys(meta).filter((k) => k.startsWith('jcp.node'))).toEqual([]);
    // The 2026-07-28 envelope (protocol version, client info) rides in the same _meta, only in that era.
    const envelope = (structured(r.result).envelope ?? {}) as Record<string, unknown>;
    const version =
      meta['io.modelcontextprotocol/protocolVersion'] ?? envelope['io.modelcontextprotocol/protocolVersion'] ?? envelope['protocolVersion'];
    expect(version).toBe(name === 'v1paged' ? undefined : '2026-07-28');
  });

  test('HTTP 2026-07-28 / no session; MCP-Protocol-Version and Mcp-Method headers on the call', async () => {
    const g = mint(alice, bob, 'v2http', ['whoami'], 1_000n, rng);
    const r = await client.call({ chain: [g], action: 'whoami', payload: {} });
    const { headers } = structured(r.result);
    expect(headers).toMatchObject({ 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 'whoami' });
    expect(headers).not.toHaveProperty('mcp-session-id');
  });

  test('caching / no ttlMs: the list is read again before the tool check; a dropped tool is unknown-tool, no receipt', async () => {
    const g = mint(alice, bob, 'v2stdio', ['doomed', 'drop_doomed', 'stats'], 1_000_000n, rng);
    const cost = { uj: 10n, provenance: 'Estimator' } as const;
    expect(text((await client.call({ chain: [g], action: 'doomed', payload: {}, cost })).result)).toBe('still here');
    await client.call({ chain: [g], action: 'drop_doomed', payload: {}, cost });
    const seq = node.enforcer.nextSeq;
    // (another payload: the same request again would be an idempotent replay of the first)
    const refused = await client.call({ chain: [g], action: 'doomed', payload: { n: 2 }, cost }).catch((e: unknown) => e);
    expect((refused as WireErrorReply).code).toBe('unknown-tool');
    expect(node.enforcer.nextSeq).toBe(seq);
    const listsBefore = Number(text((await client.call({ chain: [g], action: 'stats', payload: { n: 1 }, cost })).result));
    const listsAfter = Number(text((await client.call({ chain: [g], action: 'stats', payload: { n: 2 }, cost })).result));
    expect(listsAfter).toBeGreaterThan(listsBefore);
  });

  test('caching / ttlMs 60 s, private: the list is not read again within it', async () => {
    const g = mint(alice, bob, 'v2http', ['doomed', 'drop_doomed', 'stats'], 1_000_000n, rng);
    let n = 0;
    const stats = async () => Number(text((await client.call({ chain: [g], action: 'stats', payload: { n: ++n } })).result));
    const first = await stats();
    expect(await stats()).toBe(first);
    await client.call({ chain: [g], action: 'drop_doomed', payload: {} });
    // Still listed as far as the node knows (fresh for 60 s): the call goes through to the server.
    expect(text((await client.call({ chain: [g], action: 'doomed', payload: { n: 1 } })).result)).toBe('still here');
    expect(await stats()).toBe(first);
    const fresh = (endpoint('v2http') as McpHttpEndpoint).listFreshness();
    expect(fresh.scope).toBe('private');
    expect(fresh.staleInMs).toBeGreaterThan(0);
  });
});

describe('an HTTP upstream that redirects', () => {
  test('the configured headers never follow a 3xx to another origin (the tool list is simply not read)', async () => {
    const captured: { url: string; headers: Record<string, unknown> }[] = [];
    const capture = createServer((req, res) => {
      captured.push({ url: req.url ?? '', headers: req.headers });
      res.writeHead(404).end();
    });
    await new Promise<void>((r) => capture.listen(0, '127.0.0.1', r));
    const elsewhere = `http://127.0.0.1:${(capture.address() as AddressInfo).port}`;
    const front = createServer((req, res) => res.writeHead(307, { location: `${elsewhere}${req.url}` }).end());
    await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
    const t = tempDir('http-redirect');
    const keyFile = path.join(t.dir, 'token');
    writeFileSync(keyFile, 'secret-token-456', { mode: 0o600 });
    const n = await liveNode({
      resources: [
        {
          name: 'redir',
          endpoint: {
            kind: 'mcp-http',
            url: `http://127.0.0.1:${(front.address() as AddressInfo).port}/mcp`,
            timeout_ms: 2000,
            headers: { 'X-Api-Key': { file: keyFile } },
          },
        },
      ],
    });
    try {
      await n.endpoints.get(rid('redir'))!.endpoint.ensureTools();
      expect(n.endpoints.get(rid('redir'))!.endpoint.tools()).toBeUndefined();
      expect(captured).toEqual([]);
    } finally {
      await n.cleanup();
      front.close();
      capture.close();
      t.cleanup();
    }
  });
});
