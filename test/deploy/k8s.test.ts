import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { loadConsumer, type ResolvedConsumer } from '../../src/config';
import { objectStoreProblems } from '../../src/lance/store-config';
import {
  argValue,
  defaultMetricsPort,
  defaultShutdownTimeoutMs,
  dockerInstructions,
  envMap,
  envNamesReadBySource,
  EXTERNAL_ENV,
  metricsServerPaths,
  read,
  yamlDocuments,
  yamlFiles,
} from './deploy-files';

const DIR = 'deploy/k8s';

interface Meta {
  name: string;
  labels?: Record<string, string>;
}
interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: Meta;
  spec?: unknown;
  data?: Record<string, string>;
  stringData?: Record<string, string>;
}
interface Probe {
  httpGet: { path: string; port: string | number };
}
interface Container {
  name: string;
  image: string;
  args?: string[];
  command?: string[];
  env?: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[];
  ports: { name: string; containerPort: number }[];
  readinessProbe: Probe;
  livenessProbe: Probe;
  resources: { requests: Record<string, string>; limits: Record<string, string> };
  volumeMounts: { name: string; mountPath: string; readOnly?: boolean }[];
}
interface StatefulSetSpec {
  serviceName: string;
  replicas: number;
  podManagementPolicy: string;
  selector: { matchLabels: Record<string, string> };
  template: {
    metadata: { labels: Record<string, string> };
    spec: {
      terminationGracePeriodSeconds: number;
      securityContext: { runAsNonRoot: boolean; runAsUser: number; fsGroup: number };
      containers: Container[];
      volumes: { name: string; configMap?: { name: string; items?: unknown[] } }[];
    };
  };
  volumeClaimTemplates: { metadata: { name: string }; spec: { accessModes: string[] } }[];
}

const files = yamlFiles(DIR);
const objectsByFile = new Map(files.map((f) => [f, yamlDocuments(`${DIR}/${f}`) as K8sObject[]]));
const kustomization = objectsByFile.get('kustomization.yaml')![0] as unknown as { resources: string[] };
const objects = kustomization.resources.flatMap((f) => objectsByFile.get(f) ?? []);
const find = (kind: string) => {
  const found = objects.filter((o) => o.kind === kind);
  expect(found).toHaveLength(1);
  return found[0]!;
};
const statefulSet = find('StatefulSet') as K8sObject & { spec: StatefulSetSpec };
const pod = statefulSet.spec.template;
const container = pod.spec.containers[0]!;
const env = envMap(container.env);
const podLabels = pod.metadata.labels;
const namedPort = (port: string | number) =>
  typeof port === 'number' ? port : container.ports.find((p) => p.name === port)?.containerPort;
const matches = (selector: Record<string, string>) =>
  Object.entries(selector).every(([k, v]) => podLabels[k] === v);
const configMap = find('ConfigMap');
const secretExample = objectsByFile.get('secret.example.yaml')![0]!;

