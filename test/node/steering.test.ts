/**
 * Steering in the running product (§4.7, C21): `jcp grant checkpoint | amend | continue` against a
 * live node, every §4.7 refusal from the CLI, the node refusing the steered grant (`revoked`) and
 * capping the continuation at what the steered grant had left, across a restart.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { amend, contentId, grantId, makeCheckpoint, newActor, seededRng } from '../../core/index.ts';
import { runJcpInProcess } from '../support.ts';
import { readChainFile } from '../../client/index.ts';
import { readAmendmentFile, readCheckpointFile } from '../../cli/internal.ts';
import { JcpClient, WireErrorReply } from '../../client/index.ts';
import { liveNode, request, tempDir } from './fixtures.ts';

/** The `jcp` command run in this process (test/support.ts). */
const jcp = (...argv: string[]) => runJcpInProcess(argv);

type CallOut = { decision: { verdict: string; deny_reason?: string }; receipt: { core: { budget_remaining_uj: string; cost_uj: string } } };

describe('steering against a live node (§4.7)', () => {
  const t = tempDir('steer');
  const f = (n: string) => path.join(t.dir, n);
  const config = { resources: [{ name: 'demo' }], meter: { default_estimate_uj: 0, rungs: ['estimator'] } };
  let node: Awaited<ReturnType<typeof liveNode>>;
  let addr: string;
  const call = async (chain: string, cost: number): Promise<CallOut> => {
    const r = await jcp('call', '--node', addr, '--chain', f(chain), '--key', f('bob.key'), '--action', 'read', '--cost', String(cost));
    expect(r.err).toBe('');
    return JSON.parse(r.out) as CallOut;
  };

  beforeAll(async () => {
    node = await liveNode(config);
    addr = `127.0.0.1:${node.port}`;
    for (const k of ['alice', 'bob', 'mallory']) expect((await jcp('key', 'new', '--out', f(`${k}.key`))).code).toBe(0);
    const mint = await jcp(
      'grant',
      'mint',
      '--key',
      f('alice.key'),
      '--subject',
      f('bob.key'),
      '--resource',
      'demo',
      '--actions',
      'read',
      '--budget',
      '1000',
      '--out',
      f('run.json'),
    );
    expect(mint.code).toBe(0);
  });
  afterAll(async () => {
    await node.cleanup();
    t.cleanup();
  });

  test('checkpoint: only the agent; amend: only the distinct issuer, only tighter', async () => {
    expect((await call('run.json', 900)).decision.verdict).toBe('allow');
    const byOther = await jcp(
      'grant',
      'checkpoint',
      '--chain',
      f('run.json'),
      '--key',
      f('mallory.key'),
      '--state',
      contentId({ step: 1 }),
      '--out',
      f('x.json'),
    );
    expect(byOther.code).toBe(1);
    expect(byOther.err).toMatch(/^jcp grant: error \[not-agent\]: checkpoint refused: /);
    const byIssuer = await jcp(
      'grant',
      'checkpoint',
      '--chain',
      f('run.json'),
      '--key',
      f('alice.key'),
      '--state',
      contentId({ step: 1 }),
      '--out',
      f('x.json'),
    );
    expect(byIssuer.err).toMatch(/\[not-agent\]/);

    const cp = await jcp(
      'grant',
      'checkpoint',
      '--chain',
      f('run.json'),
      '--key',
      f('bob.key'),
      '--state',
      f('run.json'),
      '--out',
      f('cp.json'),
    );
    expect(cp.code).toBe(0);
    expect(cp.out.trim()).toMatch(/^[0-9a-f]{64}$/);
    const cp2 = await jcp(
      'grant',
      'checkpoint',
      '--chain',
      f('run.json'),
      '--key',
      f('bob.key'),
      '--state',
      contentId({ step: 2 }),
      '--out',
      f('cp2.json'),
    );
    expect(cp2.code).toBe(0);

    const amendBy = (key: string, budget: string, out: string, ...more: string[]) =>
      jcp(
        'grant',
        'amend',
        '--chain',
        f('run.json'),
        '--checkpoint',
        f('cp.json'),
        '--key',
        f(key),
        '--budget',
        budget,
        '--out',
        f(out),
        ...more,
      );
    const self = await amendBy('bob.key', '10', 'a-self.json');
    expect(self.code).toBe(1);
    expect(self.err).toMatch(/^jcp grant: error \[self-steering\]: amend refused: /);
    const stranger = await amendBy('mallory.key', '10', 'a-mal.json');
    expect(stranger.err).toMatch(/^jcp grant: error \[not-issuer\]: amend refused: /);
    const wider = await amendBy('alice.key', '1001', 'a-wide.json');
    expect(wider.code).toBe(1);
    expect(wider.err).toMatch(/^jcp grant: error \[widening\]: amend refused: /);
    const otherGrant = await jcp(
      'grant',
      'mint',
      '--key',
      f('alice.key'),
      '--subject',
      f('bob.key'),
      '--resource',
      'demo',
      '--actions',
      'read',
      '--budget',
      '1000',
      '--out',
      f('other.json'),
    );
    expect(otherGrant.code).toBe(0);
    const misbound = await jcp(
      'grant',
      'amend',
      '--chain',
      f('other.json'),
      '--checkpoint',
      f('cp.json'),
      '--key',
      f('alice.key'),
      '--budget',
      '5',
      '--out',
      f('a-mis.json'),
    );
    expect(misbound.err).toMatch(/^jcp grant: error \[wrong-grant\]: amend refused: /);

    // "Amended to 1,000" with 900 spent: the node caps the continuation at the 100 left.
    const ok = await amendBy('alice.key', '1000', 'amend.json', '--instructions', contentId({ focus: 'summarise' }), '--node', addr);
    expect(ok.err).toBe('');
    expect(ok.code).toBe(0);
    const sent = JSON.parse(ok.out) as { nodes: Array<{ budget_uj: string; steered_spent_uj: string }> };
    expect(sent.nodes).toEqual([expect.objectContaining({ node: addr, budget_uj: '100', steered_spent_uj: '900' })]);
  });

  test('the steered grant allows nothing at the node; the continuation spends at most what was left', async () => {
    expect((await call('run.json', 1)).decision).toEqual({ verdict: 'deny', deny_reason: 'revoked' });

    const elsewhere = await jcp(
      'grant',
      'continue',
      '--chain',
      f('run.json'),
      '--amendment',
      f('amend.json'),
      '--checkpoint',
      f('cp2.json'),
      '--key',
      f('alice.key'),
      '--out',
      f('c-x.json'),
    );
    expect(elsewhere.code).toBe(1);
    expect(elsewhere.err).toMatch(/^jcp grant: error \[wrong-checkpoint\]: continue refused: /);
    const byAgent = await jcp(
      'grant',
      'continue',
      '--chain',
      f('run.json'),
      '--amendment',
      f('amend.json'),
      '--key',
      f('bob.key'),
      '--out',
      f('c-x.json'),
    );
    expect(byAgent.err).toMatch(/^jcp grant: error \[not-issuer\]: continue refused: /);
    const cont = await jcp(
      'grant',
      'continue',
      '--chain',
      f('run.json'),
      '--amendment',
      f('amend.json'),
      '--key',
      f('alice.key'),
      '--out',
      f('cont.json'),
    );
    expect(cont.code).toBe(0);
    expect(readChainFile(f('cont.json'))[0]!.grant.budget_uj).toBe(1000n);

    const first = await call('cont.json', 60);
    expect(first.decision.verdict).toBe('allow');
    expect(first.receipt.core.budget_remaining_uj).toBe('40');
    expect((await call('cont.json', 41)).decision).toEqual({ verdict: 'deny', deny_reason: 'budget-exceeded' });
    expect((await call('cont.json', 40)).decision.verdict).toBe('allow');
    expect((await call('cont.json', 1)).decision).toEqual({ verdict: 'deny', deny_reason: 'budget-exceeded' });
  });

  test('a second amendment of the steered grant is refused; the same one again is answered as before', async () => {
    const again = await jcp(
      'grant',
      'amend',
      '--chain',
      f('run.json'),
      '--checkpoint',
      f('cp2.json'),
      '--key',
      f('alice.key'),
      '--budget',
      '1000',
      '--node',
      addr,
      '--out',
      f('amend2.json'),
    );
    expect(again.code).toBe(1);
    expect(again.err).toMatch(/^jcp grant: error \[amendment-refused\]: amend refused by node .*: already-amended: /);

    const { amendment, checkpoint } = readAmendmentFile(f('amend.json'));
    const steered = readChainFile(f('run.json'))[0]!;
    const client = await JcpClient.connect({ host: '127.0.0.1', port: node.port, reconnectAttempts: 0 });
    try {
      expect((await client.amend(steered, checkpoint, amendment)).budget_uj).toBe(100n);
      const other = readCheckpointFile(f('cp2.json'));
      const err = await client.amend(steered, other, amendment).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(WireErrorReply);
      expect((err as WireErrorReply).code).toBe('amendment-refused');
      expect((err as WireErrorReply).message).toMatch(/^amendment-refused: wrong-checkpoint: /);
    } finally {
      await client.close();
    }
  });

  test('--send hands a signed amendment to another node, which caps by its own ledger; a mismatched chain is refused before sending', async () => {
    const other = await liveNode(config);
    try {
      const addr2 = `127.0.0.1:${other.port}`;
      const wrong = await jcp('grant', 'amend', '--chain', f('other.json'), '--send', f('amend.json'), '--node', addr2);
      expect(wrong.code).toBe(1);
      expect(wrong.err).toMatch(/^jcp grant: error \[wrong-grant\]: amend refused: /);
      expect((await other.log.amendments()).length).toBe(0);
      const mixed = await jcp('grant', 'amend', '--chain', f('run.json'), '--send', f('amend.json'), '--budget', '5', '--node', addr2);
      expect(mixed.code).toBe(2);
      const sent = await jcp('grant', 'amend', '--chain', f('run.json'), '--send', f('amend.json'), '--node', addr2);
      expect(sent.err).toBe('');
      // Nothing of the steered grant was spent at this node: its continuation may spend the amended 1,000 here.
      expect((JSON.parse(sent.out) as { nodes: unknown[] }).nodes).toEqual([
        expect.objectContaining({ node: addr2, budget_uj: '1000', steered_spent_uj: '0' }),
      ]);
      expect(other.amendments.steered(grantId(readChainFile(f('run.json'))[0]!.grant))).toBe(true);
    } finally {
      await other.cleanup();
    }
  });

  test('after a restart the steered grant stays refused and the continuation stays capped (replay + the amendment record)', async () => {
    await node.close();
    node = await liveNode(config, {}, node.dataDir);
    addr = `127.0.0.1:${node.port}`;
    expect(node.boot.amendments).toEqual({ applied: 1, bad: 0 });
    // Costs not used before, so neither call is answered as an idempotent replay of an earlier one.
    expect((await call('run.json', 3)).decision).toEqual({ verdict: 'deny', deny_reason: 'revoked' });
    expect((await call('cont.json', 3)).decision).toEqual({ verdict: 'deny', deny_reason: 'budget-exceeded' });
  });
});

