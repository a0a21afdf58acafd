/**
 * A tiny mutant list for test/harness/mutants.test.ts (not a product list): one mutant C1 kills
 * (the decision stops comparing the frame's resource with the capability's) and one equivalent.
 */
import type { Mutant } from '../../../scripts/mutants.ts';

export default [
  {
    id: 'fixture-scope-dropped',
    file: 'core/decision.ts',
    find: 'if (f.resource !== g.capability.resource) {',
    replace: 'if (f.resource !== f.resource) {',
    classes: ['C1'],
  },
  {
    id: 'fixture-comment',
    file: 'core/decision.ts',
    find: '/** §7 check 8: the frame',
    replace: '/** §7 check eight: the frame',
    classes: ['C1'],
    equivalent: 'a comment: no behaviour changes',
  },
] satisfies Mutant[];
