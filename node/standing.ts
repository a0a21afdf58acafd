/**
 * Standing grants fired by real events (spec §4.6, conformance C20): a durable mint ledger and
 * the webhook server behind `jcp standing serve` (docs/standing.md).
 *
 * The server receives webhooks over HTTP (node:http) at `POST /events/<source>`; the body is a
 * JSON object whose `kind` is text. The event's class is the content id of `{source, kind}`
 * ({@link eventClassOf}), so a webhook for one source can never spend a policy meant for another;
 * the event itself is named by the content id of its body bytes ({@link eventIdOf}). The event is
 * checked against the signed mint policy and the child is minted through the attenuation path
 * (core/standing.ts `fire`, §4.1) as the standing grant's subject, then handed to the configured
 * agent: a chain file written into a folder, or POSTed to a callback URL.
 *
 * The mint ledger ({@link MintLedgerFile}) is a JSON-lines file: a header naming the policy and
 * the standing grant, then one line per firing with the firing count and cumulative µJ after it,
 * the event and the child. Each firing is appended and fsync'd BEFORE the child is handed out, so
 * a restart never resets the rate limit; a refused firing writes nothing, so the ledger is
 * unchanged (in memory and on disk). A torn last line (a crash mid-append: that child was never
 * handed out) is cut off on open; any other damage refuses to open (`ledger-corrupt`).
 * The same event delivered again (a webhook retry) is answered with the child it minted the
 * first time, and is not a new firing.
 *
 * HTTP answers are JSON: 200 `{fired: {child_id, firings, spent_uj, max_firings, replayed, file?}}`;
 * refusals `{error: {code, message}, ledger: {firings, spent_uj}}` with a stable code:
 * 403 `wrong-event-class`, 429 `firings-exhausted` / `budget-exhausted`, 400 `event-invalid`,
 * 413 `event-too-large`, 404 `not-found`, 405 `method-not-allowed`, 500 `ledger-failed`,
 * 502 `handoff-failed` (the firing is counted and its child is in the ledger file).
 * `GET /ledger` answers `{firings, spent_uj, max_firings, per_firing_uj, budget_uj}`.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, fstatSync, fsyncSync, ftruncateSync, openSync, readFileSync, writeSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import path from 'node:path';
import { createBoundedServer, type HttpLimits } from '../io/index.ts';
import {
  type Actor,
  contentId,
  type ContentId,
  contentIdOfBytes,
  decode,
  type Did,
  encode,
  fire,
  fromHex,
  grantId,
  type MintLedger,
  mintPolicyId,
  readSignedGrant,
  type SignedGrant,
  signedGrantToCbor,
  type SignedMintPolicy,
  StandingRefusals,
  toHex,
  type Uj,
  verifyPolicy,
} from '../core/index.ts';

/** Stable codes of the standing server besides the §4.6 refusals of `StandingRefusals`. */
export const StandingServerCodes = {
  EVENT_INVALID: 'event-invalid',
  EVENT_TOO_LARGE: 'event-too-large',
  NOT_FOUND: 'not-found',
  METHOD_NOT_ALLOWED: 'method-not-allowed',
  LEDGER_FAILED: 'ledger-failed',
  HANDOFF_FAILED: 'handoff-failed',
  /** The ledger file is damaged beyond a torn last line, or is another policy's. */
  LEDGER_CORRUPT: 'ledger-corrupt',
  /** The key given to serve is not the standing grant's subject (§4.1: only its holder mints). */
  NOT_HOLDER: 'not-holder',
  /** A non-loopback listen address without the explicit flag. */
  NON_LOOPBACK: 'non-loopback',
} as const;

/** A refusal to open or start, with a stable code (one of {@link StandingServerCodes} or `StandingRefusals`). */
export class StandingError extends Error {
  override readonly name = 'StandingError';
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.code = code;
  }
}

/** Largest event body accepted, bytes. */
export const MAX_EVENT_BYTES = 1 << 20;

/** The `type` of a mint ledger file's header line. */
export const MINT_LEDGER_TYPE = 'jcp-mint-ledger';

