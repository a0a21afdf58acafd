/**
 * The Kubernetes manifests in k8s/ (k8s/README.md): every object validates against the
 * Kubernetes schemas (kubernetes-models, @kubernetes-models/prometheus-operator) with no unknown
 * field, meets the "restricted" Pod Security Standard, references only objects that exist or that
 * k8s/README.md names as operator-provided, and carries a node config that the node's own loader
 * accepts and that agrees with the pods, Services, NetworkPolicy and the NATS chart values.
 * Every check is also shown refusing a deliberately broken copy.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { actorFromSeed } from '../../core/index.ts';
import { readMeterConfig } from '../../meter/index.ts';
import { pino } from 'pino';
import {
  configFromJson,
  type NodeConfig,
  NodeFault,
  readKeyFile,
  resourceIdOf,
  startNode,
  trustRootsOf,
  writeKeyFile,
} from '../../node/index.ts';
import {
  apiServerProblems,
  clone,
  crossRefProblems,
  initScript,
  type K8sObject,
  label,
  loadManifests,
  type NatsValues,
  natsChartService,
  natsValuesProblems,
  parseYamlDocs,
  ROOT,
  restrictedProblems,
  schemaProblems,
  strictFieldProblems,
  wiringProblems,
} from './checks.ts';

const read = (f: string) => readFileSync(path.join(ROOT, f), 'utf8');
const loaded = loadManifests();
const objs = loaded.map((l) => l.obj);
const find = (list: readonly K8sObject[], kind: string, name?: string): K8sObject => {
  const o = list.find((x) => x.kind === kind && (name === undefined || x.metadata.name === name));
  if (o === undefined) throw new Error(`no ${kind}/${name ?? '*'} in the manifests`);
  return o;
};
const sts = find(objs, 'StatefulSet', 'jcp-node');
const pkg = JSON.parse(read('package.json')) as { version: string; dependencies: Record<string, string> };

/** Secrets k8s/README.md names as created by the operator ("Secret `name`"). */
const OPERATOR_SECRETS = [...read('k8s/README.md').matchAll(/Secret `([a-z0-9.-]+)`/g)].map((m) => m[1]!);

/** The NATS chart values and the release/namespace their header's `helm install` line uses. */
const natsValuesText = read('k8s/nats-values.yaml');
const natsValues = parseYamlDocs(natsValuesText, 'nats-values.yaml')[0] as NatsValues;
const install = /helm install (\S+) nats\/nats --namespace (\S+)/.exec(natsValuesText);
const NATS = natsChartService(install?.[1] ?? '?', install?.[2] ?? '?', natsValues);

/** The node config as the pod sees it: the ConfigMap's node.json, mounted where --config points. */
function podConfig(list: readonly K8sObject[]): { json: unknown; base: string } {
  const s = find(list, 'StatefulSet');
  const node = s.spec.template.spec.containers.find((c: { name: string }) => c.name === 'node');
  const cfgPath: string = node.args[node.args.indexOf('--config') + 1];
  const cm = find(list, 'ConfigMap', 'jcp-node-config');
  return { json: JSON.parse(cm.data?.['node.json'] ?? 'null'), base: path.posix.dirname(cfgPath) };
}
const { json: cfgJson, base: cfgBase } = podConfig(objs);
const cfg: NodeConfig = configFromJson(cfgJson, {}, cfgBase);

function refusal(fn: () => unknown): { code: string; where: string | undefined } {
  try {
    fn();
  } catch (e) {
    if (e instanceof NodeFault) return { code: e.code, where: e.where };
    throw e;
  }
  throw new Error('accepted');
}

/** A copy of the manifests with `edit` applied to the object `kind/name`. */
function broken(kind: string, name: string, edit: (o: K8sObject) => void): K8sObject[] {
  const copy = clone(objs);
  edit(find(copy, kind, name));
  return copy;
}

