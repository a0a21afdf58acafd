/**
 * Conformance class C8 (spec §11, wire binding): a request round-trips the jcp/1 framing
 * canonically, and an enforcement endpoint decides and seals over a live socket (a node on a
 * loopback port, its receipts verifying under its steward key).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { encode as cborgEncode } from 'cborg';
import { pino } from 'pino';
import {
  type Actor,
  bytesEqual,
  decode,
  decodeWireMessage,
  encode,
  encodeWireRequest,
  encodeWireResponse,
  frameMessage,
  FrameReader,
  grantId,
  newActor,
  openReceipt,
  payloadHash,
  receiptId,
  requestIdOf,
  seededRng,
  type SignedGrant,
  signGrant,
  signWireRequestSync,
  type WireMessage,
  type WireRequest,
  wireRequestToCbor,
} from '../../core/index.ts';
import { configFromJson, resourceIdOf, startNode } from '../../node/index.ts';
import { JcpClient } from '../../client/index.ts';
import type { Checker } from '../checker.ts';
import type { ConformanceClass } from '../runner.ts';

/** C8: jcp/1 round-trips canonically; a live node decides and seals over a socket. */
export const C8: ConformanceClass = {
  id: 'C8',
  title: 'wire binding',
  async run(t) {
    const fx = wireFixture();
    checkCodec(t, fx);
    await withLiveNode(fx, async (node, client) => {
      const reply = await checkLiveDecision(t, fx, node, client);
      if (!reply) return;
      await checkNonCanonicalRefused(t, fx, node, client);
      await checkDenyAndErrorReplies(t, fx, node, client, reply);
    });
  },
};

/**
 * What C8's checks share: the issuer and agent, a 1,000 µJ grant for `echo` on `c8-tool`, and a
 * signed 300 µJ request (`body` is its canonical jcp/1 encoding, `o` its CBOR map form).
 */
interface WireFixture {
  readonly issuer: Actor;
  readonly agent: Actor;
  readonly g: SignedGrant;
  readonly gid: string;
  readonly req: WireRequest;
  readonly body: Uint8Array;
  readonly o: Record<string, unknown>;
}

/** A live node on a loopback port (as `startNode` returns it). */
type LiveNode = Awaited<ReturnType<typeof startNode>>;

/** A decided (allow or deny) response of jcp/1 (spec §11). */
type DecidedResponse = Extract<WireMessage, { kind: 'response' }>['response'];

/** The grant and signed request of C8, from the seeded rng `conformance/C8` (throws nothing). */
function wireFixture(): WireFixture {
  const rng = seededRng('conformance/C8');
  const issuer = newActor(rng);
  const agent = newActor(rng);
  const resource = resourceIdOf('c8-tool');
  const g = signGrant(
    { issuer: issuer.did, subject: agent.did, capability: { resource, actions: ['echo'] }, budget_uj: 1_000n, expiry: 0, nonce: rng(16) },
    issuer,
  );
  const payload = new TextEncoder().encode('{"say":"hi"}');
  const req = signWireRequestSync(
    {
      frame: {
        kind: 'tool-call',
        trust: 'control',
        grant_id: grantId(g.grant),
        action: 'echo',
        resource,
        payload_hash: payloadHash(payload),
      },
      chain: [g],
      caller: agent.did,
      cost: { uj: 300n, provenance: 'Estimator' },
      now: Math.floor(Date.now() / 1000),
      payload,
    },
    agent,
  );
  return { issuer, agent, g, gid: grantId(g.grant), req, body: encodeWireRequest(req), o: wireRequestToCbor(req) };
}

