/**
 * `revocations.json`: revocations (spec §4.3; C6). Each signed revocation is checked for
 * authority against the grant it is presented with — ids match, the revoker is the grant's
 * issuer, the signature verifies — and admitted or refused with its code; plus revocation bytes
 * that a strict decoder must refuse. Subtree death is in `decisions.json` (`chained/revoked-*`).
 */
import {
  decode,
  encode,
  readSignedRevocation,
  type Revocation,
  revocationId,
  RevocationSet,
  revocationToCbor,
  sign,
  type SignedGrant,
  type SignedRevocation,
  signedRevocationToCbor,
} from '../core/index.ts';
import type { Checker } from '../conformance/index.ts';
import { threeLinks } from './chains.ts';
import { type ActorName, actor, did, fileHeader, idOf, nonce, sgFromHex, sgHex, VectorCheck } from './fixtures.ts';
import { hex, type J, type JsonObj } from './json.ts';

function revoke(
  grant: SignedGrant,
  revokedBy: ActorName,
  signer: ActorName,
  label: string,
  grantIdOverride?: string,
): { sr: SignedRevocation; signer: ActorName } {
  const body: Revocation = { grant_id: grantIdOverride ?? idOf(grant), revoked_by: did(revokedBy), nonce: nonce(label) };
  return { sr: { body, signature: sign(actor(signer).key, encode(revocationToCbor(body))) }, signer };
}

function vector(name: string, description: string, grant: SignedGrant, r: { sr: SignedRevocation; signer: ActorName }): JsonObj {
  const set = new RevocationSet();
  const verdict = set.admit(r.sr, grant.grant);
  return {
    name,
    description,
    grant: sgHex(grant),
    revocation: {
      body: { grant_id: r.sr.body.grant_id, revoked_by: r.sr.body.revoked_by, nonce: hex(r.sr.body.nonce) },
      signer: r.signer,
      signed_cbor: hex(encode(signedRevocationToCbor(r.sr))),
      id: revocationId(r.sr.body),
    },
    expected: verdict.ok ? 'admitted' : verdict.error.code,
  };
}

/** Builds `revocations.json`. */
export function generate(): JsonObj {
  const [root, mid, leaf] = threeLinks('revocations/chain') as [SignedGrant, SignedGrant, SignedGrant];
  const good = revoke(root, 'alice', 'alice', 'revocations/root-by-alice');
  const goodBytes = encode(signedRevocationToCbor(good.sr));
  const o = signedRevocationToCbor(good.sr) as { body: Record<string, unknown>; signature: Uint8Array };
  return {
    ...fileHeader('revocations.json', 'Revocation authority', '§4.3; C6'),
    revocations: [
      vector('issuer-revokes-root', 'alice revokes the root she issued', root, good),
      vector(
        'delegator-revokes-child',
        'bob revokes the middle grant he issued to carol',
        mid,
        revoke(mid, 'bob', 'bob', 'revocations/mid-by-bob'),
      ),
      vector(
        'subject-cannot-revoke',
        'bob (the root’s subject) tries to revoke it',
        root,
        revoke(root, 'bob', 'bob', 'revocations/root-by-bob'),
      ),
      vector(
        'ancestor-issuer-cannot-revoke-leaf',
        'alice issued the root, not the leaf: only carol may revoke it',
        leaf,
        revoke(leaf, 'alice', 'alice', 'revocations/leaf-by-alice'),
      ),
      vector('forged', 'names alice as revoker, signed by mallory', root, revoke(root, 'alice', 'mallory', 'revocations/forged')),
      vector('wrong-grant', 'alice’s revocation of the root, presented against the middle grant', mid, good),
      vector(
        'id-mismatch',
        'revokes an id that is not the grant presented',
        root,
        revoke(root, 'alice', 'alice', 'revocations/id-mismatch', idOf(leaf)),
      ),
    ],
    decode_errors: [
      {
        name: 'nonce-15-bytes',
        cbor: hex(encode({ ...o, body: { ...o.body, nonce: good.sr.body.nonce.subarray(0, 15) } })),
        code: 'bad-length',
      },
      { name: 'revoked-by-not-did', cbor: hex(encode({ ...o, body: { ...o.body, revoked_by: 'alice' } })), code: 'did-invalid' },
      { name: 'grant-id-not-content-id', cbor: hex(encode({ ...o, body: { ...o.body, grant_id: 'abc' } })), code: 'schema' },
      { name: 'unknown-field', cbor: hex(encode({ ...o, body: { ...o.body, reason: 'compromised' } })), code: 'schema' },
      { name: 'trailing-byte', cbor: hex(new Uint8Array([...goodBytes, 0])), code: 'cbor-malformed' },
    ],
  };
}

/** Re-checks `revocations.json` against our implementation. */
export function verify(doc: J, t: Checker): void {
  const c = new VectorCheck(t, 'revocations.json', doc);
  c.each(doc, 'revocations', (v) => {
    const grant = sgFromHex(v.get('grant'));
    const rv = v.get('revocation');
    const b = rv.get('body');
    const body: Revocation = { grant_id: b.get('grant_id').str(), revoked_by: b.get('revoked_by').str(), nonce: b.get('nonce').bytes(16) };
    const sig = sign(c.actor(rv.get('signer')).key, encode(revocationToCbor(body)));
    c.eq(hex(encode(signedRevocationToCbor({ body, signature: sig }))), rv.get('signed_cbor').str(), 'signed bytes');
    c.eq(revocationId(body), rv.get('id').str(), 'revocation id = content id of the body');
    const sr = readSignedRevocation(decode(rv.get('signed_cbor').bytes()));
    const set = new RevocationSet();
    const r = set.admit(sr, grant.grant);
    c.eq(r.ok ? 'admitted' : r.error.code, v.get('expected').str(), 'admitted or refused');
    c.eq(set.has(sr.body.grant_id), r.ok, 'only an admitted revocation changes the set');
  });
  c.each(doc, 'decode_errors', (v) => {
    const bytes = v.get('cbor').bytes();
    c.throws(() => readSignedRevocation(decode(bytes)), v.get('code').str(), 'refused with the expected code');
  });
}
