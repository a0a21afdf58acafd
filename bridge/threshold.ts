/**
 * A threshold caller behind the bridge (spec §2.2, §11): the agent's grant chains name a FROST
 * group as their subject, so every request is signed by a k-of-n signing session with the group's
 * holders over the FROST bus (docs/frost.md "Signing messages"), and each holder applies its own
 * approval policy to the exact request before it commits a nonce (docs/frost.md "Approvals").
 *
 * A session that does not produce a signature (holders refused, too few answered in time) never
 * reaches the node: the bridge turns it into an MCP tool error result ({@link thresholdToolError})
 * naming each refusing holder and its reason, read back from the holder's signed decision record on
 * the approvals stream when it is there. Nothing is debited: the node never saw the call.
 */
import type { NatsConnection } from '@nats-io/transport-node';
import type { Actor, Did } from '../core/index.ts';
import {
  DEFAULT_PREFIX,
  FrostError,
  FrostErrorCodes,
  type GroupRegistry,
  isFrostError,
  natsBus,
  natsRegistry,
  readHolderDecisions,
  signWithGroup,
  type StreamedDecision,
} from '../frost/index.ts';
import type { ToolResult } from './agent.ts';

/** Stable codes of a threshold call that was not signed (`_meta["jcp/error"]` of the tool error). */
export const ThresholdErrorCodes = {
  /** Enough holders refused the call (their approval policies) that k signers cannot be reached. */
  REFUSED: 'threshold-refused',
  /** Too few holders answered within the round deadline (offline, or a person/webhook too slow). */
  UNAVAILABLE: 'threshold-unavailable',
  /** Any other failure of the signing session (a bad share, the bus) — the FROST code says which. */
  FAILED: 'threshold-failed',
} as const;

/** One holder that refused, as the MCP client is told. */
export interface HolderRefusal {
  /** FROST identifier (1-based roster index). */
  readonly identifier: number | null;
  /** The holder's roster identity. */
  readonly holder: string | null;
  /** The refusal's code (`frost-not-approved`, `frost-not-a-request`, …). */
  readonly code: string;
  /** The reason: from the signed decision record when it was found, else from the refusal message. */
  readonly reason: string;
  /** The holder's signed decision record for this session, when it was on the approvals stream. */
  readonly record?: {
    readonly stream_seq: number;
    /** Content id of the record body's request (the exact call judged). */
    readonly request: string;
    readonly policy: string;
    readonly policy_kind: string;
    readonly decision: 'approve' | 'refuse';
    readonly at_s: number;
    /** The record's signature verified under `holder`. */
    readonly valid: boolean;
  };
}

/** Why a threshold call was not signed. */
export interface ThresholdRefusal {
  /** A {@link ThresholdErrorCodes} value. */
  readonly code: string;
  /** The FROST error code (`frost-not-approved`, `frost-not-enough-participants`, …). */
  readonly frostCode: string;
  readonly group: Did;
  readonly session: string | null;
  readonly message: string;
  readonly refusals: readonly HolderRefusal[];
}

/** Options of {@link ThresholdCaller.open}. */
export interface ThresholdCallerOptions {
  readonly nc: NatsConnection;
  /** The group (the subject of the agent's leaf grants). */
  readonly group: Did;
  /** FROST subject prefix (default `jcp.frost`). */
  readonly prefix?: string;
  /** The coordinator identity the sessions are signed with (holders may allow only it: `--coordinator DID`). */
  readonly coordinator: Actor;
  /** Deadline of each signing round, ms (default 5000): must leave a person or webhook time to answer. */
  readonly timeoutMs?: number;
  /** How long to wait for refusing holders' records to reach the approvals stream, ms (default 1000). */
  readonly recordWaitMs?: number;
}

/** Default round deadline of a threshold call through the bridge, ms. */
export const DEFAULT_THRESHOLD_TIMEOUT_MS = 5000;

/** A FROST group as the bridge's caller: its did, its signer, and the explanation of a refusal. */
export class ThresholdCaller {
  readonly did: Did;
  readonly #o: ThresholdCallerOptions;
  readonly #registry: GroupRegistry;

  private constructor(o: ThresholdCallerOptions, registry: GroupRegistry) {
    this.#o = o;
    this.did = o.group;
    this.#registry = registry;
  }

  /**
   * Checks that the registry holds `group`'s public package, and returns the caller.
   * @throws FrostError `frost-unknown-group` (no package: not a FROST group, or another prefix), `frost-transport`.
   */
  static async open(o: ThresholdCallerOptions): Promise<ThresholdCaller> {
    const registry = await natsRegistry(o.nc, o.prefix ?? DEFAULT_PREFIX, { create: false });
    const g = await registry.get(o.group);
    if (!g)
      throw new FrostError(
        FrostErrorCodes.UNKNOWN_GROUP,
        `no public package for ${o.group} in the FROST registry (prefix ${o.prefix ?? DEFAULT_PREFIX}): is the chain's subject a threshold group?`,
      );
    return new ThresholdCaller(o, registry);
  }

