/**
 * The bridge's front door: an MCP server that holds one agent's key and grant chains and turns
 * every `tools/call` into a caller-signed jcp/1 request decided by an enforcement node (spec §11).
 * See docs/bridge.md.
 */
export {
  type AgentOptions,
  BridgeAgent,
  BridgeErrorCodes,
  type CallContext,
  type CallInput,
  type GrantBudget,
  inputText,
  journalSecret,
  keyedCallKey,
  type ToolResult,
} from './agent.ts';
export { type BridgeTool, catalogue, type McpToolDef, type NodeResourceTools, resourceLabel } from './catalogue.ts';
export {
  BridgeConfigError,
  DEFAULT_SESSION_LIMITS,
  type HttpAgent,
  type HttpBridge,
  HttpErrorCodes,
  type HttpOptions,
  isLoopback,
  type SessionLimits,
  serveBridgeHttp,
} from './http.ts';
export {
  type CallStamp,
  type AnsweredScope,
  CallJournal,
  DEFAULT_ANSWERED_WINDOW_S,
  type Journal,
  JournalError,
  JournalErrorCodes,
  type JournalOptions,
  randomSaltBase,
} from './journal.ts';
export { DEFAULT_JOURNAL_BUCKET, DEFAULT_JOURNAL_MAX_BYTES, entryBound, NatsCallJournal, type NatsJournalOptions } from './journal-nats.ts';
export { BRIDGE_INFO, BUDGET_URI, bridgeServer, legacyAsk, MAX_INPUT_ROUNDS } from './server.ts';
export { BridgeStdioTransport } from './stdio.ts';
export { MODERN_VERSION, isModernMessage, modernServer, serveBridgeStdio, STATIC_TTL_MS } from './modern.ts';
export { saltText } from './journal.ts';
export {
  DEFAULT_THRESHOLD_TIMEOUT_MS,
  type HolderRefusal,
  ThresholdCaller,
  type ThresholdCallerOptions,
  ThresholdErrorCodes,
  type ThresholdRefusal,
  thresholdToolError,
} from './threshold.ts';
export {
  DELEGATE_KEY,
  type DelegateRequest,
  DELEGATION_KEY,
  DelegationError,
  DelegationErrorCodes,
  DelegationGate,
  type GateOptions,
  MAX_DELEGATION_CHARS,
  decodeDelegation,
  encodeDelegation,
  mintDelegation,
  readDelegateRequest,
} from './delegation.ts';
export {
  A2A_MAX_ID_CHARS,
  type A2aBridge,
  A2aErrorCodes,
  A2aFace,
  type A2aLimits,
  type A2aOptions,
  DEFAULT_A2A_LIMITS,
  serveBridgeA2a,
} from './a2a.ts';
export { type BridgeSkill, skillCatalogue } from './catalogue.ts';
export type { Decided, Exchange } from './agent.ts';
