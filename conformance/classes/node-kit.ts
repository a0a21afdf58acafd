/**
 * A live enforcement node for the conformance classes that must drive the product's stateful
 * paths (spec §9: C6, C11, C15): a real `startNode` on loopback port 0 in a temporary data
 * directory, reached over jcp/1 by a `JcpClient`, with a fixed clock (so the authority kit's
 * grants, which expire at 5,000 s, are live) and the estimator meter charging each call's
 * claimed cost. Its ledger and revocation store are the node's own; a class reads them back to
 * show what was and was not debited. Not a conformance class itself.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { type Actor, type ContentId, type Did, grantId, payloadHash, type SignedGrant, signWireRequestSync } from '../../core/index.ts';
import { type BudgetPolicy, configFromJson, type RunningNode, resourceIdOf, startNode } from '../../node/index.ts';
import { JcpClient } from '../../client/index.ts';

/** The node's clock and every request's `now` (Unix seconds): inside the kit grants' lifetime. */
export const LIVE_NOW_S = 1_000;

/** One resource the live node serves: its name and, when configured, its trust roots (§7). */
export interface LiveResource {
  readonly name: string;
  readonly trustRoots?: readonly Did[];
}

/** Options of {@link withLiveNode}. */
export interface LiveNodeOpts {
  /** Resources served (default one open resource named after the label). */
  readonly resources?: readonly LiveResource[];
  /** A budget policy (node/hooks.ts); `self()` gives the node's steward did once it is known. */
  readonly budgetPolicy?: (self: () => Did | undefined) => BudgetPolicy;
}

/** A running node and what a class does with it. */
export interface KitNode {
  readonly node: RunningNode;
  /** Resource content ids by name (`resourceIdOf(name)`). */
  readonly resources: Readonly<Record<string, ContentId>>;
  /**
   * Sends a tool call exercising the leaf of `chain`, signed by `caller` (default: the leaf's
   * subject must be `caller`), claiming `costUj` (default 10 µJ). Resolves to `allow` or the
   * deny reason; an error reply (no decision) resolves to `error:<code>`.
   */
  call(chain: readonly SignedGrant[], caller: Actor, opts?: { costUj?: bigint; action?: string }): Promise<string>;
  /** Sends a revocation over jcp/1: `revoked` when the node took it, else `error:<code>`. */
  revoke(sr: Parameters<JcpClient['revoke']>[0], grant?: Parameters<JcpClient['revoke']>[1]): Promise<string>;
  /** µJ the node's ledger holds against each grant, in order. */
  spent(...grants: readonly SignedGrant[]): bigint[];
  /** Stops the node and starts it again over the same data directory (boot replay, §8.1). */
  restart(): Promise<void>;
}

/**
 * Starts a node, runs `fn` against it, and always stops it and deletes its data directory.
 * @throws whatever `fn` or `startNode` throws (the class records it as a failure).
 */
export async function withLiveNode<T>(label: string, opts: LiveNodeOpts, fn: (n: KitNode) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(path.join(tmpdir(), `jcp-${label}-`));
  const resources = opts.resources ?? [{ name: label }];
  const cfg = configFromJson({
    listen: '127.0.0.1:0',
    data_dir: dir,
    resources: resources.map((r) => (r.trustRoots === undefined ? { name: r.name } : { name: r.name, trust_roots: [...r.trustRoots] })),
    meter: { default_estimate_uj: 0, rungs: ['estimator'] },
  });
  let node: RunningNode | undefined;
  let client: JcpClient | undefined;
  const policy = opts.budgetPolicy?.(() => node?.did);
  const start = async () => {
    node = await startNode(cfg, {
      logger: pino({ level: 'silent' }),
      clockS: () => LIVE_NOW_S,
      ...(policy ? { budgetPolicy: policy } : {}),
    });
    client = await JcpClient.connect({ host: '127.0.0.1', port: node.port });
  };
  const stop = async () => {
    await client?.close();
    await node?.close();
    client = undefined;
  };
  let n = 0;
  try {
    await start();
    const live: KitNode = {
      get node() {
        return node!;
      },
      resources: Object.fromEntries(resources.map((r) => [r.name, resourceIdOf(r.name)])),
      async call(chain, caller, o = {}) {
        const leaf = chain[chain.length - 1]!.grant;
        const payload = new TextEncoder().encode(`{"n":${++n}}`);
        const req = signWireRequestSync(
          {
            frame: {
              kind: 'tool-call',
              trust: 'control',
              grant_id: grantId(leaf),
              action: o.action ?? 'read',
              resource: leaf.capability.resource,
              payload_hash: payloadHash(payload),
            },
            chain,
            caller: caller.did,
            cost: { uj: o.costUj ?? 10n, provenance: 'Estimator' },
            now: LIVE_NOW_S,
            payload,
          },
          caller,
        );
        try {
          const r = await client!.callRequest(req);
          return r.decision.verdict === 'allow' ? 'allow' : String(r.decision.deny_reason);
        } catch (e) {
          const code = (e as { code?: string }).code;
          if (code === undefined) throw e;
          return `error:${code}`;
        }
      },
      async revoke(sr, grant) {
        try {
          await client!.revoke(sr, grant);
          return 'revoked';
        } catch (e) {
          const code = (e as { code?: string }).code;
          if (code === undefined) throw e;
          return `error:${code}`;
        }
      },
      spent(...grants) {
        return grants.map((g) => node!.ledger.spent(grantId(g.grant)));
      },
      async restart() {
        await stop();
        await start();
      },
    };
    return await fn(live);
  } finally {
    await stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
