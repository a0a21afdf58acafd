/**
 * deploy/ (deploy/README.md): the example config loads with the node's own loader, the
 * Containerfile builds what the node needs (checked by structure: no container engine runs on
 * the development machines or CI), and the systemd unit passes `systemd-analyze verify` with a
 * low exposure score. Every check is also shown refusing a deliberately broken copy.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { readMeterConfig } from '../../meter/index.ts';
import { loadConfig, NodeFault, resourceIdOf, trustRootsOf } from '../../node/index.ts';
import {
  containerfileProblems,
  type ImageExpectations,
  parseContainerfile,
  parseYamlDocs,
  ROOT,
  runtimeImports,
  systemdAnalyze,
  unitProblems,
} from './checks.ts';

const read = (f: string) => readFileSync(path.join(ROOT, f), 'utf8');
const pkg = JSON.parse(read('package.json')) as { dependencies: Record<string, string>; devDependencies: Record<string, string> };
const work = mkdtempSync(path.join(tmpdir(), 'jcp-deploy-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const example = loadConfig(path.join(ROOT, 'deploy', 'node.example.json'));
/**
 * Everything `jcp` can load at run time: the bin, every command (lazily imported), the workers
 * (their scripts are chosen by the running module's own extension, so they are named here).
 */
const runtime = runtimeImports(['bin/jcp.mjs', 'cli/main.ts', 'node/worker.mjs', 'node/worker.ts', 'demo/worker.ts']);
/** Plain JavaScript loaded from outside dist/: what the runtime stage copies beside it. */
const plainFiles = new Set([...runtime.files].map((f) => path.relative(ROOT, f)).filter((f) => f.endsWith('.mjs')));
/** tsx is imported only where a checkout runs its sources (bin/jcp.mjs, node/worker.mjs); an installed package never loads it (test/pkg). */
const SOURCES_ONLY = new Set(['tsx']);
const containerfile = read('deploy/Containerfile');
/** The Containerfile's `${NODE_IMAGE}` reference, spelt without a template placeholder. */
const NODE_IMAGE_REF = '$' + '{NODE_IMAGE}';
const want: ImageExpectations = { config: example, configPathInImage: '/etc/jcp/node.json', sourceFolders: runtime.folders, plainFiles };

describe('deploy/node.example.json', () => {
  test("the node's own loader accepts it, with its trust roots, endpoints and meter settings", () => {
    const did = 'did:key:z6Mkjpn6ywkCCiXkoSmpQB67LQ1E6QKA8uNyd9CRx7TNG8FJ';
    expect(trustRootsOf(example)).toEqual({ [resourceIdOf('files')]: [did], [resourceIdOf('memory')]: [did] });
    expect(
      example.resources.map((r) => [
        r.name,
        path.basename(r.endpoint?.kind === 'mcp-stdio' ? r.endpoint.command : ''),
        r.endpoint?.kind === 'mcp-stdio' ? r.endpoint.env : undefined,
      ]),
    ).toEqual([
      ['files', 'mcp-server-filesystem', {}],
      ['memory', 'mcp-server-memory', { MEMORY_FILE_PATH: '/var/lib/jcp/mcp-memory.jsonl' }],
    ]);
    expect([example.listen.port, example.metrics?.port, example.dataDir, example.stewardKey]).toEqual([
      7400,
      9464,
      '/var/lib/jcp',
      '/var/lib/jcp/steward.key',
    ]);
    expect(readMeterConfig(example.meter).estimatesUj?.['search_files']).toBe(80_000n);
  });

  test('it is the same node config the Kubernetes ConfigMap carries, but for the key and NATS', () => {
    const cm = parseYamlDocs(read('k8s/configmap.yaml'), 'configmap.yaml')[0] as { data: Record<string, string> };
    const k8s = JSON.parse(cm.data['node.json']!) as Record<string, unknown>;
    const local = JSON.parse(read('deploy/node.example.json')) as Record<string, unknown>;
    const { steward_key: _k, nats: _n, ...k8sRest } = k8s;
    const { nats: _m, ...localRest } = local;
    expect(k8sRest).toEqual(localRest);
  });

  test('refused by the loader / an unknown field in a copy', () => {
    const file = path.join(work, 'bad.json');
    writeFileSync(file, JSON.stringify({ ...JSON.parse(read('deploy/node.example.json')), listen_port: 7400 }));
    expect(() => loadConfig(file)).toThrow(NodeFault);
  });
});

