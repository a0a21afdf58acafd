/**
 * Round messages (frost/message.ts) and share encryption (frost/box.ts): every message is signed
 * by its sender and bound to its session, round, kind and recipient; anything else is refused.
 */
import { describe, expect, it } from 'vitest';
import { decode, encode, newActor, seededRng } from '../../core/index.ts';
import {
  expectMessage,
  FrostErrorCodes,
  isFrostError,
  newBoxKey,
  open,
  openMessage,
  pairKey,
  seal,
  sealMessage,
} from '../../frost/internal.ts';

const rng = seededRng('test/frost/message');
const alice = newActor(rng);
const bob = newActor(rng);
const carol = newActor(rng);
const S = '0123456789abcdef0123456789abcdef';
const T = 'fedcba9876543210fedcba9876543210';

describe('round messages / signed and bound', () => {
  const raw = sealMessage({ kind: 'dkg-round2', session: S, round: 2, to: bob.did, payload: { identifier: 1 } }, alice);

  it('opens with its sender named and its signature checked', () => {
    const o = openMessage(raw);
    expect(o.ok && o.value.body).toMatchObject({ kind: 'dkg-round2', session: S, round: 2, from: alice.did, to: bob.did });
    expect(o.ok && expectMessage(o.value, { kind: 'dkg-round2', session: S, round: 2, to: bob.did, from: [alice.did] }).ok).toBe(true);
  });

  it('refuse / another session, round, kind, recipient or sender, each naming the sender (frost-misrouted)', () => {
    const o = openMessage(raw);
    if (!o.ok) throw new Error(o.error.why);
    const cases = [
      { kind: 'dkg-round2', session: T, round: 2, to: bob.did },
      { kind: 'dkg-round2', session: S, round: 1, to: bob.did },
      { kind: 'dkg-round1', session: S, round: 2, to: bob.did },
      { kind: 'dkg-round2', session: S, round: 2, to: carol.did },
      { kind: 'dkg-round2', session: S, round: 2, to: bob.did, from: [carol.did] },
    ] as const;
    for (const want of cases) {
      expect(expectMessage(o.value, want)).toMatchObject({
        ok: false,
        error: { code: FrostErrorCodes.MISROUTED, culprits: [{ did: alice.did }] },
      });
    }
  });

  it('refuse / a body re-signed by someone else, a changed field, or non-canonical bytes (frost-bad-message)', () => {
    const m = decode(raw) as { body: Record<string, unknown>; signature: Uint8Array };
    const changed = encode({ body: { ...m.body, session: T }, signature: m.signature });
    expect(openMessage(changed)).toMatchObject({ ok: false, error: { code: FrostErrorCodes.BAD_MESSAGE, culprits: [{ did: alice.did }] } });
    const impostor = sealMessage({ kind: 'dkg-round2', session: S, round: 2, to: bob.did, payload: { identifier: 1 } }, carol);
    const spoofed = encode({ body: { ...m.body }, signature: (decode(impostor) as { signature: Uint8Array }).signature });
    expect(openMessage(spoofed).ok).toBe(false);
    const longForm = Uint8Array.from([...raw.subarray(0, raw.length), 0x00]);
    expect(openMessage(longForm)).toMatchObject({ ok: false, error: { code: FrostErrorCodes.BAD_MESSAGE } });
  });
});

describe('share encryption / X25519 + HKDF + AES-256-GCM bound to session and parties', () => {
  const a = newBoxKey();
  const b = newBoxKey();
  const ctx = { session: S, from: alice.did, to: bob.did, fromKey: a.public, toKey: b.public };
  const share = new Uint8Array(32).fill(5);
  const nonce = new Uint8Array(12).fill(1);
  const sealed = seal(pairKey(a.secret, b.public, ctx), nonce, ctx, share);

  it('only the recipient, in this session, reads the share', () => {
    expect(open(pairKey(b.secret, a.public, ctx), nonce, ctx, sealed)).toEqual(share);
    const c = newBoxKey();
    expect(open(pairKey(c.secret, a.public, ctx), nonce, ctx, sealed)).toBeUndefined();
    const otherSession = { ...ctx, session: T };
    expect(open(pairKey(b.secret, a.public, otherSession), nonce, otherSession, sealed)).toBeUndefined();
    const otherRecipient = { ...ctx, to: carol.did };
    expect(open(pairKey(b.secret, a.public, otherRecipient), nonce, otherRecipient, sealed)).toBeUndefined();
  });

  it('refuse / a low-order X25519 peer key', () => {
    let code = 'accepted';
    try {
      pairKey(a.secret, new Uint8Array(32), ctx);
    } catch (e) {
      code = isFrostError(e) ? e.code : 'untyped';
    }
    expect(code).toBe(FrostErrorCodes.BAD_MESSAGE);
  });
});