/** The codec (spec §11): frame → byte stream in odd chunks → deframe → decode → re-encode, byte for byte; caps and canonical form. */
function checkCodec(t: Checker, { req, body, o }: WireFixture): void {
  const framed = frameMessage(body);
  t.eq(new DataView(framed.buffer).getUint32(0), body.length, '4-byte big-endian length prefix');
  const reader = new FrameReader();
  const out: Uint8Array[] = [];
  for (let i = 0; i < framed.length; i += 7) out.push(...reader.push(framed.subarray(i, i + 7)));
  t.eq(out.length, 1, 'one message comes out of the stream');
  const m = decodeWireMessage(out[0]!);
  t.ok(m.kind === 'request' && bytesEqual(encodeWireRequest(m.request), body), 'the request re-encodes to the same bytes');
  t.ok(m.kind === 'request' && requestIdOf(m.request) === requestIdOf(req), 'the request id survives the round trip');
  t.throws(() => new FrameReader(64).push(Uint8Array.of(0, 0, 0, 65)), 'a length above the cap is refused', 'frame-too-large');
  t.throws(() => new FrameReader().push(Uint8Array.of(0xff, 0xff, 0xff, 0xff)), 'a 4 GiB declared length is refused', 'frame-too-large');
  const reordered = new Uint8Array([...encode({ now: o['now'] })]);
  reordered[0] = 0xa6;
  t.throws(() => decodeWireMessage(reordered), 'a non-canonical (malformed) body is refused', 'cbor-malformed');
  const longForm = Uint8Array.of(0xa1, 0x61, 0x61, 0x18, 0x01);
  t.throws(() => decodeWireMessage(longForm), 'a long-form integer is refused as non-canonical', 'cbor-non-canonical');
}

/**
 * Runs `body` against a live node on a loopback port (its data in a temp dir, estimator-only
 * meter) with a connected client; closes both and removes the dir afterwards, also on a throw.
 */