describe('k8s/ parses', () => {
  test('every file is YAML that reads alike under YAML 1.1 and 1.2, with every object the deployment needs', () => {
    const kinds = objs.map(label).sort();
    expect(kinds).toEqual(
      [
        'ConfigMap/jcp-node-config',
        'Namespace/jcp',
        'NetworkPolicy/jcp-node',
        'PodDisruptionBudget/jcp-node',
        'Service/jcp-node',
        'Service/jcp-node-headless',
        'ServiceMonitor/jcp-node',
        'StatefulSet/jcp-node',
      ].sort(),
    );
  });

  test.each([
    ['an octal-looking mode (0440 is 288 to Kubernetes, 440 to YAML 1.2)', 'defaultMode: 0440\n'],
    ['a YAML 1.1 boolean word', 'enabled: on\n'],
    ['a duplicate key', 'a: 1\na: 2\n'],
  ])('refused / %s', (_what, text) => {
    expect(() => parseYamlDocs(text, 'broken.yaml')).toThrow(/broken\.yaml/);
  });
});

describe('Kubernetes schemas (kubernetes-models)', () => {
  test.each(loaded.map((l) => [`${l.file}#${l.index} ${label(l.obj)}`, l.obj] as const))('valid / %s', async (_name, o) => {
    expect(await schemaProblems(o)).toEqual([]);
  });

  test('valid / no object has a field its schema does not define (strict field validation)', () => {
    expect(strictFieldProblems(objs)).toEqual([]);
  });

  test.each(loaded.map((l) => [label(l.obj), l.obj] as const))(
    'valid / %s keeps the API server rules on names, labels and ports',
    (_n, o) => {
      expect(apiServerProblems(o)).toEqual([]);
    },
  );

  test.each([
    [
      'StatefulSet replicas as a word',
      'StatefulSet',
      'jcp-node',
      (o: K8sObject) => (o.spec.replicas = 'three'),
      /replicas must be integer/,
    ],
    [
      'a memory limit that is not a quantity',
      'StatefulSet',
      'jcp-node',
      (o: K8sObject) => (o.spec.template.spec.containers[0].resources.limits.memory = 'lots'),
      /quantity/,
    ],
    ['a Service port without a number', 'Service', 'jcp-node', (o: K8sObject) => delete o.spec.ports[0].port, /required property/],
    [
      'a PDB maxUnavailable that is a boolean',
      'PodDisruptionBudget',
      'jcp-node',
      (o: K8sObject) => (o.spec.maxUnavailable = true),
      /maxUnavailable/,
    ],
    [
      'a NetworkPolicy type that does not exist',
      'NetworkPolicy',
      'jcp-node',
      (o: K8sObject) => (o.spec.policyTypes = ['Sideways']),
      /allowed values/,
    ],
    [
      'a ServiceMonitor endpoint port given as a number',
      'ServiceMonitor',
      'jcp-node',
      (o: K8sObject) => (o.spec.endpoints[0].port = 9464),
      /port must be string/,
    ],
    [
      'a ConfigMap value that is not a string',
      'ConfigMap',
      'jcp-node-config',
      (o: K8sObject) => ((o.data as Record<string, unknown>)['n'] = 1),
      /must be string/,
    ],
  ])('refused / %s', async (_what, kind, name, edit, why) => {
    const bad = find(broken(kind, name, edit), kind, name);
    const problems = await schemaProblems(bad);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(why);
  });

  test('refused / an apiVersion the libraries do not know', async () => {
    const bad = { ...find(objs, 'PodDisruptionBudget'), apiVersion: 'policy/v1beta9' };
    expect(await schemaProblems(bad)).toEqual(['PodDisruptionBudget/jcp-node: no schema for policy/v1beta9 PodDisruptionBudget']);
  });

  test('refused / misspelt fields the JSON schemas let through (readinesProbe, endpoint)', () => {
    const bad = clone(objs);
    const s = find(bad, 'StatefulSet');
    const c = s.spec.template.spec.containers[0];
    c.readinesProbe = c.readinessProbe;
    delete c.readinessProbe;
    const sm = find(bad, 'ServiceMonitor');
    sm.spec.endpoint = sm.spec.endpoints;
    const problems = strictFieldProblems(bad);
    expect(problems.some((p) => p.startsWith('StatefulSet/jcp-node:') && p.includes('readinesProbe'))).toBe(true);
    expect(problems.some((p) => p.startsWith('ServiceMonitor/jcp-node:') && p.includes('endpoint'))).toBe(true);
    expect(problems).toHaveLength(2);
  });

  test.each([
    ['a name with capitals and an underscore', (o: K8sObject) => (o.metadata.name = 'Jcp_Node'), /DNS-1123/],
    [
      'a port name over 15 characters',
      (o: K8sObject) => (o.spec.template.spec.containers[0].ports[1].name = 'prometheus-metrics'),
      /IANA_SVC_NAME/,
    ],
    ['a container port above 65535', (o: K8sObject) => (o.spec.template.spec.containers[0].ports[0].containerPort = 74000), /out of range/],
    ['a label value with a space', (o: K8sObject) => (o.metadata.labels!['app.kubernetes.io/part-of'] = 'jcp cluster'), /bad value/],
  ])('refused by the API-server rules / %s', (_what, edit, why) => {
    const problems = apiServerProblems(find(broken('StatefulSet', 'jcp-node', edit), 'StatefulSet'));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(why);
  });
});

