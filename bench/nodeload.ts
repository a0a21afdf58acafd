/**
 * The load process of the node bench (`bench/node.ts`): a separate process that drives a running
 * node over loopback with several connections. It pre-signs every request before the clock starts
 * (so its own signing does not compete with the node), then sends raw frames and times replies.
 *
 * Input: one JSON argument (see {@link LoadSpec}); output: one JSON line (see {@link LoadResult}).
 * Modes: `closed` keeps `window` requests outstanding per connection (peak throughput); `open`
 * sends at a fixed `rate` (requests/s) regardless of replies (latency under a given load).
 */
import { writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import {
  actorFromSeed,
  decode,
  encodeWireRequest,
  frameMessage,
  FrameReader,
  fromHex,
  grantId,
  payloadHash,
  readSignedGrant,
  signWireRequestSync,
} from '../core/index.ts';

/** What the load process is asked to do. */
export interface LoadSpec {
  readonly host: string;
  readonly port: number;
  /** Hex of the det-CBOR signed grant (a one-link chain) the agent calls under. */
  readonly grantHex: string;
  /** Hex of the agent's 32-byte seed. */
  readonly agentSeedHex: string;
  readonly action: string;
  readonly connections: number;
  readonly requests: number;
  readonly mode: 'closed' | 'open';
  /** closed mode: outstanding requests per connection. */
  readonly window?: number;
  /** open mode: requests per second over all connections. */
  readonly rate?: number;
  /** Distinguishes payloads between runs, so no request repeats an earlier one. */
  readonly tag: string;
  /** Skew base for `now` (unix seconds). */
  readonly nowS: number;
  /** Also write the time of every reply (unix ms, fractional, in reply order) to this file, as a JSON array. */
  readonly timelineFile?: string;
  /** Also write every reply's latency (µs, in the same reply order as `timelineFile`) to this file, as a JSON array. */
  readonly latencyFile?: string;
}

/** What the load process measured. */
export interface LoadResult {
  readonly sent: number;
  readonly allow: number;
  readonly deny: number;
  readonly errors: number;
  /** The error replies by their code (`clock-skew`, `replay`…); empty when there were none. */
  readonly errorCodes: Record<string, number>;
  readonly elapsedMs: number;
  readonly perSecond: number;
  readonly p50Us: number;
  readonly p99Us: number;
  readonly maxUs: number;
  readonly signMs: number;
  /** CPU time (user + system, µs) this load process spent from the first request to the last reply. */
  readonly cpuUs: number;
}

function prepare(spec: LoadSpec): Uint8Array[] {
  const agent = actorFromSeed(fromHex(spec.agentSeedHex, 32));
  const sg = readSignedGrant(decode(fromHex(spec.grantHex)));
  const id = grantId(sg.grant);
  const frames: Uint8Array[] = new Array(spec.requests);
  const enc = new TextEncoder();
  for (let i = 0; i < spec.requests; i++) {
    const payload = enc.encode(`{"n":${i},"tag":"${spec.tag}"}`);
    const req = signWireRequestSync(
      {
        frame: {
          kind: 'tool-call',
          trust: 'control',
          grant_id: id,
          action: spec.action,
          resource: sg.grant.capability.resource,
          payload_hash: payloadHash(payload),
        },
        chain: [sg],
        caller: agent.did,
        cost: { uj: 1n, provenance: 'Estimator' },
        now: spec.nowS,
        payload,
      },
      agent,
    );
    frames[i] = frameMessage(encodeWireRequest(req));
  }
  return frames;
}

/** The `code` of an error reply `{error: {code, message}}` (core/wire.ts), or `?` when it does not decode. */
function errorCodeOf(body: Uint8Array): string {
  try {
    const code = (decode(body) as { error?: { code?: unknown } }).error?.code;
    return typeof code === 'string' ? code : '?';
  } catch {
    return '?';
  }
}

function pct(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/** `spec.connections` connections to the node, each once connected (rejects with the first that fails). */
function connectAll(spec: LoadSpec): Promise<Socket[]> {
  return Promise.all(
    Array.from(
      { length: spec.connections },
      () =>
        new Promise<Socket>((resolve, reject) => {
          const s = connect({ host: spec.host, port: spec.port, noDelay: true });
          s.once('connect', () => resolve(s));
          s.once('error', reject);
        }),
    ),
  );
}

async function run(spec: LoadSpec): Promise<LoadResult> {
  const t0 = performance.now();
  const frames = prepare(spec);
  const signMs = performance.now() - t0;
  const socks = await connectAll(spec);
  const lat = new Float64Array(spec.requests);
  const sentAt = new Float64Array(spec.requests);
  const replyAt = spec.timelineFile !== undefined ? new Float64Array(spec.requests) : undefined;
  let next = 0;
  let done = 0;
  let allow = 0;
  let deny = 0;
  let errors = 0;
  const errorCodes: Record<string, number> = {};
  const started = performance.now();
  const cpu0 = process.cpuUsage();
  return await new Promise<LoadResult>((resolve) => {
    const finish = () => {
      const elapsedMs = performance.now() - started;
      const cpu = process.cpuUsage(cpu0);
      if (spec.latencyFile !== undefined)
        writeFileSync(spec.latencyFile, JSON.stringify(Array.from(lat.subarray(0, done), (us) => Math.round(us))));
      const sorted = lat.slice(0, done).sort();
      if (replyAt && spec.timelineFile !== undefined)
        writeFileSync(
          spec.timelineFile,
          JSON.stringify(Array.from(replyAt.subarray(0, done), (t) => Math.round((performance.timeOrigin + t) * 1000) / 1000)),
        );
      for (const s of socks) s.destroy();
      resolve({
        sent: next,
        allow,
        deny,
        errors,
        errorCodes,
        elapsedMs,
        perSecond: (done * 1000) / elapsedMs,
        p50Us: pct(sorted, 50),
        p99Us: pct(sorted, 99),
        maxUs: sorted.length ? sorted[sorted.length - 1]! : 0,
        signMs,
        cpuUs: cpu.user + cpu.system,
      });
    };
    const send = (s: Socket, queue: number[]) => {
      if (next >= spec.requests) return;
      const i = next++;
      queue.push(i);
      sentAt[i] = performance.now();
      s.write(frames[i]!);
    };
    const queues = socks.map(() => [] as number[]);
    socks.forEach((s, c) => {
      const reader = new FrameReader(64 << 20);
      const q = queues[c]!;
      s.on('data', (chunk: Buffer) => {
        const now = performance.now();
        s.cork();
        for (const body of reader.push(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength))) {
          const i = q.shift()!;
          if (replyAt) replyAt[done] = now;
          lat[done++] = (now - sentAt[i]!) * 1000;
          if (body[0] === 0xa1) {
            errors++;
            const code = errorCodeOf(body);
            errorCodes[code] = (errorCodes[code] ?? 0) + 1;
          }
          // {receipt, decision} in canonical key order: the decision map closes the body.
          else if (Buffer.from(body.buffer, body.byteOffset + Math.max(0, body.length - 24), Math.min(body.length, 24)).includes('allow'))
            allow++;
          else deny++;
          if (spec.mode === 'closed') send(s, q);
        }
        s.uncork();
        if (done >= spec.requests) finish();
      });
    });
    if (spec.mode === 'closed') {
      socks.forEach((s, c) => {
        for (let k = 0; k < (spec.window ?? 16); k++) send(s, queues[c]!);
      });
    } else {
      const rate = spec.rate ?? 1000;
      let c = 0;
      const tick = () => {
        const due = Math.min(spec.requests, Math.floor(((performance.now() - started) * rate) / 1000));
        while (next < due) {
          send(socks[c]!, queues[c]!);
          c = (c + 1) % socks.length;
        }
        // A 1 ms timer, not setImmediate: a busy loop here would take a core from the node.
        if (next < spec.requests) setTimeout(tick, 1);
      };
      tick();
    }
  });
}

if (process.argv[2] !== undefined) {
  const spec = JSON.parse(process.argv[2]) as LoadSpec;
  run(spec).then(
    (r) => {
      process.stdout.write(`${JSON.stringify(r)}\n`);
      process.exit(0);
    },
    (e: unknown) => {
      process.stderr.write(`nodeload: ${(e as Error)?.stack ?? String(e)}\n`);
      process.exit(1);
    },
  );
}
