/**
 * The NATS layer's subject and stream-name rules (natsio/names.ts) and its stream config
 * (natsio/streams.ts `streamConfig`): stable error codes, no server needed.
 */
import { describe, expect, it } from 'vitest';
import { isJcpError } from '../../core/index.ts';
import {
  checkStreamName,
  checkSubject,
  checkSubjectRoot,
  NatsNameCodes,
  NatsNameError,
  rootStreamName,
  storeNameOf,
  streamConfig,
} from '../../natsio/index.ts';

const codeOf = (f: () => unknown): string | undefined => {
  try {
    f();
    return undefined;
  } catch (e) {
    return (e as { code?: string }).code;
  }
};

describe('natsio names', () => {
  it('subject roots: 1-32 of [a-z0-9_-], a letter first; anything else is a schema error', () => {
    for (const ok of ['jcp', 'a', 't0a1-b_c', 'a'.repeat(32)]) expect(checkSubjectRoot(ok)).toBe(ok);
    for (const bad of ['', 'JCP', '1abc', 'a.b', 'a b', 'a*', 'a'.repeat(33), '-a']) {
      expect(() => checkSubjectRoot(bad)).toThrow(/subject root/);
      let err: unknown;
      try {
        checkSubjectRoot(bad);
      } catch (e) {
        err = e;
      }
      expect(isJcpError(err, 'schema'), bad).toBe(true);
    }
  });

  it('stream names of a root: upper case, - as _, the suffix after _ (the names the cluster always used)', () => {
    expect(rootStreamName('jcp', 'STATEMENTS')).toBe('JCP_STATEMENTS');
    expect(rootStreamName('t-1a', 'SHARDS')).toBe('T_1A_SHARDS');
    expect(codeOf(() => rootStreamName('Bad', 'SHARDS'))).toBe('schema');
  });

  it('subjects: publish subjects take no wildcards; filters take * and > as whole tokens, > last', () => {
    for (const ok of ['jcp.stmt.abc.def', 'a', '$JS.API.INFO', 'x-y_z.1']) expect(checkSubject(ok)).toBe(ok);
    for (const ok of ['jcp.stmt.*.def', 'jcp.rev.>', '*', '>', 'a.*.>']) expect(checkSubject(ok, { wildcards: true })).toBe(ok);
    const bad: [string, boolean][] = [
      ['', true],
      ['a..b', true],
      ['.a', true],
      ['a.', true],
      ['a b', true],
      ['a.\tb', true],
      ['a.é', true],
      ['a.b*', true],
      ['a.>b', true],
      ['a.>.b', true],
      ['a.*', false],
      ['a.>', false],
    ];
    for (const [s, wildcards] of bad) {
      expect(
        codeOf(() => checkSubject(s, { wildcards })),
        JSON.stringify(s),
      ).toBe(NatsNameCodes.SUBJECT);
    }
    expect(() => checkSubject('a..b')).toThrow(NatsNameError);
    expect(() => checkSubject('a..b')).toThrow(/token 2 is empty/);
  });

  it('stream names: 1-255 printable bytes without . * > / \\ or spaces', () => {
    for (const ok of ['JCP_STATEMENTS', 'jcp_frost_evidence', 'a-b', 'x'.repeat(255)]) expect(checkStreamName(ok)).toBe(ok);
    for (const bad of ['', 'A.B', 'A*', 'A>', 'A/B', 'A\\B', 'A B', 'x'.repeat(256), 'é']) {
      expect(
        codeOf(() => checkStreamName(bad)),
        JSON.stringify(bad),
      ).toBe(NatsNameCodes.STREAM_NAME);
    }
  });

  it('store names from a subject prefix: every other character becomes _ (frost registry and evidence names)', () => {
    expect(storeNameOf('jcp.frost')).toBe('jcp_frost');
    expect(storeNameOf('t.a-b.c*d')).toBe('t_a-b_c_d');
    expect(codeOf(() => storeNameOf(''))).toBe(NatsNameCodes.STREAM_NAME);
  });
});

describe('natsio stream config', () => {
  const shape = { name: 'T_X', subjects: ['t.x.>'], maxMsgsPerSubject: 1, discard: 'old' as const };

  it('the fixed settings: file storage, limits, 2-minute duplicate window, no delete, no purge, no direct get', () => {
    const c = streamConfig({ ...shape, replicas: 3 });
    expect(c).toEqual({
      name: 'T_X',
      subjects: ['t.x.>'],
      storage: 'file',
      retention: 'limits',
      num_replicas: 3,
      duplicate_window: 120_000_000_000,
      allow_direct: false,
      deny_delete: true,
      deny_purge: true,
      max_msgs_per_subject: 1,
      discard: 'old',
    });
    expect('placement' in c).toBe(false);
    expect(streamConfig({ ...shape, discard: 'new' }).discard).toBe('new');
    expect(streamConfig(shape).num_replicas).toBe(1);
  });

  it('placement: a cluster and tags when given', () => {
    const c = streamConfig({ ...shape, replicas: 3, placement: { cluster: 'eu-west', tags: ['ssd', 'az:1'] } });
    expect(c.placement).toEqual({ cluster: 'eu-west', tags: ['ssd', 'az:1'] });
    expect(streamConfig({ ...shape, placement: { cluster: 'us' } }).placement).toEqual({ cluster: 'us', tags: [] });
  });

  it('refuses bad names, subjects and replica counts before any server sees them', () => {
    expect(codeOf(() => streamConfig({ ...shape, name: 'T.X' }))).toBe(NatsNameCodes.STREAM_NAME);
    expect(codeOf(() => streamConfig({ ...shape, subjects: ['t..x'] }))).toBe(NatsNameCodes.SUBJECT);
    expect(() => streamConfig({ ...shape, replicas: 0 })).toThrow(RangeError);
    expect(() => streamConfig({ ...shape, replicas: 6 })).toThrow(RangeError);
  });
});