  /**
   * Signs `message` (the §11 signing bytes of a request) with one signing session: every holder
   * is sent the message in round one and decides on it before drawing a nonce; no prefetched
   * round one, so no commitment is drawn for a call before its holders saw it.
   * @returns the 64-byte Ed25519 signature under the group's did:key.
   * @throws FrostError (`frost-not-approved` with `detail.refusals`, `frost-not-enough-participants`, …).
   */
  readonly sign = async (message: Uint8Array): Promise<Uint8Array> => {
    const r = await signWithGroup({
      bus: natsBus(this.#o.nc),
      registry: this.#registry,
      prefix: this.#o.prefix ?? DEFAULT_PREFIX,
      group: this.#o.group,
      message,
      actor: this.#o.coordinator,
      timeoutMs: this.#o.timeoutMs ?? DEFAULT_THRESHOLD_TIMEOUT_MS,
    });
    return r.signature;
  };

  /**
   * Explains a failed {@link sign}: the stable code, and each refusing holder with its reason from
   * its signed decision record (of the records on `<prefix>.approvals.<groupTag>.<identifier>`, the
   * last that verifies under the holder's roster identity and names this group and session; waited
   * for up to `recordWaitMs`, as holders publish after replying), else from the holder's signed refusal.
   * Undefined when `e` is not a FrostError (not a signing failure).
   */
  async explain(e: unknown): Promise<ThresholdRefusal | undefined> {
    if (!isFrostError(e)) return undefined;
    const session = typeof e.detail?.['session'] === 'string' ? (e.detail['session'] as string) : null;
    const listed = (e.detail?.['refusals'] as { identifier?: number; did?: string; code: string; why: string }[] | undefined) ?? [];
    const approval = new Set<string>([FrostErrorCodes.NOT_APPROVED, FrostErrorCodes.NOT_A_REQUEST, FrostErrorCodes.APPROVAL_MISMATCH]);
    const code =
      e.code === FrostErrorCodes.NOT_APPROVED || (listed.length > 0 && listed.every((r) => approval.has(r.code)))
        ? ThresholdErrorCodes.REFUSED
        : e.code === FrostErrorCodes.NOT_ENOUGH_PARTICIPANTS ||
            e.code === FrostErrorCodes.PARTICIPANT_LOST ||
            e.code === FrostErrorCodes.TIMEOUT
          ? ThresholdErrorCodes.UNAVAILABLE
          : ThresholdErrorCodes.FAILED;
    const refusals = await Promise.all(
      listed.map(async (r): Promise<HolderRefusal> => {
        const rec =
          session !== null && r.identifier !== undefined && approval.has(r.code)
            ? await this.#record(r.identifier, r.did, session)
            : undefined;
        return {
          identifier: r.identifier ?? null,
          holder: r.did ?? null,
          code: r.code,
          reason: rec?.reason ?? r.why,
          ...(rec !== undefined ? { record: rec.record } : {}),
        };
      }),
    );
    return { code, frostCode: e.code, group: this.did, session, message: e.message, refusals };
  }

  /**
   * The refusing holder's signed decision record for `session`: every record on its subject since
   * the session could have started is read (not the last: anyone on the bus can publish there), and
   * the last one that verifies under the holder's roster identity (from the group's package in the
   * registry; `holder`, from the refusal, only when the package has none) and names this group,
   * identifier and session is used.
   */
  async #record(
    identifier: number,
    holder: string | undefined,
    session: string,
  ): Promise<{ reason: string; record: NonNullable<HolderRefusal['record']> } | undefined> {
    const prefix = this.#o.prefix ?? DEFAULT_PREFIX;
    let key: string | undefined;
    try {
      key = (await this.#registry.get(this.did))?.roster[identifier - 1] ?? holder;
    } catch {
      key = holder;
    }
    if (key === undefined) return undefined;
    const speaks = (s: StreamedDecision): boolean => {
      const d = s.record;
      return (
        d?.valid === true &&
        d.body.holder === key &&
        d.body.group === this.did &&
        d.body.identifier === identifier &&
        d.body.session === session
      );
    };
    // The session began at most a few round deadlines ago; a minute more for the server's clock.
    const since = new Date(Date.now() - 3 * (this.#o.timeoutMs ?? DEFAULT_THRESHOLD_TIMEOUT_MS) - 60_000);
    let records: StreamedDecision[];
    try {
      records = await readHolderDecisions(this.#o.nc, prefix, this.did, identifier, {
        since,
        waitMs: this.#o.recordWaitMs ?? 1000,
        enough: (rs) => rs.some(speaks),
      });
    } catch {
      return undefined;
    }
    const found = records.filter(speaks).at(-1);
    if (found === undefined || found.record === undefined) return undefined;
    const d = found.record;
    return {
      reason: d.body.reason,
      record: {
        stream_seq: found.seq,
        request: d.body.request,
        policy: d.body.policy,
        policy_kind: d.body.policy_kind,
        decision: d.body.decision,
        at_s: d.body.at_s,
        valid: d.valid,
      },
    };
  }
}

/**
 * The MCP tool error result of a threshold call that was not signed: `isError: true`, one text
 * item `<code>: [<frost code>] <who refused and why>`, and `_meta` keys `jcp/error` (the stable
 * code), `jcp/frost_code`, `jcp/threshold_group`, `jcp/session`, `jcp/refusals` ({@link HolderRefusal}[]).
 * No `jcp/receipt`: the node never saw the call.
 */
export function thresholdToolError(r: ThresholdRefusal): ToolResult {
  const who = r.refusals.map((x) => `holder ${x.identifier ?? '?'} (${x.holder ?? 'unknown'}) refused: [${x.code}] ${x.reason}`).join('; ');
  const text =
    r.code === ThresholdErrorCodes.REFUSED
      ? `${r.code}: [${r.frostCode}] the holders of ${r.group} did not approve the call: ${who}; nothing was sent to the node`
      : `${r.code}: [${r.frostCode}] ${r.message}; nothing was sent to the node`;
  return {
    isError: true,
    content: [{ type: 'text', text }],
    _meta: {
      'jcp/error': r.code,
      'jcp/frost_code': r.frostCode,
      'jcp/threshold_group': r.group,
      'jcp/session': r.session,
      'jcp/refusals': r.refusals,
    },
  };
}
