/**
 * Multi round-trip MCP calls (MCP 2026-07-28, SEP-2322) through `jcp bridge` → node → a real SDK
 * v2 server (testkit/mcp-tools-server.ts over stdio, whose tools answer `input_required`): a
 * 2026-07-28 client (the SDK v2 client pinned to the revision) gets the input_required result and
 * retries with its inputResponses and the requestState it was handed; a 2025-era client (the v1
 * SDK client) is asked by server requests on its call. Either way one decision and one debit per
 * logical call, every round bound to the first round's receipt; a tampered or replayed
 * requestState, or one sent with other arguments, is refused `input-state-invalid`; the node's
 * pending calls are bounded per caller (`abuse.input_pending_per_caller`, the oldest dropped). The client's declared capabilities reach the upstream, which
 * asks only for what the client can answer.
 */
import path from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as LegacyHttp } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { BridgeAgent, CallJournal, type HttpBridge, legacyAsk, MAX_INPUT_ROUNDS, serveBridgeHttp } from '../../bridge/index.ts';
import { JcpClient } from '../../client/index.ts';
import { grantId, type SignedGrant } from '../../core/index.ts';
import type { RunningNode } from '../../node/index.ts';
import { cast, liveNode, mint } from '../node/fixtures.ts';

const { rng, alice, bob } = cast('bridge-input-required');
const SERVER = path.resolve(import.meta.dirname, '../../testkit/mcp-tools-server.ts');
const PIN = { versionNegotiation: { mode: { pin: '2026-07-28' } } } as const;
const STATE_TOOL = 'test_input_required_result_request_state';
const MULTI_TOOL = 'test_input_required_result_multi_round';
const COST = 10n;

type Result = { content?: { type: string; text?: string }[]; isError?: boolean; _meta?: Record<string, unknown> };
type InputRequired = {
  resultType?: string;
  inputRequests?: Record<string, unknown>;
  requestState?: string;
  _meta?: Record<string, unknown>;
};
const text = (r: Result) => (r.content ?? []).map((c) => c.text ?? '').join('');