describe('pod security', () => {
  test('the node pods meet the restricted Pod Security Standard, read-only root, requests and limits', () => {
    expect(restrictedProblems(label(sts), sts.spec.template.spec)).toEqual([]);
  });

  test('the namespace enforces the restricted profile at admission', () => {
    expect(find(objs, 'Namespace', 'jcp').metadata.labels?.['pod-security.kubernetes.io/enforce']).toBe('restricted');
  });

  test.each([
    [
      'privilege escalation allowed',
      (p: K8sObject['spec']) => (p.containers[0].securityContext.allowPrivilegeEscalation = true),
      /allowPrivilegeEscalation/,
    ],
    ['a hostPath volume', (p: K8sObject['spec']) => p.volumes.push({ name: 'h', hostPath: { path: '/' } }), /hostPath not allowed/],
    [
      'a writable root file system',
      (p: K8sObject['spec']) => (p.initContainers[0].securityContext.readOnlyRootFilesystem = false),
      /readOnlyRootFilesystem/,
    ],
    ['no seccomp profile', (p: K8sObject['spec']) => delete p.securityContext.seccompProfile, /seccompProfile/],
    ['capabilities kept', (p: K8sObject['spec']) => delete p.containers[0].securityContext.capabilities, /drop ALL/],
    ['no memory limit', (p: K8sObject['spec']) => delete p.containers[0].resources.limits.memory, /limits\.memory/],
  ])('refused / %s', (_what, edit, why) => {
    const pod = clone(sts.spec.template.spec);
    edit(pod);
    const problems = restrictedProblems('pod', pod);
    expect(problems.length).toBeGreaterThan(0);
    expect(problems.join('\n')).toMatch(why);
  });
});

