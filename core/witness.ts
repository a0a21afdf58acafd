/**
 * A witness's one decision (C2SP tlog-cosignature "semantics"): cosign a log's new checkpoint only
 * when it is consistent (RFC 9162 §2.1.4) with the last checkpoint of that log the witness
 * cosigned; otherwise return both checkpoints as evidence of a rewritten or forked log. Pure: the
 * transport (a CLI file, later NATS) and the witness's memory of the last checkpoint are the caller's.
 */
import type { PublicKey, SigningKey } from './ed25519.ts';
import { isJcpError } from './errors.ts';
import { cosign, openCheckpoint, type SignedLogCheckpoint } from './note.ts';
import { type Hash32, verifyConsistency } from './tlog.ts';

/** What {@link witness} decided. */
export type WitnessVerdict =
  | { readonly ok: true; readonly checkpoint: SignedLogCheckpoint; readonly cosignature: string }
  | {
      readonly ok: false;
      readonly code: 'log-inconsistent';
      readonly why: string;
      readonly evidence: readonly [previous: string, next: string];
    };

/**
 * Checks `next` (a signed checkpoint note of the log of `logKey`, origin `origin`) against
 * `previous` (the last one this witness cosigned, or undefined the first time: trust on first
 * use) with consistency proof `proof`, and when consistent returns the cosignature line by
 * (`name`, `key`) at `timeS` (POSIX seconds).
 * @throws JcpError `note-malformed` / `note-unverified` (a checkpoint not signed by the log's key,
 *   or of another origin: never cosigned, never evidence), `bad-length`
 */
export function witness(
  next: string,
  previous: string | undefined,
  proof: readonly Hash32[],
  log: { readonly key: PublicKey; readonly origin: string },
  me: { readonly name: string; readonly key: SigningKey; readonly timeS: number },
): WitnessVerdict {
  const n = openCheckpoint(next, log.key, log.origin);
  if (previous !== undefined) {
    const p = openCheckpoint(previous, log.key, log.origin);
    const evidence = [p.note, n.note] as const;
    if (n.size < p.size)
      return { ok: false, code: 'log-inconsistent', why: `the log shrank from ${p.size} to ${n.size} receipts`, evidence };
    try {
      verifyConsistency(p.size, n.size, proof, p.root, n.root);
    } catch (e) {
      if (!isJcpError(e, 'proof-invalid')) throw e;
      return { ok: false, code: 'log-inconsistent', why: e.message, evidence };
    }
  }
  return { ok: true, checkpoint: n, cosignature: cosign(n.parsed.text, me.name, me.key, me.timeS) };
}