describe('the node refuses amendments §4.7 forbids, and debits nothing for them', () => {
  test('an amendment signed by a stranger or the agent, or a widening one, is refused; the grant keeps working', async () => {
    const rng = seededRng('test/node/steering/refusals');
    const [issuer, agent, stranger] = [newActor(rng), newActor(rng), newActor(rng)];
    const node = await liveNode({ resources: [{ name: 'tools' }] });
    const client = await JcpClient.connect({ host: '127.0.0.1', port: node.port, reconnectAttempts: 0 });
    try {
      const { signGrant } = await import('../../core/index.ts');
      const { resourceIdOf } = await import('../../node/index.ts');
      const { signBody } = await import('../../core/index.ts');
      const { checkpointId } = await import('../../core/index.ts');
      const run = signGrant(
        {
          issuer: issuer.did,
          subject: agent.did,
          capability: { resource: resourceIdOf('tools'), actions: ['read'] },
          budget_uj: 500n,
          expiry: 0,
          nonce: rng(16),
        },
        issuer,
      );
      const cp = makeCheckpoint(run, contentId({ s: 1 }), agent, rng(16));
      if (!cp.ok) throw new Error(cp.error.why);
      const forged = (by: typeof issuer, budget: bigint) =>
        signBody({ checkpoint: checkpointId(cp.value), budget_uj: budget, nonce: rng(16) }, by);
      const refusal = async (sa: ReturnType<typeof forged>) => {
        const e = await client.amend(run, cp.value, sa).catch((x: unknown) => x);
        expect(e).toBeInstanceOf(WireErrorReply);
        expect((e as WireErrorReply).code).toBe('amendment-refused');
        return (e as WireErrorReply).message.split(': ')[1];
      };
      expect(await refusal(forged(stranger, 10n))).toBe('not-issuer');
      expect(await refusal(forged(agent, 10n))).toBe('self-steering');
      expect(await refusal(forged(issuer, 501n))).toBe('widening');
      const tampered = { body: { ...run.grant, budget_uj: 5000n }, signature: run.signature };
      const good = amend(cp.value, run, { budget_uj: 10n, nonce: rng(16) }, issuer);
      if (!good.ok) throw new Error(good.error.why);
      const e = await client.amend({ grant: tampered.body, signature: tampered.signature }, cp.value, good.value).catch((x: unknown) => x);
      expect((e as WireErrorReply).message).toMatch(/^amendment-refused: bad-signature: /);
      expect((await node.log.amendments()).length).toBe(0);
      // Nothing refused took effect: the run still allows its agent.
      const r = await client.callRequest(request(agent, [run], { action: 'read', costUj: 5n }));
      expect(r.decision).toEqual({ verdict: 'allow' });
    } finally {
      await client.close();
      await node.cleanup();
    }
  });
});
