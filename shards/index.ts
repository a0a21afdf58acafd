/**
 * Shards (spec §4.5 baseline, C11): minting a shard set from a parent grant, its manifest across
 * rebalances, rebalancing by revocation + re-issuance from what is left, the close records
 * nodes publish once a revocation is in force, and the signed assignments that bind each shard to
 * its one point. See docs/cluster.md.
 */
export {
  type ShardClose,
  type SignedShardClose,
  decodeShardClose,
  encodeShardClose,
  shardCloseToCbor,
  signShardClose,
  verifyShardClose,
} from './close.ts';
export { type CloseTransport, ShardCloser } from './closer.ts';
export {
  assignmentId,
  decodeShardAck,
  decodeShardAssignment,
  encodeShardAck,
  encodeShardAssignment,
  type ShardAck,
  type ShardAssignment,
  type SignedShardAck,
  type SignedShardAssignment,
  signShardAck,
  signShardAssignment,
  verifyShardAck,
  verifyShardAssignment,
} from './assignment.ts';
export { type AssignOpts, type AssignRefusal, assignmentOf, assignShards } from './assign.ts';
export { type AssignmentRefusal, ShardBindings } from './binding.ts';
export { type AssignmentFollow, type AssignmentTransport, ShardAssignmentStream, type ShardStreamOpts, shardStreamConfig, shardStreamName } from './stream.ts';
export { rebalance, type RebalanceOpts, type RebalanceRefusal, type RebalanceReport, type RebalanceTransport } from './rebalance.ts';
export {
  type ClosedShard,
  manifestFromJson,
  manifestToJson,
  type MintSetOpts,
  mintShardSet,
  parentOf,
  parseSplit,
  readManifest,
  type Shard,
  type ShardManifest,
  type SplitEntry,
  writeManifest,
} from './set.ts';
