/**
 * The enforcement node (docs/design.md "Folders and layers": node/): the jcp/1 daemon in front of real tools, its
 * durable receipt log, boot replay, revocations, amendments (§4.7), MCP endpoints, metrics, the
 * standing-grant webhook server (§4.6) (the agent-side client is in client/).
 */
export { type AmendmentLoad, AmendmentRefusals, type AmendmentRejection, AmendmentStore, type PersistAmendment } from './amendments.ts';
export {
  ARCHIVE_FORMAT,
  type ArchiveRecord,
  type Archived,
  archiveLimit,
  archiveReceipts,
  archiveRecords,
  readSegments,
  SEGMENT_RECEIPTS,
  type SegmentCheck,
  segmentFileName,
  segmentReceiptAt,
  withSegments,
} from './archive.ts';
export { CHAIN_CACHE_SIZE, ChainCache } from './chaincache.ts';
export { NodeErrorCodes, type NodeErrorCode, NodeFault, NodeFaultCodes, type NodeFaultCode, type WireErrorCode } from './codes.ts';
export {
  A2A_EVENT_METHOD,
  A2A_METHODS,
  A2aEndpoint,
  type A2aMethod,
  AGENT_REPLY_KEY,
  A2A_CARD_TOO_LARGE,
  AGENT_CARD_MAX_BYTES,
  AGENT_CARD_MAX_SKILLS,
  CALLER_META,
  MAX_TASKS,
  MAX_TASKS_PER_CALLER,
  SKILL_META,
  TaskTable,
  type TaskOwner,
} from './a2a.ts';
export {
  type A2aEndpointConfig,
  CONFIG_DEFAULTS,
  type ConfigOverrides,
  configFromJson,
  type EndpointConfig,
  type HeaderSource,
  loadConfig,
  type McpHttpEndpointConfig,
  type McpStdioEndpointConfig,
  type NodeConfig,
  parseHostPort,
  REPLAY_WORKERS_MIN_RECEIPTS,
  type ResourceConfig,
  resourceIdOf,
  trustRootsOf,
  upstreamResourcesJson,
} from './config.ts';
export {
  CALLER_META_KEY,
  type Endpoint,
  EndpointError,
  EndpointErrorCodes,
  type EndpointErrorCode,
  EndpointUnavailable,
  endpointUnavailableIn,
  errorResult,
  headerValue,
  type InvokeOptions,
  CLIENT_CAPABILITIES_KEY,
  type McpEra,
  type McpInput,
  McpHttpEndpoint,
  type McpNotificationMessage,
  McpStdioEndpoint,
  GRANT_META_KEY,
  LOST_AFTER_LIST_COUNT,
  LOST_AFTER_LIST_WINDOW_MS,
  RECEIPT_META_KEY,
  RESPAWN_BACKOFF_MAX_MS,
  RESPAWN_BACKOFF_MS,
  RESPAWN_LOG_EVERY_MS,
  RESPAWN_STABLE_MS,
  type RespawnOptions,
  STDIO_READ_CAP_BYTES,
  stdioEnvironment,
  type ToolStatus,
  type UnavailablePhase,
} from './endpoint.ts';
export {
  OVERSIZED_ERROR_CODE,
  OVERSIZED_HEAD_BYTES,
  OVERSIZED_TAIL_BYTES,
  type OversizedLine,
  oversizedResponseId,
  type RpcId,
  StdioReader,
  type StdioReaderOptions,
} from './stdioreader.ts';
export {
  argumentsDigest,
  type ContinuationLimits,
  type ContinuationParty,
  type ContinuationRefusal,
  Continuations,
  DEFAULT_CONTINUATION_LIMITS,
  DEFAULT_INPUT_ROUNDS,
  type PendingCall,
  type PendingRefusal,
} from './continuations.ts';
export {
  type AmendmentOutlet,
  Enforcer,
  type EnforcerDeps,
  type EndpointBinding,
  errorBody,
  parseArgs,
  RESULT_CAP_BYTES,
} from './enforcer.ts';
export type { AllowDecision, BudgetPolicy, RevocationFeed, RevocationRejection, RevocationSink } from './hooks.ts';
export { KEY_FILE_TYPE, loadOrCreateKey, readKeyFile, readSecretFile, secretModeProblem, writeKeyFile } from './keyfile.ts';
export { type LogGrowth, NodeMetrics, RateSampler, serveMetrics } from './metrics.ts';
export {
  EVICT_SCAN,
  type PeerLimitConfig,
  PeerLimiter,
  REPLAYS_PER_PEER,
  REPLAYS_TOTAL,
  REPLY_TOKEN_BYTES,
  ReplaySlots,
} from './ratelimit.ts';
export { type BootReport, type NodeOptions, type RunningNode, startNode } from './node.ts';
export {
  checkOutcome,
  type CheckedOutcome,
  OUTCOME_KINDS,
  OUTCOME_PROFILE,
  type OutcomeCore,
  type OutcomeKind,
  OutcomeRefusals,
  openOutcome,
  readOutcomeCore,
  sealOutcome,
} from './outcome.ts';
export { capProvenance, type MeterProbe, type NodeMeter, priceCall, provenanceCeiling } from './pricing.ts';
export {
  DATA_FORMAT,
  type HeadCheck,
  isLockError,
  outcomeKey,
  readDataMeta,
  type AppendedDurable,
  ReceiptLog,
  type ReceiptLogOptions,
  receiptKey,
} from './receiptlog.ts';
export { HEAD_MARK_FILE, type HeadMark, HeadMarkFile } from './headmark.ts';
export {
  type LogReplay,
  type OutcomeAttribution,
  type OutcomeReplay,
  replayLog,
  replayOutcomes,
  replaySlice,
  type SliceJob,
  type SliceResult,
  type SliceRunner,
} from './replay.ts';
export { type RequestEntries, RequestIndex, TimedRequestIndex } from './requestindex.ts';
export { revocationRecord, RevocationStore } from './revocations.ts';
export {
  eventClassOf,
  eventIdOf,
  type FiringRecord,
  type Handoff,
  isLoopbackHost,
  MAX_EVENT_BYTES,
  MINT_LEDGER_TYPE,
  MintLedgerFile,
  StandingError,
  type StandingServer,
  StandingServerCodes,
  type StandingServerOptions,
  startStandingServer,
} from './standing.ts';
export {
  chooseSnapshot,
  encodeSnapshot,
  listSnapshots,
  listSnapshotsOrWhy,
  type MadeSnapshot,
  makeSnapshot,
  makeSnapshotOffThread,
  type OffThreadSnapshotOptions,
  type OpenedSnapshot,
  openSnapshot,
  readSnapshotFile,
  SNAPSHOT_CAP_BYTES,
  SNAPSHOT_DIR,
  SNAPSHOT_FORMAT,
  SNAPSHOT_WORKER_IDLE_S,
  SNAPSHOT_WORKER_NICE,
  type SnapshotBase,
  type SnapshotChoice,
  type SnapshotLogLookups,
  type SnapshotScheduling,
  snapshotBody,
  snapshotFileName,
  Snapshotter,
  writeSnapshotFile,
} from './snapshot.ts';
export type { SnapshotCheck } from './snapshotjob.ts';
export {
  HANDSHAKES_PER_PEER,
  JcpServer,
  MAX_IN_FLIGHT,
  type MessageHandler,
  type NoticeSink,
  REFUSED_BEFORE_CLOSE,
  REFUSED_BYTES_BEFORE_CLOSE,
  REFUSED_WINDOW_MS,
  type ServerHooks,
  type ServerLimits,
  TURN_MESSAGES,
  UNSENT_BUDGET_BYTES,
  UNSENT_CEILING_FACTOR,
} from './server.ts';
/** The peer address abuse limits count by; it lives in io/ (shared with the HTTP listeners' bounds). */
export { peerAddress } from '../io/index.ts';
export { type PoolOptions, type WorkerExit, WorkerPool } from './workers.ts';
export { buildLogTree, checkAgainstCheckpoint, checkpointOf, type LogCheckpoint, originOf, type ReceiptSource } from './tlog.ts';
export { hashTile, parseTilePath, TILE_WIDTH, type TilePath, type TileReply, TileServer, tileIndexPath } from './tlogtiles.ts';
export {
  type CheckpointView,
  type Consistency,
  checkpointView,
  compareCheckpoints,
  dataDirTree,
  fetchCheckpointView,
  type Witness,
} from './tlogview.ts';
export { ClusterHooks, type ClusterHookOpts, type GatewayState, type NotReady, readClusterConfig, readGateways } from './cluster.ts';

export {
  type AlarmMsg,
  type CheckpointMsg,
  type CosignatureMsg,
  didToken,
  TLOG_STREAM_MISSING,
  TlogStream,
  TlogStreamMissing,
  type TlogStreamOpts,
  tlogStreamConfig,
  tlogStreamName,
  TlogWitnessing,
  type WitnessAudit,
  type WitnessAuditLog,
  witnessAudit,
  type WitnessedCheckpoint,
  type WitnessingOpts,
  witnessName,
} from './witnessing.ts';
