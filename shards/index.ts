/**
 * Shards (spec §4.5 baseline, C11): minting a shard set from a parent grant, its manifest across
 * rebalances, rebalancing by revocation + re-issuance from what is left, the close records
 * nodes publish once a revocation is in force, and the signed assignments that bind each shard to
 * its one point. See docs/cluster.md.
 */
export { ShardCloser } from './closer.ts';
export { decodeShardAssignment, signShardAck, signShardAssignment } from './assignment.ts';
export { assignmentOf, assignShards } from './assign.ts';
export { ShardBindings } from './binding.ts';
export { type AssignmentFollow, ShardAssignmentStream, shardStreamConfig, shardStreamName } from './stream.ts';
export { rebalance } from './rebalance.ts';
export { manifestFromJson, manifestToJson, mintShardSet, parseSplit, readManifest, type ShardManifest, writeManifest } from './set.ts';
