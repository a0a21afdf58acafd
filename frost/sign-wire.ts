/**
 * Payloads of the signing-session messages (docs/frost.md, "Signing messages"). Readers throw
 * JcpError `schema`/`bad-length`/`did-invalid` naming the field.
 */
import { asArray, asBytes, asDid, asObj, asSafeUint, asText, type Did, type Obj } from '../core/index.ts';
import { MAX_PARTICIPANTS, type SigningCommitment } from './group.ts';
import type { SigningPackage } from './sign.ts';

/**
 * `sign-request` (coordinator → all holders, round 1): `{group, message?}`. The message is there
 * when the coordinator knows it (not for prefetched round one), so a holder with an approval
 * policy decides before it commits a nonce.
 */
export function readRequest(p: Obj): { group: Did; message?: Uint8Array } {
  const o = asObj(p, 'request', ['group'], ['message']);
  const group = asDid(o['group'], 'request.group');
  return o['message'] === undefined ? { group } : { group, message: asBytes(o['message'], 'request.message') };
}

/** `sign-commitment` (holder → coordinator, round 1). */
export interface CommitmentPayload {
  readonly group: Did;
  readonly commitment: SigningCommitment;
  /** Content id of the group package the holder signs under (must equal the coordinator's). */
  readonly digest: string;
}

/** Payload of a `sign-commitment`. */
export function commitmentPayload(group: Did, c: SigningCommitment, digest: string): Obj {
  return { group, identifier: c.identifier, hiding: c.hiding, binding: c.binding, digest };
}

/** Reads a `sign-commitment` payload. */
export function readCommitment(p: Obj): CommitmentPayload {
  const o = asObj(p, 'commitment', ['group', 'identifier', 'hiding', 'binding', 'digest']);
  return {
    group: asDid(o['group'], 'commitment.group'),
    commitment: {
      identifier: asSafeUint(o['identifier'], 'commitment.identifier'),
      hiding: asBytes(o['hiding'], 'commitment.hiding', 32),
      binding: asBytes(o['binding'], 'commitment.binding', 32),
    },
    digest: asText(o['digest'], 'commitment.digest', 64),
  };
}

/** Payload of a `sign-package` (coordinator → each chosen signer, round 2). */
export function packagePayload(group: Did, pkg: SigningPackage): Obj {
  return {
    group,
    message: pkg.message,
    commitments: pkg.commitments.map((c) => ({ identifier: c.identifier, hiding: c.hiding, binding: c.binding })),
  };
}

/** Reads a `sign-package` payload (shape only; `checkPackage` judges it). */
export function readPackage(p: Obj): { group: Did; pkg: SigningPackage } {
  const o = asObj(p, 'package', ['group', 'message', 'commitments']);
  const commitments = asArray(o['commitments'], 'package.commitments', MAX_PARTICIPANTS).map((c, i) => {
    const e = asObj(c, `package.commitments[${i}]`, ['identifier', 'hiding', 'binding']);
    return {
      identifier: asSafeUint(e['identifier'], `package.commitments[${i}].identifier`),
      hiding: asBytes(e['hiding'], `package.commitments[${i}].hiding`),
      binding: asBytes(e['binding'], `package.commitments[${i}].binding`),
    };
  });
  return { group: asDid(o['group'], 'package.group'), pkg: { message: asBytes(o['message'], 'package.message'), commitments } };
}

/** Reads a `sign-share` payload (holder → coordinator, round 2). */
export function readShare(p: Obj): { group: Did; identifier: number; share: Uint8Array } {
  const o = asObj(p, 'share', ['group', 'identifier', 'share']);
  return {
    group: asDid(o['group'], 'share.group'),
    identifier: asSafeUint(o['identifier'], 'share.identifier'),
    share: asBytes(o['share'], 'share.share', 32),
  };
}

/** Reads a `sign-refusal` payload. */
export function readRefusal(p: Obj): { code: string; why: string } {
  const o = asObj(p, 'refusal', ['code', 'why']);
  return { code: asText(o['code'], 'refusal.code', 64), why: asText(o['why'], 'refusal.why', 2048) };
}
