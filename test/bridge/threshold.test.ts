/**
 * A threshold subject through `jcp bridge` (spec §2.2, §11): the agent's grant names a dealt
 * 2-of-3 FROST group as its subject; an unmodified MCP client (the SDK's `Client` over stdio)
 * calls a tool, the bridge runs a signing session with the three holders (`jcp frost participant`
 * processes over the local NATS, each with its own rules file), and the call reaches the node only
 * with a 2-of-3 aggregate. One holder refusing by rule: the call still passes with the other two.
 * Two refusing: a tool error result `threshold-refused` naming both holders and the reasons from
 * their signed decision records; the node has no receipt for it and debited nothing. A holder
 * without --approve does not start (`frost-approve-required`); --approve allow-all signs, and
 * records each decision like any policy. A bridge killed between the signature and the node's
 * answer re-sends, after its restart, the same signed request: the node debits it once. Too few
 * holders online: `threshold-unavailable` after the round deadline, nothing sent.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer, connect as netConnect, type Socket } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { writeChainFile } from '../../client/index.ts';
import { grantId, type SignedGrant, signGrant } from '../../core/index.ts';
import { ALLOW_ALL_POLICY_ID, ALLOW_ALL_REASON, deal, readDecisionFile, shareRecord, writeShareFile } from '../../frost/internal.ts';
import { type ParticipantProc, startParticipantProc } from '../../testkit/index.ts';
import { type RunningNode, writeKeyFile } from '../../node/index.ts';
import { cleanupPrefix, NATS_URL, uniquePrefix } from '../frost/helpers.ts';
import { cast, liveNode, rid, tempDir } from '../node/fixtures.ts';

const { rng, alice, bob } = cast('bridge-threshold');
const JCP = path.resolve(import.meta.dirname, '../../bin/jcp.mjs');
const exec = promisify(execFile);

async function waitUntil(cond: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

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

  /** An MCP client of a fresh `jcp bridge` process for the group, on the node at `port` (its call journal `journal`). */
  async function bridgeClient(port: number, journal?: string): Promise<{ client: Client; transport: StdioClientTransport }> {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [
        JCP,
        'bridge',
        '--node',
        `127.0.0.1:${port}`,
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
        ...(journal !== undefined ? ['--journal', journal] : []),
      ],
    });
    const c = new Client({ name: 'threshold-test', version: '1' });
    await c.connect(transport);
    return { client: c, transport };
  }

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
    client = (await bridgeClient(node.port)).client;
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

  test('a holder without --approve does not start (frost-approve-required); --approve allow-all signs, each decision a signed record', async () => {
    await holders[1]!.stop();
    const refused = await exec(process.execPath, [
      JCP,
      'frost',
      'participant',
      '--keystore',
      w('p2'),
      '--nats',
      NATS_URL,
      '--prefix',
      prefix,
      '--coordinator',
      bob.did,
    ]).catch((e: { code: number; stderr: string }) => e);
    expect((refused as { code: number }).code).toBe(1);
    expect((refused as { stderr: string }).stderr).toMatch(/^jcp frost: error \[frost-approve-required\]: .*--approve allow-all/);
    // The old behaviour, asked for explicitly: holder 2 signs with holder 1.
    holders[1] = await startParticipantProc({
      keystore: w('p2'),
      natsUrl: NATS_URL,
      prefix,
      args: ['--coordinator', bob.did, '--approve', 'allow-all'],
    });
    const before = node.log.durableSeq;
    const ok = await client.callTool({ name: 'delete_entities', arguments: { entityNames: ['scratch-3'] } });
    expect(ok._meta?.['jcp/verdict']).toBe('allow');
    expect(node.log.durableSeq).toBe(before + 1);
    // allow-all decided too: a signed approve record with its fixed policy id, journaled and printed.
    const d2 = await holders[1]!.waitFor((e) => e.event === 'decision', "holder 2's allow-all decision");
    expect(d2).toMatchObject({ policy: ALLOW_ALL_POLICY_ID, policy_kind: 'allow-all', decision: 'approve', reason: ALLOW_ALL_REASON });
    const kept = readDecisionFile(path.join(w('p2'), 'approvals.journal')).at(-1)?.record;
    expect(kept?.valid).toBe(true);
    expect(kept?.body).toMatchObject({
      policy: ALLOW_ALL_POLICY_ID,
      policy_kind: 'allow-all',
      decision: 'approve',
      request: d2['request'],
    });
  }, 60_000);

  test('a bridge killed between the signature and the answer: its re-send after a restart is the same request, debited once', async () => {
    // A proxy in front of the node passes requests on but, once armed, drops the node's replies:
    // the node decides and debits the call, and the bridge never hears of it.
    let drop = false;
    const socks = new Set<Socket>();
    const proxy = createServer((inbound) => {
      const out = netConnect(node.port, '127.0.0.1');
      socks.add(inbound).add(out);
      inbound.on('data', (b) => out.write(b));
      out.on('data', (b) => {
        if (!drop) inbound.write(b);
      });
      const close = () => {
        inbound.destroy();
        out.destroy();
      };
      for (const x of [inbound, out]) x.on('error', close).on('close', close);
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    const journal = w('restart.journal');
    const call = {
      name: 'delete_entities',
      arguments: { entityNames: ['scratch-restart'] },
      _meta: { 'jcp/idempotency_key': 'restart-1' },
    };
    const spent = node.ledger.spent(grantId(grant.grant));
    const before = node.log.durableSeq;
    const first = await bridgeClient((proxy.address() as AddressInfo).port, journal);
    try {
      await first.client.listTools(); // the catalogue, while the node's replies still pass
      drop = true;
      const pending = first.client.callTool(call).catch((e: unknown) => e);
      await waitUntil(() => node.log.durableSeq === before + 1, 'the node to decide the first send');
      process.kill(first.transport.pid!, 'SIGKILL');
      await pending;
    } finally {
      await first.client.close().catch(() => {});
      proxy.close();
      for (const x of socks) x.destroy();
    }
    expect(node.ledger.spent(grantId(grant.grant))).toBe(spent + 7n);
    // The restarted bridge (same journal) re-sends the call: the same signed bytes, replayed by the node.
    const second = await bridgeClient(node.port, journal);
    try {
      const r = await second.client.callTool(call);
      expect(r._meta?.['jcp/verdict']).toBe('allow');
      await new Promise((res) => setTimeout(res, 200));
      expect(node.log.durableSeq).toBe(before + 1);
      expect(node.ledger.spent(grantId(grant.grant))).toBe(spent + 7n);
    } finally {
      await second.client.close();
    }
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