describe('cross-references', () => {
  test('k8s/README.md names the steward key Secret as operator-provided', () => {
    expect(OPERATOR_SECRETS).toContain('jcp-steward-keys');
  });

  test('every selector, port name, mounted ConfigMap/Secret and volume resolves', () => {
    expect(crossRefProblems(objs, OPERATOR_SECRETS)).toEqual([]);
  });

  test.each([
    [
      'a Service selecting no pods',
      'Service',
      'jcp-node',
      (o: K8sObject) => (o.spec.selector['app.kubernetes.io/instance'] = 'other'),
      /selector matches no pods/,
    ],
    [
      'a Service target port the pods lack',
      'Service',
      'jcp-node',
      (o: K8sObject) => (o.spec.ports[0].targetPort = 'jcp1'),
      /targetPort jcp1/,
    ],
    [
      'a governing Service that is not headless',
      'Service',
      'jcp-node-headless',
      (o: K8sObject) => (o.spec.clusterIP = '10.0.0.9'),
      /not headless/,
    ],
    [
      'a ConfigMap renamed away from the mount',
      'ConfigMap',
      'jcp-node-config',
      (o: K8sObject) => (o.metadata.name = 'jcp-config'),
      /ConfigMap jcp-node-config is not/,
    ],
    [
      'a ConfigMap without the mounted key',
      'ConfigMap',
      'jcp-node-config',
      (o: K8sObject) => (o.data = { 'config.json': '{}' }),
      /no key node\.json/,
    ],
    [
      'a mount of a volume that does not exist',
      'StatefulSet',
      'jcp-node',
      (o: K8sObject) => (o.spec.template.spec.containers[0].volumeMounts[0].name = 'state'),
      /unknown volume state/,
    ],
    [
      'a ServiceMonitor port name the Service lacks',
      'ServiceMonitor',
      'jcp-node',
      (o: K8sObject) => (o.spec.endpoints[0].port = 'metric'),
      /no port named metric/,
    ],
    ['a PDB that lets every node go', 'PodDisruptionBudget', 'jcp-node', (o: K8sObject) => (o.spec.maxUnavailable = 3), /lets every pod/],
    [
      'a NetworkPolicy ingress port the pods do not serve',
      'NetworkPolicy',
      'jcp-node',
      (o: K8sObject) => (o.spec.ingress[0].ports[0].port = 7401),
      /ingress port 7401/,
    ],
    [
      "an object outside the manifests' namespace",
      'PodDisruptionBudget',
      'jcp-node',
      (o: K8sObject) => (o.metadata.namespace = 'prod'),
      /namespace prod/,
    ],
  ])('refused / %s', (_what, kind, name, edit, why) => {
    const problems = crossRefProblems(broken(kind, name, edit), OPERATOR_SECRETS);
    expect(problems.length).toBeGreaterThan(0);
    expect(problems.join('\n')).toMatch(why);
  });

  test('refused / a mounted Secret that is neither in the manifests nor documented', () => {
    expect(crossRefProblems(objs, [])).toEqual([
      'StatefulSet/jcp-node: Secret jcp-steward-keys is neither in the manifests nor documented as operator-provided',
    ]);
  });

  test('the image is the one deploy/README.md builds, tagged with the package version', () => {
    const images = [...sts.spec.template.spec.initContainers, ...sts.spec.template.spec.containers].map((c: { image: string }) => c.image);
    expect(new Set(images)).toEqual(new Set([`jcp-node:${pkg.version}`]));
    expect(read('deploy/README.md')).toContain(`-t jcp-node:${pkg.version}`);
  });
});

