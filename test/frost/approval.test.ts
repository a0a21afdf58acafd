/**
 * Threshold approvals, pure (spec §2.2, §11): decoding the message a holder is asked to sign,
 * the rules-file policy, the common checks (raw bytes, skew) and the signed decision record.
 */
import { describe, expect, it } from 'vitest';
import {
  actorFromSeed,
  contentIdOfBytes,
  costToCbor,
  encode,
  frameToCbor,
  signedGrantToCbor,
  utf8,
  wireRequestSigningBytes,
} from '../../core/index.ts';
import {
  type DecisionBody,
  decodeCall,
  FrostErrorCodes,
  judgeByRules,
  openDecision,
  parseRules,
  precheck,
  resourceIdFor,
  type Rules,
  sealDecision,
} from '../../frost/index.ts';
import { callBytes, unsignedCall } from './approval-call.ts';

const NOW = 1_760_000_000; // 2025-10-09T08:53:20Z: hour 8 UTC

function rules(json: unknown): Rules {
  const r = parseRules(JSON.stringify(json));
  if (!r.ok) throw new Error(r.error.why);
  return r.value;
}

const FOLDER = rules({
  allow: [{ resource: 'fs', actions: ['write_file'], max_cost_uj: 1000, args: { path: { prefix: '/srv/out/' }, size: { max: 4096 } } }],
});

describe('approval / decoding the message to sign', () => {
  it('decode / a jcp/1 request: tool, resource, arguments, cost, chain, caller and now are shown; the content id names the bytes', () => {
    const u = unsignedCall({ args: { path: '/srv/out/a.txt', size: 10 }, costUj: 700n, nowS: NOW });
    const bytes = wireRequestSigningBytes(u);
    const c = decodeCall(bytes);
    expect(c.kind).toBe('jcp-request');
    if (c.kind !== 'jcp-request') return;
    expect(c.request).toBe(contentIdOfBytes(bytes));
    expect(c.action).toBe('write_file');
    expect(c.resource).toBe(resourceIdFor('fs'));
    expect(c.arguments).toEqual({ path: '/srv/out/a.txt', size: 10 });
    expect(c.cost_uj).toBe('700');
    expect(c.caller).toBe(u.caller);
    expect(c.now).toBe(NOW);
    expect(c.chain).toHaveLength(1);
    expect(c.chain[0]!.subject).toBe(u.caller);
  });

  it('decode / a request asking for notices (notify: 1, as the bridge sends to a node that lists tools) is still a call', () => {
    const u = { ...unsignedCall({ args: { path: '/srv/out/a.txt' }, nowS: NOW }), notify: 1 as const };
    const d = decodeCall(wireRequestSigningBytes(u));
    expect(d).toMatchObject({ kind: 'jcp-request', action: 'write_file', arguments: { path: '/srv/out/a.txt' } });
    expect(d.request).toBe(contentIdOfBytes(wireRequestSigningBytes(u)));
  });

  it('decode / raw bytes, a payload that does not match frame.payload_hash, and a signed request are not calls', () => {
    expect(decodeCall(utf8('sign me')).kind).toBe('raw');
    const u = unsignedCall({ args: { path: '/srv/out/a' }, nowS: NOW });
    const swapped = encode({
      frame: frameToCbor(u.frame),
      chain: u.chain.map(signedGrantToCbor),
      caller: u.caller,
      cost: costToCbor(u.cost),
      now: u.now,
      payload: utf8('{"path":"/etc"}'),
    });
    const d = decodeCall(swapped);
    expect(d.kind).toBe('raw');
    expect(d.kind === 'raw' && d.why).toMatch(/payload_hash/);
    const signed = encode({
      frame: frameToCbor(u.frame),
      chain: u.chain.map(signedGrantToCbor),
      caller: u.caller,
      cost: costToCbor(u.cost),
      now: u.now,
      payload: u.payload!,
      signature: new Uint8Array(64),
    });
    expect(decodeCall(signed).kind).toBe('raw');
  });

  it('precheck / raw bytes are refused unless the holder signs raw; a now outside the skew is refused', () => {
    const raw = decodeCall(utf8('x'));
    expect(precheck(raw, { allowRaw: false, nowS: NOW, maxSkewS: 300 })?.approve).toBe(false);
    expect(precheck(raw, { allowRaw: true, nowS: NOW, maxSkewS: 300 })).toBeUndefined();
    const call = decodeCall(callBytes({ nowS: NOW }));
    expect(precheck(call, { allowRaw: false, nowS: NOW + 300, maxSkewS: 300 })).toBeUndefined();
    expect(precheck(call, { allowRaw: false, nowS: NOW + 301, maxSkewS: 300 })?.reason).toMatch(/more than 300 s/);
  });
});

