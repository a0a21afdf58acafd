/**
 * Names of core/ that only the tests reach (beside the front door, index.ts, which this
 * re-exports). Product code never imports this file.
 */
export * from './index.ts';
export { FlatMapPicker, FlatMapWriter, headLength, readCanonical, readFlatMap, readHead, writeHead } from './cbor.ts';
export { decodeByCborg } from './cbor.ts';
export { MAX_CHAIN_LENGTH } from './chain.ts';
export { COSE_ALG_EDDSA, ed25519KeyFromCose, signSign1, verifySign1 } from './cose.ts';
export { isExpired } from './decision.ts';
export {
  isCanonicalPointEncoding,
  isCanonicalSignature,
  type PublicKey,
  publicKeyFromBytes,
  publicKeyFromJwk,
  signingKeyFromJwk,
  signingKeyFromSeed,
} from './ed25519.ts';
export { checkpointText, cosign, parseCheckpointText, parseNote, verifyNote } from './note.ts';
export { BreakCodes } from './replay.ts';
export { verifyRevocation } from './revocation.ts';
export { ChannelRefusals } from './statement.ts';
export { EMPTY_ROOT } from './tlog.ts';
export { errorResponseOf } from './wire.ts';
export { concatItems } from './cbor.ts';
export { headBytes } from './cbor.ts';
export { leadingTag } from './cbor.ts';
export { skipItem } from './cbor.ts';
export { withoutMapEntry } from './cbor.ts';
export { jcrSign1Parts } from './cose.ts';
export { readOwnReceipt, REPLAYED_FIELDS, type ReplayedFields } from './receipt.ts';
