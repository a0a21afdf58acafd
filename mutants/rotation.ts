/**
 * Mutants of pre-committed key rotation (spec §2.1, C12): building a rotation and verifying a key
 * log. Format: see `scripts/mutants.ts`.
 */
import type { Mutant } from '../scripts/mutants.ts';

export default [
  {
    id: 'rotation-build-any-new-key',
    file: 'core/rotation.ts',
    find: 'if (nextKeyHash(newCurrent.key.publicKey.bytes) !== prev.body.next_hash) {',
    replace: 'if (newCurrent.did === prev.body.current) {',
    classes: ['C12'],
  },
  {
    id: 'rotation-next-hash-unchecked',
    file: 'core/rotation.ts',
    find: 'if (hashOfDid(e.current) !== state.next_hash) {',
    replace: 'if (hashOfDid(e.current) !== state.next_hash && e.current === state.current) {',
    classes: ['C12'],
  },
  {
    id: 'rotation-current-key-may-recommit',
    file: 'core/rotation.ts',
    find: 'if (hashOfDid(e.current) !== state.next_hash) {',
    replace: 'if (hashOfDid(e.current) !== state.next_hash && e.current !== state.current) {',
    classes: ['C12'],
  },
  {
    id: 'rotation-next-hash-of-next',
    file: 'core/rotation.ts',
    find: 'if (hashOfDid(e.current) !== state.next_hash) {',
    replace: 'if (hashOfDid(e.current) !== state.next_hash && hashOfDid(e.current) !== e.next_hash) {',
    classes: ['C12'],
  },
  {
    id: 'rotation-sequence-gap-accepted',
    file: 'core/rotation.ts',
    find: 'if (e.seq !== state.seq + 1) return refuse(',
    replace: 'if (e.seq <= state.seq) return refuse(',
    classes: ['C12'],
  },
  {
    id: 'rotation-parent-only-present',
    file: 'core/rotation.ts',
    find: 'if (e.parent !== state.head) return refuse(',
    replace: 'if (e.parent === undefined) return refuse(',
    classes: ['C12'],
  },
  {
    id: 'rotation-identity-unchecked',
    file: 'core/rotation.ts',
    find: 'if (e.identity !== state.identity) return refuse(',
    replace: 'if (e.identity === undefined) return refuse(',
    classes: ['C12'],
  },
  {
    id: 'rotation-signed-by-previous-key',
    file: 'core/rotation.ts',
    find: 'if (!verifyBody(se, e.current)) return refuse(',
    replace: 'if (!verifyBody(se, state?.current ?? e.current) && !verifyBody(se, e.current)) return refuse(',
    classes: ['C12'],
  },
  {
    id: 'rotation-inception-any-key',
    file: 'core/rotation.ts',
    find: 'if (e.current !== e.identity) return refuse(',
    replace: 'if (e.current === undefined) return refuse(',
    classes: ['C12'],
  },
  {
    id: 'rotation-inception-parent-accepted',
    file: 'core/rotation.ts',
    find: "if (e.parent !== undefined) return refuse(RotationRefusals.PARENT_MISMATCH, 'inception has a parent');",
    replace: '',
    classes: ['C12'],
  },
  {
    id: 'rotation-inception-seq-unchecked',
    file: 'core/rotation.ts',
    find: 'if (e.seq !== 0) return refuse(',
    replace: 'if (e.seq < 0) return refuse(',
    classes: ['C12'],
  },
] satisfies Mutant[];
