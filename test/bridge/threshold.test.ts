/**
 * A threshold subject through `jcp bridge` (spec §2.2, §11): the agent's grant names a dealt
 * 2-of-3 FROST group as its subject; an unmodified MCP client (the SDK's `Client` over stdio)
 * calls a tool, the bridge runs a signing session with the three holders (`jcp frost participant`
 * processes over the local NATS, each with its own rules file), and the call reaches the node only
 * with a 2-of-3 aggregate. One holder refusing by rule: the call still passes with the other two.
 * Two refusing: a tool error result `threshold-refused` naming both holders and the reasons from
 * their signed decision records; the node has no receipt for it and debited nothing. A holder
 * without --approve refuses control calls; --approve allow-all signs them. Too few holders
 * online: `threshold-unavailable` after the round deadline, nothing sent.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { writeChainFile } from '../../client/index.ts';
import { grantId, type SignedGrant, signGrant } from '../../core/index.ts';
import { deal, NO_POLICY_ID, NO_POLICY_REASON, shareRecord, writeShareFile } from '../../frost/internal.ts';
import { type ParticipantProc, startParticipantProc } from '../../testkit/index.ts';
import { type RunningNode, writeKeyFile } from '../../node/index.ts';
import { cleanupPrefix, NATS_URL, uniquePrefix } from '../frost/helpers.ts';
import { cast, liveNode, rid, tempDir } from '../node/fixtures.ts';

const { rng, alice, bob } = cast('bridge-threshold');
const JCP = path.resolve(import.meta.dirname, '../../bin/jcp.mjs');

type Refusal = {
  identifier: number;
  holder: string;
  code: string;
  reason: string;
  record?: { valid: boolean; policy: string; policy_kind: string; decision: string; request: string };
};

describe('jcp bridge / a threshold group as the subject (needs NATS)', () => {
  const work = tempDir('bridge-threshold');
  const w = (name: string) => path.join(work.dir, name);
  const prefix = uniquePrefix('bridge');
  let nc: NatsConnection;
  let node: RunningNode & { cleanup: () => Promise<void> };
  let group = '';
  let roster: string[] = [];
  let grant: SignedGrant;
  const holders: ParticipantProc[] = [];
  let client: Client;

  beforeAll(async () => {
    nc = await connect({ servers: NATS_URL });
    node = await liveNode({
      resources: [
        { name: 'memory', endpoint: { kind: 'mcp-stdio', command: 'mcp-server-memory', env: { MEMORY_FILE_PATH: w('memory.jsonl') } } },
      ],
    });
    const d = deal({ min: 2, max: 3 }, (n) => new Uint8Array(randomBytes(n)));
    if (!d.ok) throw new Error(d.error.why);
    group = d.value.did;
    roster = [...d.value.shares[0]!.group.roster];
    // Holder 1: only names under "scratch-"; holder 2: any delete up to 100 µJ; holder 3: reads only.
    const policies = [
      { allow: [{ resource: 'memory', actions: ['delete_entities', 'create_entities'], args: { entityNames: { prefix: 'scratch-' } } }] },
      { allow: [{ resource: 'memory', actions: ['delete_entities', 'create_entities'], max_cost_uj: 100 }] },
      { allow: [{ resource: 'memory', actions: ['read_graph'] }] },
    ];
    for (const s of d.value.shares) {
      const ks = w(`p${s.identifier}`);
      mkdirSync(ks, { recursive: true, mode: 0o700 });
      writeShareFile(
        path.join(ks, `participant-${s.identifier}.share`),
        shareRecord(s.group, s.identifier, s.signingShare, s.identitySeed),
      );
      writeFileSync(w(`rules-${s.identifier}.json`), JSON.stringify(policies[s.identifier - 1]));
    }
    holders.push(
      ...(await Promise.all(
        [1, 2, 3].map((i) =>
          startParticipantProc({
            keystore: w(`p${i}`),
            natsUrl: NATS_URL,
            prefix,
            args: ['--coordinator', bob.did, '--approve', 'rules', w(`rules-${i}.json`)],
          }),
        ),
      )),
    );
    grant = signGrant(
      {
        issuer: alice.did,
        subject: group,
        capability: { resource: rid('memory'), actions: ['delete_entities', 'read_graph'] },
        budget_uj: 1_000n,
        expiry: 0,
        nonce: rng(16),
      },
      alice,
    );
    writeKeyFile(w('bob.key'), bob);
    writeChainFile(w('team.chain.json'), [grant]);
    client = new Client({ name: 'threshold-test', version: '1' });
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [
          JCP,
          'bridge',
          '--node',
          `127.0.0.1:${node.port}`,
          '--key',
          w('bob.key'),
          '--chain',
          w('team.chain.json'),
          '--cost-uj',
          '7',
          '--nats',
          NATS_URL,
          '--frost-prefix',
          prefix,
        ],
      }),
    );
  }, 60_000);

  afterAll(async () => {
    await client?.close();
    await Promise.all(holders.map((h) => h.stop()));
    await node?.cleanup();
    await cleanupPrefix(nc, prefix);
    await nc?.close();
    work.cleanup();
  });

  test('one holder refuses by rule: the call passes with the other two, as the group, and is debited once', async () => {
    const before = node.log.durableSeq;
    const r = await client.callTool({ name: 'delete_entities', arguments: { entityNames: ['scratch-1'] } });
    expect(r.isError).not.toBe(true);
    expect(r._meta?.['jcp/verdict']).toBe('allow');
    expect(r._meta?.['jcp/cost_uj']).toBe('7');
    expect(node.ledger.spent(grantId(grant.grant))).toBe(7n);
    expect(node.log.durableSeq).toBe(before + 1);
    // Holder 3 refused by its rule, with a signed record; holders 1 and 2 approved.
    const request = String((await holders[0]!.waitFor((e) => e.event === 'decision', 'a decision'))['request']);
    const d3 = await holders[2]!.waitFor((e) => e.event === 'decision' && e['request'] === request, "holder 3's decision");
    expect(d3['decision']).toBe('refuse');
    expect(String(d3['reason'])).toMatch(/delete_entities/);
    expect((await holders[1]!.waitFor((e) => e.event === 'decision' && e['request'] === request, "holder 2's decision"))['decision']).toBe(
      'approve',
    );
  }, 30_000);

  test('two holders refuse: a threshold-refused tool error naming both and why (from their signed records); no receipt, nothing debited', async () => {
    const spent = node.ledger.spent(grantId(grant.grant));
    const before = node.log.durableSeq;
    const r = await client.callTool({ name: 'delete_entities', arguments: { entityNames: ['payroll'] } });
    expect(r.isError).toBe(true);
    expect(r._meta?.['jcp/error']).toBe('threshold-refused');
    expect(r._meta?.['jcp/frost_code']).toBe('frost-not-approved');
    expect(r._meta?.['jcp/receipt']).toBeUndefined();
    const refusals = r._meta?.['jcp/refusals'] as Refusal[];
    expect(refusals.map((x) => x.identifier).sort()).toEqual([1, 3]);
    for (const x of refusals) {
      expect(x.holder).toBe(roster[x.identifier - 1]);
      expect(x.record).toMatchObject({ valid: true, policy_kind: 'rules', decision: 'refuse' });
    }
    const text = (r.content as { text: string }[])[0]!.text;
    expect(text).toMatch(/^threshold-refused: \[frost-not-approved\]/);
    expect(text).toContain(refusals.find((x) => x.identifier === 1)!.reason);
    expect(refusals.find((x) => x.identifier === 1)!.reason).toMatch(/scratch-/);
    // Nothing reached the node: no receipt, no debit.
    await new Promise((res) => setTimeout(res, 200));
    expect(node.log.durableSeq).toBe(before);
    expect(node.ledger.spent(grantId(grant.grant))).toBe(spent);
  }, 30_000);

  test('a holder without --approve refuses a control call (the safe default); --approve allow-all signs it', async () => {
    // Restart holder 2 with no policy: holders 2 and 3 now refuse, so the call is refused.
    await holders[1]!.stop();
    holders[1] = await startParticipantProc({ keystore: w('p2'), natsUrl: NATS_URL, prefix, args: ['--coordinator', bob.did] });
    const before = node.log.durableSeq;
    const r = await client.callTool({ name: 'delete_entities', arguments: { entityNames: ['scratch-2'] } });
    expect(r._meta?.['jcp/error']).toBe('threshold-refused');
    const refusals = r._meta?.['jcp/refusals'] as Refusal[];
    expect(refusals.find((x) => x.identifier === 2)).toMatchObject({ code: 'frost-not-approved', reason: NO_POLICY_REASON });
    // Even without a policy the refusal is a signed, published decision record (policy kind none).
    expect(refusals.find((x) => x.identifier === 2)?.record).toMatchObject({
      valid: true,
      policy_kind: 'none',
      decision: 'refuse',
      policy: NO_POLICY_ID,
    });
    expect(node.log.durableSeq).toBe(before);
    // The old behaviour, asked for explicitly: holder 2 signs with holder 1.
    await holders[1]!.stop();
    holders[1] = await startParticipantProc({
      keystore: w('p2'),
      natsUrl: NATS_URL,
      prefix,
      args: ['--coordinator', bob.did, '--approve', 'allow-all'],
    });
    const ok = await client.callTool({ name: 'delete_entities', arguments: { entityNames: ['scratch-3'] } });
    expect(ok._meta?.['jcp/verdict']).toBe('allow');
    expect(node.log.durableSeq).toBe(before + 1);
  }, 60_000);

  test('too few holders online: a threshold-unavailable tool error after the round deadline; nothing sent, nothing debited', async () => {
    await holders[1]!.stop();
    await holders[2]!.stop();
    const spent = node.ledger.spent(grantId(grant.grant));
    const before = node.log.durableSeq;
    const r = await client.callTool({ name: 'delete_entities', arguments: { entityNames: ['scratch-4'] } });
    expect(r.isError).toBe(true);
    expect(r._meta).toMatchObject({
      'jcp/error': 'threshold-unavailable',
      'jcp/frost_code': 'frost-not-enough-participants',
      'jcp/refusals': [],
    });
    expect((r.content as { text: string }[])[0]!.text).toMatch(
      /^threshold-unavailable: \[frost-not-enough-participants\] .*nothing was sent to the node$/,
    );
    expect(node.log.durableSeq).toBe(before);
    expect(node.ledger.spent(grantId(grant.grant))).toBe(spent);
  }, 30_000);
});
