/**
 * What the issuer and the threshold team do during the demo's run:
 *
 * - revoke grants at every node (§4.3): a signed revocation sent over jcp/1 to each node, which
 *   answers once it is durable there;
 * - steer a worker (§4.7): ask for its signed checkpoint, check it and the receipt it carries,
 *   amend to a tighter budget, issue the continuation grant, revoke the steered grant so the old
 *   bound cannot be used any more, and hand the pair to the worker;
 * - approve the irreversible action as the 2-of-3 team (§2.2): first one member alone (its
 *   signature is sent anyway, and the node refuses it `bad-signature`), then two members through
 *   a signing session.
 */
import { randomBytes } from 'node:crypto';
import { Client, InMemoryTransport } from '@modelcontextprotocol/client';
import { BridgeAgent, bridgeServer, CallJournal, ThresholdCaller } from '../bridge/index.ts';
import {
  type Actor,
  amend,
  amendmentId,
  checkpointId,
  type ContentId,
  decode,
  encode,
  fromHex,
  grantId,
  issueContinuation,
  openReceipt,
  readSignedCheckpoint,
  signedAmendmentToCbor,
  type SignedGrant,
  signedGrantToCbor,
  signRevocation,
  toHex,
  verifyCheckpoint,
  verifyContinuation,
  verifyWireRequestSignature,
} from '../core/index.ts';
import { isFrostError, soloSignature } from '../frost/index.ts';
import { JcpClient, resultJson } from '../client/index.ts';
import type { DemoNode } from './nodes.ts';
import type { Team } from './team.ts';
import type { WorkerProc } from './workers.ts';

/** Sends a signed revocation of each grant to every node; resolves to the names of the nodes that acknowledged all of them. */
export async function revokeEverywhere(issuer: Actor, nodes: readonly DemoNode[], grantIds: readonly ContentId[]): Promise<string[]> {
  const revocations = grantIds.map((id) => signRevocation(id, issuer, new Uint8Array(randomBytes(16))));
  const acked: string[] = [];
  await Promise.all(
    nodes.map(async (n) => {
      const c = await JcpClient.connect({ host: n.host, port: n.port });
      try {
        for (const r of revocations) await c.revoke(r);
        acked.push(n.name);
      } finally {
        await c.close();
      }
    }),
  );
  return acked.sort();
}

/** The outcome of steering one worker. µJ as bigint. */
export interface Steering {
  readonly steeredId: ContentId;
  readonly checkpointId: ContentId;
  readonly amendmentId: ContentId;
  readonly continuation: SignedGrant;
  readonly budgetBeforeUj: bigint;
  readonly remainingUj: bigint;
  readonly amendedUj: bigint;
  readonly continuationVerifies: boolean;
}

/**
 * Steers `worker` at a checkpoint of its files grant `steered` (§4.7): the amended budget is half
 * of what the worker's last receipt says is left, rounded down to 1,000 µJ.
 * @throws Error when the checkpoint, its receipt, the amendment or the continuation is refused.
 */
export async function steer(issuer: Actor, nodes: readonly DemoNode[], worker: WorkerProc, steered: SignedGrant): Promise<Steering> {
  const msg = await worker.checkpoint();
  const sc = readSignedCheckpoint(decode(fromHex(msg.checkpoint)));
  const cp = verifyCheckpoint(sc, steered);
  if (!cp.ok) throw new Error(`${worker.name}'s checkpoint is refused (${cp.error.code}): ${cp.error.why}`);
  // The worker's last receipt, checked under the node's steward: what is left is evidence, not hearsay.
  const node = nodes.find((n) => n.name === msg.node);
  if (!node) throw new Error(`${worker.name}'s checkpoint names no known node (${msg.node})`);
  const rc = openReceipt(fromHex(msg.receipt), node.did);
  if (!rc.ok) throw new Error(`${worker.name}'s checkpoint receipt does not verify: ${rc.error.why}`);
  const steeredId = grantId(steered.grant);
  if (rc.value.grant_id !== steeredId) throw new Error(`${worker.name}'s checkpoint receipt is for another grant`);
  const remainingUj = rc.value.budget_remaining_uj;
  const amendedUj = (remainingUj / 2n / 1_000n) * 1_000n;
  const am = amend(sc, steered, { budget_uj: amendedUj, nonce: new Uint8Array(randomBytes(16)) }, issuer);
  if (!am.ok) throw new Error(`amendment refused (${am.error.code}): ${am.error.why}`);
  const cont = issueContinuation(steered, sc, am.value, issuer);
  if (!cont.ok) throw new Error(`continuation refused (${cont.error.code}): ${cont.error.why}`);
  const verifies = verifyContinuation(steered, sc, am.value, cont.value).ok;
  await revokeEverywhere(issuer, nodes, [steeredId]);
  worker.send({
    type: 'continue',
    amendment: toHex(encode(signedAmendmentToCbor(am.value))),
    continuation: toHex(encode(signedGrantToCbor(cont.value))),
  });
  return {
    steeredId,
    checkpointId: checkpointId(sc),
    amendmentId: amendmentId(am.value),
    continuation: cont.value,
    budgetBeforeUj: steered.grant.budget_uj,
    remainingUj,
    amendedUj,
    continuationVerifies: verifies,
  };
}

/** One attempt at the irreversible call. */
export interface Attempt {
  readonly signatureVerifies: boolean;
  readonly verdict: string;
  readonly denyReason: string | null;
  readonly result: string | null;
  readonly requestId: ContentId;
}

/** Both attempts at the team's action. */
export interface Approval {
  readonly solo: Attempt;
  readonly group: Attempt;
}

