/**
 * Test helper: a jcp/1 call as a threshold group would be asked to sign it (spec §11: the
 * canonical bytes of the request without its `signature`), with a grant issued to the group.
 */
import { randomBytes } from 'node:crypto';
import {
  actorFromSeed,
  type Did,
  grantId,
  payloadHash,
  signGrant,
  type UnsignedWireRequest,
  utf8,
  wireRequestSigningBytes,
} from '../../core/index.ts';
import { resourceIdFor } from '../../frost/index.ts';

/** The steward that issues the group's grant (fixed, so tests are reproducible). */
export const STEWARD = actorFromSeed(new Uint8Array(32).fill(7));

/** An unsigned tool call by `caller` (default a fresh did) on resource `resource` (a name). */
export function unsignedCall(opts: {
  caller?: Did;
  action?: string;
  resource?: string;
  args?: unknown;
  payload?: Uint8Array;
  costUj?: bigint;
  nowS?: number;
}): UnsignedWireRequest {
  const caller = opts.caller ?? actorFromSeed(new Uint8Array(randomBytes(32))).did;
  const resource = resourceIdFor(opts.resource ?? 'fs');
  const g = signGrant(
    {
      issuer: STEWARD.did,
      subject: caller,
      capability: { resource, actions: [opts.action ?? 'write_file'] },
      budget_uj: 1_000_000n,
      expiry: 0,
      nonce: new Uint8Array(16).fill(1),
    },
    STEWARD,
  );
  const payload = opts.payload ?? (opts.args === undefined ? undefined : utf8(JSON.stringify(opts.args)));
  return {
    frame: {
      kind: 'tool-call',
      trust: 'control',
      grant_id: grantId(g.grant),
      action: opts.action ?? 'write_file',
      resource,
      payload_hash: payloadHash(payload),
    },
    chain: [g],
    caller,
    cost: { uj: opts.costUj ?? 500n, provenance: 'Estimator' },
    now: opts.nowS ?? Math.floor(Date.now() / 1000),
    ...(payload !== undefined ? { payload } : {}),
  };
}

/** The §11 signing bytes of {@link unsignedCall}: what `jcp frost sign --message` takes. */
export function callBytes(opts: Parameters<typeof unsignedCall>[0]): Uint8Array {
  return wireRequestSigningBytes(unsignedCall(opts));
}