/** The ConfigMap's definition through the project's own loader, with the StatefulSet's env. */
function loadConfigMapDefinition(key: string): ResolvedConsumer {
  const dir = mkdtempSync(path.join(tmpdir(), 'kl-k8s-'));
  try {
    const file = path.join(dir, key);
    writeFileSync(file, configMap.data![key]!);
    return loadConsumer(file, env);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('deploy/k8s', () => {
  test('every YAML parses, and the kustomization lists every manifest (the Secret is only an example)', () => {
    expect(files).toContain('kustomization.yaml');
    for (const [file, docs] of objectsByFile) {
      expect([file, docs.length]).toEqual([file, expect.any(Number)]);
      expect(docs.length).toBeGreaterThan(0);
      if (file === 'kustomization.yaml') continue;
      for (const o of docs) {
        expect([file, typeof o.apiVersion, typeof o.kind, typeof o.metadata?.name]).toEqual([
          file,
          'string',
          'string',
          'string',
        ]);
      }
    }
    const manifests = files.filter((f) => f !== 'kustomization.yaml' && f !== 'secret.example.yaml');
    expect([...kustomization.resources].sort()).toEqual(manifests);
    // The Secret is never applied from the repository.
    expect(objects.filter((o) => o.kind === 'Secret')).toEqual([]);
  });

  test('has each kind with the API version the issue asks for', () => {
    const kinds = Object.fromEntries(objects.map((o) => [o.kind, o.apiVersion]));
    expect(kinds).toMatchObject({
      StatefulSet: 'apps/v1',
      Service: 'v1',
      ConfigMap: 'v1',
      PodDisruptionBudget: 'policy/v1',
      PodMonitor: 'monitoring.coreos.com/v1',
      ScaledObject: 'keda.sh/v1alpha1',
    });
  });

  test('StatefulSet: 3 replicas in parallel, a claim per replica mounted at the data dir', () => {
    const spec = statefulSet.spec;
    expect(spec.replicas).toBe(3);
    expect(spec.podManagementPolicy).toBe('Parallel');
    expect(matches(spec.selector.matchLabels)).toBe(true);
    expect(spec.volumeClaimTemplates).toHaveLength(1);
    const claim = spec.volumeClaimTemplates[0]!;
    expect(claim.spec.accessModes).toEqual(['ReadWriteOnce']);
    const dataMount = container.volumeMounts.find((m) => m.name === claim.metadata.name);
    expect(dataMount?.mountPath).toBe(env.KAFKA_LANCE_DATA_DIR);
    // The same directory the image declares as its VOLUME.
    const volume = dockerInstructions('deploy/Dockerfile').filter((i) => i.instruction === 'VOLUME');
    expect(env.KAFKA_LANCE_DATA_DIR).toBe(volume.at(-1)!.args);
    expect(pod.spec.securityContext.runAsNonRoot).toBe(true);
    expect(pod.spec.securityContext.runAsUser).toBeGreaterThan(0);
    expect(pod.spec.securityContext.fsGroup).toBeGreaterThan(0); // the claim is writable by that user
  });

  test('the -c path is where the ConfigMap is mounted, and its definition loads with the manifest env', () => {
    const args = [...(container.command ?? []), ...(container.args ?? [])];
    expect(args[0]).toBe('run');
    const file = argValue(args, '-c')!;
    const mount = container.volumeMounts.find((m) => m.mountPath === path.posix.dirname(file))!;
    expect(mount).toBeDefined();
    expect(mount.readOnly).toBe(true);
    const volume = pod.spec.volumes.find((v) => v.name === mount.name)!;
    expect(volume.configMap?.name).toBe(configMap.metadata.name);
    expect(volume.configMap?.items).toBeUndefined(); // keys are file names
    const key = path.posix.basename(file);
    expect(Object.keys(configMap.data!)).toContain(key);
    expect(key).toMatch(/\.json$/); // no TypeScript needed at run time
    const consumer = loadConfigMapDefinition(key);
    expect(consumer.brokers).toEqual(env.KAFKA_BOOTSTRAP_SERVERS!.split(','));
    expect(consumer.dataDir).toBe(env.KAFKA_LANCE_DATA_DIR);
    // Replicas on different nodes share the table: it must be on an object store.
    expect(consumer.lance.uri).toMatch(/^s3:\/\//);
    expect(objectStoreProblems(consumer.lance.uri!, consumer.lance.storageOptions, env)).toEqual([]);
  });

  test('env names are ones the process or LanceDB reads; credentials come from the Secret', () => {
    const known = envNamesReadBySource();
    for (const name of Object.keys(env)) {
      expect([name, known.has(name) || EXTERNAL_ENV.has(name)]).toEqual([name, true]);
    }
    const refs = (container.env ?? []).filter((e) => e.valueFrom?.secretKeyRef);
    expect(refs.map((e) => e.name).sort()).toEqual(['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY']);
    for (const { valueFrom } of refs) {
      expect(valueFrom!.secretKeyRef!.name).toBe(secretExample.metadata.name);
      expect(Object.keys(secretExample.stringData!)).toContain(valueFrom!.secretKeyRef!.key);
    }
    for (const value of Object.values(secretExample.stringData!)) expect(value).toBe('REPLACE_ME');
  });

  test('probes: /readyz and /healthz, paths the metrics server answers, on the metrics port', () => {
    const port = Number(env.KAFKA_LANCE_METRICS_PORT ?? defaultMetricsPort());
    expect(port).toBe(defaultMetricsPort());
    expect(container.ports).toEqual([{ name: 'metrics', containerPort: port }]);
    expect(container.readinessProbe.httpGet.path).toBe('/readyz');
    expect(container.livenessProbe.httpGet.path).toBe('/healthz');
    for (const probe of [container.readinessProbe, container.livenessProbe]) {
      expect(metricsServerPaths()).toContain(probe.httpGet.path);
      expect(namedPort(probe.httpGet.port)).toBe(port);
    }
  });

  test('terminationGracePeriodSeconds covers the graceful-stop timeout', () => {
    const timeout = Number(env.KAFKA_LANCE_SHUTDOWN_TIMEOUT_MS ?? defaultShutdownTimeoutMs());
    expect(pod.spec.terminationGracePeriodSeconds * 1000).toBeGreaterThanOrEqual(timeout + 10_000);
  });

  test('resources: requests at least the benchmark peak RSS, limits above the requests', () => {
    const mib = (q: string) => {
      const m = /^(\d+)(Mi|Gi)$/.exec(q)!;
      return Number(m[1]) * (m[2] === 'Gi' ? 1024 : 1);
    };
    const cpu = (q: string) => (q.endsWith('m') ? Number(q.slice(0, -1)) / 1000 : Number(q));
    const { requests, limits } = container.resources;
    // The ingestion table of bench/README.md: the "replica peak RSS" column.
    const bench = read('bench/README.md');
    const section = bench.slice(bench.indexOf('## Ingestion throughput'), bench.indexOf('## Materializer'));
    const header = section.split('\n').find((l) => l.includes('replica peak RSS'))!;
    const column = header.split('|').findIndex((c) => c.includes('replica peak RSS'));
    const peaks = section
      .split('\n')
      .filter((l) => /^\| \d{4}-/.test(l))
      .flatMap((l) =>
        [...l.split('|')[column]!.matchAll(/[\d,]+/g)].map((m) => Number(m[0].replace(/,/g, ''))),
      );
    expect(peaks.length).toBeGreaterThan(0);
    expect(mib(requests.memory!)).toBeGreaterThanOrEqual(Math.max(...peaks) * 0.95);
    expect(mib(limits.memory!)).toBeGreaterThanOrEqual(2 * mib(requests.memory!));
    expect(cpu(limits.cpu!)).toBeGreaterThanOrEqual(cpu(requests.cpu!));
    // The default bounds the comment sizes from still hold in the definition.
    const consumer = loadConfigMapDefinition('consumer.json');
    const inFlight =
      consumer.queue.maxBytes +
      consumer.materializer.sourceReservationBytes +
      4 * consumer.materializer.maxPublicationBytes;
    expect(mib(requests.memory!) * 2 ** 20).toBeGreaterThan(inFlight);
  });

  test('the headless Service, the PDB and the PodMonitor select the pods; the PodMonitor scrapes /metrics as job kafka-lance', () => {
    const service = find('Service') as K8sObject & {
      spec: { clusterIP: string; selector: Record<string, string>; ports: { targetPort: string | number }[] };
    };
    expect(service.spec.clusterIP).toBe('None');
    expect(statefulSet.spec.serviceName).toBe(service.metadata.name);
    expect(matches(service.spec.selector)).toBe(true);
    for (const p of service.spec.ports) expect(namedPort(p.targetPort)).toBe(defaultMetricsPort());

    const pdb = find('PodDisruptionBudget') as K8sObject & {
      spec: { maxUnavailable: number; selector: { matchLabels: Record<string, string> } };
    };
    expect(pdb.spec.maxUnavailable).toBe(1);
    expect(matches(pdb.spec.selector.matchLabels)).toBe(true);

    const monitor = find('PodMonitor') as K8sObject & {
      spec: {
        jobLabel: string;
        selector: { matchLabels: Record<string, string> };
        podMetricsEndpoints: { port: string; path: string }[];
      };
    };
    expect(matches(monitor.spec.selector.matchLabels)).toBe(true);
    for (const e of monitor.spec.podMetricsEndpoints) {
      expect(namedPort(e.port)).toBe(defaultMetricsPort());
      expect(metricsServerPaths()).toContain(e.path);
      expect(e.path).toBe('/metrics');
    }
    // The alert rules and the dashboard select job="kafka-lance".
    const job = podLabels[monitor.spec.jobLabel];
    expect(read('deploy/prometheus/alerts.yaml')).toContain(`job="${job}"`);
  });

  test('the KEDA ScaledObject scales the StatefulSet on the lag of its group, up to the partition count', () => {
    const scaled = find('ScaledObject') as K8sObject & {
      spec: {
        scaleTargetRef: { kind: string; name: string };
        minReplicaCount: number;
        maxReplicaCount: number;
        triggers: { type: string; metadata: Record<string, string> }[];
      };
    };
    expect(scaled.spec.scaleTargetRef).toMatchObject({
      kind: 'StatefulSet',
      name: statefulSet.metadata.name,
    });
    const consumer = loadConfigMapDefinition('consumer.json');
    expect(scaled.spec.triggers).toHaveLength(1);
    const { type, metadata } = scaled.spec.triggers[0]!;
    expect(type).toBe('kafka');
    expect(metadata.consumerGroup).toBe(consumer.groupId);
    expect(consumer.topics).toContain(metadata.topic);
    expect(metadata.bootstrapServers).toBe(env.KAFKA_BOOTSTRAP_SERVERS);
    expect(metadata.offsetResetPolicy).toBe(consumer.fromBeginning ? 'earliest' : 'latest');
    expect(Number(metadata.lagThreshold)).toBeGreaterThan(0);
    // app-logs has 6 partitions (created so by the compose stack and the demo).
    const compose = read('deploy/compose/docker-compose.yml').replace(/\s+/g, ' ');
    const partitions = Number(/--topic app-logs --partitions (\d+)/.exec(compose)![1]);
    expect(scaled.spec.maxReplicaCount).toBe(partitions);
    expect(read(`${DIR}/scaledobject.yaml`)).toMatch(/maxReplicaCount = the partitions/);
    expect(scaled.spec.minReplicaCount).toBeLessThanOrEqual(statefulSet.spec.replicas);
    expect(statefulSet.spec.replicas).toBeLessThanOrEqual(scaled.spec.maxReplicaCount);
  });

  test('names and labels agree across the manifests', () => {
    for (const o of objects.filter((o) => o.kind !== 'Namespace')) {
      expect([o.kind, o.metadata.labels?.['app.kubernetes.io/name']]).toEqual([o.kind, 'kafka-lance']);
    }
    const namespace = find('Namespace');
    expect((kustomization as unknown as { namespace: string }).namespace).toBe(namespace.metadata.name);
  });
});
