/**
 * The core bench (docs/crypto-policy.md; README "Figures"): each figure against a floor measured in the same run, with
 * seeded inputs (keys, nonces, grants) so two runs measure the same work.
 *
 * - decide() on a cached one-link grant, signature work excluded (its verification is cached,
 *   its id memoized): decisions/s, goal ≥ 200,000. Floor: the same decision's cheapest possible
 *   core, a ledger lookup plus the bigint budget comparison (shows what the checks cost on top).
 * - sealing a receipt (core → det-CBOR → Sig_structure → Ed25519 → COSE_Sign1) vs one bare
 *   node:crypto Ed25519 signature of the same Sig_structure bytes: goal ratio ≤ 1.25.
 * - verifying an uncached depth-8 chain (grants freshly decoded objects, never verified before:
 *   8 encodings, 8 BLAKE3 ids, 7 hop checks, 8 signature checks) vs eight bare node:crypto
 *   verifications of the same bytes with ready key objects: goal ratio ≤ 1.15.
 * - content id of a grant (a fresh grant object, so nothing is memoized) vs one bare det-CBOR
 *   encoding with cborg plus one BLAKE3 (hash-wasm) of those bytes and its hex: goal ratio ≤ 2.
 *   An extra figure without a goal shows the id against the BLAKE3 + hex of ready bytes alone.
 * - decoding a one-link wire request body (§11; no goal, to watch the det-CBOR fast path): the
 *   strict canonical decode, and the whole message decode (strict decode, schema, the grant read),
 *   each vs a plain cborg decode of the same bytes (no canonical checks).
 */
import { verify as nodeVerify, sign as nodeSign } from 'node:crypto';
import { decode as cborgDecode, encode as cborgEncode, rfc8949EncodeOptions } from 'cborg';
import { createBLAKE3 } from 'hash-wasm';
import {
  type Actor,
  attenuate,
  contentId,
  type ContentId,
  decide,
  type DecisionRequest,
  type DecisionState,
  decode,
  decodeWireMessage,
  encode,
  encodeWireRequest,
  type Frame,
  type Grant,
  grantId,
  grantToCbor,
  jcrProtectedHeader,
  Ledger,
  newActor,
  payloadHash,
  receiptCoreFor,
  receiptCoreToCbor,
  sealReceipt,
  seededRng,
  type SignedGrant,
  signGrant,
  signWireRequestSync,
  sigStructure,
  TrustRoots,
  verifyChain,
} from '../core/index.ts';
import { type Figure, median, opsPerSecond, paired, type SuiteOptions, sig } from './figures.ts';

const NOW_S = 1_800_000_000;
const CHAIN_DEPTH = 8;
/** Depth-8 chains minted for the chain figure (each verified once). */
const CHAINS = 1_200;

/** Runs the core suite. */
export async function run({ seed }: SuiteOptions): Promise<Figure[]> {
  const rng = seededRng(`bench/core/${seed}`);
  const figures: Figure[] = [];
  figures.push(...decideFigures(rng));
  figures.push(sealFigure(rng));
  figures.push(chainFigure(rng));
  figures.push(...(await contentIdFigures(rng)));
  figures.push(...decodeFigures(rng));
  return figures;
}

function oneLink(rng: (n: number) => Uint8Array) {
  const issuer = newActor(rng);
  const agent = newActor(rng);
  const resource = contentId({ tool: 'filesystem', root: '/srv/data' });
  const g: Grant = {
    issuer: issuer.did,
    subject: agent.did,
    capability: { resource, actions: ['read_file', 'list_directory', 'write_file'] },
    budget_uj: 10n ** 15n,
    expiry: NOW_S + 86_400,
    nonce: rng(16),
  };
  const sg = signGrant(g, issuer);
  const id = grantId(g);
  const frame: Frame = {
    kind: 'tool-call',
    trust: 'control',
    grant_id: id,
    action: 'read_file',
    resource,
    payload_hash: contentId({ path: '/srv/data/report.csv' }),
  };
  const req: DecisionRequest = { frame, chain: [sg], caller: agent.did, cost: { uj: 250_000n, provenance: 'ModelBased' }, nowS: NOW_S };
  const ledger = new Ledger();
  ledger.debit([id], 3_000_000n);
  const state: DecisionState = { ledger, revoked: new Set<ContentId>(), trust: new TrustRoots({ [resource]: [issuer.did] }) };
  const first = decide(req, state);
  if (first.verdict !== 'allow') throw new Error(`bench setup: expected allow, got ${JSON.stringify(first.deny)}`);
  return { issuer, agent, g, sg, id, req, state, ledger };
}

