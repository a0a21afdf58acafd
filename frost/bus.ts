/**
 * How threshold actors move messages: a small {@link Bus} interface over NATS core
 * (publish/subscribe/request, as nats.js keeps the transport behind an interface), the subject
 * names, and the two JetStream uses where durability matters:
 *
 * - the group registry (a KV bucket): each group's public package by group tag, written by its
 *   participants, read by coordinators, checked against the group did on every read;
 * - the evidence stream: complaints naming a participant who sent an inconsistent share, kept
 *   durably with the signed messages that prove it.
 *
 * Subjects (prefix default `jcp.frost`; tests use a unique prefix per run):
 * `<p>.dkg.invite`, `<p>.dkg.<session>.bcast`, `<p>.dkg.<session>.to.<didTag>`,
 * `<p>.sign.<groupTag>.request`, `<p>.sign.<groupTag>.p<identifier>`, `<p>.sign.<groupTag>.done`,
 * `<p>.evidence.<session>`.
 */
import { randomBytes } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, type JetStreamClient } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import { blake3, bytesEqual, decode, type Did, toHex, utf8 } from '../core/index.ts';
import { checkSubject, ensureStream, isStreamNotFound, storeNameOf } from '../natsio/index.ts';
import { FrostError, FrostErrorCodes } from './errors.ts';
import { checkGroup, type GroupPublic, groupBytes, groupDigest, groupTag, readGroup } from './group.ts';

/** The default subject prefix. */
export const DEFAULT_PREFIX = 'jcp.frost';

/** One delivered message. */
export interface BusMsg {
  readonly subject: string;
  readonly data: Uint8Array;
  readonly reply?: string;
}

/** The messaging a threshold actor needs; {@link natsBus} implements it over NATS core. */
export interface Bus {
  publish(subject: string, data: Uint8Array, reply?: string): void;
  /** Calls `handler` for each message on `subject` (wildcards allowed); returns the unsubscriber. */
  subscribe(subject: string, handler: (m: BusMsg) => void): () => void;
  /** One request, one reply. @throws FrostError `frost-transport` on timeout or no responders. */
  request(subject: string, data: Uint8Array, timeoutMs: number): Promise<Uint8Array>;
  /** A fresh unique inbox subject for collecting replies. */
  inbox(): string;
  /** Resolves when the server has processed everything published so far. */
  flush(): Promise<void>;
  /** The largest message the transport carries (bytes), when it says. */
  maxPayload?(): number | undefined;
}

/** {@link Bus} over a NATS connection. */
export function natsBus(nc: NatsConnection): Bus {
  let n = 0;
  const base = `_INBOX.${randomBytes(11).toString('hex')}`;
  return {
    publish(subject, data, reply) {
      nc.publish(subject, data, reply ? { reply } : undefined);
    },
    subscribe(subject, handler) {
      const sub = nc.subscribe(subject, {
        callback: (e, m) => {
          if (e) return;
          handler({ subject: m.subject, data: m.data, ...(m.reply ? { reply: m.reply } : {}) });
        },
      });
      return () => sub.unsubscribe();
    },
    async request(subject, data, timeoutMs) {
      try {
        const m = await nc.request(subject, data, { timeout: timeoutMs });
        return m.data;
      } catch (e) {
        throw new FrostError(FrostErrorCodes.TRANSPORT, `request on ${subject}: ${(e as Error).message}`, [], undefined, { cause: e });
      }
    },
    inbox() {
      return `${base}.${++n}`;
    },
    async flush() {
      await nc.flush();
    },
    maxPayload() {
      return nc.info?.max_payload;
    },
  };
}

/** A short tag for a did, used in directed subjects (16 hex chars of BLAKE3 of the did). */
export function didTag(did: Did): string {
  return toHex(blake3(utf8(did))).slice(0, 16);
}

/**
 * Subject names under `prefix` (checked once here by the NATS layer's subject rule, so a bad
 * `--prefix` fails before anything is sent). @throws NatsNameError `nats-bad-subject`.
 */
export function subjects(prefix: string) {
  checkSubject(prefix);
  return {
    dkgInvite: `${prefix}.dkg.invite`,
    dkgBcast: (session: string) => `${prefix}.dkg.${session}.bcast`,
    dkgDirect: (session: string, to: Did) => `${prefix}.dkg.${session}.to.${didTag(to)}`,
    dkgAnyBcast: `${prefix}.dkg.*.bcast`,
    dkgAnyDirect: (me: Did) => `${prefix}.dkg.*.to.${didTag(me)}`,
    signRequest: (group: Did) => `${prefix}.sign.${groupTag(group)}.request`,
    signPackage: (group: Did, identifier: number) => `${prefix}.sign.${groupTag(group)}.p${identifier}`,
    signDone: (group: Did) => `${prefix}.sign.${groupTag(group)}.done`,
    evidence: (session: string) => `${prefix}.evidence.${session}`,
    evidenceAll: `${prefix}.evidence.>`,
  };
}

/** A name safe for JetStream stream/bucket names, derived from a subject prefix (the NATS layer's rule). */
const storeName = storeNameOf;

