/**
 * Pricing a call (§5; docs/design.md "Decisions and the ledger": the node prices a call as no less than
 * its own estimate for that action). The caller's signed request names a cost; the node debits
 * the larger of that and its own estimate, so a caller cannot under-declare its way past a budget.
 *
 * The meter (`meter/`) sits behind {@link NodeMeter}, the part of its `Meter` the node uses:
 * `probe()`, `measure(action, fn)` and `estimateUj(action)`. Tests and benches may pass any
 * object of that shape.
 */
import { type Cost, type Provenance, provenanceRank, type Uj } from '../core/index.ts';
import type { Meter, Probe } from '../meter/index.ts';

/** What the node needs from the energy meter (§5). */
export type NodeMeter = Pick<Meter, 'probe' | 'measure' | 'estimateUj'>;

/** The probe of a meter, as the node logs it and shows it on `/metrics`. */
export type MeterProbe = Probe;

/**
 * The cost the node debits for a call: the caller's claimed cost when it is at least the node's
 * estimate (µJ), else the estimate itself with `Estimator` provenance (an estimate is never
 * claimed as a measurement, §5).
 */
export function priceCall(claimed: Cost, estimateUj: Uj): Cost {
  return claimed.uj >= estimateUj ? claimed : { uj: estimateUj, provenance: 'Estimator' };
}

/**
 * The best provenance a receipt of this node may seal for a charged figure (§5): the
 * charge is fixed at decision time, before the call runs. At that point the node holds no hardware
 * reading of the call, so the ceiling is at best `ModelBased`. It is never better than the node's
 * own meter either (the rung `probe()` found at start; `Estimator` when the probe failed). What the
 * node measures afterwards is recorded in the call's outcome record (`node/outcome.ts`), with the
 * meter's own provenance.
 */
export function provenanceCeiling(meterProvenance: Provenance | undefined): Provenance {
  const p = meterProvenance ?? 'Estimator';
  return provenanceRank(p) < provenanceRank('ModelBased') ? 'ModelBased' : p;
}

/**
 * A caller's claimed cost with its provenance capped at `ceiling` (§5: a figure never claims
 * better provenance than the evidence for it). The µJ are unchanged (they are what is charged).
 * A capped cost drops `measured`, because the caller's figure is not the node's reading. Pure and
 * deterministic: the same claim and ceiling always seal the same receipt fields.
 */
export function capProvenance(cost: Cost, ceiling: Provenance): Cost {
  if (provenanceRank(cost.provenance) >= provenanceRank(ceiling)) return cost;
  return { uj: cost.uj, provenance: ceiling };
}
