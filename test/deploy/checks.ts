/**
 * Checks of the deployment files (deploy/README.md): each takes parsed objects or file text
 * and returns the problems it found as strings (empty = fine), so a test can assert that the real
 * files pass and that a deliberately broken copy is refused by the same check.
 *
 * - Kubernetes schemas: `kubernetes-models` (core/apps/policy/networking) and
 *   `@kubernetes-models/prometheus-operator` (ServiceMonitor), each model's `.validate()` (the
 *   OpenAPI JSON schema: types, formats, required fields, enums).
 * - Unknown fields, which those JSON schemas let through (they do not set
 *   `additionalProperties: false`) but `kubectl apply` (strict field validation) refuses: the
 *   same package's TypeScript interfaces, by TypeScript's excess-property check on each object.
 * - Rules the API server enforces outside the OpenAPI schema (names, label syntax, port names
 *   and ranges) and the Pod Security Standards "restricted" profile.
 * - Cross-references between the objects, the node config and the NATS chart values.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { parseAllDocuments } from 'yaml';
import type { NodeConfig } from '../../node/index.ts';

/** The repository root. */
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** A Kubernetes object as parsed from YAML (only the parts the checks read are typed). */
export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  // biome-ignore lint/suspicious/noExplicitAny: a parsed manifest is untyped until validated.
  spec?: any;
  data?: Record<string, string>;
}

/** One object with where it came from. */
export interface Loaded {
  readonly file: string;
  readonly index: number;
  readonly obj: K8sObject;
}

/** `kind/name` for messages. */
export function label(o: K8sObject): string {
  return `${o.kind}/${o.metadata?.name}`;
}

/** Deep copy (for making broken variants in tests). */
export function clone<T>(v: T): T {
  return structuredClone(v);
}

// ---------------------------------------------------------------------------------------------
// YAML

/**
 * Parses every document of a YAML text, refusing YAML errors, duplicate keys, and any scalar that
 * YAML 1.1 (what Kubernetes' go-yaml reads) and YAML 1.2 read differently (`0440`, `yes`, `on`).
 * @throws Error naming the file and the problem.
 */
export function parseYamlDocs(text: string, file: string): unknown[] {
  const docs12 = parseAllDocuments(text, { uniqueKeys: true, prettyErrors: true });
  const docs11 = parseAllDocuments(text, { uniqueKeys: true, prettyErrors: true, version: '1.1' });
  if (!Array.isArray(docs12) || !Array.isArray(docs11)) throw new Error(`${file}: not a YAML stream`);
  const out: unknown[] = [];
  docs12.forEach((d, i) => {
    const problems = [...d.errors, ...d.warnings];
    if (problems.length > 0) throw new Error(`${file}: ${problems.map((p) => p.message).join('; ')}`);
    const v12 = d.toJS();
    const v11 = docs11[i]?.toJS();
    if (JSON.stringify(v12) !== JSON.stringify(v11)) {
      throw new Error(`${file}: document ${i} reads differently under YAML 1.1 and 1.2 (quote octal-looking numbers, yes/no/on/off)`);
    }
    if (v12 !== null && v12 !== undefined) out.push(v12);
  });
  return out;
}

