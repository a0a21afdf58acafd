/**
 * Mutants of canonical CBOR (spec §3; core/cbor.ts, encoder and decoder): the re-encoding check
 * weakened, key order by string instead of encoded bytes, floats and bools let through.
 */
import type { Mutant } from '../scripts/mutants.ts';

export default [
  {
    id: 'cbor-reencode-length-only',
    file: 'core/cbor.ts',
    find: 'if (!bytesEqual(again, bytes)) {',
    replace: 'if (!bytesEqual(again, bytes) && again.length !== bytes.length) {',
    classes: ['C8'],
  },
  {
    id: 'cbor-half-floats-decoded',
    file: 'core/cbor.ts',
    find: 'if (ai >= 25) forbid(`a float',
    replace: 'if (ai >= 26) forbid(`a float',
    classes: ['C-neg'],
    equivalent:
      'the next line forbids every other major-7 item (as simple(25)), so a half float is still cbor-forbidden-type; only the message changes',
  },
  {
    id: 'cbor-flat-key-order-unchecked',
    file: 'core/cbor.ts',
    find: 'compareRanges(b, prevStart, prevEnd, keyStart, keyEnd) >= 0',
    replace: 'compareRanges(b, prevStart, prevEnd, keyStart, keyEnd) === 0',
    classes: ['C8'],
  },
  {
    id: 'cbor-flat-duplicate-keys',
    file: 'core/cbor.ts',
    find: 'compareRanges(b, prevStart, prevEnd, keyStart, keyEnd) >= 0',
    replace: 'compareRanges(b, prevStart, prevEnd, keyStart, keyEnd) > 0',
    classes: ['C8'],
  },
  {
    id: 'cbor-bools-decoded',
    file: 'core/cbor.ts',
    find: "forbid(ai === 20 || ai === 21 ? 'a bool'",
    replace: "if (ai !== 20 && ai !== 21) forbid(ai === 20 || ai === 21 ? 'a bool'",
    classes: ['C-neg'],
    equivalent:
      'the guard lets true/false through, but the re-encoding check then refuses them: encode() forbids bools, so the decode still fails cbor-forbidden-type',
  },
  {
    id: 'detcbor-keys-sorted-as-strings',
    file: 'core/cbor.ts',
    find: 'pairs.sort((x, y) => compareBytes(x.e, y.e));',
    replace: 'pairs.sort((x, y) => (x.k < y.k ? -1 : x.k > y.k ? 1 : 0));',
    classes: ['C8'],
  },
  {
    id: 'detcbor-bools-encoded',
    file: 'core/cbor.ts',
    find: "    case 'boolean':\n      forbid('a bool');\n      break;",
    replace: "    case 'boolean':\n      w.head(7, v ? 21 : 20);\n      return;",
    classes: ['C-neg'],
  },
  {
    id: 'detcbor-shortest-form-off-by-one',
    file: 'core/cbor.ts',
    find: '    if (v < 0x10000) {',
    replace: '    if (v < 0x1000) {',
    classes: ['C8', 'C-neg'],
  },
] satisfies Mutant[];
