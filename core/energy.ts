/**
 * Energy costs (spec §5): integer microjoules with a provenance tag.
 *
 * Provenance rules: `HwShunt` (a hardware reading) REQUIRES `measured`; `ModelBased` (calibrated
 * model) MAY carry it; `Estimator` (coarse constant) MUST NOT. A figure never claims better
 * provenance than how it was obtained (the meter/ ladder enforces that when it degrades).
 */
import { check } from './errors.ts';
import { asEnum, asObj, asUint, type Obj, uintOut } from './schema.ts';

/**
 * Microjoules. Always bigint: cluster totals can pass 2^53. Counts and seq numbers are `number`
 * throughout, so the compiler already refuses one where µJ are wanted.
 */
export type Uj = bigint;

/** Provenance tags, best first (§5). */
export const PROVENANCES = ['HwShunt', 'ModelBased', 'Estimator'] as const;
/** A provenance tag. */
export type Provenance = (typeof PROVENANCES)[number];

/** A metered cost (§5): `uj` is what is debited; `measured` is the raw reading in µJ, when there is one. */
export interface Cost {
  readonly uj: Uj;
  readonly provenance: Provenance;
  readonly measured?: Uj;
}

/** Why a cost's provenance is inconsistent, or undefined when it is consistent (§5, C9). */
export function provenanceProblem(c: Cost): string | undefined {
  if (c.provenance === 'HwShunt' && c.measured === undefined) return 'HwShunt requires a measured figure';
  if (c.provenance === 'Estimator' && c.measured !== undefined) return 'Estimator must not carry a measured figure';
  return undefined;
}

/** Rank of a provenance: 0 = best (HwShunt). A degraded figure never gets a lower rank than its source. */
export function provenanceRank(p: Provenance): number {
  return PROVENANCES.indexOf(p);
}

/** The plain CBOR map of a cost. */
export function costToCbor(c: Cost): Obj {
  const o: Obj = { uj: uintOut(c.uj), provenance: c.provenance };
  if (c.measured !== undefined) o['measured'] = uintOut(c.measured);
  return o;
}

/**
 * Reads a decoded CBOR map as a Cost and checks the provenance rules.
 * @throws JcpError `schema` naming the field.
 */
export function readCost(v: unknown, field = 'cost'): Cost {
  const o = asObj(v, field, ['uj', 'provenance'], ['measured']);
  const c: Cost = {
    uj: asUint(o['uj'], `${field}.uj`),
    provenance: asEnum(o['provenance'], `${field}.provenance`, PROVENANCES),
    ...(o['measured'] !== undefined ? { measured: asUint(o['measured'], `${field}.measured`) } : {}),
  };
  const problem = provenanceProblem(c);
  check(problem === undefined, `${field}.provenance`, problem ?? '');
  return c;
}
