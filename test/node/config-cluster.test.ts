/**
 * Node config: the keys of revocation staleness, region and TLS (node/config.ts; docs/node.md,
 * docs/tls.md) — defaults, flag overrides, and refusals naming the field.
 */
import { describe, expect, test } from 'vitest';
import { configFromJson } from '../../node/index.ts';
import { NodeFault } from '../../node/index.ts';

function refused(v: unknown, overrides: Parameters<typeof configFromJson>[1] = {}): string {
  try {
    configFromJson(v, overrides, '/etc/jcp');
  } catch (e) {
    if (e instanceof NodeFault && e.code === 'config-invalid') return e.where ?? '';
    throw e;
  }
  throw new Error('accepted');
}

describe('config - staleness, region, tls', () => {
  test('defaults: staleness 30 s, region local, no TLS', () => {
    const c = configFromJson({});
    expect(c.revocationStalenessS).toBe(30);
    expect(c.region).toBe('local');
    expect(c.tls).toBeUndefined();
    expect(c.natsTls).toBeUndefined();
  });

  test('values and flags: relative files against the config folder, flags against the working folder', () => {
    const c = configFromJson(
      {
        revocation_staleness_s: 5,
        region: 'eu-west',
        tls: { cert_file: 'n.pem', key_file: 'n.key', ca_file: 'ca.pem', client_certs: 'require' },
        nats_tls: { ca_file: 'nca.pem' },
      },
      {},
      '/etc/jcp',
    );
    expect(c.revocationStalenessS).toBe(5);
    expect(c.region).toBe('eu-west');
    expect(c.tls).toEqual({ certFile: '/etc/jcp/n.pem', keyFile: '/etc/jcp/n.key', caFile: '/etc/jcp/ca.pem', clientCerts: 'require' });
    expect(c.natsTls).toEqual({ caFile: '/etc/jcp/nca.pem', certFile: undefined, keyFile: undefined });
    const f = configFromJson(
      { revocation_staleness_s: 5 },
      { revocationStalenessS: '0', region: 'r1', tlsCert: '/x/c.pem', tlsKey: '/x/k.pem' },
    );
    expect(f.revocationStalenessS).toBe(0);
    expect(f.region).toBe('r1');
    expect(f.tls?.clientCerts).toBe('off');
  });

  test('reject / each bad value names its field or flag', () => {
    expect(refused({ revocation_staleness_s: -1 })).toBe('revocation_staleness_s');
    expect(refused({}, { revocationStalenessS: '1.5' })).toBe('--revocation-staleness-s');
    expect(refused({ region: 'a b' })).toBe('region');
    expect(refused({ tls: { cert_file: 'c.pem' } })).toBe('tls.key_file');
    expect(refused({ tls: { key_file: 'k.pem' } })).toBe('tls.cert_file');
    expect(refused({ tls: { cert_file: 'c', key_file: 'k', client_certs: 'require' } })).toBe('tls.client_certs');
    expect(refused({ tls: { cert_file: 'c', key_file: 'k', client_certs: 'sometimes', ca_file: 'a' } })).toBe('tls.client_certs');
    expect(refused({ tls: { cert: 'c' } })).toBe('tls.cert');
    expect(refused({ nats_tls: { cert_file: 'c' } })).toBe('nats_tls');
  });
});