describe('bridge: multi round-trip calls (input_required)', () => {
  let node: RunningNode & { cleanup: () => Promise<void> };
  let jcp: JcpClient;
  let bridge: HttpBridge;
  let grant: SignedGrant;
  const clients: { close(): Promise<void> }[] = [];

  /** Receipts in the node's log (seq 0…). */
  async function receipts(): Promise<number> {
    let n = 0;
    while ((await node.log.getReceipt(n)) !== undefined) n++;
    return n;
  }

  /** A 2026-07-28 client that answers every elicitation with `content` (the SDK's own driver retries). */
  async function modernClient(content: Record<string, unknown>): Promise<Client> {
    const c = new Client({ name: 'modern', version: '1' }, { ...PIN, capabilities: { elicitation: {} } });
    c.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content }) as never);
    await c.connect(new StreamableHTTPClientTransport(new URL(bridge.url)));
    clients.push(c);
    return c;
  }

  /** A 2026-07-28 client in manual mode: an input_required result is handed back as it came. */
  async function manualClient(): Promise<Client> {
    const c = new Client(
      { name: 'manual', version: '1' },
      { ...PIN, capabilities: { elicitation: {} }, inputRequired: { autoFulfill: false } },
    );
    await c.connect(new StreamableHTTPClientTransport(new URL(bridge.url)));
    clients.push(c);
    return c;
  }

  const ask = async (c: Client, name: string, extra: Record<string, unknown> = {}) =>
    (await c.callTool({ name, arguments: {}, ...extra } as never, { allowInputRequired: true } as never)) as InputRequired & Result;

  beforeAll(async () => {
    node = await liveNode({
      resources: [{ name: 'tools', endpoint: { command: process.execPath, args: ['--import', 'tsx', SERVER, '--stdio'] } }],
      abuse: { input_pending_per_caller: 2 },
    });
    jcp = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    grant = mint(alice, bob, 'tools', [STATE_TOOL, MULTI_TOOL], 1_000_000n, rng);
    const agent = new BridgeAgent({ name: 'bob', signer: bob, chains: [[grant]], client: jcp, journal: new CallJournal(), costUj: COST });
    bridge = await serveBridgeHttp({ host: '127.0.0.1', port: 0, agents: [{ agent }] });
  }, 60_000);
  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => undefined);
    await bridge?.close();
    await jcp?.close();
    await node?.cleanup();
  });

  test('2026-07-28 / a three-round call (two elicitations) is one decision and one debit; every round carries the first receipt', async () => {
    const c = await manualClient();
    const before = { spent: node.ledger.spent(grantId(grant.grant)), receipts: await receipts() };
    const r1 = await ask(c, MULTI_TOOL);
    expect(r1.resultType).toBe('input_required');
    expect(Object.keys(r1.inputRequests ?? {})).toEqual(['step1']);
    const receipt = r1._meta?.['jcp/receipt'];
    expect(typeof receipt).toBe('string');
    const r2 = await ask(c, MULTI_TOOL, {
      inputResponses: { step1: { action: 'accept', content: { name: 'Ada' } } },
      requestState: r1.requestState,
    });
    expect(r2.resultType).toBe('input_required');
    expect(Object.keys(r2.inputRequests ?? {})).toEqual(['step2']);
    expect(r2._meta?.['jcp/receipt']).toBe(receipt);
    const r3 = await ask(c, MULTI_TOOL, {
      inputResponses: { step2: { action: 'accept', content: { color: 'teal' } } },
      requestState: r2.requestState,
    });
    expect(text(r3)).toBe('Done: {"color":"teal"}');
    expect(r3._meta?.['jcp/receipt']).toBe(receipt);
    expect(node.ledger.spent(grantId(grant.grant)) - before.spent).toBe(COST);
    expect((await receipts()) - before.receipts).toBe(1);
  });

  test("2026-07-28 / the SDK client's own driver answers the elicitation and retries: the tool gets the answer, one debit", async () => {
    const c = await modernClient({ ok: true });
    const before = { spent: node.ledger.spent(grantId(grant.grant)), receipts: await receipts() };
    const r = (await c.callTool({ name: STATE_TOOL, arguments: {} })) as Result;
    expect(text(r)).toBe('state-ok: confirmed true');
    expect(node.ledger.spent(grantId(grant.grant)) - before.spent).toBe(COST);
    expect((await receipts()) - before.receipts).toBe(1);
  });

  test('2026-07-28 / a tampered requestState is refused input-state-invalid (-32602); the untampered one still continues', async () => {
    const c = await manualClient();
    const r1 = await ask(c, STATE_TOOL);
    const state = r1.requestState as string;
    const spent = node.ledger.spent(grantId(grant.grant));
    const answer = { confirm: { action: 'accept', content: { ok: true } } };
    // One character of the tag changed (not the last: base64url's last character may carry unused bits).
    const i = state.length - 5;
    const tampered = `${state.slice(0, i)}${state[i] === 'A' ? 'B' : 'A'}${state.slice(i + 1)}`;
    await expect(ask(c, STATE_TOOL, { inputResponses: answer, requestState: tampered })).rejects.toThrow(/input-state-invalid: mismatch/);
    await expect(ask(c, STATE_TOOL, { inputResponses: answer, requestState: `${state}-TAMPERED` })).rejects.toThrow(/input-state-invalid/);
    const done = await ask(c, STATE_TOOL, { inputResponses: answer, requestState: state });
    expect(text(done)).toBe('state-ok: confirmed true');
    expect(node.ledger.spent(grantId(grant.grant))).toBe(spent);
  });

  test('2026-07-28 / a replayed requestState (a round already continued) is refused input-state-invalid; nothing debited', async () => {
    const c = await manualClient();
    const r1 = await ask(c, STATE_TOOL);
    const answer = { confirm: { action: 'accept', content: { ok: false } } };
    const done = await ask(c, STATE_TOOL, { inputResponses: answer, requestState: r1.requestState });
    expect(text(done)).toBe('state-ok: confirmed false');
    const spent = node.ledger.spent(grantId(grant.grant));
    const receiptsBefore = await receipts();
    await expect(ask(c, STATE_TOOL, { inputResponses: answer, requestState: r1.requestState })).rejects.toThrow(
      /input-state-invalid: unknown/,
    );
    expect(node.ledger.spent(grantId(grant.grant))).toBe(spent);
    expect(await receipts()).toBe(receiptsBefore);
  });

  test('2026-07-28 / a continuation re-sent with its idempotency key after its answer (the client never saw it) gets the same reply; nothing debited again', async () => {
    const c = await manualClient();
    const r1 = await ask(c, STATE_TOOL, { _meta: { 'jcp/idempotency_key': 'f7-round-1' } });
    expect(r1.resultType).toBe('input_required');
    const spent = node.ledger.spent(grantId(grant.grant));
    const receiptsBefore = await receipts();
    const round2 = {
      inputResponses: { confirm: { action: 'accept', content: { ok: true } } },
      requestState: r1.requestState,
      _meta: { 'jcp/idempotency_key': 'f7-round-2' },
    };
    const done = await ask(c, STATE_TOOL, round2);
    expect(text(done)).toBe('state-ok: confirmed true');
    const again = await ask(c, STATE_TOOL, round2);
    expect(text(again)).toBe('state-ok: confirmed true');
    expect(typeof done._meta?.['jcp/request_id']).toBe('string');
    expect(again._meta?.['jcp/request_id']).toBe(done._meta?.['jcp/request_id']);
    expect(node.ledger.spent(grantId(grant.grant))).toBe(spent);
    expect(await receipts()).toBe(receiptsBefore);
  });

  test('2026-07-28 / past abuse.input_pending_per_caller the new call is kept and the oldest of the caller dropped: never locked out', async () => {
    const c = await manualClient();
    const a = await ask(c, STATE_TOOL);
    const b = await ask(c, STATE_TOOL);
    const over = await ask(c, STATE_TOOL);
    expect([a.resultType, b.resultType, over.resultType]).toEqual(['input_required', 'input_required', 'input_required']);
    const answer = { confirm: { action: 'accept', content: { ok: true } } };
    // The oldest (a) made room: its token is gone; the other two continue.
    await expect(ask(c, STATE_TOOL, { inputResponses: answer, requestState: a.requestState })).rejects.toThrow(
      /input-state-invalid: unknown/,
    );
    for (const s of [b.requestState, over.requestState]) {
      expect(text(await ask(c, STATE_TOOL, { inputResponses: answer, requestState: s }))).toBe('state-ok: confirmed true');
    }
  });

  test('2026-07-28 / a retry with other arguments is another call, not a continuation: refused, nothing sent upstream or debited', async () => {
    const c = await manualClient();
    const r1 = await ask(c, STATE_TOOL);
    expect(r1.resultType).toBe('input_required');
    const spent = node.ledger.spent(grantId(grant.grant));
    const receiptsBefore = await receipts();
    const answer = { confirm: { action: 'accept', content: { ok: true } } };
    await expect(
      ask(c, STATE_TOOL, { arguments: { path: '/etc/shadow' }, inputResponses: answer, requestState: r1.requestState }),
    ).rejects.toThrow(/input-state-invalid: mismatch/);
    expect(node.ledger.spent(grantId(grant.grant))).toBe(spent);
    expect(await receipts()).toBe(receiptsBefore);
    // The same arguments still continue it.
    expect(text(await ask(c, STATE_TOOL, { inputResponses: answer, requestState: r1.requestState }))).toBe('state-ok: confirmed true');
  });

  test('2025 era / the elicitation reaches the client as a server request on its call, the answer goes back to the tool; one debit', async () => {
    const c = new LegacyClient({ name: 'legacy', version: '1' }, { capabilities: { elicitation: {} } });
    let asked = 0;
    c.setRequestHandler(ElicitRequestSchema, async () => {
      asked++;
      return { action: 'accept', content: { ok: true } };
    });
    await c.connect(new LegacyHttp(new URL(bridge.url)));
    clients.push(c);
    const before = { spent: node.ledger.spent(grantId(grant.grant)), receipts: await receipts() };
    const r = (await c.callTool({ name: STATE_TOOL, arguments: {} })) as Result;
    expect(text(r)).toBe('state-ok: confirmed true');
    expect(asked).toBe(1);
    expect(node.ledger.spent(grantId(grant.grant)) - before.spent).toBe(COST);
    expect((await receipts()) - before.receipts).toBe(1);
  });

  test('2025 era / a client without the elicitation capability is never asked: its capabilities reach the upstream, which refuses to ask', async () => {
    const c = new LegacyClient({ name: 'legacy-bare', version: '1' }, { capabilities: {} });
    await c.connect(new LegacyHttp(new URL(bridge.url)));
    clients.push(c);
    const r = (await c.callTool({ name: STATE_TOOL, arguments: {} })) as Result;
    expect(r.isError).toBe(true);
    // The SDK server behind the node checks the request's client capabilities (the bridge's, sent on).
    expect(text(r)).toMatch(/^endpoint-failed: .*elicitation\/create.*client capabilities do not declare/);
    expect(r._meta?.['jcp/verdict']).toBe('allow');
  });
});