describe('deploy/Containerfile', () => {
  test('the run-time import graph of jcp is what the image copies, and only production packages', () => {
    expect(runtime.files.size).toBeGreaterThan(50);
    for (const f of ['bin', 'cli', 'core', 'meter', 'node']) expect(runtime.folders).toContain(f);
    const prod = Object.keys(pkg.dependencies);
    expect([...runtime.packages].filter((p) => !prod.includes(p) && !SOURCES_ONLY.has(p))).toEqual([]);
    expect([...runtime.packages]).toContain('classic-level');
    expect(prod.filter((p) => SOURCES_ONLY.has(p) || p === 'ioredis')).toEqual([]);
    expect([...plainFiles].sort()).toEqual(['bin/jcp.mjs', 'node/worker.mjs']);
    const build = JSON.parse(read('tsconfig.build.json')) as { include: string[] };
    expect([...runtime.folders].filter((f) => f !== 'bin' && !build.include.includes(f))).toEqual([]);
  });

  test('multi-stage, npm ci --omit=dev, slim Node 20, non-root, data volume, ports, healthcheck, entrypoint', () => {
    expect(containerfileProblems(containerfile, want)).toEqual([]);
    const stages = parseContainerfile(containerfile)
      .filter((i) => i.op === 'FROM')
      .map((i) => i.arg);
    expect(stages).toEqual([`${NODE_IMAGE_REF} AS build`, `${NODE_IMAGE_REF} AS deps`, `${NODE_IMAGE_REF} AS runtime`]);
  });

  const edits: Array<[string, (t: string) => string, RegExp]> = [
    ['running as root', (t) => t.replace('USER 10001:10001', 'USER root'), /is root/],
    ['no USER at all', (t) => t.replace('USER 10001:10001\n', ''), /USER \(none\)/],
    ['one stage', (t) => t.replace(/FROM \$\{NODE_IMAGE\} AS deps[\s\S]*?(?=FROM)/, ''), /multi-stage|deps stage/],
    ['dev dependencies installed', (t) => t.replace('npm ci --omit=dev', 'npm ci'), /--omit=dev/],
    ['no build stage', (t) => t.replace(/FROM \$\{NODE_IMAGE\} AS build[\s\S]*?(?=FROM)/, ''), /no build stage/],
    [
      'the build without dev dependencies',
      (t) => t.replace('npm ci --ignore-scripts', 'npm ci --omit=dev --ignore-scripts'),
      /with the dev dependencies/,
    ],
    ['no build run', (t) => t.replace('RUN npm run build\n', ''), /npm run build/],
    ['dist/ not taken from the build', (t) => t.replace('COPY --from=build /app/dist ./dist\n', ''), /dist\/ from build/],
    [
      'the sources copied into the runtime image',
      (t) => t.replace('COPY bin ./bin\n', 'COPY bin ./bin\nCOPY core ./core\n'),
      /core\/ is copied into the runtime/,
    ],
    ['the worker boot script left out', (t) => t.replace('COPY node/worker.mjs ./node/worker.mjs\n', ''), /node\/worker\.mjs is loaded/],
    ['a full Node 22 image', (t) => t.replace('ARG NODE_IMAGE=node:20-bookworm-slim', 'ARG NODE_IMAGE=node:22-bookworm'), /slim Node 20/],
    ['the data folder not a volume', (t) => t.replace('VOLUME ["/var/lib/jcp"]', 'VOLUME ["/data"]'), /not a VOLUME/],
    ['the metrics port not exposed', (t) => t.replace('EXPOSE 7400 9464', 'EXPOSE 7400'), /port 9464/],
    ['a healthcheck on another port', (t) => t.replace('127.0.0.1:9464/healthz', '127.0.0.1:8080/healthz'), /HEALTHCHECK/],
    [
      'a shell-form entrypoint',
      (t) => t.replace('ENTRYPOINT ["node", "bin/jcp.mjs", "node", "start"]', 'ENTRYPOINT node bin/jcp.mjs node start'),
      /ENTRYPOINT/,
    ],
    ['the meter sources left out of the build', (t) => t.replace('COPY meter ./meter\n', ''), /meter\/ is imported/],
    ['a NATS server installed', (t) => t.replace('python3 make g++', 'python3 make g++ nats-server'), /NATS server/],
    ['built on the NATS image', (t) => t.replace(`FROM ${NODE_IMAGE_REF} AS runtime`, 'FROM nats:2 AS runtime'), /NATS server/],
  ];
  test.each(edits)('refused / %s', (_what, edit, why) => {
    const t = edit(containerfile);
    expect(t).not.toBe(containerfile);
    expect(containerfileProblems(t, want).join('\n')).toMatch(why);
  });
});