/** The team asked to sign a call its holders' policies refuse: who refused and why. */
export interface TeamRefusal {
  /** True when no signature came out (the call never reached the node). */
  readonly refused: boolean;
  readonly code: string | null;
  /** Who refused: `member` is the team's member (process) number, `identifier` the FROST identifier (roster index). */
  readonly refusals: readonly {
    readonly member: number | null;
    readonly identifier: number | null;
    readonly did: string | null;
    readonly code: string;
    readonly why: string;
  }[];
}

/**
 * Asks the team to sign `action` with `args` (a call outside the holders' policies) and never
 * sends it: the holders must refuse, and the coordinator names who refused and why (spec §2.2).
 */
export async function askTeamToSign(
  node: DemoNode,
  team: Team,
  grant: SignedGrant,
  action: string,
  args: Record<string, unknown>,
): Promise<TeamRefusal> {
  const c = await JcpClient.connect({ host: node.host, port: node.port, signer: { did: team.group, sign: team.sign } });
  try {
    await c.request({ chain: [grant], action, payload: args });
    return { refused: false, code: null, refusals: [] };
  } catch (e) {
    if (!isFrostError(e)) throw e;
    const list = (e.detail?.['refusals'] as { identifier?: number; did?: string; code: string; why: string }[] | undefined) ?? [];
    const member = (did: string | undefined) => (did !== undefined && team.holders.includes(did) ? team.holders.indexOf(did) + 1 : null);
    return {
      refused: true,
      code: e.code,
      refusals: list.map((r) => ({
        member: member(r.did),
        identifier: r.identifier ?? null,
        did: r.did ?? null,
        code: r.code,
        why: r.why,
      })),
    };
  } finally {
    await c.close();
  }
}

/** The team's call through `jcp bridge`'s code (an MCP client in memory → bridge → node). */
export interface BridgeCall {
  readonly tool: string;
  readonly arguments: Record<string, unknown>;
  /** `allow`/`deny` when the node decided; null when the holders did not sign (never sent). */
  readonly verdict: string | null;
  readonly requestId: string | null;
  /** The bridge's stable code when not signed (`threshold-refused`, …). */
  readonly error: string | null;
  readonly ms: number;
}

/**
 * Calls `action` with `args` as the team through the bridge (spec §2.2, §11; bridge/threshold.ts):
 * the SDK's MCP client in memory, the bridge agent whose caller is the group, one signing session
 * in which each member's policy judges the call, then the node.
 */
export async function callTeamViaBridge(
  node: DemoNode,
  team: Team,
  grant: SignedGrant,
  action: string,
  args: Record<string, unknown>,
): Promise<BridgeCall> {
  const t0 = Date.now();
  const caller = await ThresholdCaller.open({
    nc: team.nc,
    group: team.group,
    prefix: team.prefix,
    coordinator: team.coordinator,
    timeoutMs: 5_000,
  });
  const signer = { did: caller.did, sign: caller.sign };
  const c = await JcpClient.connect({ host: node.host, port: node.port, signer });
  const journal = new CallJournal({});
  const agent = new BridgeAgent({ name: 'team', signer, chains: [[grant]], client: c, journal, threshold: caller });
  const [a, b] = InMemoryTransport.createLinkedPair();
  const server = bridgeServer(agent);
  const mcp = new Client({ name: 'jcp-demo', version: '1' });
  try {
    await server.connect(b);
    await mcp.connect(a);
    const r = await mcp.callTool({ name: action, arguments: args });
    const meta = (r._meta ?? {}) as Record<string, unknown>;
    return {
      tool: action,
      arguments: args,
      verdict: typeof meta['jcp/verdict'] === 'string' ? meta['jcp/verdict'] : null,
      requestId: typeof meta['jcp/request_id'] === 'string' ? meta['jcp/request_id'] : null,
      error: typeof meta['jcp/error'] === 'string' ? meta['jcp/error'] : null,
      ms: Date.now() - t0,
    };
  } finally {
    await mcp.close().catch(() => undefined);
    await c.close();
    journal.close();
  }
}

function resultText(result: Uint8Array | undefined): string | null {
  const v = resultJson(result) as { content?: { text?: string }[] } | string | undefined;
  if (v === undefined) return null;
  if (typeof v === 'string') return v.slice(0, 120);
  const t = v.content?.[0]?.text;
  return typeof t === 'string' ? t.split('\n')[0]!.slice(0, 120) : null;
}

/**
 * The team's irreversible call at `node`: `action` with `args` under `grant` (subject = the group).
 * First member 1 alone signs with its share (FROST's arithmetic makes that a signature under the
 * wrong key); then two members sign through a session.
 */
export async function approveAsTeam(
  node: DemoNode,
  team: Team,
  grant: SignedGrant,
  action: string,
  args: Record<string, unknown>,
): Promise<Approval> {
  const attempt = async (sign: (msg: Uint8Array) => Uint8Array | Promise<Uint8Array>): Promise<Attempt> => {
    const c = await JcpClient.connect({ host: node.host, port: node.port, signer: { did: team.group, sign } });
    try {
      const req = await c.request({ chain: [grant], action, payload: args });
      const r = await c.callRequest(req);
      return {
        signatureVerifies: verifyWireRequestSignature(req),
        verdict: r.decision.verdict,
        denyReason: r.decision.deny_reason ?? null,
        result: resultText(r.result),
        requestId: r.requestId,
      };
    } finally {
      await c.close();
    }
  };
  const solo = await attempt((msg) => soloSignature(team.soloShare, msg));
  const group = await attempt(team.sign);
  return { solo, group };
}
