/**
 * Shards (spec §4.5 baseline, C11): minting a shard set from a parent grant, its manifest across
 * rebalances, rebalancing by revocation + re-issuance from what is left, and the close records
 * nodes publish once a revocation is in force. See docs/cluster.md.
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
