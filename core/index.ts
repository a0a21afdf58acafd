/**
 * The protocol core (JCP v0.3) as pure functions: no I/O, no clock, no ambient randomness.
 * Time (`nowS`, unix seconds), randomness (`Rng`) and keys are arguments. This is the front door;
 * sibling folders import from here.
 */
export { type Actor, actorFromSeed, newActor, type Rng, seededRng } from './actor.ts';
export { bytesEqual, concat, fromHex, toHex, utf8 } from './bytes.ts';
export { decode, encode, Tagged } from './cbor.ts';
export { verifyChain } from './chain.ts';
export {
  amend,
  amendmentId,
  amendmentToCbor,
  checkpointId,
  checkpointToCbor,
  continuationNonce,
  continuationOf,
  issueContinuation,
  makeCheckpoint,
  readAmendment,
  readCheckpoint,
  readSignedAmendment,
  readSignedCheckpoint,
  type SignedAmendment,
  signedAmendmentToCbor,
  type SignedCheckpoint,
  signedCheckpointToCbor,
  type SteeringRefusal,
  SteeringRefusals,
  verifyAmendment,
  verifyCheckpoint,
  verifyContinuation,
} from './checkpoint.ts';
export { decodeJcrSign1, decodeSign1, encodeProtectedHeader, encodeSign1, jcrProtectedHeader, sigStructure } from './cose.ts';
export { decide, type Decision, type DecisionRequest, type DecisionState, denied } from './decision.ts';
export { ALL_DENY_REASONS, type Deny, DenyReasons } from './deny.ts';
export { type Did, didFromPublicKey, isDid, parseDid } from './didkey.ts';
export { ED25519_L, sign, verify } from './ed25519.ts';
export { type Cost, costToCbor, type Provenance, provenanceProblem, provenanceRank, PROVENANCES, readCost, type Uj } from './energy.ts';
export { check, type ErrorCode, ErrorCodes, isJcpError, JcpError } from './errors.ts';
export { type Frame, FRAME_KINDS, type FrameKind, frameToCbor, readFrame, type Trust, TRUST_TAGS } from './frame.ts';
export {
  attenuate,
  type AttenuationParams,
  type Capability,
  checkHop,
  type Grant,
  grantBytes,
  grantId,
  grantToCbor,
  type MintRefusal,
  readGrant,
  readSignedGrant,
  type SignedGrant,
  signedGrantToCbor,
  signGrant,
  verifyGrantSignature,
} from './grant.ts';
export { blake3, contentId, type ContentId, contentIdOfBytes, isContentId } from './hash.ts';
export { Ledger, type LedgerView } from './ledger.ts';
export { addSignatureLines, type Checkpoint, openCheckpoint, signCheckpoint, type SignedLogCheckpoint, verifyCosignature } from './note.ts';
export {
  encodeReceiptCore,
  openJcr1Receipt,
  openReceipt,
  readVouchedReceipt,
  readJcr1ReceiptCore,
  readReceiptCore,
  type ReceiptCore,
  receiptCoreFor,
  receiptCoreToCbor,
  receiptId,
  type ReceiptRefusalCode,
  ReceiptRefusals,
  sealReceipt,
} from './receipt.ts';
export {
  type Attribution,
  attributionKey,
  type BreakCode,
  type ContinuityBreak,
  type DelegationNode,
  delegationTree,
  type RejectedReceipt,
  replayReceipts,
} from './replay.ts';
export { err, ok, type Result } from './result.ts';
export {
  readSignedRevocation,
  type Revocation,
  revocationId,
  RevocationSet,
  revocationToCbor,
  type SignedRevocation,
  signedRevocationToCbor,
  signRevocation,
  verifyRevocation,
} from './revocation.ts';
export {
  advanceKeyState,
  inception,
  type KeyEvent,
  keyEventId,
  keyEventToCbor,
  nextKeyHash,
  readKeyEvent,
  readSignedKeyEvent,
  rotate,
  RotationRefusals,
  type SignedKeyEvent,
  signedKeyEventToCbor,
  verifyKeyLog,
} from './rotation.ts';
export { asArray, asBytes, asCid, asDid, asEnum, asObj, asSafeUint, asText, asUint, type Obj, uintOut } from './schema.ts';
export { mintShards, planSplit, type Remainder, type ShardRefusal, ShardRefusals, type ShardSlice } from './shard.ts';
export { readSigned, signBody, type Signed, verifyBody } from './signed.ts';
export {
  authorPolicy,
  EMPTY_MINT_LEDGER,
  fire,
  type MintLedger,
  mintPolicyId,
  mintPolicyToCbor,
  readMintPolicy,
  readSignedMintPolicy,
  type SignedMintPolicy,
  signedMintPolicyToCbor,
  StandingRefusals,
  verifyPolicy,
} from './standing.ts';
export {
  channelAllows,
  ChannelLedger,
  type ChannelRefusal,
  overdraftBound,
  type OverdraftProof,
  overdraftProofToCbor,
  ProofRefusals,
  readOverdraftProof,
  readSignedStatement,
  readStatement,
  type SignedStatement,
  signedStatementToCbor,
  signStatement,
  spendBound,
  type Statement,
  type StatementRefusalCode,
  StatementRefusals,
  statementToCbor,
  verifyOverdraftProof,
  verifyStatement,
} from './statement.ts';
export { type Hash32, leafHash, MerkleTree, verifyConsistency, verifyInclusion } from './tlog.ts';
export { TrustRoots } from './trust.ts';
export {
  decodeWireMessage,
  decodeWireResponse,
  DEFAULT_FRAME_CAP,
  encodeWireMessage,
  encodeWireRequest,
  encodeWireResponse,
  FRAME_HEADER_BYTES,
  FRAME_INITIAL_RESERVE,
  type FrameAllocator,
  frameMessage,
  FrameReader,
  type FrameReaderOptions,
  MAX_DECLARABLE_LENGTH,
  MAX_ERROR_MESSAGE,
  MAX_WIRE_CHAIN,
  payloadHash,
  readWireRequestFields,
  REQUEST_OPTIONAL,
  REQUEST_INPUT_MAX_CHARS,
  requestIdOf,
  signWireRequest,
  signWireRequestSync,
  type UnsignedWireRequest,
  verifyWireRequestSignature,
  type WireAmended,
  type WireDecision,
  type WireMessage,
  type WireRequest,
  wireRequestSigningBytes,
  wireRequestToCbor,
  type WireResponse,
} from './wire.ts';
export { witness } from './witness.ts';
export { buildFleetRecord, type FleetMember, type FleetRecord, fleetOrigin, verifyFleetRecord } from './fleet.ts';
export { splitSequence } from './cbor.ts';
export { firstForbiddenHead, firstNonCanonicalByte, type ItemFault, itemEndOrFault, majorOf } from './cbor.ts';
export { decodeWireRequestWithChain, requestChainEntry, wireRequestSigningBytesOf } from './wire.ts';