function decideFigures(rng: (n: number) => Uint8Array): Figure[] {
  const { req, state, ledger, id, g } = oneLink(rng);
  const rates: number[] = [];
  const floors: number[] = [];
  opsPerSecond(() => decide(req, state), 300, 300);
  for (let r = 0; r < 3; r++) {
    rates.push(opsPerSecond(() => decide(req, state), 1_000, 50).opsPerS);
    floors.push(opsPerSecond(() => ledger.spent(id) + req.cost.uj <= g.budget_uj, 300, 50).opsPerS);
  }
  const value = median(rates);
  const floor = median(floors);
  return [
    {
      name: 'decide() one-link cached grant (floor: ledger lookup + compare)',
      value: sig(value),
      unit: 'decisions/s',
      floor: sig(floor),
      ratio: sig(value / floor),
      goal: '≥ 200000 decisions/s',
      met: value >= 200_000,
    },
  ];
}

function sealFigure(rng: (n: number) => Uint8Array): Figure {
  const { req, state } = oneLink(rng);
  const steward = newActor(rng);
  const decision = decide(req, state);
  const N = 256;
  const cores = Array.from({ length: N }, (_, i) =>
    receiptCoreFor(req, decision, { steward: steward.did, seq: 1_000 + i, prev: contentId({ seq: i }), requestId: contentId({ req: i }) }),
  );
  const protectedBytes = jcrProtectedHeader(new TextEncoder().encode(steward.did));
  const tbs = cores.map((c) => sigStructure(protectedBytes, encode(receiptCoreToCbor(c))));
  const key = steward.key.keyObject;
  const v = paired(
    (i) => sealReceipt(cores[i % N]!, steward),
    (i) => nodeSign(null, tbs[i % N]!, key),
    { budgetMs: 4_000, batch: 4, warmupPairs: 100 },
  );
  return {
    name: 'seal receipt vs bare Ed25519 sign (×)',
    value: sig(v.valueUs),
    unit: 'µs',
    floor: sig(v.floorUs),
    ratio: sig(v.ratio, 3),
    goal: 'ratio ≤ 1.25',
    met: v.ratio <= 1.25,
  };
}

/** Mints `count` depth-8 chains over the same nine actors (keys recur, grants never do). */
function mintChains(rng: (n: number) => Uint8Array, actors: readonly Actor[], count: number): SignedGrant[][] {
  const resource = contentId({ tool: 'memory', graph: 'bench' });
  const out: SignedGrant[][] = [];
  for (let c = 0; c < count; c++) {
    const root = signGrant(
      {
        issuer: actors[0]!.did,
        subject: actors[1]!.did,
        capability: { resource, actions: ['read_graph', 'search_nodes', 'create_entities'] },
        budget_uj: 10n ** 12n,
        expiry: NOW_S + 86_400,
        delegate_depth: CHAIN_DEPTH,
        nonce: rng(16),
      },
      actors[0]!,
    );
    const chain = [root];
    for (let k = 1; k < CHAIN_DEPTH; k++) {
      const child = attenuate(
        chain[k - 1]!,
        { subject: actors[k + 1]!.did, budget_uj: 10n ** 12n - BigInt(k) * 1_000n, expiry: NOW_S + 86_400 - k, nonce: rng(16) },
        actors[k]!,
      );
      if (!child.ok) throw new Error(`bench setup: attenuation refused: ${child.error.why}`);
      chain.push(child.value);
    }
    out.push(chain);
  }
  return out;
}

/** A deep copy with fresh objects, as a decoder would hand them over: no memoized bytes or ids. */
function fresh(sg: SignedGrant): SignedGrant {
  const g = sg.grant;
  return {
    grant: {
      ...g,
      capability: { resource: g.capability.resource, actions: [...g.capability.actions] },
      nonce: new Uint8Array(g.nonce),
    },
    signature: new Uint8Array(sg.signature),
  };
}

