/**
 * The front door of testkit/: the names other folders use. Siblings and tests import from here
 * (tests may also use internal.ts); files inside testkit/ import each other directly.
 */
export { type ClusterState, clusterStatus, LocalCluster, stopClusterFromState } from './cluster.ts';
export { ParticipantCluster } from './frost-procs.ts';
export { type A2aAgent, startA2aAgent, serveToolsHttp } from './lazy.ts';
export { CONFORMANCE_TOOL_NAMES } from './mcp-tools-list.ts';
export { findNatsServerBin, loopbackNatsUrlProblem, NatsServer } from './nats.ts';
export { ParticipantProc } from './frost-procs.ts';
export { startParticipantProc } from './frost-procs.ts';
export {
  agentEnvironment,
  exitAfterInterrupt,
  freePort,
  interrupting,
  JCP_BIN,
  scriptArgv,
  stopChild,
  track,
  whenInterrupted,
} from './procs.ts';
export { type LinkStatus, liveLinks, type RegionCluster, type RegionState, type RegionStatus, startRegions } from './regions.ts';
export { TcpProxy } from './proxy.ts';
export { feedReachTarget, measureRevocationReach, metricsReachTarget, quantileMs, type ReachTarget } from './reach.ts';
export { makeTlsMaterial } from './tls.ts';