describe('approval / rules file', () => {
  const judge = (r: Rules, o: Parameters<typeof callBytes>[0]) => judgeByRules(r, decodeCall(callBytes({ nowS: NOW, ...o })));

  it('approve / a call inside every limit of an entry', () => {
    expect(judge(FOLDER, { args: { path: '/srv/out/x.txt', size: 4096 }, costUj: 1000n })).toMatchObject({ approve: true });
  });

  it('refuse / cost over the cap by 1 µJ, another action, another resource', () => {
    expect(judge(FOLDER, { args: { path: '/srv/out/x', size: 1 }, costUj: 1001n }).reason).toMatch(/cost 1001 µJ is over 1000 µJ/);
    expect(judge(FOLDER, { action: 'delete_file', args: { path: '/srv/out/x', size: 1 } }).reason).toMatch(/action delete_file/);
    expect(judge(FOLDER, { resource: 'db', args: { path: '/srv/out/x', size: 1 } }).reason).toMatch(/resource is not fs/);
  });

  it('refuse / a path outside the folder, a .. traversal, a value over its limit, a missing argument', () => {
    expect(judge(FOLDER, { args: { path: '/etc/passwd', size: 1 } }).reason).toMatch(/not under \/srv\/out\//);
    expect(judge(FOLDER, { args: { path: '/srv/out/../../etc/passwd', size: 1 } }).reason).toMatch(/contains '\.\.'/);
    expect(judge(FOLDER, { args: { path: '/srv/out/x', size: 4097 } }).reason).toMatch(/size = 4097 is over 4096/);
    expect(judge(FOLDER, { args: { path: '/srv/out/x' } }).reason).toMatch(/size is missing/);
  });

  it('lists / a prefix rule judges every element of a list of names (one outside refuses the call)', () => {
    const names = rules({ allow: [{ resource: 'memory', actions: ['delete_entities'], args: { entityNames: { prefix: 'w1-' } } }] });
    const j = (entityNames: unknown) => judge(names, { resource: 'memory', action: 'delete_entities', args: { entityNames } });
    expect(j(['w1-a', 'w1-b']).approve).toBe(true);
    expect(j(['w1-a', 'w2-secrets']).reason).toMatch(/entityNames is not under w1-/);
    expect(j([]).reason).toMatch(/empty list/);
  });

  it('time windows / hours_utc and not_after are judged against the request now', () => {
    const day = rules({ allow: [{ resource: 'fs', actions: ['write_file'], hours_utc: [9, 17] }] });
    expect(judge(day, {}).reason).toMatch(/hour 8 UTC is outside \[9, 17\)/);
    expect(judge(day, { nowS: NOW + 3600 }).approve).toBe(true);
    const until = rules({ allow: [{ resource: 'fs', actions: ['write_file'], not_after: NOW }] });
    expect(judge(until, {}).approve).toBe(true);
    expect(judge(until, { nowS: NOW + 1 }).approve).toBe(false);
  });

  it('refuse / a call matching no entry, and raw bytes, are refused', () => {
    expect(judgeByRules(rules({ allow: [] }), decodeCall(callBytes({ nowS: NOW }))).approve).toBe(false);
    expect(judgeByRules(FOLDER, decodeCall(utf8('raw'))).approve).toBe(false);
  });

  it('args / a constraint on an argument named like an Object.prototype member (__proto__, constructor) is kept and judged', () => {
    // JSON.parse makes "__proto__" an own key; the constraint must not vanish into a prototype.
    const proto = parseRules('{"allow":[{"resource":"fs","actions":["write_file"],"args":{"__proto__":{"prefix":"/srv/out/"}}}]}');
    expect(proto.ok).toBe(true);
    if (!proto.ok) return;
    const call = (json: string) => judgeByRules(proto.value, decodeCall(callBytes({ nowS: NOW, payload: utf8(json) })));
    expect(call('{"__proto__":"/etc/passwd"}').reason).toMatch(/__proto__ is not under \/srv\/out\//);
    expect(call('{"path":"/etc/passwd"}').reason).toMatch(/argument __proto__ is missing/);
    expect(call('{"__proto__":"/srv/out/a"}').approve).toBe(true);
    // An argument the call does not have is missing, not Object's own member.
    const ctor = rules({ allow: [{ resource: 'fs', actions: ['write_file'], args: { constructor: { one_of: ['a'] } } }] });
    expect(judge(ctor, { args: { path: '/x' } }).reason).toMatch(/argument constructor is missing/);
  });

  it('content id / the rules are versioned by their canonical form (key order and spacing do not matter; content does)', () => {
    const a = parseRules('{"allow":[{"resource":"fs","actions":["w"],"max_cost_uj":5}]}');
    const b = parseRules('{ "allow": [ { "max_cost_uj": 5, "actions": ["w"], "resource": "fs" } ] }');
    const c = parseRules('{"allow":[{"resource":"fs","actions":["w"],"max_cost_uj":6}]}');
    expect(a.ok && b.ok && a.value.id === b.value.id).toBe(true);
    expect(a.ok && c.ok && a.value.id !== c.value.id).toBe(true);
  });

  it('invalid / not JSON, an unknown key, a missing field, a fractional cap: frost-policy-invalid naming the field', () => {
    for (const [text, field] of [
      ['{"allow": [', 'not JSON'],
      ['{"allow": [], "deny": []}', 'rules'],
      ['{"allow": [{"actions": ["w"]}]}', 'rules.allow[0]'],
      ['{"allow": [{"resource": "fs", "actions": ["w"], "max_cost_uj": 1.5}]}', 'rules.allow[0].max_cost_uj'],
      ['{"allow": [{"resource": "fs", "actions": ["w"], "args": {"path": {"prefx": "/"}}}]}', 'rules.allow[0].args.path'],
      ['{"allow": [{"resource": "fs", "actions": ["w"], "args": null}]}', 'rules.allow[0].args: expected a map'],
    ] as const) {
      const r = parseRules(text);
      expect(r.ok).toBe(false);
      if (r.ok) continue;
      expect(r.error.code).toBe(FrostErrorCodes.POLICY_INVALID);
      expect(r.error.why).toContain(field);
    }
  });
});

describe('approval / the signed decision record', () => {
  const holder = actorFromSeed(new Uint8Array(32).fill(3));
  const body: DecisionBody = {
    proto: 'jcp-frost-approval/1',
    holder: holder.did,
    group: actorFromSeed(new Uint8Array(32).fill(4)).did,
    identifier: 2,
    session: 'ab'.repeat(16),
    request: 'cd'.repeat(32),
    policy: 'ef'.repeat(32),
    policy_kind: 'rules',
    decision: 'refuse',
    reason: 'no rules entry allows this call',
    at_s: NOW,
    action: 'write_file',
    resource: resourceIdFor('fs'),
  };

  it('record / verifies under the holder it names, and names request, policy, decision and reason', () => {
    const d = openDecision(sealDecision(body, holder));
    expect(d.valid).toBe(true);
    expect(d.body).toEqual(body);
  });

  it('record / a record claiming another holder, or a decision changed after signing, does not verify', () => {
    const bytes = sealDecision(body, holder);
    const forged = sealDecision({ ...body, holder: actorFromSeed(new Uint8Array(32).fill(9)).did }, holder);
    expect(openDecision(forged).valid).toBe(false);
    const approveInstead = encode({ body: { ...body, decision: 'approve' }, signature: bytes.subarray(bytes.length - 64) });
    expect(openDecision(approveInstead).valid).toBe(false);
  });
});
