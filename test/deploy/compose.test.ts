import { existsSync } from 'node:fs';
import * as path from 'node:path';
import { loadConsumer } from '../../src/config';
import { objectStoreProblems } from '../../src/lance/store-config';
import {
  ROOT,
  argValue,
  defaultMetricsPort,
  defaultShutdownTimeoutMs,
  dockerInstructions,
  envMap,
  envNamesReadBySource,
  EXTERNAL_ENV,
  yamlDocuments,
} from './deploy-files';

interface Service {
  image?: string;
  build?: { context: string; dockerfile: string };
  command?: string[];
  entrypoint?: string[];
  environment?: unknown;
  hostname?: string;
  ports?: string[];
  volumes?: string[];
  depends_on?: Record<string, { condition: string }> | string[];
  stop_grace_period?: string;
  profiles?: string[];
}
interface Compose {
  services: Record<string, Service>;
  volumes: Record<string, unknown>;
}

const COMPOSE_DIR = 'deploy/compose';
const docs = yamlDocuments(`${COMPOSE_DIR}/docker-compose.yml`);
const compose = docs[0] as Compose;
const services = compose.services;
const replicas = Object.entries(services).filter(([, s]) => s.command?.[0] === 'run');
const fromCompose = (p: string) => path.resolve(ROOT, COMPOSE_DIR, p);
const mounts = (s: Service) =>
  (s.volumes ?? []).map((v) => {
    const [source, target, mode] = v.split(':') as [string, string, string?];
    return { source, target, mode };
  });
const shellOf = (s: Service) => (s.command ?? []).join(' ').replace(/\s+/g, ' ');
const seconds = (d: string) => Number(/^(\d+)s$/.exec(d)?.[1] ?? NaN);