/** The event class of a webhook from `source` of kind `kind`: content id of `{source, kind}` (§4.6). */
export function eventClassOf(source: string, kind: string): ContentId {
  return contentId({ source, kind });
}

/** The id of an event: the content id of its body bytes. */
export function eventIdOf(body: Uint8Array): ContentId {
  return contentIdOfBytes(body);
}

/** One firing as the ledger file keeps it. */
export interface FiringRecord {
  /** The firing count after it (1 for the first). */
  readonly firing: number;
  /** Cumulative µJ sliced out after it. */
  readonly spent_uj: Uj;
  readonly event_id: ContentId;
  readonly event_class: ContentId;
  readonly child: SignedGrant;
}

/**
 * The durable mint ledger of one (policy, standing grant) pair (§4.6): see the module docs.
 * Not safe for two processes at once (one server per ledger file).
 */
export class MintLedgerFile {
  readonly file: string;
  readonly #fd: number;
  #ledger: MintLedger = { firings: 0, spent_uj: 0n };
  readonly #byEvent = new Map<ContentId, FiringRecord>();

  private constructor(file: string, fd: number) {
    this.file = file;
    this.#fd = fd;
  }

  /**
   * Opens (or creates, fsync'ing the file and its folder) the ledger file for `policyId` of
   * `standingId`, replaying its firings. A torn last line is cut off.
   * @throws StandingError `ledger-corrupt` (another policy's file, a bad or out-of-order line);
   *   the system error when the file cannot be opened.
   */
  static open(file: string, policyId: ContentId, standingId: ContentId): MintLedgerFile {
    const created = !existsSync(file);
    const fd = openSync(file, created ? 'wx+' : 'r+');
    const l = new MintLedgerFile(file, fd);
    try {
      if (created) {
        l.#append({ type: MINT_LEDGER_TYPE, policy: policyId, grant: standingId });
        const dir = openSync(path.dirname(path.resolve(file)), 'r');
        try {
          fsyncSync(dir);
        } finally {
          closeSync(dir);
        }
      } else l.#replay(policyId, standingId);
    } catch (e) {
      closeSync(fd);
      throw e;
    }
    return l;
  }

