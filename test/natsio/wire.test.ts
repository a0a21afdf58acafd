/**
 * The streams and subjects the buses put on NATS are the ones every node has always used (a node
 * on older code and one on this code share the streams): the configs are pinned here field by
 * field, as older nodes create them.
 */
import { describe, expect, it } from 'vitest';
import { channelNames, closeSubject, grantSubject, revocationSubject, statementSubject, streamConfigs } from '../../channel/index.ts';
import { evidenceStream, registryBucket, subjects } from '../../frost/index.ts';
import { shardStreamConfig, shardStreamName } from '../../shards/index.ts';

const common = {
  storage: 'file',
  retention: 'limits',
  duplicate_window: 120_000_000_000,
  allow_direct: false,
  deny_delete: true,
  deny_purge: true,
};

describe('natsio wire: stream names, configs and subjects unchanged', () => {
  it('channel streams', () => {
    const c = streamConfigs(channelNames('jcp-x'), 3);
    expect(c.statements).toEqual({
      ...common,
      num_replicas: 3,
      name: 'JCP_X_STATEMENTS',
      subjects: ['jcp-x.stmt.>', 'jcp-x.grant.>', 'jcp-x.close.>'],
      max_msgs_per_subject: 1,
      discard: 'old',
    });
    expect(c.revocations).toEqual({
      ...common,
      num_replicas: 3,
      name: 'JCP_X_REVOCATIONS',
      subjects: ['jcp-x.rev.>'],
      max_msgs_per_subject: -1,
      discard: 'new',
    });
    expect(streamConfigs(channelNames(), 1, { cluster: 'c1', tags: ['eu'] }).revocations.placement).toEqual({
      cluster: 'c1',
      tags: ['eu'],
    });
  });

  it('channel subjects', () => {
    const n = channelNames('jcp');
    const g = 'a'.repeat(64);
    const did = 'did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK';
    // blake3(utf8(did)) in hex, as computed by the code before the NATS layer
    const h = 'ac96e59a6bb011fe6ab9be2ec4cba461305f2ec91c1d674cbc96d91a36f95f0c';
    expect(statementSubject(n, g, did)).toBe(`jcp.stmt.${g}.${h}`);
    expect(closeSubject(n, g, did)).toBe(`jcp.close.${g}.${h}`);
    expect(grantSubject(n, g)).toBe(`jcp.grant.${g}`);
    expect(revocationSubject(n, g)).toBe(`jcp.rev.${g}`);
  });

  it('shard stream', () => {
    expect(shardStreamName('jcp')).toBe('JCP_SHARDS');
    expect(shardStreamConfig('jcp', 1)).toEqual({
      ...common,
      num_replicas: 1,
      name: 'JCP_SHARDS',
      subjects: ['jcp.shard.>'],
      max_msgs_per_subject: -1,
      discard: 'new',
    });
  });

  it('frost names', () => {
    expect(registryBucket('jcp.frost')).toBe('jcp_frost_groups');
    expect(evidenceStream('jcp.frost')).toBe('jcp_frost_evidence');
    expect(subjects('jcp.frost').evidenceAll).toBe('jcp.frost.evidence.>');
  });
});
