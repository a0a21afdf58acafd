/**
 * The front door of cli/: the names other folders use. Siblings and tests import from here
 * (tests may also use internal.ts); files inside cli/ import each other directly.
 */