  #replay(policyId: ContentId, standingId: ContentId): void {
    const bytes = readFileSync(this.file);
    const end = bytes.lastIndexOf(0x0a) + 1;
    if (end < bytes.length) {
      // A torn last append: that firing was never fsync'd, so its child was never handed out.
      ftruncateSync(this.#fd, end);
      fsyncSync(this.#fd);
    }
    const lines = bytes.subarray(0, end).toString('utf8').split('\n').slice(0, -1);
    const bad = (i: number, why: string) => new StandingError(StandingServerCodes.LEDGER_CORRUPT, `${this.file}: line ${i + 1}: ${why}`);
    if (lines.length === 0) throw bad(0, 'no header');
    let head: Record<string, unknown>;
    try {
      head = JSON.parse(lines[0]!) as Record<string, unknown>;
    } catch {
      throw bad(0, 'not JSON');
    }
    if (head['type'] !== MINT_LEDGER_TYPE) throw bad(0, `not a ${MINT_LEDGER_TYPE} file`);
    if (head['policy'] !== policyId || head['grant'] !== standingId)
      throw bad(0, `the ledger of policy ${String(head['policy'])}, not of ${policyId}`);
    for (let i = 1; i < lines.length; i++) {
      let r: FiringRecord;
      try {
        const o = JSON.parse(lines[i]!) as Record<string, unknown>;
        r = {
          firing: o['firing'] as number,
          spent_uj: BigInt(o['spent_uj'] as string),
          event_id: o['event_id'] as ContentId,
          event_class: o['event_class'] as ContentId,
          child: readSignedGrant(decode(fromHex(String(o['cbor']), undefined, 'cbor')), 'child'),
        };
      } catch (e) {
        throw bad(i, `unreadable firing: ${(e as Error).message}`);
      }
      if (r.firing !== this.#ledger.firings + 1) throw bad(i, `firing ${r.firing} after ${this.#ledger.firings}`);
      if (r.spent_uj !== this.#ledger.spent_uj + r.child.grant.budget_uj) throw bad(i, 'cumulative spend does not add up');
      if (r.child.grant.parent !== standingId) throw bad(i, 'the child is not of the standing grant');
      this.#ledger = { firings: r.firing, spent_uj: r.spent_uj };
      this.#byEvent.set(r.event_id, r);
    }
  }

  #append(o: Record<string, unknown>): void {
    const line = Buffer.from(`${JSON.stringify(o)}\n`, 'utf8');
    const at = fstatSync(this.#fd).size;
    let off = 0;
    while (off < line.length) off += writeSync(this.#fd, line, off, line.length - off, at + off);
    fsyncSync(this.#fd);
  }

  /** The ledger now: firings so far, cumulative µJ. */
  get ledger(): MintLedger {
    return this.#ledger;
  }

  /** The firing an event already made, if any (a retried webhook). */
  firingOf(eventId: ContentId): FiringRecord | undefined {
    return this.#byEvent.get(eventId);
  }

  /**
   * Records a firing durably (appended and fsync'd) and only then advances the ledger.
   * @throws the system error when the append or fsync fails (the ledger is then not advanced).
   */
  record(r: FiringRecord): void {
    this.#append({
      firing: r.firing,
      spent_uj: r.spent_uj.toString(),
      event_id: r.event_id,
      event_class: r.event_class,
      child: grantId(r.child.grant),
      cbor: toHex(encode(signedGrantToCbor(r.child))),
    });
    this.#ledger = { firings: r.firing, spent_uj: r.spent_uj };
    this.#byEvent.set(r.event_id, r);
  }

  close(): void {
    closeSync(this.#fd);
  }
}

/** Where a minted child goes: a chain file in a folder, or a POST of the chain file to a URL. */
export type Handoff = { readonly dir: string } | { readonly callback: string };

/** What {@link startStandingServer} needs. */
export interface StandingServerOptions {
  /** The standing grant's chain, root first (the standing grant is the leaf). */
  readonly chain: readonly SignedGrant[];
  readonly policy: SignedMintPolicy;
  /** The standing grant's subject: the firer (§4.1 holder). */
  readonly holder: Actor;
  /** Who does the work: the children's subject. */
  readonly agent: Did;
  readonly ledgerFile: string;
  readonly handoff: Handoff;
  /** Writes the handed-out chain (root first) to `file` (the CLI's chain file writer). */
  readonly writeChain: (file: string, chain: readonly SignedGrant[]) => void;
  /** The chain file body for a callback (JSON text). */
  readonly chainJson: (chain: readonly SignedGrant[]) => string;
  readonly host: string;
  readonly port: number;
  /** Children's expiry, unix seconds (absent: the standing grant's). */
  readonly childExpiry?: number;
  /** Callback timeout, ms (default 10 000). */
  readonly callbackTimeoutMs?: number;
  /**
   * Connection bounds of the webhook listener (io/httplimits.ts; default `HTTP_LIMITS`: 1024 in
   * all, 64 per peer address, 10 s for the headers, 30 s for a request): one over a bound is
   * closed as it is accepted (slow loris, file-handle exhaustion).
   */
  readonly connectionLimits?: HttpLimits;
}

/** A running standing server. */
export interface StandingServer {
  readonly port: number;
  readonly ledger: MintLedgerFile;
  close(): Promise<void>;
}

/** True for a loopback host name or address (127.0.0.0/8, ::1, localhost). */
export function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127(\.\d{1,3}){3}$/.test(host);
}

/**
 * Hands a minted child grant to the agent (§4.6): writes the chain (holder's chain + child) to
 * `<dir>/<child id>.json` unless that file exists (returns its path), or POSTs the chain JSON to
 * the callback (returns undefined).
 * @throws Error on a callback answering non-2xx or timing out (`callbackTimeoutMs`, default 10 s), or the write's error.
 */
async function handOff(o: StandingServerOptions, child: SignedGrant): Promise<string | undefined> {
  const chain = [...o.chain, child];
  if ('dir' in o.handoff) {
    const file = path.join(o.handoff.dir, `${grantId(child.grant)}.json`);
    if (!existsSync(file)) o.writeChain(file, chain);
    return file;
  }
  const r = await fetch(o.handoff.callback, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: o.chainJson(chain),
    signal: AbortSignal.timeout(o.callbackTimeoutMs ?? 10_000),
  });
  await r.arrayBuffer().catch(() => undefined);
  if (!r.ok) throw new Error(`the callback answered HTTP ${r.status}`);
  return undefined;
}

/** What answering an event needs: the server's options, its standing grant and open ledger, and its refusal reply. */
interface EventContext {
  readonly o: StandingServerOptions;
  readonly standing: SignedGrant;
  readonly ledger: MintLedgerFile;
  /** Replies `status` with `{error: {code, message}, ledger}`. */
  readonly refuse: (res: ServerResponse, status: number, code: string, message: string) => void;
}

/** Replies `status` with `body` as one line of JSON. */
function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(`${JSON.stringify(body)}\n`);
}

/**
 * Answers one webhook event POSTed to `/events/<source>` (§4.6): the body must be a UTF-8 JSON
 * object with a text `kind` (else 400 event-invalid); a replay of a recorded event hands the same
 * child out again; a new one fires the policy (403 wrong-event-class and the other policy
 * refusals, 429 firings-exhausted / budget-exhausted), is fsync'd (500 ledger-failed, no child)
 * and handed off (502 handoff-failed, the firing stays counted). 200 `{fired: {child_id, firings,
 * spent_uj, max_firings, replayed, file?}}`.
 */
async function answerEvent(cx: EventContext, source: string, body: Uint8Array, res: ServerResponse): Promise<void> {
  const { o, standing, ledger, refuse } = cx;
  const p = o.policy.body;
  let kind: unknown;
  try {
    const v = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(body)) as Record<string, unknown>;
    kind = typeof v === 'object' && v !== null && !Array.isArray(v) ? v['kind'] : undefined;
  } catch {
    return refuse(res, 400, StandingServerCodes.EVENT_INVALID, 'the event body is not a UTF-8 JSON object');
  }
  if (typeof kind !== 'string' || kind.length === 0)
    return refuse(res, 400, StandingServerCodes.EVENT_INVALID, 'the event has no text "kind"');
  const eventClass = eventClassOf(source, kind);
  const eventId = eventIdOf(body);
  let record = ledger.firingOf(eventId);
  // The same body POSTed to another source is another event class: refused, never a replay.
  if (record !== undefined && record.event_class !== eventClass) {
    return refuse(res, 403, StandingRefusals.WRONG_EVENT_CLASS, `event class ${eventClass} does not fire this policy`);
  }
  const replayed = record !== undefined;
  if (record === undefined) {
    // Synchronous from the check to the fsync'd append: no other firing can interleave.
    const r = fire(
      o.policy,
      standing,
      ledger.ledger,
      { event_class: eventClass, event_id: eventId },
      { subject: o.agent, nonce: new Uint8Array(randomBytes(16)), ...(o.childExpiry !== undefined ? { expiry: o.childExpiry } : {}) },
      o.holder,
    );
    if (!r.ok) {
      const status =
        r.error.code === StandingRefusals.WRONG_EVENT_CLASS
          ? 403
          : r.error.code === StandingRefusals.FIRINGS_EXHAUSTED || r.error.code === StandingRefusals.BUDGET_EXHAUSTED
            ? 429
            : 403;
      return refuse(res, status, r.error.code, r.error.why);
    }
    record = {
      firing: r.value.ledger.firings,
      spent_uj: r.value.ledger.spent_uj,
      event_id: eventId,
      event_class: eventClass,
      child: r.value.child,
    };
    try {
      ledger.record(record);
    } catch (e) {
      return refuse(
        res,
        500,
        StandingServerCodes.LEDGER_FAILED,
        `the firing could not be made durable; no child was handed out: ${(e as Error).message}`,
      );
    }
  }
  let file: string | undefined;
  try {
    file = await handOff(o, record.child);
  } catch (e) {
    return refuse(
      res,
      502,
      StandingServerCodes.HANDOFF_FAILED,
      `firing ${record.firing} is counted but its child ${grantId(record.child.grant)} was not handed out: ${(e as Error).message}`,
    );
  }
  sendJson(res, 200, {
    fired: {
      child_id: grantId(record.child.grant),
      firings: ledger.ledger.firings,
      spent_uj: ledger.ledger.spent_uj.toString(),
      max_firings: p.max_firings,
      replayed,
      ...(file !== undefined ? { file } : {}),
    },
  });
}

