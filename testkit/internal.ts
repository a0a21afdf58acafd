/**
 * Names of testkit/ that only the tests reach (beside the front door, index.ts, which this
 * re-exports). Product code never imports this file.
 */
export * from './index.ts';
export { type ParticipantProc, startDealtGroup, startParticipantProc } from './frost-procs.ts';
export { NatsCluster } from './nats.ts';
export { CLAIMS_DIR, claimPort, JCP_BIN } from './procs.ts';
export { TcpProxy } from './proxy.ts';
export { type A2aAgentOptions, TEST_AGENT_SKILLS } from './a2a-agent.ts';
