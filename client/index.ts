/**
 * The agent side (§8): `JcpClient`, which signs jcp/1 requests with the caller's key and sends them
 * to a node, and the chain-file format an agent keeps its grant chains in. The npm package's
 * `./client` export is library.ts.
 */
export {
  type AgentTaskParams,
  type ClientTlsOptions,
  type ClientSigner,
  type CallParams,
  type CallResult,
  CallTimeout,
  ConnectionLost,
  type McpNotification,
  JcpClient,
  resultJson,
  WireErrorReply,
} from './client.ts';
export { chainFileText, grantView, readChainFile, viewDiffs, writeChainFile } from './chainfile.ts';
