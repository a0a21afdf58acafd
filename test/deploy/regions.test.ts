/**
 * The multi-region deployment in k8s/regions/ (docs/regions.md "Deployment"): per region, NATS
 * chart values that with the single-region values form one supercluster (a cluster per region,
 * gateways between them), and a StatefulSet of nodes pinned to the region and wired to its own
 * NATS release, validated as k8s/ is (schemas, strict fields, API server rules, the restricted
 * Pod Security Standard, the node's own config loader, the wiring to Services, NetworkPolicy and
 * the chart's Service). The files are what scripts/k8s-regions.ts writes from k8s/.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { configFromJson } from '../../node/index.ts';
import { GATEWAY_PORT, gatewayUrl, JCP_REGION_LABEL, REGION_LABEL, REGIONS, regionFiles } from '../../scripts/k8s-regions.ts';
import {
  apiServerProblems,
  clone,
  type K8sObject,
  label,
  loadManifests,
  mergeValues,
  type NatsValues,
  natsChartService,
  parseYamlDocs,
  ROOT,
  restrictedProblems,
  schemaProblems,
  strictFieldProblems,
  superclusterProblems,
  wiringProblems,
} from './checks.ts';

const read = (f: string) => readFileSync(path.join(ROOT, f), 'utf8');
const base = parseYamlDocs(read('k8s/nats-values.yaml'), 'nats-values.yaml')[0] as NatsValues;
const values = new Map(
  REGIONS.map((r) => [r, mergeValues(base, parseYamlDocs(read(`k8s/regions/nats-values-${r}.yaml`), `nats-values-${r}.yaml`)[0])] as const),
);
const regional = loadManifests(path.join(ROOT, 'k8s', 'regions')).filter((l) => l.file.startsWith('nodes-'));
const single = loadManifests().map((l) => l.obj);
const find = (list: readonly K8sObject[], kind: string, name: string): K8sObject => {
  const o = list.find((x) => x.kind === kind && x.metadata.name === name);
  if (!o) throw new Error(`no ${kind}/${name}`);
  return o;
};

describe('k8s/regions - the supercluster values', () => {
  test('the files are what scripts/k8s-regions.ts writes from k8s/', () => {
    for (const [name, text] of regionFiles()) expect(read(`k8s/regions/${name}`), name).toBe(text);
  });

  test('each region is a 3-server JetStream cluster named for it, with gateways to every region', () => {
    expect(superclusterProblems(values, gatewayUrl, REGION_LABEL)).toEqual([]);
    expect(values.get('b')?.config.gateway.port).toBe(GATEWAY_PORT);
  });

  test.each([
    [
      'a region missing from one gateway list',
      (v: NatsValues) => v.config.gateway.merge.gateways.pop(),
      /gateways a,b are not the regions a,b,c/,
    ],
    [
      'a gateway name that is not the cluster name',
      (v: NatsValues) => (v.config.gateway.merge.name = 'east'),
      /gateway name east is not the region/,
    ],
    [
      'a gateway url of another release',
      (v: NatsValues) => (v.config.gateway.merge.gateways[0].urls = ['nats://nats-headless.nats.svc.cluster.local:7222']),
      /gateway a urls/,
    ],
    ['gateways off', (v: NatsValues) => (v.config.gateway.enabled = false), /gateway is not enabled/],
    [
      'a misspelt gateway value',
      (v: NatsValues) => (v.config.gateway.gateways = []),
      /config\.gateway\.gateways is not a value the chart reads/,
    ],
    ['servers not pinned to their region', (v: NatsValues) => delete (v as { podTemplate?: unknown }).podTemplate, /not pinned/],
  ])('refused / %s', (_what, edit, why) => {
    const copy = new Map([...values].map(([r, v]) => [r, clone(v)] as const));
    edit(copy.get('c')!);
    expect(superclusterProblems(copy, gatewayUrl, REGION_LABEL).join('\n')).toMatch(why);
  });
});

describe('k8s/regions - the nodes of each region', () => {
  test('one ConfigMap and one StatefulSet per region', () => {
    expect(regional.map((l) => label(l.obj)).sort()).toEqual(
      REGIONS.flatMap((r) => [`ConfigMap/jcp-node-config-${r}`, `StatefulSet/jcp-node-${r}`]).sort(),
    );
  });

  test.each(regional.map((l) => [`${l.file} ${label(l.obj)}`, l.obj] as const))(
    'valid / %s against its schema and the API server rules',
    async (_n, o) => {
      expect(await schemaProblems(o)).toEqual([]);
      expect(apiServerProblems(o)).toEqual([]);
    },
  );

  test('no field their schemas do not define', () => {
    expect(strictFieldProblems(regional.map((l) => l.obj))).toEqual([]);
  });

  test.each(REGIONS.map((r) => [r]))(
    'region %s: restricted pods pinned to the region, a config the node accepts, wired to its own NATS release',
    (r) => {
      const objs = regional.map((l) => l.obj);
      const sts = find(objs, 'StatefulSet', `jcp-node-${r}`);
      const pod = sts.spec.template.spec;
      expect(restrictedProblems(label(sts), pod)).toEqual([]);
      expect(pod.nodeSelector).toEqual({ [REGION_LABEL]: r });
      expect(sts.spec.selector.matchLabels[JCP_REGION_LABEL]).toBe(r);
      expect(sts.spec.template.metadata.labels[JCP_REGION_LABEL]).toBe(r);
      const cm = find(objs, 'ConfigMap', `jcp-node-config-${r}`);
      const node = pod.containers.find((c: { name: string }) => c.name === 'node');
      const cfgBase = path.posix.dirname(node.args[node.args.indexOf('--config') + 1]);
      const cfg = configFromJson(JSON.parse(cm.data?.['node.json'] ?? 'null'), {}, cfgBase);
      // The region's objects in place of the single-region ConfigMap and StatefulSet; the Services and NetworkPolicy are shared.
      const rest = single.filter((o) => o.kind !== 'ConfigMap' && o.kind !== 'StatefulSet');
      const asSingle = clone([cm, sts]);
      asSingle[0]!.metadata.name = 'jcp-node-config';
      for (const v of asSingle[1]!.spec.template.spec.volumes) if (v.configMap) v.configMap.name = 'jcp-node-config';
      const nats = natsChartService(`nats-${r}`, 'nats', values.get(r)!);
      expect(wiringProblems([...rest, ...asSingle], cfg, nats)).toEqual([]);
      // The same node config wired to another region's NATS is refused.
      expect(
        wiringProblems([...rest, ...asSingle], cfg, natsChartService(`nats-${r === 'a' ? 'b' : 'a'}`, 'nats', values.get(r)!)).join('\n'),
      ).toMatch(/chart's Service/);
    },
  );
});