/** Where coordinators find a group's public package. */
export interface GroupRegistry {
  /** The package for `did`, checked against it; undefined when unknown. @throws FrostError `frost-unknown-group` if a stored package does not match `did`. */
  get(did: Did): Promise<GroupPublic | undefined>;
  /** Stores the package (first writer wins; an identical package is a no-op). @throws FrostError `frost-group-mismatch` on a conflicting package. */
  put(g: GroupPublic, did: Did): Promise<void>;
}

const checked = new Map<string, Did>();

/** {@link checkGroup} with its verdict cached by package digest (the check costs max·min point multiplications). */
export function checkGroupCached(g: GroupPublic, expected: Did): GroupPublic {
  const digest = groupDigest(g);
  if (checked.get(digest) === expected) return g;
  const r = checkGroup(g, expected);
  if (!r.ok) throw FrostError.of(r.error);
  if (checked.size > 1000) checked.clear();
  checked.set(digest, expected);
  return g;
}

/** Whether the KV bucket `bucket` exists (its backing stream `KV_<bucket>`). */
async function bucketExists(nc: NatsConnection, bucket: string): Promise<boolean> {
  const jsm = await jetstreamManager(nc);
  try {
    await jsm.streams.info(`KV_${bucket}`);
    return true;
  } catch (e) {
    if (isStreamNotFound(e)) return false;
    throw e;
  }
}

/** The KV bucket name for `prefix`. */
export function registryBucket(prefix: string): string {
  return `${storeName(prefix)}_groups`;
}

/** The evidence stream name for `prefix`. */
export function evidenceStream(prefix: string): string {
  return `${storeName(prefix)}_evidence`;
}

/**
 * The group registry in a JetStream KV bucket (`<prefix>_groups`, file storage). Participants
 * (who publish packages) create the bucket if absent; a reader (`create: false`, as coordinators
 * open it) never does: with no bucket every group is simply unknown, and nothing is left behind
 * on the server by a lookup under a mistyped prefix.
 * @throws FrostError `frost-transport` when JetStream is unavailable.
 */
export async function natsRegistry(nc: NatsConnection, prefix = DEFAULT_PREFIX, opts: { create?: boolean } = {}): Promise<GroupRegistry> {
  const create = opts.create ?? true;
  let kv: KV | undefined;
  try {
    if (create) kv = await new Kvm(nc).create(registryBucket(prefix), { history: 1 });
    else if (await bucketExists(nc, registryBucket(prefix))) kv = await new Kvm(nc).open(registryBucket(prefix));
  } catch (e) {
    throw new FrostError(FrostErrorCodes.TRANSPORT, `group registry: ${(e as Error).message}`, [], undefined, { cause: e });
  }
  if (kv === undefined) {
    return {
      get: async () => undefined,
      put: async () => {
        throw new FrostError(FrostErrorCodes.TRANSPORT, `group registry ${registryBucket(prefix)} does not exist and was opened read-only`);
      },
    };
  }
  const cache = new Map<Did, GroupPublic>();
  return {
    async get(did) {
      const hit = cache.get(did);
      if (hit) return hit;
      const e = await kv.get(groupTag(did));
      if (e?.operation !== 'PUT' || e.value.length === 0) return undefined;
      let g: GroupPublic;
      try {
        g = readGroup(decode(e.value));
      } catch (x) {
        throw new FrostError(FrostErrorCodes.UNKNOWN_GROUP, `registry entry for ${did} is malformed: ${(x as Error).message}`);
      }
      checkGroupCached(g, did);
      cache.set(did, g);
      return g;
    },
    async put(g, did) {
      const bytes = groupBytes(g);
      try {
        await kv.create(groupTag(did), bytes);
        return;
      } catch {
        // exists (or a race): compare below
      }
      const e = await kv.get(groupTag(did));
      if (e && e.operation === 'PUT' && bytesEqual(e.value, bytes)) return;
      throw new FrostError(FrostErrorCodes.GROUP_MISMATCH, `the registry holds a different package for ${did}`);
    },
  };
}

/**
 * Publishes evidence durably on the JetStream stream `<prefix>_evidence` (created if absent, by
 * the NATS layer's create-if-missing: a lost creation race re-reads the winner's stream).
 * Returns the stream sequence. @throws FrostError `frost-transport`.
 */
export async function publishEvidence(nc: NatsConnection, prefix: string, session: string, bytes: Uint8Array): Promise<number> {
  try {
    const jsm = await jetstreamManager(nc);
    await ensureStream(jsm, { name: evidenceStream(prefix), subjects: [subjects(prefix).evidenceAll], max_age: 30 * 24 * 3600 * 1e9 });
    const js: JetStreamClient = jetstream(nc);
    const ack = await js.publish(subjects(prefix).evidence(session), bytes);
    return ack.seq;
  } catch (e) {
    throw new FrostError(FrostErrorCodes.TRANSPORT, `evidence stream: ${(e as Error).message}`, [], undefined, { cause: e });
  }
}
