/**
 * C18 (spec §2.2, §9): a dealer-free k-of-n actor. Three `jcp frost participant` processes run
 * a distributed key generation over the local NATS; the group they all confirm then signs a
 * message, and the aggregate is checked as a standard Ed25519 signature by OpenSSL directly.
 * One share alone cannot sign: each participant's share, used as a key, yields a signature that
 * does not verify, and a coordinator with only one holder online obtains none.
 */
import { randomBytes, createPublicKey, verify as nodeVerify } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { parseDid, utf8, verify } from '../../core/index.ts';
import {
  frostStreams,
  FrostErrorCodes,
  isFrostError,
  natsBus,
  natsRegistry,
  readShareFile,
  runDkg,
  signWithGroup,
  soloSignature,
} from '../../frost/index.ts';
import type { ConformanceClass } from '../runner.ts';
import { ParticipantCluster } from '../../testkit/index.ts';

const NATS_URL = process.env['JCP_NATS_URL'] ?? 'nats://127.0.0.1:4222';
const SPKI = Buffer.from('302a300506032b6570032100', 'hex');

function opensslVerify(did: string, msg: Uint8Array, sig: Uint8Array): boolean {
  try {
    const key = createPublicKey({ key: Buffer.concat([SPKI, parseDid(did).bytes]), format: 'der', type: 'spki' });
    return nodeVerify(null, msg, key, sig);
  } catch {
    return false;
  }
}

/** C18: DKG — a dealer-free k-of-n actor signs a standard Ed25519 signature; one share cannot. */
export const C18: ConformanceClass = {
  id: 'C18',
  title: 'DKG: a dealer-free k-of-n actor signs a standard Ed25519 signature; one share cannot',
  async run(t) {
    const prefix = `jcp.conformance.c18.${randomBytes(5).toString('hex')}`;
    let nc: NatsConnection | undefined;
    let cluster: ParticipantCluster | undefined;
    try {
      nc = await connect({ servers: NATS_URL });
      cluster = await ParticipantCluster.start(3, { natsUrl: NATS_URL, prefix });
      const bus = natsBus(nc);
      const dkg = await runDkg({ bus, prefix, min: 2, max: 3, timeoutMs: 5000 });
      t.eq([...dkg.roster].sort(), cluster.procs.map((p) => p.did).sort(), 'the DKG roster is the three participant processes');
      const shares = [];
      for (const p of cluster.procs) {
        const e = await p.waitFor((x) => x.event === 'dkg-complete' && x['session'] === dkg.session, 'dkg-complete', 10_000);
        t.eq(e['group'], dkg.did, `participant ${e['identifier']} confirmed the same group did:key`);
        const dir = join(p.keystore, 'shares');
        for (const f of readdirSync(dir)) shares.push(readShareFile(join(dir, f)));
      }
      t.eq(new Set(shares.map((s) => s.identifier)).size, 3, 'each participant holds its own share (identifiers 1, 2, 3)');

      const msg = utf8('C18: an irreversible action signed by two of three agents');
      const registry = await natsRegistry(nc, prefix);
      const r = await signWithGroup({ bus, registry, prefix, group: dkg.did, message: msg });
      t.eq(r.signature.length, 64, 'the aggregate is 64 bytes (R ‖ S)');
      t.ok(
        opensslVerify(dkg.did, msg, r.signature),
        'OpenSSL verifies the aggregate as a standard Ed25519 signature under the group did:key',
      );
      t.ok(verify(parseDid(dkg.did), msg, r.signature), 'the project verifier (S < L, canonical R) accepts it too');
      t.ok(!opensslVerify(dkg.did, utf8('another message'), r.signature), 'the signature does not verify for another message');

      for (const s of shares) {
        t.ok(
          !opensslVerify(dkg.did, msg, soloSignature(s, msg)),
          `share ${s.identifier} alone, used as a key, does not produce a valid signature`,
        );
      }
      await cluster.procs[1]!.stop();
      await cluster.procs[2]!.stop();
      let code = 'signed';
      try {
        await signWithGroup({ bus, registry, prefix, group: dkg.did, message: utf8('one holder online'), timeoutMs: 800, retries: 0 });
      } catch (e) {
        code = isFrostError(e) ? e.code : String(e);
      }
      t.eq(code, FrostErrorCodes.NOT_ENOUGH_PARTICIPANTS, 'with one holder online a coordinator obtains no signature');
    } finally {
      await cluster?.dispose();
      if (nc) {
        try {
          const jsm = await jetstreamManager(nc);
          for (const s of frostStreams(prefix)) await jsm.streams.delete(s).catch(() => false);
        } catch {
          // best effort
        }
        await nc.close();
      }
    }
  },
};
