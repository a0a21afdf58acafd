/** The jcp/1 `amend` / `amended` messages (§4.7; docs/wire.md): canonical round trip and strict schema. */
import { describe, expect, test } from 'vitest';
import {
  amend,
  contentId,
  decodeWireMessage,
  encode,
  encodeWireMessage,
  isJcpError,
  makeCheckpoint,
  newActor,
  seededRng,
  signedAmendmentToCbor,
  signedCheckpointToCbor,
  signedGrantToCbor,
  signGrant,
} from '../../core/index.ts';

const rng = seededRng('test/core/steering-wire');
const [issuer, agent] = [newActor(rng), newActor(rng)];
const grant = signGrant(
  {
    issuer: issuer.did,
    subject: agent.did,
    capability: { resource: contentId({ r: 1 }), actions: ['a'] },
    budget_uj: 1000n,
    expiry: 0,
    nonce: rng(16),
  },
  issuer,
);
const cp = makeCheckpoint(grant, contentId({ s: 1 }), agent, rng(16));
if (!cp.ok) throw new Error(cp.error.why);
const sa = amend(cp.value, grant, { budget_uj: 400n, instructions: contentId({ i: 1 }), nonce: rng(16) }, issuer);
if (!sa.ok) throw new Error(sa.error.why);

const codeOf = (f: () => unknown): string | undefined => {
  try {
    f();
    return undefined;
  } catch (e) {
    return isJcpError(e) ? e.code : String(e);
  }
};

describe('amend / amended on the wire', () => {
  test('amend round-trips byte for byte and keeps every signed field', () => {
    const bytes = encodeWireMessage({ kind: 'amend', grant, checkpoint: cp.value, amendment: sa.value });
    const m = decodeWireMessage(bytes);
    expect(m.kind).toBe('amend');
    if (m.kind !== 'amend') return;
    expect(encodeWireMessage(m)).toEqual(bytes);
    expect(m.amendment.body.budget_uj).toBe(400n);
    expect(m.amendment.body.instructions).toBe(sa.value.body.instructions);
    expect(m.checkpoint.body.state).toBe(cp.value.body.state);
    expect(m.grant.grant.budget_uj).toBe(1000n);
    expect(m.grant.signature).toEqual(grant.signature);
  });

  test('amended round-trips, amounts as uint64', () => {
    const amended = {
      grant_id: contentId({ g: 1 }),
      continuation_id: contentId({ c: 1 }),
      budget_uj: (1n << 64n) - 1n,
      steered_spent_uj: 0n,
    };
    const bytes = encodeWireMessage({ kind: 'amended', amended });
    const m = decodeWireMessage(bytes);
    expect(m).toEqual({ kind: 'amended', amended });
    expect(encodeWireMessage(m)).toEqual(bytes);
  });

  test('a missing part, an unknown field or a second top-level key is refused `schema`', () => {
    const parts = {
      grant: signedGrantToCbor(grant),
      checkpoint: signedCheckpointToCbor(cp.value),
      amendment: signedAmendmentToCbor(sa.value),
    };
    const { checkpoint: _, ...noCheckpoint } = parts;
    expect(codeOf(() => decodeWireMessage(encode({ amend: noCheckpoint })))).toBe('schema');
    expect(codeOf(() => decodeWireMessage(encode({ amend: { ...parts, extra: 1 } })))).toBe('schema');
    expect(codeOf(() => decodeWireMessage(encode({ amend: parts, revoked: { grant_id: contentId({ g: 1 }) } })))).toBe('schema');
    expect(
      codeOf(() =>
        decodeWireMessage(encode({ amended: { grant_id: contentId({ g: 1 }), continuation_id: contentId({ c: 1 }), budget_uj: 1 } })),
      ),
    ).toBe('schema');
  });
});
