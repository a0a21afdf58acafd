/**
 * The client library's front door (`jcp-cluster/client`): what an agent or an issuer needs to
 * use a node from code, without the daemon. Keys (did:key, RFC 8032 Ed25519), grants and their
 * attenuation (spec §4.1, §4.2), revocation (§4.3), the jcp/1 client (§11) and receipts (§8).
 *
 * @example
 * ```ts
 * import { JcpClient, newActor, randomRng, resourceIdOf, signGrant } from 'jcp-cluster/client';
 * const issuer = newActor(randomRng), agent = newActor(randomRng);
 * const grant = signGrant({ issuer: issuer.did, subject: agent.did, expiry: 0, nonce: randomRng(16),
 *   capability: { resource: resourceIdOf('fs'), actions: ['list_directory'] }, budget_uj: 1_000_000n }, issuer);
 * const client = await JcpClient.connect({ host: '127.0.0.1', port: 7070, signer: agent });
 * const r = await client.call({ chain: [grant], action: 'list_directory', payload: { path: '/tmp' } });
 * ```
 */
import { randomBytes } from 'node:crypto';
import type { Rng } from '../core/index.ts';

export {
  type Actor,
  actorFromSeed,
  attenuate,
  type AttenuationParams,
  type Capability,
  type ContentId,
  type Cost,
  type Did,
  type Grant,
  grantId,
  type MintRefusal,
  newActor,
  openReceipt,
  type Provenance,
  type ReceiptCore,
  receiptId,
  type Revocation,
  type Rng,
  type SignedGrant,
  type SignedRevocation,
  signGrant,
  signRevocation,
  type Uj,
  verifyGrantSignature,
} from '../core/index.ts';
export { readChainFile } from './chainfile.ts';
export {
  type AgentTaskMethod,
  type AgentTaskParams,
  type AgentTaskResult,
  type CallParams,
  type CallResult,
  CallTimeout,
  type ClientOptions,
  type ClientSigner,
  ConnectionLost,
  JcpClient,
  type ListedResource,
  type McpNotification,
  resultJson,
  WireErrorReply,
} from './client.ts';
export { readKeyFile, resourceIdOf, writeKeyFile } from '../node/index.ts';

/** Random bytes from the operating system (node:crypto), as the {@link Rng} key and nonce makers take. */
export const randomRng: Rng = (n: number) => new Uint8Array(randomBytes(n));
