/**
 * Hold under attack: denies a caller causes at will (a self-minted root grant:
 * `untrusted-root`) draw on the peer's bucket and a global one, past either `rate-limited` and no
 * receipt; amendments and revocations are kept only from issuers the record policy vouches for
 * (`issuer-refused`), within a size, a rate per issuer and a bound on the revocation set
 * (`record-limit`), over jcp/1 and from the cluster's feed alike, counted in
 * `jcp_records_refused_total`.
 */
import { describe, expect, test } from 'vitest';
import {
  amend,
  attenuate,
  contentId,
  decodeWireMessage,
  encodeWireMessage,
  encodeWireRequest,
  frameMessage,
  grantId,
  makeCheckpoint,
  type SignedGrant,
  signRevocation,
} from '../../core/index.ts';
import { NodeErrorCodes, type RevocationSink } from '../../node/index.ts';
import { JcpClient } from '../../client/index.ts';
import { cast, liveNode, mint, RawConn, request, tempFolders } from './fixtures.ts';

const { rng, alice, bob, mallory, carol } = cast('abuse-records');
const folder = tempFolders('abuse-records');
const clock = 1_900_000_000;
const snapshotOff = { every_receipts: 0, every_s: 0 };
/** The test resource, with alice its only trust root. */
const guarded = [{ name: 'tools', trust_roots: [alice.did] }];

/** Sends `frames` one at a time on `c`; the reply of each: an error code, the deny reason, `allow`, or the message kind. */
async function outcomes(c: RawConn, frames: Uint8Array[]): Promise<string[]> {
  const out: string[] = [];
  for (const f of frames) {
    c.write(f);
    const m = decodeWireMessage(await c.next());
    out.push(m.kind === 'error' ? m.error.code : m.kind === 'response' ? (m.response.decision.deny_reason ?? 'allow') : m.kind);
  }
  return out;
}

/** `n` calls of `signer` on its own root grant `g`, each with its own payload (its own request id). */
function calls(g: SignedGrant, signer: typeof mallory, n: number, tag: string): Uint8Array[] {
  return Array.from({ length: n }, (_, i) =>
    frameMessage(encodeWireRequest(request(signer, [g], { now: clock, payload: new TextEncoder().encode(`{"${tag}":${i}}`) }))),
  );
}

/** A `{revoke}` of a fresh grant `issuer` mints for itself, signed by `issuer`, the grant attached. */
function selfRevoke(issuer: typeof mallory): Uint8Array {
  const g = mint(issuer, issuer, 'tools', ['read'], 1_000n, rng);
  return frameMessage(encodeWireMessage({ kind: 'revoke', revocation: signRevocation(grantId(g.grant), issuer, rng(16)), grant: g.grant }));
}

async function metric(node: Awaited<ReturnType<typeof liveNode>>, name: string): Promise<string> {
  return await node.metrics.registry.getSingleMetricAsString(name);
}

describe('sealed denies a caller causes at will', () => {
  test('a self-minted root grant flooding a live node: receipts stop at the peer’s burst, then at the global one; a trusted caller is still served', async () => {
    const node = await liveNode(
      {
        resources: guarded,
        abuse: { burst: 5, refill_per_s: 0, deny_burst: 8, deny_refill_per_s: 0 },
        snapshot: snapshotOff,
      },
      { clockS: () => clock },
      folder(),
    );
    const own = mint(mallory, mallory, 'tools', ['read'], 1_000_000n, rng);
    const m1 = await RawConn.open(node.port, '127.0.0.2');
    const got = await outcomes(m1, calls(own, mallory, 20, 'a'));
    expect(got).toEqual([...Array(5).fill('untrusted-root'), ...Array(15).fill(NodeErrorCodes.RATE_LIMITED)]);
    expect(node.enforcer.nextSeq).toBe(5);
    // A second stranger's address has its own bucket, but the global one has 3 tokens left.
    const m2 = await RawConn.open(node.port, '127.0.0.3');
    const own2 = mint(carol, carol, 'tools', ['read'], 1_000_000n, rng);
    const got2 = await outcomes(m2, calls(own2, carol, 10, 'b'));
    expect(got2).toEqual([...Array(3).fill('untrusted-root'), ...Array(7).fill(NodeErrorCodes.RATE_LIMITED)]);
    expect(node.enforcer.nextSeq).toBe(8);
    // bob, whose grant alice (the trust root) issued, draws on no deny bucket: allowed, sealed.
    const g = mint(alice, bob, 'tools', ['read'], 1_000_000n, rng);
    const c = await JcpClient.connect({ host: '127.0.0.1', port: node.port, signer: bob });
    expect((await c.call({ chain: [g], action: 'read', payload: { ok: 1 }, now: clock })).decision).toEqual({ verdict: 'allow' });
    expect(node.enforcer.nextSeq).toBe(9);
    expect(await metric(node, 'jcp_rate_limited_total')).toContain('jcp_rate_limited_total 22');
    await c.close();
    m1.destroy();
    m2.destroy();
    await node.cleanup();
  });
});