describe('bridge: what a 2025-era client is asked', () => {
  const result = (inputRequests: Record<string, unknown>) => ({
    resultType: 'input_required',
    inputRequests,
    requestState: 's',
    _meta: { 'jcp/receipt': 'r' },
  });
  const elicit = { method: 'elicitation/create', params: { message: 'name?' } };

  test('only what the client declared, at most MAX_INPUT_ROUNDS rounds; anything else ends the call with a failed tool result', () => {
    expect(legacyAsk(result({ a: elicit }), { elicitation: {} }, 1)).toEqual({ requests: [['a', elicit]] });
    const undeclared = legacyAsk(result({ a: elicit, b: { method: 'roots/list' } }), { elicitation: {} }, 1);
    expect('refused' in undeclared && undeclared.refused).toMatchObject({
      isError: true,
      content: [{ type: 'text', text: expect.stringMatching(/^input-unsupported: the tool asked for roots\/list/) }],
      _meta: { 'jcp/receipt': 'r' },
    });
    const unknown = legacyAsk(result({ a: { method: 'tasks/get' } }), { elicitation: {}, sampling: {}, roots: {} }, 1);
    expect('refused' in unknown && JSON.stringify(unknown.refused)).toMatch(/input-unsupported/);
    const many = legacyAsk(result({ a: elicit }), { elicitation: {} }, MAX_INPUT_ROUNDS + 1);
    expect('refused' in many && JSON.stringify(many.refused)).toMatch(/input-rounds-exceeded/);
  });
});