describe('the node config in the ConfigMap', () => {
  test("the node's own loader accepts it, with the trust roots and endpoints it carries", () => {
    const did = 'did:key:z6Mkjpn6ywkCCiXkoSmpQB67LQ1E6QKA8uNyd9CRx7TNG8FJ';
    expect(trustRootsOf(cfg)).toEqual({ [resourceIdOf('files')]: [did], [resourceIdOf('memory')]: [did] });
    expect(
      cfg.resources.map((r) => [
        r.name,
        path.basename(r.endpoint?.kind === 'mcp-stdio' ? r.endpoint.command : ''),
        r.endpoint?.kind === 'mcp-stdio' ? r.endpoint.args : undefined,
      ]),
    ).toEqual([
      ['files', 'mcp-server-filesystem', ['/srv/jcp/files']],
      ['memory', 'mcp-server-memory', []],
    ]);
    expect([cfg.listen, cfg.metrics, cfg.dataDir, cfg.stewardKey, cfg.nats]).toEqual([
      { host: '0.0.0.0', port: 7400 },
      { host: '0.0.0.0', port: 9464 },
      '/var/lib/jcp',
      '/run/jcp/steward.key',
      `nats://${NATS.host}:${NATS.port}`,
    ]);
    expect(readMeterConfig(cfg.meter).defaultEstimateUj).toBe(50_000n);
  });

  test("each endpoint runs an MCP server the image ships (a runtime dependency's bin)", () => {
    for (const r of cfg.resources) {
      const cmd = r.endpoint?.kind === 'mcp-stdio' ? r.endpoint.command : '';
      expect(cmd).toBe(path.join(ROOT, 'node_modules', '.bin', path.basename(cmd)));
      expect(existsSync(cmd)).toBe(true);
    }
    const owners = ['@modelcontextprotocol/server-filesystem', '@modelcontextprotocol/server-memory'];
    for (const o of owners) expect(Object.keys(pkg.dependencies)).toContain(o);
  });

  test('it agrees with the StatefulSet, Services, NetworkPolicy and the NATS chart Service', () => {
    expect(wiringProblems(objs, cfg, NATS)).toEqual([]);
  });

  test.each([
    [
      'a trust root that is not a did:key',
      (j: Record<string, unknown>) => ((j['resources'] as Array<Record<string, unknown>>)[0]!['trust_roots'] = ['did:key:zBogus']),
      'resources[0].trust_roots[0]',
    ],
    ['a misspelt field', (j: Record<string, unknown>) => (j['data_directory'] = '/var/lib/jcp'), 'data_directory'],
    ['a NATS URL that is not nats://', (j: Record<string, unknown>) => (j['nats'] = 'http://nats.nats.svc:4222'), 'nats'],
  ])("refused by the node's loader / %s", (_what, edit, where) => {
    const j = clone(cfgJson) as Record<string, unknown>;
    edit(j);
    expect(refusal(() => configFromJson(j, {}, cfgBase))).toEqual({ code: 'config-invalid', where });
  });

  test.each([
    ['a listen port the container does not expose', (j: Record<string, unknown>) => (j['listen'] = '0.0.0.0:7401'), /listen port 7401/],
    ['a loopback listen address', (j: Record<string, unknown>) => (j['listen'] = '127.0.0.1:7400'), /not reachable/],
    ['a metrics port the probes do not use', (j: Record<string, unknown>) => (j['metrics'] = '0.0.0.0:9100'), /metrics port 9100/],
    ['the data folder off the persistent volume', (j: Record<string, unknown>) => (j['data_dir'] = '/tmp/jcp'), /data_dir \/tmp\/jcp/],
    [
      'the steward key on the persistent volume',
      (j: Record<string, unknown>) => (j['steward_key'] = '/var/lib/jcp/steward.key'),
      /steward_key/,
    ],
    [
      "a NATS host other than the chart's Service",
      (j: Record<string, unknown>) => (j['nats'] = 'nats://nats.default.svc.cluster.local:4222'),
      /chart's Service/,
    ],
    [
      'an endpoint folder that is not mounted',
      (j: Record<string, unknown>) => ((j['resources'] as Array<{ endpoint: { args: string[] } }>)[0]!.endpoint.args = ['/data/files']),
      /\/data\/files is not on a mounted volume/,
    ],
  ])('refused by the wiring check / %s', (_what, edit, why) => {
    const j = clone(cfgJson) as Record<string, unknown>;
    edit(j);
    const problems = wiringProblems(objs, configFromJson(j, {}, cfgBase), NATS);
    expect(problems.length).toBeGreaterThan(0);
    expect(problems.join('\n')).toMatch(why);
  });

  test.each([
    [
      'a Secret readable by others',
      'StatefulSet',
      (o: K8sObject) => (o.spec.template.spec.volumes.find((v: { name: string }) => v.name === 'steward-keys').secret.defaultMode = 0o444),
      /readable by others/,
    ],
    [
      'an init script that copies the key without mode 0600',
      'StatefulSet',
      (o: K8sObject) => (o.spec.template.spec.initContainers[0].command[2] = initScript(o).replace('-m 0600', '-m 0640')),
      /mode 0600/,
    ],
    [
      'the key volume on disk instead of memory',
      'StatefulSet',
      (o: K8sObject) => delete o.spec.template.spec.volumes.find((v: { name: string }) => v.name === 'steward-run').emptyDir.medium,
      /memory emptyDir/,
    ],
    [
      'readiness on /healthz (a node with stale revocations would keep its traffic)',
      'StatefulSet',
      (o: K8sObject) => (o.spec.template.spec.containers[0].readinessProbe.httpGet.path = '/healthz'),
      /readinessProbe is not GET \/readyz/,
    ],
    [
      'liveness on /readyz (a stale node would be restarted)',
      'StatefulSet',
      (o: K8sObject) => (o.spec.template.spec.containers[0].livenessProbe.httpGet.path = '/readyz'),
      /livenessProbe is not GET \/healthz/,
    ],
    ['a NetworkPolicy egress to any port', 'NetworkPolicy', (o: K8sObject) => delete o.spec.egress[0].ports, /any port/],
    [
      'a NetworkPolicy egress on the NATS port to other pods',
      'NetworkPolicy',
      (o: K8sObject) => (o.spec.egress[0].to[0].podSelector.matchLabels['app.kubernetes.io/name'] = 'redis'),
      /other than the chart's NATS pods/,
    ],
    ['a NetworkPolicy without Egress', 'NetworkPolicy', (o: K8sObject) => (o.spec.policyTypes = ['Ingress']), /both Ingress and Egress/],
  ])('refused by the wiring check / %s', (_what, kind, edit, why) => {
    const problems = wiringProblems(broken(kind, 'jcp-node', edit), cfg, NATS);
    expect(problems.length).toBeGreaterThan(0);
    expect(problems.join('\n')).toMatch(why);
  });
});

