/**
 * The protocol core (JCP v0.3) as pure functions: no I/O, no clock, no ambient randomness.
 * Time (`nowS`, unix seconds), randomness (`Rng`) and keys are arguments. This is the front door;
 * sibling folders import from here.
 */
export * from './actor.ts';
export * from './bytes.ts';
export * from './cbor.ts';
export * from './chain.ts';
export * from './checkpoint.ts';
export * from './cose.ts';
export * from './decision.ts';
export * from './deny.ts';
export * from './didkey.ts';
export * from './ed25519.ts';
export * from './energy.ts';
export * from './errors.ts';
export * from './frame.ts';
export * from './grant.ts';
export * from './hash.ts';
export * from './ledger.ts';
export * from './receipt.ts';
export * from './replay.ts';
export * from './result.ts';
export * from './revocation.ts';
export * from './rotation.ts';
export * from './schema.ts';
export * from './shard.ts';
export * from './signed.ts';
export * from './standing.ts';
export * from './statement.ts';
export * from './trust.ts';
export * from './wire.ts';
