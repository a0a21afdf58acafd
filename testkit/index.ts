/**
 * The front door of testkit/: the names other folders use. Siblings and tests import from here
 * (tests may also use internal.ts); files inside testkit/ import each other directly.
 */
export { type ClusterState, clusterStatus, LocalCluster, stopClusterFromState } from './cluster.ts';
export { ParticipantCluster } from './frost-procs.ts';
export { serveToolsHttp } from './mcp-tools-server.ts';
export { findNatsServerBin, loopbackNatsUrlProblem, NatsServer } from './nats.ts';
export { ParticipantProc } from './frost-procs.ts';
export { startParticipantProc } from './frost-procs.ts';
export { exitAfterInterrupt, freePort, JCP_BIN, stopChild, track, TSX_IMPORT, whenInterrupted } from './procs.ts';
export {
  type LinkStatus,
  type Region,
  type RegionCluster,
  type RegionLink,
  type RegionNode,
  type RegionOpts,
  type RegionState,
  type RegionStatus,
  REGION_NAMES,
  startRegions,
  type TlsMaterial,
} from './regions.ts';
export { type LinkDelay, TcpProxy } from './proxy.ts';
export {
  feedReachTarget,
  measureRevocationReach,
  metricsReachTarget,
  quantileMs,
  type ReachOptions,
  type ReachReport,
  type ReachStats,
  type ReachTarget,
} from './reach.ts';
export { type CertFiles, makeTlsMaterial, natsTlsBlock } from './tls.ts';
