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
export { type ThresholdActor, issueGrant, revokeGrant, signBodyAs } from './actor.ts';
export {
  type AllowRule,
  type ArgRule,
  type DecisionBody,
  type DecodedCall,
  decodeCall,
  judgeByRules,
  openDecision,
  parseRules,
  precheck,
  type RawMessage,
  type ReadDecision,
  resourceIdFor,
  type Rules,
  sealDecision,
  type Subject,
  type Verdict,
} from './approval.ts';
export {
  type Approver,
  type ApproverOpts,
  approvalsStream,
  approvalsSubject,
  DecisionJournal,
  DEFAULT_APPROVE_TIMEOUT_MS,
  describeCall,
  promptApprover,
  publishDecision,
  readDecisionFile,
  readDecisionStream,
  rulesApprover,
  type ShownCall,
  type StreamedDecision,
  webhookApprover,
} from './approvers.ts';
export {
  type Bus,
  type BusMsg,
  DEFAULT_PREFIX,
  evidenceStream,
  type GroupRegistry,
  natsBus,
  natsRegistry,
  publishEvidence,
  registryBucket,
  subjects,
} from './bus.ts';
export { type SignOpts, type SignResult, type Signer, signWithGroup, thresholdSigner, type ThresholdSignerOpts } from './coordinator.ts';
export { type Deal, deal, type DealFixed, type DealtShare } from './dealer.ts';
export {
  checkRound1,
  checkRound2Share,
  dkgAbandon,
  type DkgResult,
  dkgRound1,
  dkgRound2,
  dkgRound3,
  type DkgState,
  dkgStateFromCoefficients,
  type Round1Package,
} from './dkg.ts';
export { type DkgOutcome, DkgSession } from './dkg-session.ts';
export { verifyComplaint } from './dkg-wire.ts';
export { type Culprit, describeCulprits, fault, FrostError, type FrostErrorCode, FrostErrorCodes, type FrostFault, isFrostError } from './errors.ts';
export {
  checkGroup,
  checkThreshold,
  decodeElement,
  type GroupPublic,
  groupDid,
  groupDigest,
  groupTag,
  MAX_PARTICIPANTS,
  type PublicPackage,
  type ShareSecret,
  type SigningCommitment,
  type Threshold,
} from './group.ts';
export { type DkgDone, type DkgOpts, runDkg } from './initiator.ts';
export { DEFAULT_NONCE_TTL_MS, NonceJournal } from './journal.ts';
export { Keystore, type KeystoreOpts } from './keystore.ts';
export { type Envelope, type Kind, KINDS, openMessage, PROTOCOL, sealMessage } from './message.ts';
export { Participant, type ParticipantEvent, type ParticipantOpts } from './participant.ts';
export {
  decodeShareFile,
  encodeShareFile,
  peekShareFile,
  readIdentityFile,
  readShareFile,
  type SealOpts,
  type ShareRecord,
  shareRecord,
  writeIdentityFile,
  writeShareFile,
} from './sharefile.ts';
export { aggregate, badShares, checkPackage, commit, type SigningPackage, signShare, soloSignature } from './sign.ts';
export { CommitmentPrefetch } from './coordinator.ts';
export { warmUp } from './group.ts';
