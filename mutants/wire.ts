/**
 * Mutants of the jcp/1 wire binding (spec §11; core/wire.ts, core/cbor.ts): the payload
 * binding weakened, the caller signature checked over the wrong bytes.
 */
import type { Mutant } from '../scripts/mutants.ts';

export default [
  {
    id: 'wire-payload-hash-only-when-present',
    file: 'core/wire.ts',
    find: "check(frame.payload_hash === payloadHash(payload), 'request.frame.payload_hash', 'does not match the payload');",
    replace:
      "check(payload === undefined || frame.payload_hash === payloadHash(payload), 'request.frame.payload_hash', 'does not match the payload');",
    classes: ['C8'],
  },
  {
    id: 'wire-payload-hash-unchecked-bytes',
    file: 'core/wire.ts',
    find: "check(frame.payload_hash === payloadHash(payload), 'request.frame.payload_hash', 'does not match the payload');",
    replace:
      "check(frame.payload_hash.length === payloadHash(payload).length, 'request.frame.payload_hash', 'does not match the payload');",
    classes: ['C8'],
  },
  {
    id: 'signing-map-count-kept',
    file: 'core/cbor.ts',
    find: 'out[0] = head - 1;',
    replace: 'out[0] = head;',
    classes: ['C8', 'C3'],
  },
  {
    id: 'signing-over-whole-body',
    file: 'core/cbor.ts',
    find: '  out.set(body.subarray(0, start));',
    replace: '  out.set(body.subarray(body.length - start));',
    classes: ['C-neg'],
  },
] satisfies Mutant[];