async function withLiveNode(fx: WireFixture, body: (node: LiveNode, client: JcpClient) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(path.join(tmpdir(), 'jcp-c8-'));
  const node = await startNode(
    configFromJson({
      listen: '127.0.0.1:0',
      data_dir: dir,
      resources: [{ name: 'c8-tool', trust_roots: [fx.issuer.did] }],
      meter: { default_estimate_uj: 0, rungs: ['estimator'] },
    }),
    { logger: pino({ level: 'silent' }) },
  );
  const client = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: fx.agent });
  try {
    await body(node, client);
  } finally {
    await client.close();
    await node.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The live node allows and seals the signed request (debit 300 µJ, 700 µJ left) and answers a
 * replay with the original receipt, debiting nothing. Returns the decided response, or
 * undefined when the node did not answer with one (the check has then failed).
 */
async function checkLiveDecision(
  t: Checker,
  { issuer, req, body, gid }: WireFixture,
  node: LiveNode,
  client: JcpClient,
): Promise<DecidedResponse | undefined> {
  const raw = await client.roundTrip(body);
  const reply = decodeWireMessage(raw);
  t.ok(reply.kind === 'response', 'the node answers with a decided response');
  if (reply.kind !== 'response') return undefined;
  t.ok(bytesEqual(encodeWireResponse(reply.response), raw), 'the response is canonical det-CBOR');
  t.eq(reply.response.decision, { verdict: 'allow' }, 'the node allows the signed request');
  const core = openReceipt(reply.response.receipt, node.did);
  t.ok(core.ok, 'the receipt verifies under the node steward');
  if (core.ok) {
    t.eq(
      [core.value.verdict, core.value.cost_uj, core.value.request_id],
      ['allow', 300n, requestIdOf(req)],
      'the receipt seals this decision',
    );
    t.eq(core.value.budget_remaining_uj, 700n, 'the receipt records the debit');
  }
  t.ok(!openReceipt(reply.response.receipt, issuer.did).ok, 'the receipt does not verify as another steward');
  t.eq(node.ledger.spent(gid), 300n, 'the node ledger holds the allow');
  const again = decodeWireMessage(await client.roundTrip(body));
  t.ok(
    again.kind === 'response' && bytesEqual(again.response.receipt, reply.response.receipt),
    'a replayed request gets its original receipt',
  );
  t.eq(node.ledger.spent(gid), 300n, 'a replayed request is not debited twice');
  t.eq(await node.log.lastSeq(), 0, 'a replayed request seals no second receipt');
  return reply.response;
}

/**
 * Valid tokens, wrong form (`cbor-non-canonical`), and canonical bodies whose payload is not the
 * one the frame's payload_hash binds (`schema`, spec §11): the node refuses them before deciding,
 * and nothing is debited or sealed.
 */
async function checkNonCanonicalRefused(t: Checker, { body, o, gid }: WireFixture, node: LiveNode, client: JcpClient): Promise<void> {
  const hex = Buffer.from(body).toString('hex');
  t.ok(bytesEqual(cborgEncode(o), body), 'cborg with its default (length-first) key order writes the canonical body');
  const inserted = cborgEncode(o, { mapSorter: () => 0 });
  const nonCanonical: [string, Uint8Array][] = [
    ['map keys in insertion order (frame, chain, …)', inserted],
    ['the same body with two keys swapped', swapFirstKeys(body)],
    ['cost.uj as a 4-byte integer', fromHex(replaceOnce(hex, '62756a19012c', '62756a1a0000012c'))],
    ['now as an 8-byte integer', fromHex(hex.replace(/636e6f771a([0-9a-f]{8})/, '636e6f771b00000000$1'))],
    [
      'the now key repeated',
      fromHex(`${(Number.parseInt(hex.slice(0, 2), 16) + 1).toString(16)}${hex.slice(2).replace(/^(636e6f771a[0-9a-f]{8})/, '$1$1')}`),
    ],
  ];
  for (const [what, bytes] of nonCanonical) {
    t.ok(!bytesEqual(bytes, body), `${what}: differs from the canonical body`);
    const r = decodeWireMessage(await client.roundTrip(bytes));
    t.eq(r.kind === 'error' ? r.error.code : r.kind, 'cbor-non-canonical', `the live node refuses ${what}`);
  }
  const swapped = { ...o, payload: new TextEncoder().encode('{"say":"bye"}') };
  const dropped: Record<string, unknown> = { ...o };
  delete dropped['payload'];
  for (const [what, m] of [
    ['another payload than the signed one', swapped],
    ['the payload removed', dropped],
  ] as const) {
    const r = decodeWireMessage(await client.roundTrip(encode(m)));
    t.eq(r.kind === 'error' ? r.error.code : r.kind, 'schema', `the live node refuses a body with ${what}`);
  }
  t.eq(node.ledger.spent(gid), 300n, 'no non-canonical request was debited');
  t.eq(await node.log.lastSeq(), 0, 'no non-canonical request was sealed');
}

/**
 * A 701 µJ call over the 700 µJ left is denied `budget-exceeded`, not debited, and sealed linked
 * to `first`'s receipt; a malformed message gets an error code (`cbor-forbidden-type`) and no receipt.
 */
async function checkDenyAndErrorReplies(
  t: Checker,
  { g, gid }: WireFixture,
  node: LiveNode,
  client: JcpClient,
  first: DecidedResponse,
): Promise<void> {
  const over = await client.call({ chain: [g], action: 'echo', payload: { say: 'more' }, cost: { uj: 701n, provenance: 'Estimator' } });
  t.eq(over.decision, { verdict: 'deny', deny_reason: 'budget-exceeded' }, 'a deny is decided over the socket');
  t.eq(node.ledger.spent(gid), 300n, 'the deny was not debited');
  const dc = openReceipt(over.receipt, node.did);
  t.ok(dc.ok && dc.value.prev === receiptId(first.receipt), 'the deny is sealed and linked to the receipt before it');
  const bad = decodeWireMessage(await client.roundTrip(Uint8Array.of(0xa1, 0x61, 0x61, 0xf5)));
  t.ok(bad.kind === 'error' && bad.error.code === 'cbor-forbidden-type', 'a malformed message gets an error code');
  t.ok(
    bad.kind === 'error' && Object.keys(decode(encodeWireResponse({ error: bad.error })) as object).join() === 'error',
    'an error reply carries no receipt',
  );
}

function fromHex(h: string): Uint8Array {
  return new Uint8Array(Buffer.from(h, 'hex'));
}

function replaceOnce(hex: string, find: string, by: string): string {
  const i = hex.indexOf(find);
  if (i < 0 || hex.indexOf(find, i + 1) >= 0) throw new Error(`C8: ${find} is not in the body exactly once`);
  return hex.slice(0, i) + by + hex.slice(i + find.length);
}

/**
 * The canonical request body with its first two top-level entries (`now`, `cost`: both keys
 * are short text) swapped: every token is valid, only the order is wrong.
 */
function swapFirstKeys(body: Uint8Array): Uint8Array {
  const hex = Buffer.from(body).toString('hex');
  const m = /^a[67](636e6f77(?:1a[0-9a-f]{8}|1b[0-9a-f]{16}))(64636f7374a262756a19012c6a70726f76656e616e636569457374696d61746f72)/.exec(
    hex,
  );
  if (!m) throw new Error('C8: unexpected request layout');
  return fromHex(`${hex.slice(0, 2)}${m[2]}${m[1]}${hex.slice(m[0].length)}`);
}
