/**
 * The endpoint section of a resource (docs/node.md "Endpoints"): stdio or Streamable HTTP, the
 * kind inferred from `command` / `url`, header values only from an environment variable or a
 * file — an inlined secret is refused with the field named — and `--upstream` entries.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, test } from 'vitest';
import { configFromJson, headerValue, NodeFault, resourceIdOf } from '../../node/index.ts';
import { tempDir } from './fixtures.ts';

const t = tempDir('endpoint-config');
afterAll(() => t.cleanup());

function refused(endpoint: unknown): { code: string; where: string | undefined; message: string } | undefined {
  try {
    configFromJson({ resources: [{ name: 'r', endpoint }] }, {}, t.dir);
  } catch (e) {
    if (e instanceof NodeFault) return { code: e.code, where: e.where, message: e.message };
    throw e;
  }
  return undefined;
}

describe('endpoint config', () => {
  test('url → mcp-http, command → mcp-stdio; kind may be given or left out', () => {
    process.env['JCP_CFG_TOKEN'] = 'abc';
    const c = configFromJson(
      {
        resources: [
          {
            name: 'remote',
            endpoint: { url: 'https://mcp.example/mcp', headers: { Authorization: { env: 'JCP_CFG_TOKEN', prefix: 'Bearer ' } } },
          },
          { name: 'remote2', endpoint: { kind: 'mcp-http', url: 'http://127.0.0.1:9/mcp', timeout_ms: 5 } },
          { name: 'local', endpoint: { command: '/bin/true' } },
          { name: 'old', endpoint: { kind: 'mcp-stdio', command: '/bin/true', args: ['x'] } },
        ],
      },
      {},
      t.dir,
    );
    expect(c.resources.map((r) => r.endpoint?.kind)).toEqual(['mcp-http', 'mcp-http', 'mcp-stdio', 'mcp-stdio']);
    expect(c.resources[0]!.endpoint).toEqual({
      kind: 'mcp-http',
      url: 'https://mcp.example/mcp',
      headers: { Authorization: { env: 'JCP_CFG_TOKEN', prefix: 'Bearer ' } },
      timeoutMs: 10_000,
    });
    delete process.env['JCP_CFG_TOKEN'];
  });

  test('refuses / a secret-looking header value inlined in the config', () => {
    for (const headers of [
      { Authorization: 'Bearer abc' },
      { 'X-Api-Key': 'short' },
      { 'X-Anything': 'Bearer 0123' },
      { 'X-Anything': 'c2VjcmV0LXRva2VuLXZhbHVlLWJhc2U2NA==' },
    ]) {
      const r = refused({ url: 'http://127.0.0.1:9/mcp', headers });
      expect(r?.code).toBe('config-invalid');
      expect(r?.where).toBe(`resources[0].endpoint.headers.${Object.keys(headers)[0]}`);
      expect(r?.message).toMatch(/looks like a secret inlined in the config/);
    }
    const plain = refused({ url: 'http://127.0.0.1:9/mcp', headers: { 'X-Client': 'jcp' } });
    expect(plain?.message).toMatch(/never inlined/);
  });

  test('refuses / a header source that is unset, missing, ambiguous or unknown', () => {
    delete process.env['JCP_CFG_UNSET'];
    const cases: Array<[unknown, string, RegExp]> = [
      [{ env: 'JCP_CFG_UNSET' }, 'resources[0].endpoint.headers.Authorization.env', /JCP_CFG_UNSET is not set/],
      [{ file: 'nope.token' }, 'resources[0].endpoint.headers.Authorization.file', /does not exist/],
      [{ env: 'A', file: 'b' }, 'resources[0].endpoint.headers.Authorization', /exactly one of "env" or "file"/],
      [{ vault: 'x' }, 'resources[0].endpoint.headers.Authorization.vault', /unknown field/],
      [{ env: 'not a name' }, 'resources[0].endpoint.headers.Authorization.env', /not an environment variable name/],
    ];
    for (const [src, where, msg] of cases) {
      const r = refused({ url: 'http://127.0.0.1:9/mcp', headers: { Authorization: src } });
      expect([r?.code, r?.where], JSON.stringify(src)).toEqual(['config-invalid', where]);
      expect(r?.message).toMatch(msg);
    }
  });

  test('refuses / a URL that is not http(s), carries credentials, or a mix of both kinds', () => {
    expect(refused({ url: 'ftp://127.0.0.1/mcp' })?.where).toBe('resources[0].endpoint.url');
    expect(refused({ url: 'http://user:pw@127.0.0.1/mcp' })?.message).toMatch(/credentials in the URL/);
    expect(refused({ url: 'http://127.0.0.1/mcp', command: 'x' })?.where).toBe('resources[0].endpoint.command');
    expect(refused({ kind: 'mcp-stdio', url: 'http://127.0.0.1/mcp' })?.where).toBe('resources[0].endpoint.url');
    expect(refused({})?.where).toBe('resources[0].endpoint.kind');
  });

  test('a header file is read at connect, trimmed, with its prefix; a rotated file is picked up', () => {
    const f = path.join(t.dir, 'token');
    writeFileSync(f, 'first\n', { mode: 0o600 });
    const c = configFromJson(
      {
        resources: [
          { name: 'r', endpoint: { url: 'http://127.0.0.1:9/mcp', headers: { Authorization: { file: 'token', prefix: 'Bearer ' } } } },
        ],
      },
      {},
      t.dir,
    );
    const ep = c.resources[0]!.endpoint;
    if (ep?.kind !== 'mcp-http') throw new Error('expected an http endpoint');
    expect(ep.headers['Authorization']).toEqual({ file: f, prefix: 'Bearer ' });
    expect(headerValue('Authorization', ep.headers['Authorization']!)).toBe('Bearer first');
    writeFileSync(f, 'second');
    expect(headerValue('Authorization', ep.headers['Authorization']!)).toBe('Bearer second');
    // A value that is no HTTP header value (a line break inside, a character past U+00FF) is not
    // sent, and the error never quotes it: it is a secret, and the message reaches the caller (break18).
    for (const bad of ['sk-secret-1\r\nX-Evil: 1', 'sk-secret-2\u0000', 'sk-secret-3\u2028x']) {
      writeFileSync(f, bad);
      let err: unknown;
      try {
        headerValue('Authorization', ep.headers['Authorization']!);
      } catch (e) {
        err = e;
      }
      expect(err).toMatchObject({ code: 'endpoint-unavailable' });
      expect((err as Error).message).toMatch(/^header Authorization: the value read from .*token is not a valid HTTP header value/);
      expect((err as Error).message).not.toContain('sk-secret');
    }
  });

  test('deploy/node.upstream.example.json loads once its env vars and token file exist', () => {
    const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
    const tokenFile = path.join(t.dir, 'tickets.token');
    writeFileSync(tokenFile, 'tok');
    const text = readFileSync(path.join(root, 'deploy', 'node.upstream.example.json'), 'utf8').replace(
      '/run/secrets/tickets.token',
      tokenFile,
    );
    process.env['JCP_SEARCH_TOKEN'] = 'x';
    process.env['JCP_TICKETS_TENANT'] = 'y';
    try {
      const c = configFromJson(JSON.parse(text), {}, t.dir);
      expect(c.resources.map((r) => [r.name, r.endpoint?.kind])).toEqual([
        ['search', 'mcp-http'],
        ['tickets', 'mcp-http'],
        ['files', 'mcp-stdio'],
      ]);
    } finally {
      delete process.env['JCP_SEARCH_TOKEN'];
      delete process.env['JCP_TICKETS_TENANT'];
    }
  });

  test('--upstream entries follow the file’s resources, ids by name, trust roots from --trust-root', () => {
    const did = 'did:key:z6Mkjpn6ywkCCiXkoSmpQB67LQ1E6QKA8uNyd9CRx7TNG8FJ';
    const c = configFromJson(
      { resources: [{ name: 'file' }] },
      { upstream: ['web=http://127.0.0.1:9/mcp', 'fs=mcp-server-filesystem /srv  /tmp'], trustRoot: [`fs=${did}`] },
      t.dir,
    );
    expect(c.resources.map((r) => [r.name, r.id, r.endpoint?.kind, r.trustRoots])).toEqual([
      ['file', resourceIdOf('file'), undefined, undefined],
      ['web', resourceIdOf('web'), 'mcp-http', undefined],
      ['fs', resourceIdOf('fs'), 'mcp-stdio', [did]],
    ]);
    const fs = c.resources[2]!.endpoint;
    expect(fs?.kind === 'mcp-stdio' ? fs.args : undefined).toEqual(['/srv', '/tmp']);
    expect(() => configFromJson({ resources: [{ name: 'web' }] }, { upstream: ['web=http://127.0.0.1:9/mcp'] }, t.dir)).toThrow(
      /--upstream web: resource listed twice/,
    );
  });
});
