/**
 * Budget channels over NATS (spec §4.5 profile, C17; docs/design.md "Budget channels: the bound we
 * prove"): the transport interface and its JetStream and in-memory implementations, the
 * settlement engine, the node's budget policy, and the audit. See docs/cluster.md.
 */
export type { BusEvent, ChannelBus, CloseRecordBus, RevocationBus, RevocationFollow, StatementBus, StoredStatement } from './bus.ts';
export { type ChannelAudit, type AuditLine, auditChannel, mergeStatements } from './audit.ts';
export { type ChannelSpec, type ChannelStats, Channels, type ChannelsOpts } from './channels.ts';
export { RevocationStreamFeed, type RevocationStreamFeedOpts, type RevocationSinkLike } from './feed.ts';
export {
  ensureStreams,
  JetStreamBus,
  type JetStreamBusOpts,
  JetStreamCloseRecordBus,
  JetStreamRevocationBus,
  JetStreamStatementBus,
  type StreamSpec,
  streamConfigs,
} from './jetstream.ts';
export { type Logger, silentLogger } from './log.ts';
export { type Greeting, greetingServers, NATS_UNAVAILABLE, NatsUnavailable, natsGreeting, natsHostPort } from '../natsio/index.ts';
export { MemoryBus, MemoryStore } from './memory.ts';
export {
  type ChannelNames,
  channelNames,
  closeSubject,
  grantSubject,
  pointHash,
  revocationSubject,
  statementFilter,
  statementSubject,
} from './names.ts';
export {
  ChannelPoint,
  type ChannelPointOpts,
  type ReadRefusal,
  type ReadRefusalCode,
  type SettleOutcome,
  type SpendRefusal,
} from './settlement.ts';
export type { ChannelSteering } from './channels.ts';
