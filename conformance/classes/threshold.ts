/**
 * Conformance class C13 (spec §11 caller authentication, §2.2 threshold actors): over a live
 * socket an impersonated caller is denied `bad-signature` (and the refusal is sealed); a 2-of-3
 * FROST actor made by the product's trusted dealer (frost/dealer.ts, RFC 9591 App. C) signs
 * through the product's rounds (frost/sign.ts: commit, package check, share, verify, aggregate),
 * and the node accepts the aggregate like any caller's signature; one share alone cannot produce
 * an accepted signature: the product refuses a one-signer package, and the node denies a single share's "signature" `bad-signature` and debits nothing.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import {
  type Actor,
  grantId,
  newActor,
  openReceipt,
  parseDid,
  payloadHash,
  type Rng,
  seededRng,
  type SignedGrant,
  sign,
  signGrant,
  signWireRequest,
  signWireRequestSync,
  type UnsignedWireRequest,
  verify,
} from '../../core/index.ts';
import {
  aggregate,
  commit,
  type DealtShare,
  deal,
  FrostErrorCodes,
  type SigningPackage,
  signShare,
  soloSignature,
} from '../../frost/index.ts';
import { configFromJson, resourceIdOf, startNode } from '../../node/index.ts';
import { JcpClient } from '../../client/index.ts';
import type { Checker } from '../checker.ts';
import type { ConformanceClass } from '../runner.ts';

/** C13: impersonation is denied bad-signature; 2-of-3 signs, one share cannot. */
export const C13: ConformanceClass = {
  id: 'C13',
  title: 'caller-signed wire + threshold',
  async run(t) {
    const fx = teamFixture();
    checkRoundRefusals(t, fx);
    const v = await startVault(fx);
    try {
      await checkImpersonation(t, fx, v);
      await checkThresholdCalls(t, fx, v);
    } finally {
      await v.close();
    }
  },
};

/** The dealt 2-of-3 team (spec §2.2; RFC 9591 App. C): its group, its did:key and its three shares. */
type Team = Extract<ReturnType<typeof deal>, { ok: true }>['value'];

/** C13's actors: the issuer, the agent, mallory, the 2-of-3 team, and the seeded rng they came from. */
interface TeamFixture {
  readonly rng: Rng;
  readonly issuer: Actor;
  readonly agent: Actor;
  readonly mallory: Actor;
  readonly resource: string;
  readonly group: Team['group'];
  readonly team: string;
  readonly shares: Team['shares'];
}

/** The actors of C13 from the seeded rng `conformance/C13`; throws when the product's dealer refuses. */
function teamFixture(): TeamFixture {
  const rng = seededRng('conformance/C13');
  const issuer = newActor(rng);
  const agent = newActor(rng);
  const mallory = newActor(rng);
  const resource = resourceIdOf('c13-vault');
  // A 2-of-3 team key from the product's dealer; the group key is an ordinary did:key.
  const dealt = deal({ min: 2, max: 3 }, rng);
  if (!dealt.ok) throw new Error(`C13: the dealer refused: ${dealt.error.why}`);
  const { group, did: team, shares } = dealt.value;
  return { rng, issuer, agent, mallory, resource, group, team, shares };
}

/** A FROST result as its fault code, or `ok`. */
function code(r: { ok: true } | { ok: false; error: { code: string } }): string {
  return r.ok ? 'ok' : r.error.code;
}

/**
 * A signer over `signers`' shares: both rounds and the aggregate, all through frost/sign.ts
 * (RFC 9591 §5); the signer throws an Error whose message is the fault code when refused.
 */
function thresholdSign({ group, rng }: TeamFixture, signers: readonly DealtShare[]): (msg: Uint8Array) => Uint8Array {
  return (msg) => {
    const rounds = signers.map((s) => ({ s, ...commit(s, rng) }));
    const pkg: SigningPackage = { message: msg, commitments: rounds.map((r) => r.commitment) };
    const sigShares = new Map<number, Uint8Array>();
    for (const r of rounds) {
      const z = signShare(group, r.s, r.nonces, r.commitment, pkg);
      if (!z.ok) throw new Error(z.error.code);
      sigShares.set(r.s.identifier, z.value);
    }
    const sig = aggregate(group, pkg, sigShares);
    if (!sig.ok) throw new Error(sig.error.code);
    return sig.value;
  };
}

/** What `f` threw (its message), or `signed` when it did not throw. */
function refusedWith(f: () => unknown): string {
  try {
    f();
    return 'signed';
  } catch (e) {
    return (e as Error).message;
  }
}

