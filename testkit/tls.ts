/**
 * TLS material and nats-server TLS blocks for tests and local clusters (docs/tls.md): a fresh CA
 * and certificates made at run time with `openssl` (present wherever nats-server runs here), and
 * the `tls { … }` blocks a nats-server config takes for client, route (`cluster`) and `gateway`
 * connections. Nothing here is for production keys: the keys are unencrypted files in a
 * temporary folder, mode 0600.
 *
 * The multi-region launcher (testkit/regions.ts) and the chaos runner use {@link makeTlsMaterial}
 * once per run and {@link natsTlsBlock} inside each server's `listen`, `cluster` and `gateway`
 * sections, so every link that could leave the machine runs TLS.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** One certificate and its key, as files and PEM text. */
export interface CertFiles {
  readonly certFile: string;
  readonly keyFile: string;
  readonly cert: string;
  readonly key: string;
}

/** A CA and the certificates it signed, in one temporary folder. */
export interface TlsMaterial {
  readonly dir: string;
  /** The CA certificate (PEM file and text): what clients and servers verify against. */
  readonly caFile: string;
  readonly ca: string;
  /** A server certificate for `localhost` and `127.0.0.1` (jcp/1 nodes, nats-servers). */
  readonly server: CertFiles;
  /** A client certificate (CN `jcp-client`), for client-certificate checks. */
  readonly client: CertFiles;
  /** Makes one more certificate signed by this CA (`server` usage adds the loopback names). */
  issue(name: string, usage: 'server' | 'client'): CertFiles;
  /** Removes the folder. */
  dispose(): void;
}

function openssl(args: readonly string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

/**
 * Makes a fresh CA (EC P-256, valid 2 days) and a server and a client certificate signed by it,
 * in a new temporary folder (or `dir`).
 * @throws Error when `openssl` is missing or fails (its stderr in the message).
 */
export function makeTlsMaterial(dir?: string): TlsMaterial {
  const d = dir ?? mkdtempSync(join(tmpdir(), 'jcp-tls-'));
  openssl(['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', 'ca.key'], d);
  openssl(['req', '-x509', '-new', '-key', 'ca.key', '-sha256', '-days', '2', '-subj', '/CN=jcp test CA', '-out', 'ca.pem'], d);
  const issue = (name: string, usage: 'server' | 'client'): CertFiles => {
    if (!/^[a-z0-9-]{1,40}$/.test(name)) throw new RangeError(`certificate name: expected [a-z0-9-]{1,40}, got ${name}`);
    const ext = join(d, `${name}.ext`);
    writeFileSync(
      ext,
      usage === 'server'
        ? 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n'
        : 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n',
    );
    openssl(['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', `${name}.key`], d);
    openssl(['req', '-new', '-key', `${name}.key`, '-subj', `/CN=${usage === 'server' ? 'localhost' : name}`, '-out', `${name}.csr`], d);
    openssl(
      [
        'x509',
        '-req',
        '-in',
        `${name}.csr`,
        '-CA',
        'ca.pem',
        '-CAkey',
        'ca.key',
        '-CAcreateserial',
        '-days',
        '2',
        '-sha256',
        '-extfile',
        `${name}.ext`,
        '-out',
        `${name}.pem`,
      ],
      d,
    );
    chmodSync(join(d, `${name}.key`), 0o600);
    const certFile = join(d, `${name}.pem`);
    const keyFile = join(d, `${name}.key`);
    return { certFile, keyFile, cert: readFileSync(certFile, 'utf8'), key: readFileSync(keyFile, 'utf8') };
  };
  chmodSync(join(d, 'ca.key'), 0o600);
  const caFile = join(d, 'ca.pem');
  return {
    dir: d,
    caFile,
    ca: readFileSync(caFile, 'utf8'),
    server: issue('server', 'server'),
    client: issue('client', 'client'),
    issue,
    dispose: () => rmSync(d, { recursive: true, force: true }),
  };
}

/**
 * A nats-server `tls { … }` block (nats-server config syntax) with `cert`'s files and the CA.
 * `verify: true` makes the server require and verify client certificates (for route and gateway
 * connections the peers present their own server certificates, which carry `clientAuth`).
 * Put it at the top level (client connections), inside `cluster { }` (routes) or inside
 * `gateway { }` (gateways); `indent` prefixes each line.
 */
export function natsTlsBlock(
  m: Pick<TlsMaterial, 'caFile'>,
  cert: Pick<CertFiles, 'certFile' | 'keyFile'>,
  opts: { verify?: boolean; indent?: string } = {},
): string {
  const i = opts.indent ?? '';
  return [
    `${i}tls {`,
    `${i}  cert_file: ${JSON.stringify(cert.certFile)}`,
    `${i}  key_file: ${JSON.stringify(cert.keyFile)}`,
    `${i}  ca_file: ${JSON.stringify(m.caFile)}`,
    ...(opts.verify ? [`${i}  verify: true`] : []),
    `${i}  timeout: 2`,
    `${i}}`,
  ].join('\n');
}
