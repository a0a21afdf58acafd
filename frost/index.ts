/**
 * Threshold actors (spec §2.2): k-of-n did:keys whose private key never exists in one place.
 *
 * - Pure rounds: `deal` (trusted dealer), `dkgRound1..3` (distributed key generation), `commit`,
 *   `checkPackage`, `signShare`, `aggregate` (RFC 9591 via `@noble/curves` `ed25519_FROST`).
 * - Files: share and identity files (mode 0600, optionally sealed), the keystore, the nonce journal.
 * - Actors over NATS: `Participant` (answers DKG and signing sessions), `runDkg` (starts a DKG),
 *   `signWithGroup` (coordinates a signing session), `thresholdSigner` (a group as a signer
 *   function), and `issueGrant` / `revokeGrant` / `signBodyAs` for threshold actors.
 * docs/frost.md describes the messages, the encryption, nonce durability and failure handling.
 */
export { type ThresholdActor, issueGrant, revokeGrant } from './actor.ts';
export {
  type DecisionBody,
  decodeCall,
  judgeByRules,
  openDecision,
  parseRules,
  precheck,
  type ReadDecision,
  resourceIdFor,
  type Rules,
  sealDecision,
} from './approval.ts';
export {
  ALLOW_ALL_POLICY_ID,
  ALLOW_ALL_REASON,
  allowAllApprover,
  type Approver,
  approvalsStream,
  frostStreams,
  approvalsSubject,
  DEFAULT_APPROVE_TIMEOUT_MS,
  MAX_WEBHOOK_ANSWER_BYTES,
  readWebhookSecret,
  webhookMac,
  WEBHOOK_SIGNATURE_HEADER,
  WEBHOOK_TIMESTAMP_HEADER,
  readHolderDecisions,
  type StreamedDecision,
  promptApprover,
  readDecisionFile,
  readDecisionStream,
  rulesApprover,
  webhookApprover,
} from './approvers.ts';
export { type Bus, DEFAULT_PREFIX, evidenceStream, type GroupRegistry, natsBus, natsRegistry, registryBucket, subjects } from './bus.ts';
export { type Signer, signWithGroup, thresholdSigner } from './coordinator.ts';
export { type Deal, deal, type DealtShare } from './dealer.ts';
export { checkRound1, checkRound2Share, dkgRound1, dkgRound2, dkgRound3, dkgStateFromCoefficients, type Round1Package } from './dkg.ts';
export { verifyComplaint } from './dkg-wire.ts';
export { describeCulprits, FrostError, FrostErrorCodes, isFrostError } from './errors.ts';
export { decodeElement, type GroupPublic, groupDid, type PublicPackage, type ShareSecret, type SigningCommitment } from './group.ts';
export { runDkg } from './initiator.ts';
export { NonceJournal } from './journal.ts';
export { Keystore } from './keystore.ts';
export { openMessage, sealMessage } from './message.ts';
export { APPROVE_REQUIRED_MESSAGE, Participant } from './participant.ts';
export {
  decodeShareFile,
  encodeShareFile,
  peekShareFile,
  readIdentityFile,
  readShareFile,
  type ShareRecord,
  shareRecord,
  writeIdentityFile,
  writeShareFile,
} from './sharefile.ts';
export {
  aggregate,
  aggregatePlanned,
  badShares,
  checkPackage,
  commit,
  planAggregate,
  type SigningPackage,
  signShare,
  soloSignature,
} from './sign.ts';
export { CommitmentPrefetch } from './coordinator.ts';
export { warmUp } from './group.ts';
export { type Curve, curves, useCurve } from './curve.ts';