describe('deploy/jcp-node.service', () => {
  const unitFile = path.join(ROOT, 'deploy', 'jcp-node.service');
  const unit = read('deploy/jcp-node.service');
  const copy = (name: string, text: string) => {
    const f = path.join(work, name);
    writeFileSync(f, text);
    return f;
  };

  test('runs jcp node start as a dedicated user on its StateDirectory, hardened, restarting on failure', () => {
    expect(unitProblems(unit)).toEqual([]);
  });

  test('systemd-analyze verify finds nothing, and the offline security exposure is at most 2.0 of 10', () => {
    const r = systemdAnalyze(unitFile);
    expect(r.warnings).toEqual([]);
    expect(r.exposure).toBeLessThanOrEqual(2.0);
  });

  test('refused by systemd-analyze verify / a misspelt directive', () => {
    const f = copy('typo.service', unit.replace('ProtectSystem=strict', 'ProtectSytem=strict'));
    expect(systemdAnalyze(f).warnings.join('\n')).toMatch(/Unknown key 'ProtectSytem'/);
  });

  test('refused by the exposure bound / the same unit without its hardening lines', () => {
    const bare = unit.replace(/# Hardening\.[\s\S]*?LimitNOFILE/, 'LimitNOFILE');
    expect(bare).not.toBe(unit);
    expect(systemdAnalyze(copy('bare.service', bare)).exposure).toBeGreaterThan(2.0);
  });

  test.each([
    ['running as root', (t: string) => t.replace('User=jcp', 'User=root'), /runs as root/],
    ['a data folder other than the StateDirectory', (t: string) => t.replace('--data /var/lib/jcp', '--data /srv/jcp'), /StateDirectory/],
    ['ProtectSystem=full', (t: string) => t.replace('ProtectSystem=strict', 'ProtectSystem=full'), /ProtectSystem=full/],
    ['NoNewPrivileges missing', (t: string) => t.replace('NoNewPrivileges=yes\n', ''), /NoNewPrivileges/],
    ['Restart=always', (t: string) => t.replace('Restart=on-failure', 'Restart=always'), /Restart=always/],
    [
      'W^X memory, which V8 cannot run under',
      (t: string) => t.replace('LimitNOFILE=65536', 'MemoryDenyWriteExecute=yes\nLimitNOFILE=65536'),
      /V8/,
    ],
  ])('refused / %s', (_what, edit, why) => {
    expect(unitProblems(edit(unit)).join('\n')).toMatch(why);
  });
});