/**
 * Checks the policy and the holder, opens the ledger and listens (§4.6; module docs).
 * @throws StandingError: the `verifyPolicy` codes (`wrong-grant`, `wrong-signer`,
 *   `amplification`), `not-holder`, `ledger-corrupt`; a listen failure as the system error.
 */
export async function startStandingServer(o: StandingServerOptions): Promise<StandingServer> {
  const standing = o.chain[o.chain.length - 1]!;
  const valid = verifyPolicy(o.policy, standing);
  if (!valid.ok) throw new StandingError(valid.error.code, `the mint policy does not hold for this grant: ${valid.error.why}`);
  if (o.holder.did !== standing.grant.subject) {
    throw new StandingError(
      StandingServerCodes.NOT_HOLDER,
      `the key ${o.holder.did} is not the standing grant's subject ${standing.grant.subject}`,
    );
  }
  const standingId = grantId(standing.grant);
  const ledger = MintLedgerFile.open(o.ledgerFile, mintPolicyId(o.policy), standingId);
  const p = o.policy.body;
  const ledgerView = () => ({ firings: ledger.ledger.firings, spent_uj: ledger.ledger.spent_uj.toString() });
  const send = sendJson;
  const refuse = (res: ServerResponse, status: number, code: string, message: string) =>
    send(res, status, { error: { code, message }, ledger: ledgerView() });

  const { server } = createBoundedServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (url.pathname === '/ledger') {
      if (req.method !== 'GET') return refuse(res, 405, StandingServerCodes.METHOD_NOT_ALLOWED, 'GET /ledger');
      return send(res, 200, {
        ...ledgerView(),
        max_firings: p.max_firings,
        per_firing_uj: p.per_firing_uj.toString(),
        budget_uj: standing.grant.budget_uj.toString(),
      });
    }
    const m = /^\/events\/([A-Za-z0-9._~-]{1,128})$/.exec(url.pathname);
    if (!m) return refuse(res, 404, StandingServerCodes.NOT_FOUND, 'webhooks are POSTed to /events/<source>');
    if (req.method !== 'POST') return refuse(res, 405, StandingServerCodes.METHOD_NOT_ALLOWED, 'events are POSTed');
    const chunks: Buffer[] = [];
    let n = 0;
    let over = false;
    req.on('data', (c: Buffer) => {
      n += c.length;
      if (n > MAX_EVENT_BYTES) over = true;
      else chunks.push(c);
    });
    req.on('end', () => {
      if (over) return refuse(res, 413, StandingServerCodes.EVENT_TOO_LARGE, `an event is at most ${MAX_EVENT_BYTES} bytes`);
      answerEvent({ o, standing, ledger, refuse }, m[1]!, new Uint8Array(Buffer.concat(chunks)), res).catch((e: Error) =>
        refuse(res, 500, StandingServerCodes.LEDGER_FAILED, e.message),
      );
    });
  }, o.connectionLimits);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(o.port, o.host, () => resolve());
    });
  } catch (e) {
    ledger.close();
    throw e;
  }
  const addr = server.address();
  return {
    port: typeof addr === 'object' && addr !== null ? addr.port : o.port,
    ledger,
    close: async () => {
      const closed = new Promise<void>((r) => server.close(() => r()));
      server.closeAllConnections();
      await closed;
      ledger.close();
    },
  };
}