describe('the steward key from the Secret', () => {
  const work = mkdtempSync(path.join(tmpdir(), 'jcp-deploy-key-'));
  afterAll(() => rmSync(work, { recursive: true, force: true }));
  const pod = sts.spec.template.spec;
  const init = pod.initContainers.find((c: { name: string }) => c.name === 'steward-key');
  const secretMount: string = init.volumeMounts.find((m: { name: string }) => m.name === 'steward-keys').mountPath;
  const runMount: string = init.volumeMounts.find((m: { name: string }) => m.name === 'steward-run').mountPath;

  /** Runs the init container's script with its two mounts mapped to folders under `work`. */
  function runInit(podName: string, dir: string): { status: number | null; stderr: string; key: string } {
    const script = initScript(sts);
    const keys = path.join(dir, 'secret');
    const run = path.join(dir, 'run');
    mkdirSync(run, { recursive: true });
    const mapped = script.split(secretMount).join(keys).split(runMount).join(run);
    // Never let the script touch the real mount paths of this machine.
    expect(mapped.includes(secretMount) || mapped.includes(runMount)).toBe(false);
    const r = spawnSync('sh', ['-c', mapped], {
      env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', POD_NAME: podName },
      encoding: 'utf8',
    });
    return { status: r.status, stderr: r.stderr, key: path.join(run, path.posix.relative(runMount, cfg.stewardKey)) };
  }

  test("the init container turns this pod's group-readable Secret file into a 0600 key the node reads", () => {
    const dir = path.join(work, 'ok');
    const steward = actorFromSeed(new Uint8Array(32).fill(7));
    const other = actorFromSeed(new Uint8Array(32).fill(8));
    writeKeyFile(path.join(dir, 'secret', 'jcp-node-1.key'), steward);
    writeKeyFile(path.join(dir, 'secret', 'jcp-node-0.key'), other);
    chmodSync(path.join(dir, 'secret', 'jcp-node-1.key'), 0o440); // as a Secret volume under fsGroup
    const r = runInit('jcp-node-1', dir);
    expect([r.status, r.stderr]).toEqual([0, '']);
    expect(statSync(r.key).mode & 0o777).toBe(0o600);
    expect(readKeyFile(r.key).did).toBe(steward.did);
  });

  test('the node refuses the Secret file as Kubernetes mounts it (0440), which is why the copy exists', () => {
    const file = path.join(work, 'mounted', 'jcp-node-0.key');
    writeKeyFile(file, actorFromSeed(new Uint8Array(32).fill(9)));
    chmodSync(file, 0o440);
    expect(refusal(() => readKeyFile(file))).toEqual({ code: 'key-file-invalid', where: file });
  });

  test('the ConfigMap config boots a real node on the key from the Secret: MCP servers up, /healthz 200, /metrics served', async () => {
    const dir = path.join(work, 'boot');
    const steward = actorFromSeed(new Uint8Array(32).fill(11));
    writeKeyFile(path.join(dir, 'secret', 'jcp-node-0.key'), steward);
    chmodSync(path.join(dir, 'secret', 'jcp-node-0.key'), 0o440);
    expect(runInit('jcp-node-0', dir).status).toBe(0);
    // The pod's mounts, mapped into the temp folder; ports on loopback; the machine's NATS.
    const node = pod.containers.find((c: { name: string }) => c.name === 'node');
    const mapped = new Map<string, string>();
    for (const m of node.volumeMounts as Array<{ name: string; mountPath: string }>) {
      const to = m.name === 'steward-run' ? path.join(dir, 'run') : path.join(dir, m.name);
      mkdirSync(to, { recursive: true });
      mapped.set(m.mountPath, to);
    }
    const mounts = [...mapped.keys()].sort((a, b) => b.length - a.length).map((m) => m.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
    const text = JSON.stringify(cfgJson).replace(new RegExp(`"(${mounts.join('|')})(?=[/"])`, 'g'), (_m, p: string) => `"${mapped.get(p)}`);
    const local = configFromJson(
      JSON.parse(text),
      { listen: '127.0.0.1:0', metrics: '127.0.0.1:0', nats: 'nats://127.0.0.1:4222' },
      cfgBase,
    );
    expect(local.stewardKey).toBe(path.join(dir, 'run', 'steward.key'));
    const running = await startNode(local, { logger: pino({ level: 'silent' }) });
    try {
      expect(running.did).toBe(steward.did);
      expect(running.endpoints.size).toBe(2);
      const health = await fetch(`http://127.0.0.1:${running.metricsPort}/healthz`);
      expect(health.status).toBe(200);
      expect(((await health.json()) as { steward: string }).steward).toBe(steward.did);
      const metrics = await (await fetch(`http://127.0.0.1:${running.metricsPort}/metrics`)).text();
      expect(metrics).toContain('jcp_decisions_total');
    } finally {
      await running.close();
    }
  });

  test('a pod whose key is missing from the Secret does not start (no fresh steward is made)', () => {
    const dir = path.join(work, 'missing');
    writeKeyFile(path.join(dir, 'secret', 'jcp-node-0.key'), actorFromSeed(new Uint8Array(32).fill(10)));
    const r = runInit('jcp-node-2', dir);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('has no key jcp-node-2.key');
    expect(existsSync(r.key)).toBe(false);
  });
});

describe('the NATS chart values (k8s/nats-values.yaml)', () => {
  test('a 3-server JetStream cluster on file storage, with only values the chart reads', () => {
    expect(natsValuesProblems(natsValues)).toEqual([]);
    expect(install?.slice(1)).toEqual(['nats', 'nats']);
  });

  test.each([
    [
      'a 0.x-era key the 1.x chart ignores',
      (v: NatsValues) => (v['nats'] = { jetstream: { fileStorage: { enabled: true } } }),
      /nats\.jetstream\.fileStorage\.enabled is not a value/,
    ],
    ['a misspelt key', (v: NatsValues) => (v.config.jetstream.fileStore.pvc.sise = '10Gi'), /pvc\.sise is not a value/],
    ['two servers (no quorum after one loss)', (v: NatsValues) => (v.config.cluster.replicas = 2), /odd number/],
    ['JetStream off', (v: NatsValues) => (v.config.jetstream.enabled = false), /JetStream is not enabled/],
    ['memory storage', (v: NatsValues) => (v.config.jetstream.memoryStore.enabled = true), /memory storage/],
    ['file storage without a volume', (v: NatsValues) => (v.config.jetstream.fileStore.pvc.enabled = false), /file storage on a PVC/],
  ])('refused / %s', (_what, edit, why) => {
    const v = clone(natsValues);
    edit(v);
    expect(natsValuesProblems(v).join('\n')).toMatch(why);
  });
});
