/**
 * Pricing a call (§5; DESIGN "Decisions and the ledger": the node prices a call as no less than
 * its own estimate for that action). The caller's signed request names a cost; the node debits
 * the larger of that and its own estimate, so a caller cannot under-declare its way past a budget.
 *
 * The meter (`meter/`) sits behind {@link NodeMeter}, the part of its `Meter` the node uses:
 * `probe()`, `measure(action, fn)` and `estimateUj(action)`. Tests and benches may pass any
 * object of that shape.
 */
import type { Cost, Uj } from '../core/energy.ts';
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
