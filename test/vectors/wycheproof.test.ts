/**
 * Wycheproof Ed25519 (C2SP/wycheproof `testvectors_v1/ed25519_test.json`): every verdict must
 * match through `core/ed25519.ts`. A `valid` case must parse its key and verify; an `invalid`
 * case must be refused, either at key parse or by `verify` returning false.
 */
import { describe, expect, it } from 'vitest';
import { JcpError, type PublicKey, publicKeyFromBytes, verify } from '../../core/internal.ts';
import { hex, vectorJson } from './load.ts';

interface WycheproofTest {
  tcId: number;
  comment: string;
  flags: string[];
  msg: string;
  sig: string;
  result: 'valid' | 'invalid' | 'acceptable';
}
interface WycheproofFile {
  numberOfTests: number;
  testGroups: { publicKey: { pk: string }; tests: WycheproofTest[] }[];
}

const file = vectorJson<WycheproofFile>('wycheproof/ed25519_test.json');
const cases = file.testGroups.flatMap((g) => g.tests.map((t) => ({ pk: g.publicKey.pk, ...t })));

type Outcome = 'verified' | 'refused-key' | 'refused-signature';

function run(pkHex: string, msgHex: string, sigHex: string): Outcome {
  let pub: PublicKey;
  try {
    pub = publicKeyFromBytes(hex(pkHex));
  } catch (e) {
    expect(e).toBeInstanceOf(JcpError);
    return 'refused-key';
  }
  return verify(pub, hex(msgHex), hex(sigHex)) ? 'verified' : 'refused-signature';
}

describe('wycheproof ed25519 - verdicts', () => {
  it.each(cases)('tc $tcId is $result ($flags)', (c) => {
    expect(['valid', 'invalid']).toContain(c.result);
    const outcome = run(c.pk, c.msg, c.sig);
    if (c.result === 'valid') expect(outcome).toBe('verified');
    else expect(outcome).not.toBe('verified');
  });
});

describe('wycheproof ed25519 - totals', () => {
  it('runs all 151 cases: 88 valid verify, 63 invalid are refused', () => {
    const tally = { valid: 0, invalid: 0, verified: 0, refusedKey: 0, refusedSignature: 0 };
    for (const c of cases) {
      if (c.result === 'valid') tally.valid++;
      else if (c.result === 'invalid') tally.invalid++;
      const outcome = run(c.pk, c.msg, c.sig);
      if (outcome === 'verified') tally.verified++;
      else if (outcome === 'refused-key') tally.refusedKey++;
      else tally.refusedSignature++;
    }
    expect(cases.length).toBe(file.numberOfTests);
    expect(cases.length).toBe(151);
    expect(tally.valid).toBe(88);
    expect(tally.invalid).toBe(63);
    expect(tally.verified).toBe(tally.valid);
    expect(tally.refusedKey + tally.refusedSignature).toBe(tally.invalid);
  });
});
