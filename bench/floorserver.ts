/**
 * The floor servers of the node bench (`bench/node.ts`): what a jcp/1 node costs before any of the
 * protocol, driven by the same load process (`bench/nodeload.ts`) as the node, so the node's
 * throughput and tail latency can be read against what this machine allows at all.
 *
 * Modes (first argument):
 * - `durable`: per request, the signature work of a decision (one Ed25519 verification of a
 *   560-byte message and one signature over 420 bytes taken from the request, `node:crypto`) and
 *   one 491-byte record put in a LevelDB (`classic-level`) batch written with `sync: true`,
 *   group-committed like the node's receipt log (while one batch is being made durable the next
 *   requests queue for the next one); the reply leaves once its record is durable.
 * - `echo`: the same framing and connection handling, no work: the transport alone (loopback TCP,
 *   the two event loops, this VM's scheduling).
 *
 * No decoding, no schema, no decision, no hashing, no receipt encoding: everything the node does
 * beyond this is protocol. Replies are 491 bytes ending in `allow`, which the load process counts.
 * Second argument: the data folder (durable mode). Prints `listening on 127.0.0.1:<port>` on
 * stderr once it accepts connections; exits on SIGINT or SIGTERM.
 */
import { generateKeyPairSync, randomBytes, sign, verify } from 'node:crypto';
import { createServer } from 'node:net';
import { ClassicLevel } from 'classic-level';
import { frameMessage, FrameReader } from '../core/index.ts';

/** What a floor server does per request. */
export type FloorMode = 'durable' | 'echo';

const REPLY_BYTES = 491;
const SIGNED_BYTES = 420;
const ALLOW = new TextEncoder().encode('allow');

/** Starts a floor server on 127.0.0.1 (any free port); resolves to the port. */
export async function startFloorServer(mode: FloorMode, dataDir?: string): Promise<number> {
  const caller = generateKeyPairSync('ed25519');
  const steward = generateKeyPairSync('ed25519');
  const message = randomBytes(560);
  const callerSig = sign(null, message, caller.privateKey);
  let db: ClassicLevel<Uint8Array, Uint8Array> | undefined;
  if (mode === 'durable') {
    if (dataDir === undefined) throw new Error('durable mode needs a data folder');
    db = new ClassicLevel<Uint8Array, Uint8Array>(dataDir, { keyEncoding: 'view', valueEncoding: 'view' });
    await db.open();
  }
  let seq = 0;
  let queue: Array<{ key: Uint8Array; value: Uint8Array; done: () => void }> = [];
  let flushing = false;
  const flush = async (log: ClassicLevel<Uint8Array, Uint8Array>) => {
    flushing = true;
    while (queue.length > 0) {
      const take = queue;
      queue = [];
      const batch = log.batch();
      for (const e of take) batch.put(e.key, e.value);
      await batch.write({ sync: true });
      for (const e of take) e.done();
    }
    flushing = false;
  };
  const handle = (body: Uint8Array): Promise<Uint8Array> => {
    const reply = new Uint8Array(REPLY_BYTES);
    reply[0] = 0xa2; // not 0xa1: the load process reads a reply starting with a one-entry map as an error
    reply.set(ALLOW, REPLY_BYTES - ALLOW.length);
    if (db === undefined) return Promise.resolve(reply);
    if (!verify(null, message, caller.publicKey, callerSig)) throw new Error('the floor signature does not verify');
    const signed = body.subarray(0, SIGNED_BYTES);
    reply.set(signed, 1);
    reply.set(sign(null, signed, steward.privateKey), 1 + SIGNED_BYTES);
    const key = new Uint8Array(9);
    key[0] = 0x52;
    new DataView(key.buffer).setUint32(5, seq++);
    return new Promise((done) => {
      queue.push({ key, value: reply, done: () => done(reply) });
      if (!flushing) void flush(db!);
    });
  };
  const server = createServer({ noDelay: true }, (sock) => {
    const reader = new FrameReader();
    const pending: Array<{ reply?: Uint8Array }> = [];
    let scheduled = false;
    // Like the node: replies in request order, the ready ones in one write per run of callbacks.
    const send = () => {
      scheduled = false;
      sock.cork();
      while (pending.length > 0 && pending[0]!.reply !== undefined) sock.write(frameMessage(pending.shift()!.reply!));
      sock.uncork();
    };
    sock.on('data', (chunk: Buffer) => {
      for (const body of reader.push(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength))) {
        const slot: { reply?: Uint8Array } = {};
        pending.push(slot);
        void handle(body).then((reply) => {
          slot.reply = reply;
          if (!scheduled) {
            scheduled = true;
            process.nextTick(send);
          }
        });
      }
    });
    sock.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen({ host: '127.0.0.1', port: 0 }, resolve));
  return (server.address() as { port: number }).port;
}

if (process.argv[2] !== undefined) {
  const mode = process.argv[2];
  if (mode !== 'durable' && mode !== 'echo') {
    process.stderr.write(`floorserver: unknown mode '${mode}' (durable | echo)\n`);
    process.exit(2);
  }
  startFloorServer(mode, process.argv[3]).then(
    (port) => {
      process.stderr.write(`listening on 127.0.0.1:${port}\n`);
      for (const s of ['SIGINT', 'SIGTERM'] as const) process.on(s, () => process.exit(0));
    },
    (e: unknown) => {
      process.stderr.write(`floorserver: ${(e as Error)?.stack ?? String(e)}\n`);
      process.exit(1);
    },
  );
}