describe('deploy/compose/docker-compose.yml', () => {
  test('is one YAML document with the whole stack', () => {
    expect(docs).toHaveLength(1);
    expect(Object.keys(services)).toEqual(
      expect.arrayContaining(['kafka', 'minio', 'minio-bucket', 'prometheus', 'grafana']),
    );
    expect(services.kafka!.image).toMatch(/^apache\/kafka:3\.9\.1$/);
    expect(services.prometheus!.image).toMatch(/^prom\/prometheus:/);
    expect(services.grafana!.image).toMatch(/^grafana\/grafana:/);
  });

  test('three replicas built from deploy/Dockerfile, a data volume and a stable hostname each', () => {
    expect(replicas.map(([name]) => name)).toEqual(['kafka-lance-0', 'kafka-lance-1', 'kafka-lance-2']);
    const dataVolumes = new Set<string>();
    const hostPorts = new Set<string>();
    for (const [name, s] of replicas) {
      expect(s.build).toEqual({ context: '../..', dockerfile: 'deploy/Dockerfile' });
      expect(existsSync(path.join(fromCompose(s.build!.context), s.build!.dockerfile))).toBe(true);
      // The data-dir lock names the hostname: a fixed one recognises its own stale lock.
      expect(s.hostname).toBe(name);
      const env = envMap(s.environment);
      const data = mounts(s).find((m) => m.target === env.KAFKA_LANCE_DATA_DIR);
      expect(data).toBeDefined();
      expect(Object.keys(compose.volumes)).toContain(data!.source);
      dataVolumes.add(data!.source);
      for (const p of s.ports ?? []) hostPorts.add(p.split(':')[0]!);
    }
    expect(dataVolumes.size).toBe(3);
    expect(hostPorts.size).toBe(3);
  });

  test('the data dir is the image VOLUME, the metrics port the CLI default or the env, on every replica', () => {
    const volume = dockerInstructions('deploy/Dockerfile').filter((i) => i.instruction === 'VOLUME');
    for (const [, s] of replicas) {
      const env = envMap(s.environment);
      expect(env.KAFKA_LANCE_DATA_DIR).toBe(volume.at(-1)!.args);
      const port = Number(
        argValue(s.command!, '--metrics-port') ?? env.KAFKA_LANCE_METRICS_PORT ?? defaultMetricsPort(),
      );
      expect(port).toBe(defaultMetricsPort());
      for (const p of s.ports ?? []) expect(Number(p.split(':')[1])).toBe(port);
    }
  });

  test('replicas set only environment variables the process or LanceDB reads', () => {
    const known = envNamesReadBySource();
    for (const name of ['KAFKA_BOOTSTRAP_SERVERS', 'KAFKA_LANCE_DATA_DIR', 'KAFKA_LANCE_METRICS_PORT']) {
      expect(known).toContain(name); // the scan of src/ finds what it must
    }
    for (const [, s] of Object.entries(services).filter(([, s]) => s.image === 'kafka-lance:dev')) {
      for (const name of Object.keys(envMap(s.environment))) {
        expect([name, known.has(name) || EXTERNAL_ENV.has(name)]).toEqual([name, true]);
      }
    }
  });

  test('the graceful stop fits in stop_grace_period (compose defaults to 10 s)', () => {
    for (const [, s] of replicas) {
      const timeout = Number(
        envMap(s.environment).KAFKA_LANCE_SHUTDOWN_TIMEOUT_MS ?? defaultShutdownTimeoutMs(),
      );
      expect(seconds(s.stop_grace_period ?? '10s') * 1000).toBeGreaterThan(timeout);
    }
  });

  test('the definition passed to -c is the mounted app-logs.json, and it loads with the env of the replicas', () => {
    for (const [, s] of replicas) {
      const file = argValue(s.command!, '-c');
      const mount = mounts(s).find((m) => m.target === file);
      expect(mount).toBeDefined();
      expect(mount!.mode).toBe('ro');
      expect(existsSync(fromCompose(mount!.source))).toBe(true);
      const env = envMap(s.environment);
      const consumer = loadConsumer(fromCompose(mount!.source), env);
      expect(consumer.brokers).toEqual(env.KAFKA_BOOTSTRAP_SERVERS!.split(','));
      expect(consumer.dataDir).toBe(path.resolve(env.KAFKA_LANCE_DATA_DIR!));
      expect(objectStoreProblems(consumer.lance.uri!, consumer.lance.storageOptions, env)).toEqual([]);
    }
  });

  test('app-logs.json is consumers/app-logs.ts plus an s3:// table', () => {
    const env = { KAFKA_BOOTSTRAP_SERVERS: 'kafka:9092' };
    const json = loadConsumer(fromCompose('app-logs.json'), env);
    const ts = loadConsumer(path.join(ROOT, 'consumers/app-logs.ts'), env);
    const strip = ({ source: _s, lance: _l, ...rest }: typeof json) => rest;
    expect(strip(json)).toEqual(strip(ts));
    expect(json.lance.uri).toMatch(/^s3:\/\//);
  });

  test('brokers, topics, bucket and credentials agree with the kafka, kafka-topics and minio services', () => {
    const [, replica] = replicas[0]!;
    const env = envMap(replica.environment);
    const consumer = loadConsumer(fromCompose('app-logs.json'), env);
    // Brokers: the kafka service's advertised PLAINTEXT listener.
    const kafkaEnv = envMap(services.kafka!.environment);
    for (const b of consumer.brokers)
      expect(kafkaEnv.KAFKA_ADVERTISED_LISTENERS!.split(',')).toContain(`PLAINTEXT://${b}`);
    // Topics: a replica refuses to start on a missing topic; kafka-topics creates them first.
    const created = [...shellOf(services['kafka-topics']!).matchAll(/--topic (\S+)/g)].map((m) => m[1]);
    const deadLetter = consumer.deadLetter;
    expect(deadLetter && 'topic' in deadLetter).toBe(true);
    const dlq = deadLetter && 'topic' in deadLetter ? [deadLetter.topic] : [];
    for (const topic of [...consumer.topics!, ...dlq]) expect(created).toContain(topic);
    expect(kafkaEnv.KAFKA_AUTO_CREATE_TOPICS_ENABLE).toBe('false');
    // The bucket of lance.uri is created by minio-bucket, on the endpoint's host.
    const bucket = /^s3:\/\/([^/]+)/.exec(consumer.lance.uri!)![1]!;
    expect(shellOf(services['minio-bucket']!)).toContain(`mc mb --ignore-existing local/${bucket}`);
    const endpoint = new URL(consumer.lance.storageOptions!.endpoint!);
    expect(Object.keys(services)).toContain(endpoint.hostname);
    expect(shellOf(services['minio-bucket']!)).toContain(`http://${endpoint.host}`);
    expect(consumer.lance.storageOptions!.allow_http).toBe('true');
    // Credentials: the replicas' AWS_* are MinIO's root user.
    const minio = envMap(services.minio!.environment);
    expect(env.AWS_ACCESS_KEY_ID).toBe(minio.MINIO_ROOT_USER);
    expect(env.AWS_SECRET_ACCESS_KEY).toBe(minio.MINIO_ROOT_PASSWORD);
    // Replicas wait for both one-shot jobs.
    for (const [, s] of replicas) {
      expect(s.depends_on).toEqual({
        'kafka-topics': { condition: 'service_completed_successfully' },
        'minio-bucket': { condition: 'service_completed_successfully' },
      });
    }
  });

  test('Prometheus mounts the shared scrape config and alert rules, which scrape the three replicas', () => {
    const prometheus = services.prometheus!;
    const config = argValue(
      (prometheus.command ?? []).flatMap((a) => a.split('=')),
      '--config.file',
    );
    const m = mounts(prometheus);
    const configMount = m.find((x) => x.target === config)!;
    expect(fromCompose(configMount.source)).toBe(path.join(ROOT, 'deploy/prometheus/prometheus.yml'));
    const scrape = yamlDocuments('deploy/prometheus/prometheus.yml')[0] as {
      rule_files: string[];
      scrape_configs: { job_name: string; metrics_path?: string; static_configs: { targets: string[] }[] }[];
    };
    // rule_files resolve next to the config file.
    for (const rules of scrape.rule_files) {
      const mount = m.find((x) => x.target === path.posix.join(path.posix.dirname(config!), rules));
      expect(mount).toBeDefined();
      expect(existsSync(fromCompose(mount!.source))).toBe(true);
    }
    const job = scrape.scrape_configs.find((j) => j.job_name === 'kafka-lance')!;
    expect(job.metrics_path ?? '/metrics').toBe('/metrics');
    const targets = job.static_configs.flatMap((c) => c.targets).sort();
    expect(targets).toEqual(
      replicas.map(
        ([name, s]) => `${name}:${envMap(s.environment).KAFKA_LANCE_METRICS_PORT ?? defaultMetricsPort()}`,
      ),
    );
  });

  test('Grafana gets the provisioning and the dashboard where the provider looks, and the data source URL is the prometheus service', () => {
    const m = mounts(services.grafana!);
    const provisioning = m.find((x) => x.target === '/etc/grafana/provisioning')!;
    expect(fromCompose(provisioning.source)).toBe(path.join(ROOT, 'grafana/provisioning'));
    const provider = yamlDocuments('grafana/provisioning/dashboards/kafka-lance.yaml')[0] as {
      providers: { options: { path: string } }[];
    };
    const dashboards = m.find((x) => x.target === provider.providers[0]!.options.path)!;
    expect(dashboards).toBeDefined();
    expect(existsSync(path.join(fromCompose(dashboards.source), 'kafka-lance.json'))).toBe(true);
    const datasource = yamlDocuments('grafana/provisioning/datasources/prometheus.yaml')[0] as {
      datasources: { url: string }[];
    };
    const url = new URL(datasource.datasources[0]!.url);
    expect(url.hostname).toBe('prometheus');
    expect((services.prometheus!.ports ?? []).map((p) => p.split(':')[1])).toContain(url.port);
  });

  test('every bind-mounted file or directory exists', () => {
    for (const [, s] of Object.entries(services)) {
      for (const { source } of mounts(s)) {
        if (source.startsWith('.')) expect([source, existsSync(fromCompose(source))]).toEqual([source, true]);
        else expect(Object.keys(compose.volumes)).toContain(source);
      }
    }
  });
});