function chainFigure(rng: (n: number) => Uint8Array): Figure {
  const actors = Array.from({ length: CHAIN_DEPTH + 1 }, () => newActor(rng));
  const warmupPairs = 50;
  const minted = mintChains(rng, actors, CHAINS);
  const chains = minted.map((c) => c.map(fresh));
  // The floor's inputs: the same bytes, signatures and key objects, prepared outside the timing.
  const bare = minted.map((c) =>
    c.map((sg, k) => ({ bytes: encode(grantToCbor(sg.grant)), sig: sg.signature, key: actors[k]!.key.publicKey.keyObject })),
  );
  let bad = 0;
  const verifyOne = (i: number) => {
    const r = verifyChain(chains[i]!);
    if (!r.ok) bad++;
    return r;
  };
  const bareOne = (i: number) => {
    let good = 0;
    for (const b of bare[i]!) if (nodeVerify(null, b.bytes, b.key, b.sig)) good++;
    if (good !== CHAIN_DEPTH) bad++;
    return good;
  };
  // One chain per pair, each chain verified once: never seen before, so nothing is cached.
  const v = paired(verifyOne, bareOne, { budgetMs: 6_000, batch: 1, maxPairs: CHAINS - warmupPairs, warmupPairs });
  if (bad > 0) throw new Error(`bench: ${bad} chain verifications failed`);
  return {
    name: 'verify uncached depth-8 chain vs 8 bare verifies (×)',
    value: sig(v.valueUs),
    unit: 'µs',
    floor: sig(v.floorUs),
    ratio: sig(v.ratio, 3),
    goal: 'ratio ≤ 1.15',
    met: v.ratio <= 1.15,
  };
}

async function contentIdFigures(rng: (n: number) => Uint8Array): Promise<Figure[]> {
  const actors = [newActor(rng), newActor(rng)];
  const N = 512;
  const grants: Grant[] = Array.from({ length: N }, (_, i) => ({
    issuer: actors[0]!.did,
    subject: actors[1]!.did,
    capability: { resource: contentId({ tool: 'fs', i }), actions: ['read_file', 'write_file'] },
    budget_uj: 5_000_000n + BigInt(i),
    expiry: NOW_S + i,
    delegate_depth: 3,
    nonce: rng(16),
  }));
  const hasher = await createBLAKE3(256);
  const bareCid = (g: Grant): string => {
    const bytes = cborgEncode(
      {
        issuer: g.issuer,
        subject: g.subject,
        capability: { resource: g.capability.resource, actions: g.capability.actions },
        budget_uj: g.budget_uj,
        expiry: g.expiry,
        delegate_depth: g.delegate_depth,
        nonce: g.nonce,
      },
      rfc8949EncodeOptions,
    );
    hasher.init();
    hasher.update(bytes);
    return hasher.digest('hex');
  };
  for (const g of grants.slice(0, 4)) if (bareCid(g) !== grantId({ ...g })) throw new Error('bench: bare content id differs from grantId');
  const ready = grants.map((g) => encode(grantToCbor(g)));
  const hashOnly = (b: Uint8Array): string => {
    hasher.init();
    hasher.update(b);
    return hasher.digest('hex');
  };
  const vsEncode = paired(
    (i) => grantId({ ...grants[i % N]! }),
    (i) => bareCid({ ...grants[i % N]! }),
    { budgetMs: 3_000, batch: 16, warmupPairs: 100 },
  );
  const vsHash = paired(
    (i) => grantId({ ...grants[i % N]! }),
    (i) => hashOnly(ready[i % N]!),
    { budgetMs: 1_500, batch: 16, warmupPairs: 100 },
  );
  return [
    {
      name: 'grant content id vs bare det-CBOR + BLAKE3 (×)',
      value: sig(vsEncode.valueUs),
      unit: 'µs',
      floor: sig(vsEncode.floorUs),
      ratio: sig(vsEncode.ratio, 3),
      goal: 'ratio ≤ 2',
      met: vsEncode.ratio <= 2,
    },
    {
      name: 'grant content id vs BLAKE3 of ready bytes (×)',
      value: sig(vsHash.valueUs),
      unit: 'µs',
      floor: sig(vsHash.floorUs),
      ratio: sig(vsHash.ratio, 3),
    },
  ];
}

function decodeFigures(rng: (n: number) => Uint8Array): Figure[] {
  const { agent, sg, req } = oneLink(rng);
  const body = encodeWireRequest(
    signWireRequestSync(
      { frame: { ...req.frame, payload_hash: payloadHash() }, chain: [sg], caller: agent.did, cost: req.cost, now: NOW_S },
      agent,
    ),
  );
  const bare = () => cborgDecode(body);
  const strict = paired(() => decode(body), bare, { budgetMs: 1_500, batch: 16, warmupPairs: 100 });
  const message = paired(() => decodeWireMessage(body), bare, { budgetMs: 1_500, batch: 16, warmupPairs: 100 });
  return [
    {
      name: 'strict det-CBOR decode of a wire request vs plain cborg decode (×)',
      value: sig(strict.valueUs),
      unit: 'µs',
      floor: sig(strict.floorUs),
      ratio: sig(strict.ratio, 3),
    },
    {
      name: 'decodeWireMessage of a wire request vs plain cborg decode (×)',
      value: sig(message.valueUs),
      unit: 'µs',
      floor: sig(message.floorUs),
      ratio: sig(message.ratio, 3),
    },
  ];
}
