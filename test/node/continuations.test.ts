/**
 * The node's pending multi round-trip calls (node/continuations.ts; docs/node.md "Multi round-trip
 * calls"): the bounds (total, age, size of the upstream state), a token bound to its caller, grant,
 * resource and tool; and on the wire (jcp/1, no bridge) against testkit's SDK v2 server: a
 * continuation by another caller, or one whose signature does not verify, is refused
 * `input-state-invalid` and leaves the pending call to its caller; a re-sent continuation gets its
 * reply again, another request with a used token is refused; a malformed `input` is refused before
 * anything is decided.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { JcpClient, WireErrorReply } from '../../client/index.ts';
import { grantId, openReceipt, type SignedGrant, sign, signRevocation } from '../../core/index.ts';
import { argumentsDigest, Continuations, openOutcome, type RunningNode } from '../../node/index.ts';
import { cast, liveNode, mint } from './fixtures.ts';

const { rng, alice, bob, mallory } = cast('continuations');
const SERVER = path.resolve(import.meta.dirname, '../../testkit/mcp-tools-server.ts');
const TOOL = 'test_input_required_result_request_state';
const dec = new TextDecoder();

const party = (caller: string, args: Record<string, unknown> = { q: 1 }) => ({
  caller,
  grantId: 'g'.repeat(64),
  resource: 'r'.repeat(64),
  action: 'tool',
  argsDigest: argumentsDigest(args),
});
const pending = (caller: string, state?: string) => ({
  ...party(caller),
  receipt: new Uint8Array([1, 2, 3]),
  receiptId: 'e'.repeat(64),
  round: 1,
  upstreamState: state,
});

describe('continuations: the pending set', () => {
  test('a token is taken once, by its own party only; another party leaves it in place', () => {
    const c = new Continuations();
    const m = c.mint(pending('did:key:bob', 'up-state'));
    if (!('token' in m)) throw new Error('not minted');
    expect(c.take(m.token, { ...party('did:key:bob'), action: 'other' })).toEqual({ refused: 'mismatch' });
    expect(c.take(m.token, party('did:key:mallory'))).toEqual({ refused: 'mismatch' });
    // The same call only: other arguments cannot ride on the first round's debit.
    expect(c.take(m.token, party('did:key:bob', { q: 2 }))).toEqual({ refused: 'mismatch' });
    const p = c.take(m.token, party('did:key:bob'));
    expect('refused' in p ? p : p.upstreamState).toBe('up-state');
    expect(c.take(m.token, party('did:key:bob'))).toEqual({ refused: 'unknown' });
    expect(c.take('not-a-token', party('did:key:bob'))).toEqual({ refused: 'malformed' });
    expect(c.size).toBe(0);
  });

  test('bounded in total, by age and by the size of the upstream state', () => {
    let now = 1_000_000;
    const c = new Continuations({ perCaller: 10, total: 2, ttlMs: 60_000, stateChars: 8 }, () => now);
    expect(c.mint(pending('did:key:a', 'x'.repeat(9)))).toEqual({ refused: 'state-too-large' });
    const a = c.mint(pending('did:key:a'));
    const b = c.mint(pending('did:key:b'));
    if (!('token' in a) || !('token' in b)) throw new Error('not minted');
    now += 60_000;
    // Both waited their whole time: swept, their places free again.
    expect(c.take(a.token, party('did:key:a'))).toEqual({ refused: 'unknown' });
    expect(c.size).toBe(0);
    expect('token' in c.mint(pending('did:key:c'))).toBe(true);
  });

  test('past a count bound the new call is kept and an old one dropped: the oldest of the caller, or of the biggest holder', () => {
    const c = new Continuations({ perCaller: 2, total: 4, ttlMs: 60_000, stateChars: 8 });
    const tokens = (who: string, n: number) =>
      Array.from({ length: n }, () => {
        const m = c.mint(pending(who));
        if (!('token' in m)) throw new Error(`not minted: ${JSON.stringify(m)}`);
        return m.token;
      });
    // A caller who abandons calls is never locked out: its third call pushes out its first.
    const [a1, a2, a3] = tokens('did:key:a', 3);
    expect(c.take(a1!, party('did:key:a'))).toEqual({ refused: 'unknown' });
    expect(c.dropped).toBe(1);
    // The node full (a: 2, b: 2), a victim's call drops the oldest of a biggest holder, not nobody's.
    const [b1] = tokens('did:key:b', 2);
    const [v1] = tokens('did:key:victim', 1);
    expect(c.size).toBe(4);
    expect(c.take(a2!, party('did:key:a'))).toEqual({ refused: 'unknown' });
    // More callers flooding with one call each cannot push out the victim's one while others hold more.
    tokens('did:key:c', 1);
    expect(c.take(b1!, party('did:key:b'))).toEqual({ refused: 'unknown' });
    expect('refused' in c.take(v1!, party('did:key:victim'))).toBe(false);
    expect('refused' in c.take(a3!, party('did:key:a'))).toBe(false);
  });

  test('a call asks for input at most `rounds` times, and its deadline runs from the first round', () => {
    let now = 5_000_000;
    const c = new Continuations({ perCaller: 4, total: 8, ttlMs: 60_000, rounds: 3, stateChars: 8 }, () => now);
    expect('token' in c.mint({ ...pending('did:key:a'), round: 3, firstAtMs: now })).toBe(true);
    expect(c.mint({ ...pending('did:key:a'), round: 4, firstAtMs: now })).toEqual({ refused: 'rounds-exceeded' });
    // A later round of a call that began 50 s ago has 10 s left, not a fresh minute.
    const m = c.mint({ ...pending('did:key:b'), round: 2, firstAtMs: now - 50_000 });
    if (!('token' in m)) throw new Error('not minted');
    now += 10_000;
    expect(c.take(m.token, party('did:key:b'))).toEqual({ refused: 'unknown' });
    expect(c.mint({ ...pending('did:key:b'), round: 2, firstAtMs: now - 60_000 })).toEqual({ refused: 'expired' });
  });
});

describe('continuations: on the wire', () => {
  let node: RunningNode & { cleanup: () => Promise<void> };
  let jcp: JcpClient;
  let grant: SignedGrant;

  beforeAll(async () => {
    node = await liveNode({
      resources: [{ name: 'tools', endpoint: { command: process.execPath, args: ['--import', 'tsx', SERVER, '--stdio'] } }],
    });
    jcp = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    grant = mint(alice, bob, 'tools', [TOOL], 1_000n, rng);
  }, 60_000);
  afterAll(async () => {
    await jcp?.close();
    await node?.cleanup();
  });

  const json = (b: Uint8Array | undefined) => JSON.parse(dec.decode(b)) as Record<string, unknown>;

  test("another caller's continuation and a forged signature are refused input-state-invalid; the caller's own still continues", async () => {
    // The caller declares elicitation (the SDK server behind asks only for what a client declared).
    const caps = JSON.stringify({ capabilities: { elicitation: {} } });
    const first = await jcp.call({ chain: [grant], action: TOOL, payload: {}, input: caps, cost: { uj: 5n, provenance: 'Estimator' } });
    const r1 = json(first.result);
    expect(r1['resultType']).toBe('input_required');
    const state = r1['requestState'] as string;
    const input = JSON.stringify({ responses: { confirm: { action: 'accept', content: { ok: true } } }, state });
    const spent = node.ledger.spent(grantId(grant.grant));
    // mallory presents bob's chain, signing as herself: the token is not hers.
    const stolen = jcp.call({ chain: [grant], action: TOOL, payload: {}, input, signer: mallory, caller: mallory.did });
    await expect(stolen).rejects.toThrow(/^input-state-invalid: mismatch/);
    // mallory claims to be bob: the signature does not verify.
    const forger = { did: bob.did, sign: (m: Uint8Array) => sign(mallory.key, m) };
    const forged = jcp.call({ chain: [grant], action: TOOL, payload: {}, input, signer: forger, caller: bob.did });
    await expect(forged).rejects.toThrow(/^input-state-invalid: bad-signature/);
    const done = await jcp.call({ chain: [grant], action: TOOL, payload: {}, input });
    expect(json(done.result)['content']).toEqual([{ type: 'text', text: 'state-ok: confirmed true' }]);
    expect(done.receipt).toEqual(first.receipt);
    expect(node.ledger.spent(grantId(grant.grant))).toBe(spent);
    // The receipt's one outcome record says the tool asked for input.
    const seq = openReceipt(first.receipt, node.did);
    if (!seq.ok) throw new Error('receipt');
    const records: string[] = [];
    for (let i = 0; i < 50 && records.length === 0; i++) {
      for await (const o of node.log.outcomes('measurement')) {
        const opened = openOutcome(o.bytes, node.did);
        if (o.seq === seq.value.seq && opened.ok) records.push(opened.value.outcome);
      }
      if (records.length === 0) await new Promise((r) => setTimeout(r, 20));
    }
    expect(records).toEqual(['input-required']);
  });

  test('a re-send of the same signed continuation gets the same reply (§11); another request with the same token is a replay, refused', async () => {
    const caps = JSON.stringify({ capabilities: { elicitation: {} } });
    const first = await jcp.call({ chain: [grant], action: TOOL, payload: {}, input: caps });
    const state = json(first.result)['requestState'] as string;
    const input = JSON.stringify({ responses: { confirm: { action: 'accept', content: { ok: false } } }, state });
    const req = await jcp.request({ chain: [grant], action: TOOL, payload: {}, input, nonce: new Uint8Array(16).fill(1) });
    const a = await jcp.callRequest(req);
    const b = await jcp.callRequest(req);
    expect(json(a.result)['content']).toEqual([{ type: 'text', text: 'state-ok: confirmed false' }]);
    expect(b.result).toEqual(a.result);
    expect(b.receipt).toEqual(first.receipt);
    const other = await jcp.request({ chain: [grant], action: TOOL, payload: {}, input, nonce: new Uint8Array(16).fill(2) });
    await expect(jcp.callRequest(other)).rejects.toThrow(/^input-state-invalid: unknown/);
  });

  test('a call whose grant was revoked after its first round is not continued: input-state-invalid revoked', async () => {
    const g2 = mint(alice, bob, 'tools', [TOOL], 1_000n, rng);
    const caps = JSON.stringify({ capabilities: { elicitation: {} } });
    const first = await jcp.call({ chain: [g2], action: TOOL, payload: {}, input: caps });
    const state = json(first.result)['requestState'] as string;
    expect(await jcp.revoke(signRevocation(grantId(g2.grant), alice, rng(16)))).toBe(grantId(g2.grant));
    const input = JSON.stringify({ responses: { confirm: { action: 'accept', content: { ok: true } } }, state });
    await expect(jcp.call({ chain: [g2], action: TOOL, payload: {}, input })).rejects.toThrow(/^input-state-invalid: revoked/);
  });

  test('a call whose grant expired after its first round is not continued: input-state-invalid expired', async () => {
    const expiry = Math.floor(Date.now() / 1000) + 2;
    const g3 = mint(alice, bob, 'tools', [TOOL], 1_000n, rng, { expiry });
    const caps = JSON.stringify({ capabilities: { elicitation: {} } });
    const first = await jcp.call({ chain: [g3], action: TOOL, payload: {}, input: caps });
    const state = json(first.result)['requestState'] as string;
    while (Date.now() / 1000 < expiry + 0.2) await new Promise((r) => setTimeout(r, 100));
    const input = JSON.stringify({ responses: { confirm: { action: 'accept', content: { ok: true } } }, state });
    await expect(jcp.call({ chain: [g3], action: TOOL, payload: {}, input })).rejects.toThrow(/^input-state-invalid: expired/);
  });

  test('a malformed input is refused before the decision (schema, input-invalid); nothing debited', async () => {
    const spent = node.ledger.spent(grantId(grant.grant));
    const refusedWith = async (input: string) => {
      try {
        await jcp.call({ chain: [grant], action: TOOL, payload: {}, input });
        return 'answered';
      } catch (e) {
        return e instanceof WireErrorReply ? e.code : String(e);
      }
    };
    expect(await refusedWith('[1]')).toBe('schema');
    expect(await refusedWith('{"state": 7}')).toBe('input-invalid');
    expect(await refusedWith('{"capabilities": {}, "extra": 1}')).toBe('input-invalid');
    expect(node.ledger.spent(grantId(grant.grant))).toBe(spent);
  });
});