/**
 * The product's rounds refuse what one share (or a cheating coordinator) would need: a
 * one-signer package, an altered or doubled commitment (`bad-package`), a reused nonce, a
 * corrupted share (naming its signer); two shares aggregate to a plain Ed25519 signature.
 */
function checkRoundRefusals(t: Checker, fx: TeamFixture): void {
  const { rng, group, team, shares } = fx;
  const probe = new TextEncoder().encode('c13 probe');
  t.eq(
    refusedWith(() => thresholdSign(fx, [shares[1]!])(probe)),
    FrostErrorCodes.BAD_PACKAGE,
    'a one-signer signing package is refused by the participant',
  );
  const r1 = commit(shares[0]!, rng);
  const r2 = commit(shares[1]!, rng);
  const pkg: SigningPackage = { message: probe, commitments: [r1.commitment, r2.commitment] };
  const other = commit(shares[0]!, rng).commitment;
  t.eq(
    code(signShare(group, shares[0]!, r1.nonces, r1.commitment, { ...pkg, commitments: [other, r2.commitment] })),
    FrostErrorCodes.BAD_PACKAGE,
    'a package that alters the participant’s commitment is refused',
  );
  t.eq(
    code(signShare(group, shares[0]!, r1.nonces, r1.commitment, { ...pkg, commitments: [r1.commitment, r1.commitment] })),
    FrostErrorCodes.BAD_PACKAGE,
    'a package naming one signer twice is refused',
  );
  const z1 = signShare(group, shares[0]!, r1.nonces, r1.commitment, pkg);
  const z2 = signShare(group, shares[1]!, r2.nonces, r2.commitment, pkg);
  t.eq(code(signShare(group, shares[0]!, r1.nonces, r1.commitment, pkg)), FrostErrorCodes.NONCE_USED, 'a nonce pair is used once');
  if (!z1.ok || !z2.ok) throw new Error('C13: a valid package was refused');
  const bad = z2.value.slice();
  bad[0] = bad[0]! ^ 1;
  const r = aggregate(
    group,
    pkg,
    new Map([
      [1, z1.value],
      [2, bad],
    ]),
  );
  t.eq(
    r.ok ? 'aggregated' : [r.error.code, r.error.culprits.map((c) => c.identifier)],
    [FrostErrorCodes.BAD_SIGNATURE_SHARE, [2]],
    'a corrupted share is refused, naming its signer',
  );
  const good = aggregate(
    group,
    pkg,
    new Map([
      [1, z1.value],
      [2, z2.value],
    ]),
  );
  t.ok(good.ok && verify(parseDid(team), probe, good.value), 'the 2-of-3 aggregate verifies as an ordinary Ed25519 signature');
}

/**
 * A live node guarding `c13-vault` (loopback port, temp data dir) with a client, the
 * 10,000 µJ grants for the agent and for the team, and `unsigned` (an unsigned 100 µJ
 * `release` request numbered `n`); `close` stops both and removes the dir.
 */
interface Vault {
  readonly node: Awaited<ReturnType<typeof startNode>>;
  readonly client: JcpClient;
  readonly forAgent: SignedGrant;
  readonly forTeam: SignedGrant;
  unsigned(chainGrant: SignedGrant, caller: string, n: number): UnsignedWireRequest;
  close(): Promise<void>;
}

/** Mints the two grants (in that order, from the fixture's rng) and starts the node and client of {@link Vault}. */
async function startVault(fx: TeamFixture): Promise<Vault> {
  const { rng, issuer, agent, team, resource } = fx;
  const g = (subject: string) =>
    signGrant(
      { issuer: issuer.did, subject, capability: { resource, actions: ['release'] }, budget_uj: 10_000n, expiry: 0, nonce: rng(16) },
      issuer,
    );
  const forAgent = g(agent.did);
  const forTeam = g(team);

  const dir = mkdtempSync(path.join(tmpdir(), 'jcp-c13-'));
  const node = await startNode(
    configFromJson({
      listen: '127.0.0.1:0',
      data_dir: dir,
      resources: [{ name: 'c13-vault', trust_roots: [issuer.did] }],
      meter: { default_estimate_uj: 0, rungs: ['estimator'] },
    }),
    { logger: pino({ level: 'silent' }) },
  );
  const client = await JcpClient.connect({ host: '127.0.0.1', port: node.port });
  const unsigned = (chainGrant: SignedGrant, caller: string, n: number) => {
    const payload = new TextEncoder().encode(`{"n":${n}}`);
    return {
      frame: {
        kind: 'tool-call' as const,
        trust: 'control' as const,
        grant_id: grantId(chainGrant.grant),
        action: 'release',
        resource,
        payload_hash: payloadHash(payload),
      },
      chain: [chainGrant],
      caller,
      cost: { uj: 100n, provenance: 'Estimator' as const },
      now: Math.floor(Date.now() / 1000),
      payload,
    };
  };
  const close = async () => {
    await client.close();
    await node.close();
    rmSync(dir, { recursive: true, force: true });
  };
  return { node, client, forAgent, forTeam, unsigned, close };
}

