/**
 * Budget channels over NATS (spec §4.5 profile, C17; docs/design.md "Budget channels: the bound we
 * prove"): the transport interface and its JetStream and in-memory implementations, the
 * settlement engine, the node's budget policy, and the audit. See docs/cluster.md.
 */
export type { BusEvent, ChannelBus, RevocationFollow, StoredStatement } from './bus.ts';
export { type ChannelAudit, auditChannel, channelAuditJson, mergeStatements } from './audit.ts';
export type { StatementBus } from './bus.ts';
export { type ChannelSpec, type ChannelStats, Channels } from './channels.ts';
export { RevocationStreamFeed, type RevocationSinkLike } from './feed.ts';
export { type FreshnessView, REVOCATION_STALE, RevocationFreshness } from './freshness.ts';
export { JetStreamBus, streamConfigs } from './jetstream.ts';
export type { Logger } from './log.ts';
export { NatsUnavailable, natsGreeting, natsHostPort } from '../natsio/index.ts';
export { MemoryBus, MemoryStore } from './memory.ts';
export { channelNames, closeSubject, grantSubject, pointHash, revocationSubject, statementSubject } from './names.ts';
export { ChannelPoint } from './settlement.ts';
export type { ChannelSteering } from './channels.ts';
