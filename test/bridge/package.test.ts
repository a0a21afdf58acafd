/**
 * The package as a library: `npm pack` (its `prepack` builds JavaScript and declarations into
 * dist/), the tarball installed offline into an empty Node 20 project (dependencies from the
 * local npm cache, pinned by a lock file derived from ours), then `jcp-cluster/client` and
 * `jcp-cluster/bridge` imported with types (tsc, strict) and at run time (node).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { tempDir } from '../node/fixtures.ts';

const REPO = path.resolve(import.meta.dirname, '../..');
const TSC = path.join(REPO, 'node_modules/typescript/bin/tsc');

const typed = `import { CallTimeout, grantId, JcpClient, newActor, randomRng, readChainFile, resourceIdOf, type SignedGrant, signGrant } from 'jcp-cluster/client';
import { BUDGET_URI, type BridgeTool, catalogue } from 'jcp-cluster/bridge';
const issuer = newActor(randomRng);
const agent = newActor(randomRng);
const grant: SignedGrant = signGrant(
  { issuer: issuer.did, subject: agent.did, capability: { resource: resourceIdOf('fs'), actions: ['list_directory'] }, budget_uj: 5n, expiry: 0, nonce: randomRng(16) },
  issuer,
);
const id: string = grantId(grant.grant);
const tools: BridgeTool[] = catalogue([[grant]], [{ name: 'fs', resource: resourceIdOf('fs'), tools: [{ name: 'list_directory' }] }]);
const connect: typeof JcpClient.connect = JcpClient.connect;
// What \`jcp init\` and \`jcp grant mint\` write is read with readChainFile; a call past its timeoutS rejects with CallTimeout.
const read = readChainFile;
export const out = { id, tools: tools.map((t) => t.name), uri: BUDGET_URI, connect: typeof connect, read: typeof read, timeout: CallTimeout.name };
`;

describe('package: npm pack, installed into an empty Node 20 project', () => {
  const work = tempDir('pack');
  afterAll(() => work.cleanup());

  test('typed imports of jcp-cluster/client and jcp-cluster/bridge from the tarball', () => {
    const packed = JSON.parse(
      execFileSync('npm', ['pack', '--json', '--pack-destination', work.dir], {
        cwd: REPO,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    ) as Array<{ filename: string; files: Array<{ path: string }> }>;
    const tarball = packed[0]!.filename;
    const shipped = packed[0]!.files.map((f) => f.path);
    expect(shipped).toContain('dist/client/library.d.ts');
    expect(shipped).toContain('dist/bridge/index.js');
    expect(shipped.some((f) => f.startsWith('test/'))).toBe(false);

    // An empty project whose lock file pins our production dependencies as our lock does, so
    // `npm ci --offline` installs them from the cache without asking the registry.
    const app = path.join(work.dir, 'app');
    execFileSync('mkdir', ['-p', app]);
    const repoPkg = JSON.parse(readFileSync(path.join(REPO, 'package.json'), 'utf8')) as Record<string, Record<string, string>>;
    const lock = JSON.parse(readFileSync(path.join(REPO, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
    const spec = `file:../${tarball}`;
    const packages: Record<string, unknown> = {
      '': { name: 'consumer', version: '1.0.0', dependencies: { 'jcp-cluster': spec } },
      'node_modules/jcp-cluster': {
        version: repoPkg['version'],
        resolved: spec,
        dependencies: repoPkg['dependencies'],
        bin: repoPkg['bin'],
      },
    };
    for (const [k, v] of Object.entries(lock.packages)) if (k.startsWith('node_modules/') && v.dev !== true) packages[k] = v;
    writeFileSync(
      path.join(app, 'package.json'),
      JSON.stringify({ name: 'consumer', version: '1.0.0', private: true, type: 'module', dependencies: { 'jcp-cluster': spec } }),
    );
    writeFileSync(
      path.join(app, 'package-lock.json'),
      JSON.stringify({ name: 'consumer', version: '1.0.0', lockfileVersion: 3, requires: true, packages }),
    );
    execFileSync('npm', ['ci', '--offline', '--ignore-scripts', '--no-audit', '--no-fund'], { cwd: app, stdio: 'pipe' });

    writeFileSync(path.join(app, 'good.ts'), typed);
    writeFileSync(
      path.join(app, 'bad.ts'),
      `import { grantId, type SignedGrant } from 'jcp-cluster/client';\ndeclare const g: SignedGrant;\nexport const n: number = grantId(g.grant);\n`,
    );
    const tsc = (file: string) =>
      spawnSync(
        process.execPath,
        [
          TSC,
          '--noEmit',
          '--strict',
          '--module',
          'nodenext',
          '--moduleResolution',
          'nodenext',
          '--target',
          'es2022',
          '--types',
          'node',
          '--typeRoots',
          path.join(REPO, 'node_modules/@types'),
          file,
        ],
        { cwd: app, encoding: 'utf8' },
      );
    const good = tsc('good.ts');
    expect(good.stdout + good.stderr).toBe('');
    expect(good.status).toBe(0);
    // The declarations are real types, not `any`: a wrong one is refused.
    const bad = tsc('bad.ts');
    // grantId returns a ContentId (a flavoured string), so the declarations carry the brand.
    expect(bad.stdout).toContain("TS2322: Type 'ContentId' is not assignable to type 'number'");

    // And at run time on this Node (20), from the installed package.
    writeFileSync(
      path.join(app, 'run.mjs'),
      `${typed.replace(/: SignedGrant|: string|: BridgeTool\[\]|: typeof JcpClient\.connect|, type SignedGrant|, type BridgeTool/g, '')}\nconsole.log(JSON.stringify(out));\n`,
    );
    const ran = JSON.parse(execFileSync(process.execPath, ['run.mjs'], { cwd: app, encoding: 'utf8' })) as Record<string, unknown>;
    expect(ran).toMatchObject({
      tools: ['list_directory'],
      uri: 'jcp://budget',
      connect: 'function',
      read: 'function',
      timeout: 'CallTimeout',
    });
    expect(String(ran['id'])).toMatch(/^[0-9a-f]{64}$/);
  }, 300_000);
});
