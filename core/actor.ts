/**
 * Actors (spec §2): an Ed25519 signing key with its did:key. Randomness is an argument.
 */
import { createHash } from 'node:crypto';
import { type Did, didFromPublicKey } from './didkey.ts';
import { type SigningKey, signingKeyFromSeed } from './ed25519.ts';

/** A source of random bytes; callers pass `crypto.randomBytes` or a seeded generator. */
export type Rng = (n: number) => Uint8Array;

/** A signing actor: its key and did:key. */
export interface Actor {
  readonly did: Did;
  readonly key: SigningKey;
}

/** The actor for a 32-byte Ed25519 seed (RFC 8032). @throws JcpError `bad-length` */
export function actorFromSeed(seed: Uint8Array): Actor {
  const key = signingKeyFromSeed(seed);
  return { did: didFromPublicKey(key.publicKey.bytes), key };
}

/** A fresh actor drawn from `rng`. */
export function newActor(rng: Rng): Actor {
  return actorFromSeed(rng(32));
}

/**
 * A deterministic RNG for vectors and tests: SHA-256 in counter mode over a seed string.
 * Not for production keys.
 */
export function seededRng(seed: string): Rng {
  let counter = 0;
  return (n: number) => {
    const out = new Uint8Array(n);
    let off = 0;
    while (off < n) {
      const block = createHash('sha256').update(`${seed}/${counter++}`).digest();
      const take = Math.min(block.length, n - off);
      out.set(block.subarray(0, take), off);
      off += take;
    }
    return out;
  };
}
