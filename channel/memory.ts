/**
 * An in-memory {@link ChannelBus} for unit tests and simulations: the same contract as the
 * JetStream bus (acked publish, de-duplication by message id, latest-per-(grant, point) reads,
 * revocations kept whole and replayed from the start), plus fault switches a test flips:
 *
 * - `down`: every call fails (NATS unreachable, or this point partitioned);
 * - `readMode = 'follower'`: reads return, for every other point, the statement before its latest
 *   (this view's own latest is returned as is), as a follower one replication step behind would;
 *   used to show that the bound needs leader reads;
 * - `delay`: an async hook awaited inside every call, to interleave settlements in a test.
 *
 * Several points share one {@link MemoryStore}; each gets its own {@link MemoryBus} view so a
 * partition can cut one point only.
 */
import type { ContentId, Did } from '../core/index.ts';
import type { BusEvent, ChannelBus, RevocationFollow, StoredStatement } from './bus.ts';
import { pointHash } from './names.ts';

/** The shared state of an in-memory "NATS": every statement version and every revocation. */
export class MemoryStore {
  /** grant → point hash → every stored version, oldest first. */
  readonly statements = new Map<ContentId, Map<string, Uint8Array[]>>();
  readonly revocations: Uint8Array[] = [];
  /** grant id → point hash → latest close record bytes. */
  readonly closes = new Map<ContentId, Map<string, Uint8Array>>();
  /** grant id → signed grant bytes. */
  readonly grants = new Map<ContentId, Uint8Array>();
  readonly #msgIds = new Set<string>();
  readonly #followers = new Set<(bytes: Uint8Array, seq: number) => void>();

  /** Stores a message unless its id was seen (de-duplication); returns false for a duplicate. */
  dedupe(msgId: string): boolean {
    if (this.#msgIds.has(msgId)) return false;
    this.#msgIds.add(msgId);
    return true;
  }

  /** Appends a revocation and delivers it to every follower. */
  appendRevocation(bytes: Uint8Array): void {
    this.revocations.push(bytes);
    const seq = this.revocations.length;
    for (const f of this.#followers) f(bytes, seq);
  }

  /** Registers a live follower (told each new revocation with its sequence, from 1); returns its remover. */
  follow(f: (bytes: Uint8Array, seq: number) => void): () => void {
    this.#followers.add(f);
    return () => this.#followers.delete(f);
  }
}

/** One point's view of a {@link MemoryStore}, with fault switches. */
export class MemoryBus implements ChannelBus {
  readonly store: MemoryStore;
  /** When true every call rejects (unreachable / partitioned). */
  down = false;
  /** `leader` (the latest stored statements) or `follower` (one step behind, see module docs). */
  readMode: 'leader' | 'follower' = 'leader';
  /** The point-hash token of this view's own publishes, once it has published. */
  #mine: string | undefined;
  /** Awaited at the start of every call; lets a test interleave operations. */
  delay: (() => Promise<void>) | undefined;
  readonly #listeners: ((e: BusEvent) => void)[] = [];
  /** Calls made, by kind. */
  readonly calls = { publishStatement: 0, readLatest: 0, publishRevocation: 0 };

  constructor(store: MemoryStore = new MemoryStore()) {
    this.store = store;
  }

  async #gate(what: string): Promise<void> {
    if (this.delay) await this.delay();
    if (this.down) throw new Error(`${what}: bus is down`);
  }

  /** See {@link ChannelBus.publishStatement}. */
  async publishStatement(grantId: ContentId, point: Did, bytes: Uint8Array, msgId: string): Promise<void> {
    this.calls.publishStatement++;
    await this.#gate('publish statement');
    if (!this.store.dedupe(`stmt/${msgId}`)) return;
    this.#mine = pointHash(point);
    this.inject(grantId, this.#mine, bytes);
  }

  /** Stores raw bytes under a point's subject, as anyone with publish rights could (forgeries in tests). */
  inject(grantId: ContentId, pointHashToken: string, bytes: Uint8Array): void {
    let byPoint = this.store.statements.get(grantId);
    if (!byPoint) {
      byPoint = new Map();
      this.store.statements.set(grantId, byPoint);
    }
    const versions = byPoint.get(pointHashToken) ?? [];
    versions.push(bytes);
    byPoint.set(pointHashToken, versions);
  }

  /** See {@link ChannelBus.readLatest}; honours {@link readMode}. */
  async readLatest(grantId: ContentId): Promise<StoredStatement[]> {
    this.calls.readLatest++;
    await this.#gate('read statements');
    const out: StoredStatement[] = [];
    for (const [h, versions] of this.store.statements.get(grantId) ?? []) {
      const behind = this.readMode === 'follower' && h !== this.#mine && versions.length > 1;
      const bytes = versions[versions.length - (behind ? 2 : 1)];
      if (bytes) out.push({ pointHash: h, bytes });
    }
    return out;
  }

  /** See {@link ChannelBus.publishClose}. */
  async publishClose(grantId: ContentId, point: Did, bytes: Uint8Array): Promise<void> {
    await this.#gate('publish close');
    const byPoint = this.store.closes.get(grantId) ?? new Map<string, Uint8Array>();
    byPoint.set(pointHash(point), bytes);
    this.store.closes.set(grantId, byPoint);
  }

  /** See {@link ChannelBus.readCloses}. */
  async readCloses(grantId: ContentId): Promise<Uint8Array[]> {
    await this.#gate('read close records');
    return [...(this.store.closes.get(grantId)?.values() ?? [])];
  }

  /** See {@link ChannelBus.publishGrant}. */
  async publishGrant(grantId: ContentId, bytes: Uint8Array): Promise<void> {
    await this.#gate('publish grant');
    if (!this.store.grants.has(grantId)) this.store.grants.set(grantId, bytes);
  }

  /** See {@link ChannelBus.readGrant}. */
  async readGrant(grantId: ContentId): Promise<Uint8Array | undefined> {
    await this.#gate('read grant');
    return this.store.grants.get(grantId);
  }

  /** See {@link ChannelBus.publishRevocation}. */
  async publishRevocation(_grantId: ContentId, bytes: Uint8Array, msgId: string): Promise<void> {
    this.calls.publishRevocation++;
    await this.#gate('publish revocation');
    if (this.store.dedupe(`rev/${msgId}`)) this.store.appendRevocation(bytes);
  }

  /** See {@link ChannelBus.followRevocations}: the backlog first (synchronously), then live ones. */
  async followRevocations(onRevocation: (bytes: Uint8Array, seq: number) => void): Promise<RevocationFollow> {
    await this.#gate('follow revocations');
    const backlog = [...this.store.revocations];
    for (let i = 0; i < backlog.length; i++) onRevocation(backlog[i]!, i + 1);
    const remove = this.store.follow(onRevocation);
    return { caughtUp: Promise.resolve(), stop: async () => void remove() };
  }

  /** See {@link ChannelBus.onEvent}. */
  onEvent(listener: (e: BusEvent) => void): void {
    this.#listeners.push(listener);
  }

  /** See {@link ChannelBus.revocationStreamLastSeq}: the stored count (fails like every call while the bus is cut off). */
  async revocationStreamLastSeq(_timeoutMs: number): Promise<number> {
    await this.#gate('revocation stream info');
    return this.store.revocations.length;
  }

  /** Emits an event to the listeners (tests simulate slow consumers with it). */
  emit(e: BusEvent): void {
    for (const l of this.#listeners) l(e);
  }

  /** Nothing to release. */
  async close(): Promise<void> {}
}