/**
 * Caller authentication (spec §11): mallory signing as the agent is denied `bad-signature`,
 * sealed and not debited; the genuine agent is allowed; the agent's or a stranger's key naming
 * the team is denied `bad-signature`.
 */
async function checkImpersonation(
  t: Checker,
  { agent, mallory, team }: TeamFixture,
  { node, client, forAgent, forTeam, unsigned }: Vault,
): Promise<void> {
  // Impersonation: mallory signs a request that names the agent as caller.
  const forged = await signWireRequest(unsigned(forAgent, agent.did, 1), (m) => sign(mallory.key, m));
  const denied = await client.callRequest(forged);
  t.eq(denied.decision, { verdict: 'deny', deny_reason: 'bad-signature' }, 'an impersonated caller is denied bad-signature');
  const dc = openReceipt(denied.receipt, node.did);
  t.ok(dc.ok && dc.value.verdict === 'deny' && dc.value.deny_reason === 'bad-signature', 'the refused impersonation is sealed as evidence');
  t.eq(node.ledger.spent(grantId(forAgent.grant)), 0n, 'the impersonation debits nothing');
  const genuine = await client.callRequest(signWireRequestSync(unsigned(forAgent, agent.did, 2), agent));
  t.eq(genuine.decision, { verdict: 'allow' }, 'the genuine caller is allowed');

  // Wrong callers: the agent's key naming the team; mallory's key naming the team.
  for (const [who, key] of [
    ['the agent', agent],
    ['a stranger', mallory],
  ] as const) {
    const r = await client.callRequest(await signWireRequest(unsigned(forTeam, team, key === agent ? 10 : 11), (m) => sign(key.key, m)));
    t.eq(r.decision, { verdict: 'deny', deny_reason: 'bad-signature' }, `${who}'s key signing as the team is denied bad-signature`);
  }
}

/**
 * Threshold callers (spec §2.2): any two shares' aggregate is accepted and debited (3 × 100 µJ);
 * an aggregate over another request and each share's lone signature are denied `bad-signature`
 * and debit nothing.
 */
async function checkThresholdCalls(t: Checker, fx: TeamFixture, { node, client, forTeam, unsigned }: Vault): Promise<void> {
  const { team, shares } = fx;
  // Two of three shares sign through the product; the node accepts the aggregate.
  const two = thresholdSign(fx, [shares[0]!, shares[1]!]);
  const byTeam = await client.callRequest(await signWireRequest(unsigned(forTeam, team, 3), two));
  t.eq(byTeam.decision, { verdict: 'allow' }, 'the node accepts a 2-of-3 threshold caller (shares 1, 2)');
  const other = await client.callRequest(await signWireRequest(unsigned(forTeam, team, 4), thresholdSign(fx, [shares[0]!, shares[2]!])));
  t.eq(other.decision, { verdict: 'allow' }, 'any two shares will do (shares 1, 3)');
  const last = await client.callRequest(await signWireRequest(unsigned(forTeam, team, 5), thresholdSign(fx, [shares[2]!, shares[1]!])));
  t.eq(last.decision, { verdict: 'allow' }, 'any two shares will do (shares 3, 2)');
  t.eq(node.ledger.spent(grantId(forTeam.grant)), 300n, 'threshold calls are debited like any other');

  // An aggregate made for another request is not a signature of this one.
  const replayed = await signWireRequest(unsigned(forTeam, team, 7), () => byTeam.request.signature);
  t.eq(
    (await client.callRequest(replayed)).decision,
    { verdict: 'deny', deny_reason: 'bad-signature' },
    'an aggregate over another request is denied bad-signature',
  );

  // One share alone cannot sign: each share's own Schnorr signature is denied by the node.
  for (const sh of shares) {
    const lone = await client.callRequest(await signWireRequest(unsigned(forTeam, team, 20 + sh.identifier), (m) => soloSignature(sh, m)));
    t.eq(
      lone.decision,
      { verdict: 'deny', deny_reason: 'bad-signature' },
      `a signature from share ${sh.identifier} alone is denied bad-signature`,
    );
  }
  t.eq(node.ledger.spent(grantId(forTeam.grant)), 300n, 'the refused attempts debit nothing');
}