describe('the record policy for revocations and amendments', () => {
  test('strict (default): a stranger’s revocation of its own grant is refused issuer-refused over jcp/1 and from the feed, never kept; the trust root’s is', async () => {
    let sink: RevocationSink | undefined;
    const feed = {
      name: 'test-feed',
      start: async (s: RevocationSink) => {
        sink = s;
      },
      stop: async () => undefined,
    };
    const node = await liveNode(
      { resources: guarded, snapshot: snapshotOff },
      { clockS: () => clock, revocationFeeds: [feed as never] },
      folder(),
    );
    const m = await RawConn.open(node.port, '127.0.0.4');
    expect(await outcomes(m, [selfRevoke(mallory), selfRevoke(mallory)])).toEqual([
      NodeErrorCodes.ISSUER_REFUSED,
      NodeErrorCodes.ISSUER_REFUSED,
    ]);
    const own = mint(mallory, mallory, 'tools', ['read'], 1_000n, rng);
    const fromFeed = await sink!.submit(signRevocation(grantId(own.grant), mallory, rng(16)), own.grant);
    expect(fromFeed.ok ? 'taken' : fromFeed.error.code).toBe(NodeErrorCodes.ISSUER_REFUSED);
    expect(node.revocations.admittedCount).toBe(0);
    expect(await outcomes(m, [selfRevoke(alice)])).toEqual(['revoked']);
    expect(node.revocations.admittedCount).toBe(1);
    const text = await metric(node, 'jcp_records_refused_total');
    expect(text).toContain('jcp_records_refused_total{kind="revocation",source="wire",reason="issuer"} 2');
    expect(text).toContain('jcp_records_refused_total{kind="revocation",source="cluster",reason="issuer"} 1');
    m.destroy();
    await node.cleanup();
  });

  test('an issuer of a grant the node decided is vouched for; its records draw on its own bucket (record-limit past it)', async () => {
    const node = await liveNode(
      { resources: guarded, abuse: { record_burst: 2, record_refill_per_s: 0 }, snapshot: snapshotOff },
      { clockS: () => clock },
      folder(),
    );
    const m = await RawConn.open(node.port, '127.0.0.5');
    // bob is no trust root and has issued nothing the node decided yet.
    expect(await outcomes(m, [selfRevoke(bob)])).toEqual([NodeErrorCodes.ISSUER_REFUSED]);
    const root = mint(alice, bob, 'tools', ['read'], 10_000n, rng);
    const child = attenuate(root, { subject: carol.did, budget_uj: 1_000n, nonce: rng(16) }, bob);
    if (!child.ok) throw new Error(child.error.why);
    const call = frameMessage(
      encodeWireRequest(request(carol, [root, child.value], { now: clock, payload: new TextEncoder().encode('{"c":1}') })),
    );
    expect(await outcomes(m, [call])).toEqual(['allow']);
    // Now bob issued a link of a decided chain: vouched for, within its bucket of 2.
    expect(await outcomes(m, [selfRevoke(bob), selfRevoke(bob), selfRevoke(bob)])).toEqual([
      'revoked',
      'revoked',
      NodeErrorCodes.RECORD_LIMIT,
    ]);
    expect(await metric(node, 'jcp_records_refused_total')).toContain(
      'jcp_records_refused_total{kind="revocation",source="wire",reason="rate"} 1',
    );
    m.destroy();
    await node.cleanup();
  });

  test('the revocation set is bounded: past max_revocations strangers get record-limit, a trust root’s revocation is still admitted, none evicted', async () => {
    const node = await liveNode(
      { resources: guarded, abuse: { record_policy: 'open', record_burst: 0, max_revocations: 3 }, snapshot: snapshotOff },
      { clockS: () => clock },
      folder(),
    );
    const m = await RawConn.open(node.port, '127.0.0.6');
    expect(await outcomes(m, [selfRevoke(mallory), selfRevoke(mallory), selfRevoke(mallory), selfRevoke(mallory)])).toEqual([
      'revoked',
      'revoked',
      'revoked',
      NodeErrorCodes.RECORD_LIMIT,
    ]);
    expect(await outcomes(m, [selfRevoke(alice)])).toEqual(['revoked']);
    expect(node.revocations.admittedCount).toBe(4);
    expect(await metric(node, 'jcp_records_refused_total')).toContain(
      'jcp_records_refused_total{kind="revocation",source="wire",reason="full"} 1',
    );
    m.destroy();
    await node.cleanup();
  });

  test('a stranger’s amendment of its own grant is refused issuer-refused over jcp/1 and from the feed, and counted', async () => {
    let sink: RevocationSink | undefined;
    const feed = {
      name: 'test-feed',
      start: async (s: RevocationSink) => {
        sink = s;
      },
      stop: async () => undefined,
    };
    const node = await liveNode(
      { resources: guarded, snapshot: snapshotOff },
      { clockS: () => clock, revocationFeeds: [feed as never] },
      folder(),
    );
    const run = mint(mallory, bob, 'tools', ['read'], 1_000n, rng);
    const cp = makeCheckpoint(run, contentId({ step: 1 }), bob, rng(16));
    if (!cp.ok) throw new Error(cp.error.why);
    const sa = amend(cp.value, run, { budget_uj: 500n, nonce: rng(16) }, mallory);
    if (!sa.ok) throw new Error(sa.error.why);
    const m = await RawConn.open(node.port, '127.0.0.7');
    expect(
      await outcomes(m, [frameMessage(encodeWireMessage({ kind: 'amend', grant: run, checkpoint: cp.value, amendment: sa.value }))]),
    ).toEqual([NodeErrorCodes.ISSUER_REFUSED]);
    const fromFeed = await sink!.amend!(run, cp.value, sa.value);
    expect(fromFeed.ok ? 'applied' : fromFeed.error.code).toBe(NodeErrorCodes.ISSUER_REFUSED);
    expect(node.amendments.steered(grantId(run.grant))).toBe(false);
    const text = await metric(node, 'jcp_records_refused_total');
    expect(text).toContain('jcp_records_refused_total{kind="amendment",source="wire",reason="issuer"} 1');
    expect(text).toContain('jcp_records_refused_total{kind="amendment",source="cluster",reason="issuer"} 1');
    m.destroy();
    await node.cleanup();
  });

  test('the amendment set is bounded: past max_amendments strangers get record-limit, a trust root’s amendment is still applied, the one in force still answered', async () => {
    const node = await liveNode(
      { resources: guarded, abuse: { record_policy: 'open', record_burst: 0, max_amendments: 2 }, snapshot: snapshotOff },
      { clockS: () => clock },
      folder(),
    );
    /** An `amend` frame of a fresh grant `issuer` gives bob, steered by `issuer`. */
    const amendOf = (issuer: typeof mallory): Uint8Array => {
      const run = mint(issuer, bob, 'tools', ['read'], 1_000n, rng);
      const cp = makeCheckpoint(run, contentId({ step: 1 }), bob, rng(16));
      if (!cp.ok) throw new Error(cp.error.why);
      const sa = amend(cp.value, run, { budget_uj: 500n, nonce: rng(16) }, issuer);
      if (!sa.ok) throw new Error(sa.error.why);
      return frameMessage(encodeWireMessage({ kind: 'amend', grant: run, checkpoint: cp.value, amendment: sa.value }));
    };
    const m = await RawConn.open(node.port, '127.0.0.8');
    const first = amendOf(mallory);
    expect(await outcomes(m, [first, amendOf(mallory), amendOf(mallory), amendOf(carol)])).toEqual([
      'amended',
      'amended',
      NodeErrorCodes.RECORD_LIMIT,
      NodeErrorCodes.RECORD_LIMIT,
    ]);
    expect(await outcomes(m, [first, amendOf(alice)])).toEqual(['amended', 'amended']);
    expect(node.amendments.size).toBe(3);
    expect(await metric(node, 'jcp_records_refused_total')).toContain(
      'jcp_records_refused_total{kind="amendment",source="wire",reason="full"} 2',
    );
    m.destroy();
    await node.cleanup();
  });
});