/** Every Kubernetes object in the `.yaml` files of `dir`, except the Helm values file. */
export function loadManifests(dir = path.join(ROOT, 'k8s')): Loaded[] {
  const out: Loaded[] = [];
  for (const f of readdirSync(dir).sort()) {
    if (!f.endsWith('.yaml') || f === 'nats-values.yaml') continue;
    parseYamlDocs(readFileSync(path.join(dir, f), 'utf8'), f).forEach((obj, index) => {
      out.push({ file: f, index, obj: obj as K8sObject });
    });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Kubernetes schemas (kubernetes-models)

/** The module of the model class for an apiVersion/kind, in kubernetes-models' export layout. */
export function modelModule(apiVersion: string, kind: string): string {
  if (apiVersion.startsWith('monitoring.coreos.com/')) return `@kubernetes-models/prometheus-operator/${apiVersion}/${kind}`;
  return apiVersion.includes('/') ? `kubernetes-models/${apiVersion}/${kind}` : `kubernetes-models/v1/${kind}`;
}

type ModelClass = new (data: unknown) => { validate(): void };

/**
 * Validates one object against its Kubernetes JSON schema with the model's `.validate()`.
 * An apiVersion/kind the libraries do not know is a problem too.
 */
export async function schemaProblems(o: K8sObject): Promise<string[]> {
  let Model: ModelClass | undefined;
  try {
    const mod = (await import(modelModule(o.apiVersion, o.kind))) as Record<string, ModelClass>;
    Model = mod[o.kind];
  } catch {
    Model = undefined;
  }
  if (Model === undefined) return [`${label(o)}: no schema for ${o.apiVersion} ${o.kind}`];
  try {
    new Model(o).validate();
    return [];
  } catch (e) {
    return [`${label(o)}: ${(e as Error).message}`];
  }
}

/**
 * Unknown fields anywhere in the objects: each object becomes a literal typed with its model's
 * interface (`IStatefulSet`, `IServiceMonitor`, ...) in one in-memory TypeScript program, and
 * TypeScript's excess-property and type errors are reported per object.
 */
export function strictFieldProblems(objs: readonly K8sObject[]): string[] {
  const file = path.join(ROOT, 'test', 'deploy', '__manifest_fields__.ts');
  const lines: string[] = [];
  const spans: Array<{ start: number; end: number; who: string }> = [];
  objs.forEach((o, i) => {
    lines.push(`import type { I${o.kind} as T${i} } from '${modelModule(o.apiVersion, o.kind)}';`);
  });
  let text = `${lines.join('\n')}\n`;
  objs.forEach((o, i) => {
    const decl = `export const o${i}: T${i} = ${JSON.stringify(o, null, 1)};\n`;
    spans.push({ start: text.length, end: text.length + decl.length, who: label(o) });
    text += decl;
  });
  const options: ts.CompilerOptions = {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  const readFile = host.readFile.bind(host);
  const fileExists = host.fileExists.bind(host);
  const same = (f: string) => path.resolve(f) === file;
  host.getSourceFile = (f, lang, ...rest) => (same(f) ? ts.createSourceFile(f, text, lang) : getSourceFile(f, lang, ...rest));
  host.readFile = (f) => (same(f) ? text : readFile(f));
  host.fileExists = (f) => same(f) || fileExists(f);
  const program = ts.createProgram([file], options, host);
  const diags = ts.getPreEmitDiagnostics(program, program.getSourceFile(file));
  return diags.map((d) => {
    const who = spans.find((s) => d.start !== undefined && d.start >= s.start && d.start < s.end)?.who ?? 'imports';
    return `${who}: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`;
  });
}

// ---------------------------------------------------------------------------------------------
// API-server rules outside the OpenAPI schema (k8s.io/apimachinery/pkg/util/validation)

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const QUALIFIED_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const IANA_SVC_NAME = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;

function labelKeyProblem(k: string): string | undefined {
  const slash = k.lastIndexOf('/');
  const prefix = slash >= 0 ? k.slice(0, slash) : undefined;
  const name = slash >= 0 ? k.slice(slash + 1) : k;
  if (prefix !== undefined && (prefix.length > 253 || !DNS1123_SUBDOMAIN.test(prefix))) return `label key ${k}: bad prefix`;
  if (name.length > 63 || !QUALIFIED_NAME.test(name)) return `label key ${k}: bad name`;
  return undefined;
}

function labelsProblems(where: string, labels: Record<string, string> | undefined): string[] {
  const out: string[] = [];
  for (const [k, v] of Object.entries(labels ?? {})) {
    const p = labelKeyProblem(k);
    if (p) out.push(`${where}: ${p}`);
    if (typeof v !== 'string' || v.length > 63 || !LABEL_VALUE.test(v)) out.push(`${where}: label ${k}: bad value ${JSON.stringify(v)}`);
  }
  return out;
}

// biome-ignore lint/suspicious/noExplicitAny: walking untyped pod specs.
function containersOf(podSpec: any): any[] {
  return [...(podSpec?.initContainers ?? []), ...(podSpec?.containers ?? [])];
}

/** Names (DNS-1123), label syntax, selector labels, port names (IANA_SVC_NAME) and port ranges. */
export function apiServerProblems(o: K8sObject): string[] {
  const out: string[] = [];
  const who = label(o);
  const name = o.metadata?.name ?? '';
  const nameRule = o.kind === 'Service' || o.kind === 'Namespace' ? DNS1123_LABEL : DNS1123_SUBDOMAIN;
  const nameMax = o.kind === 'Service' || o.kind === 'Namespace' ? 63 : 253;
  if (!nameRule.test(name) || name.length > nameMax) out.push(`${who}: metadata.name is not a valid DNS-1123 name`);
  out.push(...labelsProblems(`${who} metadata.labels`, o.metadata?.labels));
  const s = o.spec;
  if (s?.selector?.matchLabels) out.push(...labelsProblems(`${who} spec.selector`, s.selector.matchLabels));
  if (s?.template) {
    out.push(...labelsProblems(`${who} spec.template.metadata.labels`, s.template.metadata?.labels));
    for (const c of containersOf(s.template.spec)) {
      if (!DNS1123_LABEL.test(c.name ?? '')) out.push(`${who}: container name ${c.name} is not a DNS-1123 label`);
      const seen = new Set<string>();
      for (const p of c.ports ?? []) {
        if (!(p.containerPort >= 1 && p.containerPort <= 65535))
          out.push(`${who}: container ${c.name}: containerPort ${p.containerPort} out of range`);
        if (p.name !== undefined && (p.name.length > 15 || !IANA_SVC_NAME.test(p.name) || !/[a-z]/.test(p.name))) {
          out.push(`${who}: container ${c.name}: port name ${p.name} is not an IANA_SVC_NAME`);
        }
        if (p.name !== undefined && seen.has(p.name)) out.push(`${who}: container ${c.name}: port name ${p.name} twice`);
        if (p.name !== undefined) seen.add(p.name);
      }
    }
  }
  if (o.kind === 'Service') {
    for (const p of s?.ports ?? []) {
      if (!(p.port >= 1 && p.port <= 65535)) out.push(`${who}: port ${p.port} out of range`);
      if (typeof p.targetPort === 'number' && !(p.targetPort >= 1 && p.targetPort <= 65535))
        out.push(`${who}: targetPort ${p.targetPort} out of range`);
    }
  }
  if (o.kind === 'NetworkPolicy') {
    for (const rule of [...(s?.ingress ?? []), ...(s?.egress ?? [])]) {
      for (const p of rule.ports ?? []) {
        if (typeof p.port === 'number' && !(p.port >= 1 && p.port <= 65535)) out.push(`${who}: port ${p.port} out of range`);
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Pod Security Standards, "restricted" (kubernetes.io/docs/concepts/security/pod-security-standards)

const RESTRICTED_VOLUMES = ['configMap', 'csi', 'downwardAPI', 'emptyDir', 'ephemeral', 'persistentVolumeClaim', 'projected', 'secret'];

/**
 * Problems of a pod spec under the "restricted" Pod Security Standard, plus our own rule that
 * every container has a read-only root file system and resource requests and limits.
 */
// biome-ignore lint/suspicious/noExplicitAny: walking an untyped pod spec.
export function restrictedProblems(who: string, pod: any): string[] {
  const out: string[] = [];
  const psc = pod?.securityContext ?? {};
  if (pod?.hostNetwork || pod?.hostPID || pod?.hostIPC) out.push(`${who}: host namespaces`);
  for (const v of pod?.volumes ?? []) {
    const type = Object.keys(v).find((k) => k !== 'name');
    if (type === undefined || !RESTRICTED_VOLUMES.includes(type)) out.push(`${who}: volume ${v.name} of type ${type} not allowed`);
  }
  if (psc.runAsUser === 0) out.push(`${who}: pod runAsUser 0`);
  for (const c of containersOf(pod)) {
    const sc = c.securityContext ?? {};
    const where = `${who} container ${c.name}`;
    if (sc.privileged === true) out.push(`${where}: privileged`);
    if (sc.allowPrivilegeEscalation !== false) out.push(`${where}: allowPrivilegeEscalation must be false`);
    if ((sc.runAsNonRoot ?? psc.runAsNonRoot) !== true) out.push(`${where}: runAsNonRoot must be true`);
    if (sc.runAsUser === 0) out.push(`${where}: runAsUser 0`);
    const seccomp = (sc.seccompProfile ?? psc.seccompProfile)?.type;
    if (seccomp !== 'RuntimeDefault' && seccomp !== 'Localhost') out.push(`${where}: seccompProfile must be RuntimeDefault or Localhost`);
    if (!(sc.capabilities?.drop ?? []).includes('ALL')) out.push(`${where}: capabilities must drop ALL`);
    for (const cap of sc.capabilities?.add ?? []) if (cap !== 'NET_BIND_SERVICE') out.push(`${where}: adds capability ${cap}`);
    for (const p of c.ports ?? []) if (p.hostPort !== undefined) out.push(`${where}: hostPort`);
    if (sc.readOnlyRootFilesystem !== true) out.push(`${where}: readOnlyRootFilesystem must be true`);
    for (const k of ['requests', 'limits'] as const) {
      for (const r of ['cpu', 'memory']) if (c.resources?.[k]?.[r] === undefined) out.push(`${where}: no ${k}.${r}`);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Cross-references between objects

function matches(selector: Record<string, string> | undefined, labels: Record<string, string> | undefined): boolean {
  if (selector === undefined || Object.keys(selector).length === 0) return false;
  return Object.entries(selector).every(([k, v]) => labels?.[k] === v);
}

function nsOf(o: K8sObject): string {
  return o.metadata.namespace ?? 'default';
}

/**
 * Dangling or inconsistent references: namespaces, the governing Service, Service selectors and
 * target ports, mounted ConfigMaps and Secrets (a Secret may instead be named in
 * `operatorSecrets`, the ones the operator creates), volume mounts, PDB, ServiceMonitor and
 * NetworkPolicy selectors and ports.
 */
export function crossRefProblems(objs: readonly K8sObject[], operatorSecrets: readonly string[]): string[] {
  const out: string[] = [];
  const of = (kind: string) => objs.filter((o) => o.kind === kind);
  const namespaces = new Set(of('Namespace').map((n) => n.metadata.name));
  for (const o of objs) {
    if (o.kind !== 'Namespace' && !namespaces.has(nsOf(o))) out.push(`${label(o)}: namespace ${nsOf(o)} is not among the manifests`);
  }
  const workloads = objs.filter((o) => o.kind === 'StatefulSet' || o.kind === 'Deployment');
  const podsMatching = (ns: string, sel: Record<string, string> | undefined) =>
    workloads.filter((w) => nsOf(w) === ns && matches(sel, w.spec?.template?.metadata?.labels));
  // biome-ignore lint/suspicious/noExplicitAny: untyped containers.
  const portsOf = (w: K8sObject): any[] => (w.spec?.template?.spec?.containers ?? []).flatMap((c: any) => c.ports ?? []);

  for (const w of workloads) {
    const who = label(w);
    if (!matches(w.spec?.selector?.matchLabels, w.spec?.template?.metadata?.labels))
      out.push(`${who}: selector does not match the pod template labels`);
    if (w.kind === 'StatefulSet') {
      const gov = of('Service').find((s) => s.metadata.name === w.spec.serviceName && nsOf(s) === nsOf(w));
      if (gov === undefined) out.push(`${who}: serviceName ${w.spec.serviceName} is not a Service here`);
      else if (gov.spec?.clusterIP !== 'None') out.push(`${who}: governing Service ${w.spec.serviceName} is not headless`);
    }
    const pod = w.spec?.template?.spec ?? {};
    const volumes = new Map<string, Record<string, unknown>>((pod.volumes ?? []).map((v: { name: string }) => [v.name, v]));
    const claims = new Set((w.spec?.volumeClaimTemplates ?? []).map((c: K8sObject) => c.metadata.name));
    const used = new Set<string>();
    for (const c of containersOf(pod)) {
      for (const m of c.volumeMounts ?? []) {
        used.add(m.name);
        if (!volumes.has(m.name) && !claims.has(m.name)) out.push(`${who}: container ${c.name} mounts unknown volume ${m.name}`);
      }
    }
    for (const name of [...volumes.keys(), ...claims]) if (!used.has(name as string)) out.push(`${who}: volume ${name} is never mounted`);
    for (const v of volumes.values()) {
      const cm = v['configMap'] as { name: string; items?: Array<{ key: string }> } | undefined;
      if (cm) {
        const target = of('ConfigMap').find((o) => o.metadata.name === cm.name && nsOf(o) === nsOf(w));
        if (target === undefined) out.push(`${who}: ConfigMap ${cm.name} is not in the manifests`);
        for (const it of cm.items ?? [])
          if (target && target.data?.[it.key] === undefined) out.push(`${who}: ConfigMap ${cm.name} has no key ${it.key}`);
      }
      const sec = v['secret'] as { secretName: string } | undefined;
      if (sec) {
        const inManifests = of('Secret').some((o) => o.metadata.name === sec.secretName && nsOf(o) === nsOf(w));
        if (!inManifests && !operatorSecrets.includes(sec.secretName))
          out.push(`${who}: Secret ${sec.secretName} is neither in the manifests nor documented as operator-provided`);
      }
    }
  }

  for (const s of of('Service')) {
    const pods = podsMatching(nsOf(s), s.spec?.selector);
    if (pods.length === 0) {
      out.push(`${label(s)}: selector matches no pods`);
      continue;
    }
    for (const p of s.spec?.ports ?? []) {
      const target = p.targetPort ?? p.port;
      const ok = pods.every((w) =>
        portsOf(w).some((cp) => (typeof target === 'string' ? cp.name === target : cp.containerPort === target)),
      );
      if (!ok) out.push(`${label(s)}: targetPort ${target} is not a container port of the selected pods`);
    }
  }

  for (const pdb of of('PodDisruptionBudget')) {
    const pods = podsMatching(nsOf(pdb), pdb.spec?.selector?.matchLabels);
    if (pods.length === 0) out.push(`${label(pdb)}: selector matches no pods`);
    const mu = pdb.spec?.maxUnavailable;
    for (const w of pods)
      if (typeof mu === 'number' && mu >= (w.spec?.replicas ?? 1))
        out.push(`${label(pdb)}: maxUnavailable ${mu} lets every pod of ${label(w)} go`);
  }

  for (const sm of of('ServiceMonitor')) {
    const nsNames: string[] = sm.spec?.namespaceSelector?.matchNames ?? [nsOf(sm)];
    const services = of('Service').filter((s) => nsNames.includes(nsOf(s)) && matches(sm.spec?.selector?.matchLabels, s.metadata.labels));
    if (services.length === 0) out.push(`${label(sm)}: selector matches no Service`);
    for (const ep of sm.spec?.endpoints ?? []) {
      for (const s of services) {
        if (!(s.spec?.ports ?? []).some((p: { name?: string }) => p.name === ep.port))
          out.push(`${label(sm)}: Service ${s.metadata.name} has no port named ${ep.port}`);
      }
    }
  }

  for (const np of of('NetworkPolicy')) {
    const pods = podsMatching(nsOf(np), np.spec?.podSelector?.matchLabels);
    if (pods.length === 0) out.push(`${label(np)}: podSelector matches no pods`);
    for (const rule of np.spec?.ingress ?? []) {
      for (const p of rule.ports ?? []) {
        const ok = pods.every((w) =>
          portsOf(w).some((cp) => (typeof p.port === 'string' ? cp.name === p.port : cp.containerPort === p.port)),
        );
        if (!ok) out.push(`${label(np)}: ingress port ${p.port} is not a container port of the selected pods`);
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The node's wiring: config ↔ StatefulSet ↔ Services ↔ NetworkPolicy ↔ NATS chart

/** What the NATS chart values imply for clients (chart 1.x naming; see natsChartService). */
export interface NatsTarget {
  readonly host: string;
  readonly port: number;
  readonly namespace: string;
  readonly selectorLabels: Record<string, string>;
}

/**
 * The client Service of the official NATS chart for a release: the chart's `nats.fullname` is the
 * release name when it contains "nats", its selector labels are app.kubernetes.io/{name: nats,
 * instance: <release>, component: nats}, and its client port is `config.nats.port`
 * (nats-io/k8s helm/charts/nats/templates/_helpers.tpl, files/service.yaml).
 */
export function natsChartService(release: string, namespace: string, values: NatsValues): NatsTarget {
  const fullname = release.includes('nats') ? release : `${release}-nats`;
  return {
    host: `${fullname}.${namespace}.svc.cluster.local`,
    port: values.config?.nats?.port ?? 4222,
    namespace,
    selectorLabels: { 'app.kubernetes.io/name': 'nats', 'app.kubernetes.io/instance': release, 'app.kubernetes.io/component': 'nats' },
  };
}

/** The parts of the NATS chart values the checks read. */
export interface NatsValues {
  // biome-ignore lint/suspicious/noExplicitAny: Helm values are free-form.
  config?: any;
  [k: string]: unknown;
}

// biome-ignore lint/suspicious/noExplicitAny: untyped containers.
function container(w: K8sObject, name: string): any {
  // biome-ignore lint/suspicious/noExplicitAny: untyped containers.
  return containersOf(w.spec?.template?.spec).find((c: any) => c.name === name);
}

/** The init container's shell script (the last element of its `sh -c` command). */
export function initScript(sts: K8sObject, name = 'steward-key'): string {
  const c = container(sts, name);
  const cmd: string[] = c?.command ?? [];
  return cmd.at(-1) ?? '';
}

/**
 * The node container, its config and the objects around it agree: container ports = the config's
 * listen and metrics ports (bound on all interfaces), probes at the metrics port (readiness on /readyz,
 * liveness and startup on /healthz),
 * `--config` points at the mounted ConfigMap key, the data folder is the claim's mount, the
 * steward key lies on a memory volume that the init container fills from the Secret with mode
 * 0600, Secret files unreadable by others, endpoint paths mounted, NATS URL and the
 * NetworkPolicy's peers and ports matching the chart's Service.
 */
export function wiringProblems(objs: readonly K8sObject[], cfg: NodeConfig, nats: NatsTarget): string[] {
  const out: string[] = [];
  const sts = objs.find((o) => o.kind === 'StatefulSet');
  if (sts === undefined) return ['no StatefulSet'];
  const node = container(sts, 'node');
  const init = container(sts, 'steward-key');
  if (node === undefined || init === undefined) return ['StatefulSet lacks the node or steward-key container'];
  const pod = sts.spec.template.spec;
  const vol = (n: string) => (pod.volumes ?? []).find((v: { name: string }) => v.name === n);
  const mountOf = (c: { volumeMounts?: Array<{ name: string; mountPath: string; readOnly?: boolean }> }, p: string) =>
    (c.volumeMounts ?? [])
      .filter((m) => p === m.mountPath || p.startsWith(`${m.mountPath}/`))
      .sort((a, b) => b.mountPath.length - a.mountPath.length)[0];
  const portNamed = (n: string) => (node.ports ?? []).find((p: { name: string }) => p.name === n)?.containerPort;

  if (portNamed('jcp') !== cfg.listen.port) out.push(`port jcp ${portNamed('jcp')} ≠ config listen port ${cfg.listen.port}`);
  if (portNamed('metrics') !== cfg.metrics?.port)
    out.push(`port metrics ${portNamed('metrics')} ≠ config metrics port ${cfg.metrics?.port}`);
  if (cfg.listen.host !== '0.0.0.0' && cfg.listen.host !== '::')
    out.push(`config listen host ${cfg.listen.host} is not reachable from the Service`);
  if (cfg.metrics && cfg.metrics.host !== '0.0.0.0' && cfg.metrics.host !== '::')
    out.push(`config metrics host ${cfg.metrics.host} is not reachable for probes`);
  // Readiness on /readyz (503 while allows are refused: revocations stale, log failed); liveness
  // and startup on /healthz (a stale node is alive and recovers by itself).
  for (const [probe, want] of [
    ['readinessProbe', '/readyz'],
    ['livenessProbe', '/healthz'],
    ['startupProbe', '/healthz'],
  ] as const) {
    const g = node[probe]?.httpGet;
    if (g?.path !== want || (g.port !== 'metrics' && g.port !== cfg.metrics?.port))
      out.push(`${probe} is not GET ${want} on the metrics port`);
  }

  const args: string[] = node.args ?? [];
  const cfgPath = args[args.indexOf('--config') + 1];
  const cfgMount = cfgPath === undefined || !args.includes('--config') ? undefined : mountOf(node, cfgPath);
  const cmItem =
    cfgMount &&
    vol(cfgMount.name)?.configMap?.items?.find((i: { path: string }) => path.posix.join(cfgMount.mountPath, i.path) === cfgPath);
  if (cmItem?.key !== 'node.json') out.push(`--config ${cfgPath} is not the mounted ConfigMap key node.json`);

  const dataMount = mountOf(node, cfg.dataDir);
  const claims = (sts.spec.volumeClaimTemplates ?? []).map((c: K8sObject) => c.metadata.name);
  if (dataMount?.mountPath !== cfg.dataDir || !claims.includes(dataMount.name))
    out.push(`data_dir ${cfg.dataDir} is not the mount of a volumeClaimTemplate`);
  if (dataMount?.readOnly) out.push('the data volume is mounted read-only');

  const keyDir = path.posix.dirname(cfg.stewardKey);
  const keyMount = mountOf(node, cfg.stewardKey);
  const keyVol = keyMount && vol(keyMount.name);
  if (keyMount?.mountPath !== keyDir || keyVol?.emptyDir?.medium !== 'Memory')
    out.push(`steward_key ${cfg.stewardKey} is not on a memory emptyDir`);
  const initDst = keyMount && (init.volumeMounts ?? []).find((m: { name: string }) => m.name === keyMount.name);
  if (initDst?.mountPath !== keyDir || initDst.readOnly)
    out.push('the init container does not write the steward key volume at the same path');
  const secretMount = (init.volumeMounts ?? []).find((m: { name: string }) => vol(m.name)?.secret !== undefined);
  const secretVol = secretMount && vol(secretMount.name);
  if (secretVol === undefined) out.push('the init container mounts no Secret');
  else {
    if (secretMount.readOnly !== true) out.push('the Secret is not mounted read-only');
    const mode = secretVol.secret.defaultMode ?? 0o644;
    if ((mode & 0o007) !== 0 || (mode & 0o222) !== 0) out.push(`Secret defaultMode ${mode.toString(8)} is writable or readable by others`);
    if ((node.volumeMounts ?? []).some((m: { name: string }) => m.name === secretMount.name))
      out.push('the node container mounts the key Secret itself');
    const script = initScript(sts);
    if (!script.includes(`${secretMount.mountPath}/\${POD_NAME}.key`))
      out.push('the init script does not read <secret mount>/<pod name>.key');
    if (!new RegExp(`install -m 0?600 \\S+ ${cfg.stewardKey.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(\\s|$)`).test(script)) {
      out.push(`the init script does not install the key at ${cfg.stewardKey} with mode 0600`);
    }
  }

  for (const r of cfg.resources) {
    for (const a of r.endpoint?.kind === 'mcp-stdio' ? r.endpoint.args : []) {
      if (a.startsWith('/') && mountOf(node, a) === undefined) out.push(`resource ${r.name}: path ${a} is not on a mounted volume`);
    }
    for (const [k, v] of Object.entries(r.endpoint?.kind === 'mcp-stdio' ? r.endpoint.env : {})) {
      const m = v.startsWith('/') ? mountOf(node, v) : undefined;
      if (v.startsWith('/') && (m === undefined || m.readOnly)) out.push(`resource ${r.name}: env ${k}=${v} is not on a writable volume`);
    }
  }

  const u = cfg.nats === undefined ? undefined : new URL(cfg.nats);
  if (u === undefined || u.hostname !== nats.host || Number(u.port || 4222) !== nats.port)
    out.push(`nats ${cfg.nats} is not the chart's Service ${nats.host}:${nats.port}`);

  const np = objs.find((o) => o.kind === 'NetworkPolicy');
  if (np === undefined) out.push('no NetworkPolicy');
  else {
    const types: string[] = np.spec.policyTypes ?? [];
    if (!types.includes('Ingress') || !types.includes('Egress')) out.push('NetworkPolicy does not restrict both Ingress and Egress');
    const inPorts = new Set(
      (np.spec.ingress ?? []).flatMap((r: { ports?: Array<{ port: number }> }) => (r.ports ?? []).map((p) => p.port)),
    );
    const want = new Set([cfg.listen.port, cfg.metrics?.port]);
    if (inPorts.size !== want.size || [...inPorts].some((p) => !want.has(p as number)))
      out.push(`NetworkPolicy ingress ports ${[...inPorts]} ≠ jcp/1 and metrics ports`);
    for (const r of np.spec.ingress ?? []) {
      if ((r.from ?? []).length === 0 || (r.ports ?? []).length === 0) out.push('a NetworkPolicy ingress rule allows any peer or any port');
    }
    for (const r of np.spec.egress ?? []) {
      const ports = (r.ports ?? []).map((p: { port: number }) => p.port);
      if (ports.length === 0 || (r.to ?? []).length === 0) out.push('a NetworkPolicy egress rule allows any peer or any port');
      const toNats = ports.includes(nats.port);
      if (toNats) {
        const peers = r.to ?? [];
        const ok = peers.every(
          // biome-ignore lint/suspicious/noExplicitAny: untyped peers.
          (p: any) =>
            p.namespaceSelector?.matchLabels?.['kubernetes.io/metadata.name'] === nats.namespace &&
            matches(p.podSelector?.matchLabels, nats.selectorLabels),
        );
        if (!ok) out.push("NetworkPolicy egress on the NATS port goes to peers other than the chart's NATS pods");
      } else if (ports.some((p: number) => p !== 53)) out.push(`NetworkPolicy egress to ports ${ports} (only NATS and DNS expected)`);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The NATS chart values

/**
 * Value paths the official NATS chart (nats-io/k8s helm/charts/nats, 1.x) reads, from its
 * templates: files/config/{cluster,jetstream}.yaml, files/stateful-set/{nats-container,
 * pod-template,jetstream-pvc}.yaml, templates/_helpers.tpl, templates/pdb.yaml. `*` = any key;
 * a path ending in `**` takes any sub-tree (merge/patch documents, label maps).
 */
const NATS_CHART_PATHS = [
  'config.cluster.enabled',
  'config.cluster.replicas',
  'config.cluster.port',
  'config.cluster.tls.**',
  'config.cluster.routeURLs.**',
  'config.cluster.merge.**',
  'config.gateway.enabled',
  'config.gateway.port',
  'config.gateway.tls.**',
  'config.gateway.merge.**',
  'config.gateway.patch.**',
  'config.nats.port',
  'config.nats.tls.**',
  'config.monitor.enabled',
  'config.monitor.port',
  'config.jetstream.enabled',
  'config.jetstream.fileStore.enabled',
  'config.jetstream.fileStore.dir',
  'config.jetstream.fileStore.maxSize',
  'config.jetstream.fileStore.pvc.enabled',
  'config.jetstream.fileStore.pvc.size',
  'config.jetstream.fileStore.pvc.storageClassName',
  'config.jetstream.fileStore.pvc.name',
  'config.jetstream.memoryStore.enabled',
  'config.jetstream.memoryStore.maxSize',
  'config.jetstream.merge.**',
  'config.serverNamePrefix',
  'config.merge.**',
  'container.image.**',
  'container.env.**',
  'container.merge.**',
  'container.patch.**',
  'podTemplate.topologySpreadConstraints.**',
  'podTemplate.merge.**',
  'podTemplate.patch.**',
  'podDisruptionBudget.enabled',
  'podDisruptionBudget.merge.**',
  'promExporter.enabled',
  'promExporter.port',
  'promExporter.podMonitor.enabled',
  'promExporter.podMonitor.merge.**',
  'natsBox.enabled',
  'global.labels.**',
  'global.image.**',
] as const;

function knownPath(p: string[]): boolean {
  return NATS_CHART_PATHS.some((pattern) => {
    const parts = pattern.split('.');
    for (let i = 0; i < parts.length; i++) {
      if (parts[i] === '**') return p.length > i;
      if (i >= p.length) return false;
      if (parts[i] !== '*' && parts[i] !== p[i]) return false;
    }
    return p.length === parts.length;
  });
}

function leafPaths(v: unknown, prefix: string[] = []): string[][] {
  if (typeof v !== 'object' || v === null || Array.isArray(v) || (prefix.length > 0 && knownPath(prefix))) return [prefix];
  return Object.entries(v).flatMap(([k, x]) => leafPaths(x, [...prefix, k]));
}

/**
 * Problems of the NATS chart values: keys the chart does not read (a typo, or 0.x-era names such
 * as `nats.jetstream.fileStorage`), and anything short of a 3-server JetStream cluster on files.
 */
export function natsValuesProblems(v: NatsValues): string[] {
  const out = leafPaths(v)
    .filter((p) => !knownPath(p))
    .map((p) => `NATS values: ${p.join('.')} is not a value the chart reads`);
  const c = v.config ?? {};
  if (c.cluster?.enabled !== true) out.push('NATS values: config.cluster.enabled is not true');
  const r = c.cluster?.replicas;
  if (!(Number.isInteger(r) && r >= 3 && r % 2 === 1))
    out.push(`NATS values: config.cluster.replicas ${r} is not an odd number ≥ 3 (JetStream needs a RAFT quorum)`);
  if (c.jetstream?.enabled !== true) out.push('NATS values: JetStream is not enabled');
  const fs = c.jetstream?.fileStore;
  if (fs?.enabled !== true || fs?.pvc?.enabled !== true) out.push('NATS values: JetStream file storage on a PVC is not enabled');
  if (typeof fs?.pvc?.size !== 'string' || !/^\d+(Ki|Mi|Gi|Ti)$/.test(fs.pvc.size))
    out.push(`NATS values: fileStore.pvc.size ${fs?.pvc?.size} is not a quantity`);
  if (c.jetstream?.memoryStore?.enabled === true) out.push('NATS values: memory storage is on (streams would not survive a restart)');
  return out;
}

// ---------------------------------------------------------------------------------------------
// What the `jcp` command imports at run time

/** Local top-level folders and npm packages reachable from `entries` through run-time imports. */
export function runtimeImports(entries: readonly string[]): { folders: Set<string>; packages: Set<string>; files: Set<string> } {
  const files = new Set<string>();
  const folders = new Set<string>();
  const packages = new Set<string>();
  const builtins = new Set(builtinModules);
  const queue = entries.map((e) => path.resolve(ROOT, e));
  while (queue.length > 0) {
    const file = queue.pop()!;
    if (files.has(file)) continue;
    files.add(file);
    folders.add(path.relative(ROOT, file).split(path.sep)[0]!);
    const src = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true);
    const specs: string[] = [];
    const visit = (n: ts.Node): void => {
      if (ts.isImportDeclaration(n) && !n.importClause?.isTypeOnly && ts.isStringLiteral(n.moduleSpecifier)) {
        const named = n.importClause?.namedBindings;
        const allTypes =
          n.importClause !== undefined &&
          n.importClause.name === undefined &&
          named !== undefined &&
          ts.isNamedImports(named) &&
          named.elements.length > 0 &&
          named.elements.every((e) => e.isTypeOnly);
        if (!allTypes) specs.push(n.moduleSpecifier.text);
      } else if (ts.isExportDeclaration(n) && !n.isTypeOnly && n.moduleSpecifier && ts.isStringLiteral(n.moduleSpecifier)) {
        specs.push(n.moduleSpecifier.text);
      } else if (ts.isCallExpression(n) && n.expression.kind === ts.SyntaxKind.ImportKeyword) {
        const a = n.arguments[0];
        if (a && ts.isStringLiteral(a)) specs.push(a.text);
      } else if (ts.isNewExpression(n) && ts.isIdentifier(n.expression) && n.expression.text === 'URL') {
        // new URL('./file', import.meta.url): a file loaded by path (a worker, a child process).
        const [a, b] = n.arguments ?? [];
        if (a && ts.isStringLiteral(a) && /^\.\.?\/.*\.m?[jt]s$/.test(a.text) && b?.getText(src) === 'import.meta.url') specs.push(a.text);
      }
      ts.forEachChild(n, visit);
    };
    visit(src);
    for (const s of specs) {
      if (s.startsWith('.')) queue.push(path.resolve(path.dirname(file), s));
      else if (!s.startsWith('node:') && !builtins.has(s))
        packages.add(s.startsWith('@') ? s.split('/').slice(0, 2).join('/') : s.split('/')[0]!);
    }
  }
  return { folders, packages, files };
}

// ---------------------------------------------------------------------------------------------
// The Containerfile

/** One instruction of a Containerfile: keyword and its argument text (continuations joined). */
export interface Instruction {
  readonly op: string;
  readonly arg: string;
  readonly stage: number;
}

/** Parses a Dockerfile-syntax file into instructions, numbering build stages from 0. */
export function parseContainerfile(text: string): Instruction[] {
  const out: Instruction[] = [];
  let stage = -1;
  let pending = '';
  for (const raw of text.split('\n')) {
    const line = raw.trimEnd();
    if (pending === '' && (line.trim() === '' || line.trim().startsWith('#'))) continue;
    if (pending !== '' && line.trim().startsWith('#')) continue;
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1)} `;
      continue;
    }
    const full = (pending + line).trim();
    pending = '';
    const m = /^(\w+)\s+([\s\S]*)$/.exec(full);
    if (!m) continue;
    const op = m[1]!.toUpperCase();
    if (op === 'FROM') stage++;
    out.push({ op, arg: m[2]!.replace(/\s+/g, ' ').trim(), stage });
  }
  return out;
}

/** The JSON (exec) form of an ENTRYPOINT/CMD argument, or undefined for the shell form. */
function jsonForm(arg: string | undefined): unknown {
  try {
    return arg === undefined ? undefined : JSON.parse(arg);
  } catch {
    return undefined;
  }
}

/** What a Containerfile must agree with. */
export interface ImageExpectations {
  /** The config the image's CMD loads, as the node's loader read it. */
  readonly config: NodeConfig;
  /** Where the image puts that config (the CMD's --config). */
  readonly configPathInImage: string;
  /** Top-level source folders the `jcp` command imports at run time (compiled in the build stage). */
  readonly sourceFolders: ReadonlySet<string>;
  /** Plain JavaScript files the `jcp` command loads from outside dist/ (the bin, the worker boot script), repository paths. */
  readonly plainFiles: ReadonlySet<string>;
}

/**
 * Multi-stage: a build stage that runs `npm ci` (dev dependencies included) and `npm run build`
 * over every run-time source folder, `npm ci --omit=dev` in a deps stage, a slim Node 20 runtime
 * that takes node_modules from deps and dist/ from build and copies the plain JavaScript files
 * (no TypeScript source), a non-root USER, the data folder as a VOLUME, the config's ports
 * exposed, a HEALTHCHECK on /healthz at the metrics port, the fixed ENTRYPOINT, the config copied
 * where CMD points, and no NATS server in the image.
 */
export function containerfileProblems(text: string, want: ImageExpectations): string[] {
  const out: string[] = [];
  const ins = parseContainerfile(text);
  const args = new Map<string, string>();
  for (const i of ins.filter((x) => x.op === 'ARG' && x.stage === -1)) {
    const [k, v] = i.arg.split('=');
    if (k && v) args.set(k, v);
  }
  const froms = ins.filter((i) => i.op === 'FROM');
  if (froms.length < 2) out.push('not a multi-stage build');
  const last = froms.length - 1;
  const image = (froms[last]?.arg.split(' ')[0] ?? '').replace(/^\$\{(\w+)\}$/, (_, k: string) => args.get(k) ?? '');
  if (!/^node:20[\w.-]*-slim$/.test(image)) out.push(`runtime image ${image} is not a slim Node 20 image`);
  const depsStage = froms.findIndex((f) => / AS deps$/i.test(f.arg));
  if (depsStage < 0 || depsStage === last) out.push('no deps stage before the runtime stage');
  if (!ins.some((i) => i.stage === depsStage && i.op === 'RUN' && /\bnpm ci\b/.test(i.arg) && /--omit=dev\b/.test(i.arg)))
    out.push('the deps stage does not run npm ci --omit=dev');
  if (!ins.some((i) => i.stage === last && i.op === 'COPY' && /--from=deps\b/.test(i.arg) && /node_modules/.test(i.arg)))
    out.push('the runtime stage does not take node_modules from deps');
  out.push(...buildStageProblems(ins, froms, want));
  const inLast = (op: string) => ins.filter((i) => i.stage === last && i.op === op);
  const user = inLast('USER').at(-1)?.arg.split(':')[0];
  if (user === undefined || user === 'root' || user === '0') out.push(`runtime USER ${user ?? '(none)'} is root`);
  const volumes = inLast('VOLUME').flatMap((v) => (v.arg.startsWith('[') ? (JSON.parse(v.arg) as string[]) : v.arg.split(' ')));
  if (!volumes.includes(want.config.dataDir)) out.push(`data_dir ${want.config.dataDir} is not a VOLUME`);
  const exposed = new Set(inLast('EXPOSE').flatMap((e) => e.arg.split(' ').map((p) => Number(p.split('/')[0]))));
  for (const p of [want.config.listen.port, want.config.metrics?.port]) if (!exposed.has(p as number)) out.push(`port ${p} is not EXPOSEd`);
  const hc = inLast('HEALTHCHECK').at(-1)?.arg ?? '';
  const env = inLast('ENV')
    .map((e) => e.arg)
    .join(' ');
  const healthUrl = `127.0.0.1:${want.config.metrics?.port}/healthz`;
  if (!hc.includes(healthUrl) && !(hc.includes('JCP_HEALTH_URL') && env.includes(`JCP_HEALTH_URL=http://${healthUrl}`))) {
    out.push(`HEALTHCHECK does not probe ${healthUrl}`);
  }
  const entry = jsonForm(inLast('ENTRYPOINT').at(-1)?.arg);
  if (JSON.stringify(entry) !== JSON.stringify(['node', 'bin/jcp.mjs', 'node', 'start']))
    out.push(`ENTRYPOINT is ${JSON.stringify(entry)}`);
  const cmd = jsonForm(inLast('CMD').at(-1)?.arg);
  if (JSON.stringify(cmd) !== JSON.stringify(['--config', want.configPathInImage]))
    out.push(`CMD ${JSON.stringify(cmd)} does not load ${want.configPathInImage}`);
  const copies = inLast('COPY').filter((c) => !c.arg.startsWith('--from'));
  if (!copies.some((c) => c.arg === `deploy/node.example.json ${want.configPathInImage}`))
    out.push(`the config is not copied to ${want.configPathInImage}`);
  const copied = new Set(copies.flatMap((c) => c.arg.split(' ').slice(0, -1)).map((s) => s.replace(/\/$/, '')));
  for (const f of want.plainFiles)
    if (!copied.has(f) && !copied.has(f.split('/')[0]!)) out.push(`${f} is loaded at run time but not copied`);
  for (const f of want.sourceFolders)
    if (copied.has(f) && f !== 'bin') out.push(`source folder ${f}/ is copied into the runtime image (it runs dist/)`);
  for (const i of ins) {
    const natsImage = i.op === 'FROM' && /^(\S+\/)?nats[:@\s]|^(\S+\/)?nats$/.test(i.arg);
    const natsRun = i.op === 'RUN' && /\bnats-server\b/.test(i.arg);
    const natsCopy = i.op === 'COPY' && /\bnats-server\b/.test(i.arg);
    if (natsImage || natsRun || natsCopy) out.push(`${i.op} ${i.arg} brings a NATS server into the image`);
  }
  return out;
}

/** The build stage: `npm ci` with the dev dependencies, every run-time source folder copied, `npm run build`; dist/ taken from it. */
function buildStageProblems(ins: readonly Instruction[], froms: readonly Instruction[], want: ImageExpectations): string[] {
  const out: string[] = [];
  const stage = froms.findIndex((f) => / AS build$/i.test(f.arg));
  const last = froms.length - 1;
  if (stage < 0 || stage === last) return ['no build stage before the runtime stage'];
  const runs = ins.filter((i) => i.stage === stage && i.op === 'RUN').map((i) => i.arg);
  if (!runs.some((r) => /\bnpm ci\b/.test(r) && !/--omit=dev\b/.test(r)))
    out.push('the build stage does not run npm ci with the dev dependencies');
  if (!runs.some((r) => /\bnpm run build\b/.test(r))) out.push('the build stage does not run npm run build');
  const copied = new Set(
    ins
      .filter((i) => i.stage === stage && i.op === 'COPY')
      .flatMap((c) => c.arg.split(' ').slice(0, -1))
      .map((s) => s.replace(/\/$/, '')),
  );
  for (const f of ['tsconfig.json', 'tsconfig.build.json']) if (!copied.has(f)) out.push(`the build stage does not copy ${f}`);
  for (const f of want.sourceFolders)
    if (f !== 'bin' && !copied.has(f)) out.push(`source folder ${f}/ is imported at run time but not copied into the build stage`);
  if (!ins.some((i) => i.stage === last && i.op === 'COPY' && /--from=build\b/.test(i.arg) && /\bdist\b/.test(i.arg)))
    out.push('the runtime stage does not take dist/ from build');
  return out;
}

// ---------------------------------------------------------------------------------------------
// The systemd unit

/** A unit file as section → key → values (a key may repeat). */
export function parseUnit(text: string): Map<string, Map<string, string[]>> {
  const out = new Map<string, Map<string, string[]>>();
  let section: Map<string, string[]> | undefined;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const sec = /^\[(.+)\]$/.exec(line);
    if (sec) {
      section = new Map();
      out.set(sec[1]!, section);
      continue;
    }
    const eq = line.indexOf('=');
    if (section === undefined || eq < 0) continue;
    const k = line.slice(0, eq).trim();
    section.set(k, [...(section.get(k) ?? []), line.slice(eq + 1).trim()]);
  }
  return out;
}

/**
 * The unit runs `jcp node start` with a config and the StateDirectory as data folder, as a
 * dedicated or dynamic user, hardened (ProtectSystem=strict, NoNewPrivileges, no capabilities,
 * PrivateTmp), and restarts on failure.
 */
export function unitProblems(text: string): string[] {
  const out: string[] = [];
  const u = parseUnit(text);
  const svc = u.get('Service');
  if (svc === undefined) return ['no [Service] section'];
  const one = (k: string) => svc.get(k)?.at(-1);
  const exec = one('ExecStart') ?? '';
  if (!/\bbin\/jcp\.mjs node start\b/.test(exec)) out.push('ExecStart does not run jcp node start');
  const data = /--data (\S+)/.exec(exec)?.[1];
  const state = one('StateDirectory');
  if (state === undefined) out.push('no StateDirectory');
  else if (data !== `/var/lib/${state}`) out.push(`--data ${data} is not the StateDirectory /var/lib/${state}`);
  if (!/--config \/etc\/\S+\.json/.test(exec)) out.push('ExecStart has no --config under /etc');
  const user = one('User');
  if (one('DynamicUser') !== 'yes' && (user === undefined || user === 'root' || user === '0')) out.push('runs as root');
  const want: Record<string, string> = {
    ProtectSystem: 'strict',
    NoNewPrivileges: 'yes',
    Restart: 'on-failure',
    PrivateTmp: 'yes',
    ProtectHome: 'yes',
    CapabilityBoundingSet: '',
  };
  for (const [k, v] of Object.entries(want)) if (one(k) !== v) out.push(`${k}=${one(k) ?? '(unset)'}, want ${k}=${v}`);
  if (one('MemoryDenyWriteExecute') === 'yes') out.push('MemoryDenyWriteExecute=yes breaks the V8 JIT');
  if (u.get('Install')?.get('WantedBy')?.[0] !== 'multi-user.target') out.push('not WantedBy=multi-user.target');
  return out;
}

/**
 * `systemd-analyze verify` and `systemd-analyze security --offline` on a unit file: the warnings
 * verify prints about it (unknown keys, bad values), and the exposure score (0 = best, 10 = worst).
 */
export function systemdAnalyze(file: string): { warnings: string[]; exposure: number } {
  const verify = spawnSync('systemd-analyze', ['verify', '--man=no', file], { encoding: 'utf8' });
  if (verify.error) throw verify.error;
  const base = path.basename(file);
  const warnings = `${verify.stdout}\n${verify.stderr}`.split('\n').filter((l) => l.includes(base));
  if (verify.status !== 0) warnings.push(`systemd-analyze verify exited ${verify.status}`);
  const sec = spawnSync('systemd-analyze', ['security', '--offline=true', '--no-pager', file], { encoding: 'utf8' });
  if (sec.error) throw sec.error;
  const m = /Overall exposure level for \S+: (\d+(?:\.\d+)?)/.exec(`${sec.stdout}${sec.stderr}`);
  if (!m) throw new Error(`systemd-analyze security printed no exposure level: ${sec.stderr}`);
  return { warnings, exposure: Number(m[1]) };
}

// ---------------------------------------------------------------------------------------------
// The supercluster (k8s/regions/, docs/regions.md "Deployment")

/** `over` laid over `base` the way Helm merges two `-f` values files (maps merged, the rest replaced). */
export function mergeValues<T>(base: T, over: unknown): T {
  if (typeof base !== 'object' || base === null || Array.isArray(base) || typeof over !== 'object' || over === null || Array.isArray(over))
    return over as T;
  const out: Record<string, unknown> = { ...(base as Record<string, unknown>) };
  for (const [k, v] of Object.entries(over)) out[k] = k in out ? mergeValues(out[k], v) : v;
  return out as T;
}

/**
 * Problems of the per-region chart values as one supercluster: each region's values (base +
 * overlay) are a valid 3-server JetStream cluster ({@link natsValuesProblems}); the cluster and
 * gateway names equal the region; the gateway is on with a port; every region's gateway list
 * names exactly the regions given, each with the url `urlOf(name)`, and refuses unknown clusters;
 * the servers are pinned to their region with `nodeSelector`.
 */
export function superclusterProblems(
  values: ReadonlyMap<string, NatsValues>,
  urlOf: (region: string) => string,
  regionLabel: string,
): string[] {
  const out: string[] = [];
  const regions = [...values.keys()].sort();
  for (const [r, v] of values) {
    out.push(...natsValuesProblems(v).map((p) => `region ${r}: ${p}`));
    const c = v.config ?? {};
    const g = c.gateway ?? {};
    if (g.enabled !== true) out.push(`region ${r}: the gateway is not enabled`);
    if (!Number.isInteger(g.port)) out.push(`region ${r}: no gateway port`);
    if (c.cluster?.merge?.name !== r) out.push(`region ${r}: cluster name ${c.cluster?.merge?.name} is not the region`);
    if (g.merge?.name !== r)
      out.push(`region ${r}: gateway name ${g.merge?.name} is not the region (NATS requires it to equal the cluster name)`);
    if (g.merge?.reject_unknown_cluster !== true) out.push(`region ${r}: the gateway accepts unknown clusters`);
    const listed = (g.merge?.gateways ?? []) as { name?: string; urls?: string[] }[];
    const names = listed.map((x) => x.name ?? '?').sort();
    if (JSON.stringify(names) !== JSON.stringify(regions))
      out.push(`region ${r}: gateways ${names.join(',')} are not the regions ${regions.join(',')}`);
    for (const x of listed) {
      if (x.name && JSON.stringify(x.urls) !== JSON.stringify([urlOf(x.name)]))
        out.push(`region ${r}: gateway ${x.name} urls ${JSON.stringify(x.urls)} are not [${urlOf(x.name)}]`);
    }
    // biome-ignore lint/suspicious/noExplicitAny: free-form Helm values.
    const sel = (v as any).podTemplate?.merge?.spec?.nodeSelector?.[regionLabel];
    if (sel !== r) out.push(`region ${r}: the servers are not pinned to the region (${regionLabel}: ${sel})`);
  }
  return out;
}
