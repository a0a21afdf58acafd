/**
 * The FROST group-arithmetic bench (docs/frost.md): the libsodium and noble
 * implementations of `frost/curve.ts` side by side in one run, each with its holders as
 * processes (`JCP_FROST_GROUP` selects the implementation in the children).
 *
 * Figures per implementation: a 2-of-3 signing session over NATS (coordinator call → verified
 * aggregate) p50, and a DKG 3-of-5 (first invite → last confirmation) p50, each against its floor
 * measured in this run: the same rounds back to back in this process with the same
 * implementation. Goals (sodium, the default): signing p50 ≤ 10 ms, DKG 3-of-5 p50 ≤
 * 150 ms, each printed as met or MISSED; the load average at the start and end of the run too.
 * Also the unit costs of one base and one variable-base scalar multiplication per implementation.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { parseDid, type Rng, seededRng, utf8, verify } from '../core/index.ts';
import { type Curve, curves, useCurve } from '../frost/index.ts';
import {
  aggregate,
  commit,
  deal,
  dkgRound1,
  dkgRound2,
  dkgRound3,
  frostStreams,
  natsBus,
  natsRegistry,
  runDkg,
  shareRecord,
  signShare,
  signWithGroup,
  warmUp,
  writeShareFile,
} from '../frost/index.ts';
import { ParticipantCluster } from '../testkit/index.ts';
import { type Figure, loadFigure, median, type SuiteOptions, sig } from './figures.ts';

const NATS_URL = process.env['JCP_NATS_URL'] ?? 'nats://127.0.0.1:4222';
const SIGN_RUNS = 30;
const DKG_RUNS = 5;
const WARMUP = 2;

function fig(name: string, value: number, floor?: number, goal?: { text: string; met: boolean }): Figure {
  return {
    name,
    value: sig(value, 4),
    unit: 'ms',
    ...(floor !== undefined ? { floor: sig(floor, 4), ratio: sig(value / floor, 3) } : {}),
    ...(goal ? { goal: goal.text, met: goal.met } : {}),
  };
}

function libSignMs(d: ReturnType<typeof deal> & { ok: true }, msg: Uint8Array, rng: Rng): number {
  const { group, shares } = d.value;
  const t0 = performance.now();
  const signers = shares.slice(0, 2);
  const cs = signers.map((s) => commit(s, rng));
  const pkg = { message: msg, commitments: cs.map((c) => c.commitment) };
  const out = new Map<number, Uint8Array>();
  signers.forEach((s, i) => {
    const z = signShare(group, s, cs[i]!.nonces, cs[i]!.commitment, pkg);
    if (!z.ok) throw new Error(z.error.why);
    out.set(s.identifier, z.value);
  });
  const r = aggregate(group, pkg, out);
  if (!r.ok) throw new Error(r.error.why);
  return performance.now() - t0;
}

function libDkgMs(rng: Rng): number {
  const t0 = performance.now();
  const t = { min: 3, max: 5 };
  const r1 = Array.from({ length: 5 }, (_, i) => {
    const r = dkgRound1(i + 1, t, rng);
    if (!r.ok) throw new Error(r.error.why);
    return r.value;
  });
  const sent = r1.map((p, i) => {
    const r = dkgRound2(
      p.state,
      r1.filter((_, j) => j !== i).map((q) => q.package),
    );
    if (!r.ok) throw new Error(r.error.why);
    return r.value;
  });
  r1.forEach((p, i) => {
    const others = r1.filter((_, j) => j !== i);
    const r = dkgRound3(
      p.state,
      others.map((q) => q.package),
      new Map(others.map((q) => [q.package.identifier, sent[q.package.identifier - 1]!.get(i + 1)!])),
    );
    if (!r.ok) throw new Error(r.error.why);
  });
  return performance.now() - t0;
}

function unitCosts(c: Curve, figures: Figure[]): void {
  const was = useCurve(c);
  try {
    const k = new Uint8Array(32).fill(0x5a);
    k[31] = 0x0a;
    const P = c.baseMul(k);
    const n = 100;
    let t = performance.now();
    for (let i = 0; i < n; i++) c.baseMul(k);
    figures.push(fig(`${c.name}: one base scalar multiplication`, (performance.now() - t) / n));
    t = performance.now();
    for (let i = 0; i < n; i++) c.mul(P, k);
    figures.push(fig(`${c.name}: one variable-base scalar multiplication`, (performance.now() - t) / n));
    t = performance.now();
    for (let i = 0; i < n; i++) c.isElement(P);
    figures.push(fig(`${c.name}: one RFC 9591 element decode (subgroup check)`, (performance.now() - t) / n));
  } finally {
    useCurve(was);
  }
}

/** Runs the suite (needs the local NATS with JetStream). */
export async function run({ seed }: SuiteOptions): Promise<Figure[]> {
  const rng = seededRng(`bench/frost-group/${seed}`);
  warmUp();
  const figures: Figure[] = [loadFigure('start')];
  const d = deal({ min: 2, max: 3 }, rng);
  if (!d.ok) throw new Error('deal failed');
  const root = mkdtempSync(join(tmpdir(), 'jcp-bench-frost-group-'));
  const nc = await connect({ servers: NATS_URL });
  const prefixes: string[] = [];
  try {
    for (const c of [curves.sodium, curves.noble]) {
      unitCosts(c, figures);
      const prefix = `jcp.bench.frostg.${c.name}${randomBytes(4).toString('hex')}`;
      prefixes.push(prefix);
      const dir = join(root, c.name);
      for (let i = 1; i <= 5; i++) {
        const ks = join(dir, `p${i}`);
        mkdirSync(ks, { recursive: true, mode: 0o700 });
        const s = d.value.shares[i - 1];
        if (s) writeShareFile(join(ks, '2of3.share'), shareRecord(s.group, s.identifier, s.signingShare, s.identitySeed));
      }
      const cluster = await ParticipantCluster.start(5, { natsUrl: NATS_URL, prefix, env: { JCP_FROST_GROUP: c.name } }, dir);
      const was = useCurve(c);
      try {
        const bus = natsBus(nc);
        const registry = await natsRegistry(nc, prefix);
        const sess: number[] = [];
        const lib: number[] = [];
        for (let i = 0; i < SIGN_RUNS + WARMUP; i++) {
          const message = utf8(`bench frost-group ${c.name} ${i}`);
          const t0 = performance.now();
          const r = await signWithGroup({ bus, registry, prefix, group: d.value.did, message, timeoutMs: 30_000 });
          const t = performance.now() - t0;
          if (!verify(parseDid(d.value.did), message, r.signature)) throw new Error('bad aggregate');
          const l = libSignMs(d, message, rng);
          if (i < WARMUP) continue;
          sess.push(t);
          lib.push(l);
        }
        const s50 = median(sess);
        figures.push(
          fig(
            `${c.name}: sign 2-of-3 over NATS, holders as processes, p50 (floor: same rounds in-process)`,
            s50,
            median(lib),
            c.name === 'sodium' ? { text: 'p50 ≤ 10 ms', met: s50 <= 10 } : undefined,
          ),
        );
        const dk: number[] = [];
        const dl: number[] = [];
        const dids = cluster.procs.map((p) => p.did);
        for (let i = 0; i < DKG_RUNS + 1; i++) {
          const r = await runDkg({ bus, prefix, min: 3, max: 5, members: dids, timeoutMs: 30_000 });
          await Promise.all(
            cluster.procs.map((p) => p.waitFor((e) => e.event === 'dkg-complete' && e['session'] === r.session, 'dkg-complete')),
          );
          const l = libDkgMs(rng);
          if (i === 0) continue;
          dk.push(r.elapsedMs);
          dl.push(l);
        }
        const k50 = median(dk);
        figures.push(
          fig(
            `${c.name}: dkg 3-of-5 over NATS, holders as processes, p50 (floor: every participant's rounds in-process)`,
            k50,
            median(dl),
            c.name === 'sodium' ? { text: 'p50 ≤ 150 ms', met: k50 <= 150 } : undefined,
          ),
        );
      } finally {
        useCurve(was);
        await cluster.dispose();
      }
    }
    figures.push(loadFigure('end'));
  } finally {
    try {
      const jsm = await jetstreamManager(nc);
      for (const p of prefixes) for (const s of frostStreams(p)) await jsm.streams.delete(s).catch(() => false);
    } catch {
      // best effort
    }
    await nc.close();
    rmSync(root, { recursive: true, force: true });
  }
  return figures;
}
