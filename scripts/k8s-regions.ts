/**
 * Writes the multi-region deployment in k8s/regions/ (docs/regions.md "Deployment") from the
 * single-region manifests, so the two never drift: `npx tsx scripts/k8s-regions.ts [--check]`.
 *
 * Per region `r` of {@link REGIONS}:
 * - `nats-values-<r>.yaml`: values for the official NATS Helm chart laid over k8s/nats-values.yaml
 *   (`helm install nats-<r> nats/nats --namespace nats -f k8s/nats-values.yaml -f
 *   k8s/regions/nats-values-<r>.yaml`): a 3-server JetStream cluster named `<r>` on the region's
 *   Kubernetes nodes, with a gateway (port 7222) to every other region's cluster: together a
 *   supercluster;
 * - `nodes-<r>.yaml`: the region's node config (its own NATS release's Service) and a StatefulSet
 *   `jcp-node-<r>` pinned to the region, otherwise the StatefulSet of k8s/statefulset.yaml.
 *
 * `--check` writes nothing and exits 1 if a file differs from what it would write.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments, stringify } from 'yaml';

/** The regions of the sample deployment (the NATS cluster and gateway names). */
export const REGIONS = ['a', 'b', 'c'] as const;
/** The node label that places a pod in a region (a well-known Kubernetes label). */
export const REGION_LABEL = 'topology.kubernetes.io/region';
/** The pod label that names a node's region. */
export const JCP_REGION_LABEL = 'jcp.dev/region';
/** The NATS gateway port. */
export const GATEWAY_PORT = 7222;

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

// biome-ignore lint/suspicious/noExplicitAny: Kubernetes objects are free-form here.
type Obj = any;

function docs(file: string): Obj[] {
  return parseAllDocuments(readFileSync(path.join(ROOT, file), 'utf8')).map((d) => d.toJS());
}

/** The gateway url of region `r`'s NATS release (its headless Service, namespace `nats`). */
export function gatewayUrl(r: string): string {
  return `nats://nats-${r}-headless.nats.svc.cluster.local:${GATEWAY_PORT}`;
}

/** The chart values for region `r` (laid over k8s/nats-values.yaml). */
export function regionValues(r: string): Obj {
  return {
    config: {
      cluster: { merge: { name: r } },
      gateway: {
        enabled: true,
        port: GATEWAY_PORT,
        merge: {
          name: r,
          reject_unknown_cluster: true,
          gateways: REGIONS.map((o) => ({ name: o, urls: [gatewayUrl(o)] })),
        },
      },
    },
    podTemplate: { merge: { spec: { nodeSelector: { [REGION_LABEL]: r } } } },
  };
}

/** The node ConfigMap and StatefulSet of region `r`, made from k8s/configmap.yaml and k8s/statefulset.yaml. */
export function regionNodes(r: string): Obj[] {
  const cm = docs('k8s/configmap.yaml')[0];
  const sts = docs('k8s/statefulset.yaml')[0];
  cm.metadata.name = `jcp-node-config-${r}`;
  cm.metadata.labels[JCP_REGION_LABEL] = r;
  const cfg = JSON.parse(cm.data['node.json']);
  cfg.nats = `nats://nats-${r}.nats.svc.cluster.local:4222`;
  cm.data['node.json'] = `${JSON.stringify(cfg, null, 2)}\n`;
  sts.metadata.name = `jcp-node-${r}`;
  sts.metadata.labels[JCP_REGION_LABEL] = r;
  sts.spec.selector.matchLabels[JCP_REGION_LABEL] = r;
  const pod = sts.spec.template;
  pod.metadata.labels[JCP_REGION_LABEL] = r;
  pod.spec.nodeSelector = { ...(pod.spec.nodeSelector ?? {}), [REGION_LABEL]: r };
  for (const v of pod.spec.volumes) if (v.configMap?.name === 'jcp-node-config') v.configMap.name = `jcp-node-config-${r}`;
  return [cm, sts];
}

/** Every file of k8s/regions/ with its text. */
export function regionFiles(): Map<string, string> {
  const out = new Map<string, string>();
  for (const r of REGIONS) {
    out.set(
      `nats-values-${r}.yaml`,
      `# Region ${r} of the supercluster (docs/regions.md "Deployment"), over k8s/nats-values.yaml:\n#\n#   helm install nats-${r} nats/nats --namespace nats -f k8s/nats-values.yaml -f k8s/regions/nats-values-${r}.yaml\n#\n# Written by scripts/k8s-regions.ts; edit that, not this file.\n${stringify(regionValues(r))}`,
    );
    out.set(
      `nodes-${r}.yaml`,
      `# The enforcement nodes of region ${r} (docs/regions.md "Deployment"): k8s/statefulset.yaml and\n# k8s/configmap.yaml pinned to the region's Kubernetes nodes (${REGION_LABEL}: ${r}) and\n# connected to the region's own NATS release (nats-${r}). Written by scripts/k8s-regions.ts.\n${regionNodes(
        r,
      )
        .map((o) => stringify(o))
        .join('---\n')}`,
    );
  }
  return out;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const check = process.argv.includes('--check');
  let stale = 0;
  for (const [name, text] of regionFiles()) {
    const file = path.join(ROOT, 'k8s', 'regions', name);
    let old = '';
    try {
      old = readFileSync(file, 'utf8');
    } catch {
      // new file
    }
    if (old === text) continue;
    stale++;
    if (check) process.stderr.write(`${file} is not what scripts/k8s-regions.ts writes\n`);
    else writeFileSync(file, text);
  }
  if (check && stale > 0) process.exit(1);
}
