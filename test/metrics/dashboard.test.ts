import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { parse } from 'yaml';
import { Histogram } from 'prom-client';
import { Metrics } from '../../src/metrics/metrics';
import { metricNames } from './promql-names';

const root = path.resolve(__dirname, '../..');
const dashboard = JSON.parse(
  readFileSync(path.join(root, 'grafana/dashboards/kafka-lance.json'), 'utf8'),
) as {
  uid: string;
  id: null;
  schemaVersion: number;
  templating: { list: { name: string; type: string; query: unknown }[] };
  panels: { id: number; title: string; datasource: unknown; targets: { expr: string; refId: string }[] }[];
};
const rules = parse(readFileSync(path.join(root, 'deploy/prometheus/alerts.yaml'), 'utf8')) as {
  groups: { name: string; rules: { alert: string; expr: string; for?: string }[] }[];
};

/** Families the process exports, with the series names histograms expand into, plus Prometheus's own `up`. */
function exportedSeries(): Set<string> {
  const metrics = new Metrics();
  const names = new Set<string>(['up']);
  for (const m of metrics.registry.getMetricsAsArray()) {
    names.add(m.name);
    if (m instanceof Histogram)
      for (const suffix of ['_bucket', '_sum', '_count']) names.add(m.name + suffix);
  }
  return names;
}

test('the PromQL name extractor finds metric names and only them', () => {
  expect(
    metricNames(
      'histogram_quantile(0.99, sum by (le, table) (rate(kafka_lance_source_wait_seconds_bucket{instance=~"a|b"}[5m]))) and on () up{job="x"} == 0',
    ).sort(),
  ).toEqual(['kafka_lance_source_wait_seconds_bucket', 'up']);
  expect(metricNames('deriv(sum by (topic) (kafka_lance_consumer_lag)[10m:1m]) > 0')).toEqual([
    'kafka_lance_consumer_lag',
  ]);
});

test('every PromQL expression in the dashboard and the alert rules reads only metrics the process exports', () => {
  const exported = exportedSeries();
  const exprs = [
    ...dashboard.panels.flatMap((p) => p.targets.map((t) => ({ where: `panel "${p.title}"`, expr: t.expr }))),
    ...rules.groups.flatMap((g) => g.rules.map((r) => ({ where: `alert ${r.alert}`, expr: r.expr }))),
  ];
  expect(exprs.length).toBeGreaterThan(15);
  const unknown = exprs.flatMap(({ where, expr }) =>
    metricNames(expr)
      .filter((n) => !exported.has(n))
      .map((n) => `${where}: ${n}`),
  );
  expect(unknown).toEqual([]);
  // And every required family appears somewhere on the dashboard.
  const used = new Set(
    exprs.flatMap(({ expr }) => metricNames(expr)).map((n) => n.replace(/_(bucket|sum|count)$/, '')),
  );
  for (const family of new Metrics().familyNames().filter((n) => n.startsWith('kafka_lance_'))) {
    expect([family, used.has(family)]).toEqual([family, true]);
  }
});

test('every panel query of a per-table family follows the table variable', () => {
  const perTable = new Set(
    new Metrics().registry
      .getMetricsAsArray()
      .filter((m) => (m as unknown as { labelNames: readonly string[] }).labelNames.includes('table'))
      .map((m) => m.name),
  );
  expect(perTable.size).toBeGreaterThan(10);
  const unfiltered = dashboard.panels.flatMap((p) =>
    p.targets
      .filter((t) => metricNames(t.expr).some((n) => perTable.has(n.replace(/_(bucket|sum|count)$/, ''))))
      .filter((t) => !t.expr.includes('table=~"$table"'))
      .map((t) => `${p.title}: ${t.expr}`),
  );
  expect(unfiltered).toEqual([]);
});

test('the dashboard has the structure Grafana imports', () => {
  expect(dashboard.uid).toBe('kafka-lance');
  expect(dashboard.id).toBeNull();
  expect(dashboard.schemaVersion).toBeGreaterThanOrEqual(30);
  expect(dashboard.templating.list.map((v) => [v.name, v.type])).toEqual([
    ['datasource', 'datasource'],
    ['instance', 'query'],
    ['table', 'query'],
  ]);
  const ids = new Set<number>();
  for (const p of dashboard.panels) {
    expect(ids.has(p.id)).toBe(false);
    ids.add(p.id);
    expect(p.datasource).toEqual({ type: 'prometheus', uid: '${datasource}' });
    expect(p.targets.length).toBeGreaterThan(0);
    for (const t of p.targets) expect(t.expr.length).toBeGreaterThan(0);
  }
});

test('provisioning files and alert rules parse with the fields Grafana and Prometheus need', () => {
  const datasource = parse(
    readFileSync(path.join(root, 'grafana/provisioning/datasources/prometheus.yaml'), 'utf8'),
  ) as {
    apiVersion: number;
    datasources: { name: string; type: string; uid: string; url: string; access: string }[];
  };
  expect(datasource.apiVersion).toBe(1);
  expect(datasource.datasources[0]).toMatchObject({ type: 'prometheus', access: 'proxy' });
  const provider = parse(
    readFileSync(path.join(root, 'grafana/provisioning/dashboards/kafka-lance.yaml'), 'utf8'),
  ) as {
    providers: { type: string; options: { path: string } }[];
  };
  expect(provider.providers[0]!.type).toBe('file');
  expect(provider.providers[0]!.options.path.length).toBeGreaterThan(0);
  const scrape = parse(readFileSync(path.join(root, 'deploy/prometheus/prometheus.yml'), 'utf8')) as {
    rule_files: string[];
    scrape_configs: { job_name: string }[];
  };
  expect(scrape.rule_files).toContain('alerts.yaml');
  expect(scrape.scrape_configs.map((c) => c.job_name)).toContain('kafka-lance');
  const alerts = rules.groups.flatMap((g) => g.rules.map((r) => r.alert));
  expect(alerts).toEqual(
    expect.arrayContaining([
      'KafkaLanceLagGrowing',
      'KafkaLanceDeadLetters',
      'KafkaLanceNoPublication',
      'KafkaLanceReplicaDown',
    ]),
  );
});

describe("the dashboard, its generator and Grafana's dashboard schema", () => {
  const generator = path.join(root, 'scripts/build-dashboard.js');
  const checkAgainstGenerator = (...file: string[]) =>
    spawnSync(process.execPath, [generator, '--check', ...file], { cwd: root, encoding: 'utf8' });
  const committed = readFileSync(path.join(root, 'grafana/dashboards/kafka-lance.json'), 'utf8');

  /** --check on a copy of the committed dashboard with one edit; fails if the edit does not apply. */
  function checkEditedCopy(from: string, to: string) {
    const edited = committed.replace(from, to);
    expect(edited).not.toBe(committed);
    const dir = mkdtempSync(path.join(tmpdir(), 'kl-dashboard-'));
    try {
      const copy = path.join(dir, 'kafka-lance.json');
      writeFileSync(copy, edited);
      return { edited, run: checkAgainstGenerator(copy) };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  test('the committed dashboard matches the schema and is exactly what scripts/build-dashboard.js writes', () => {
    const run = checkAgainstGenerator();
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
  });

  test('a hand edit of the dashboard JSON fails the check, naming the first line that differs', () => {
    const title = dashboard.panels[0]!.title;
    const { edited, run } = checkEditedCopy(`"title": "${title}"`, `"title": "${title} (edited)"`);
    const line = edited.split('\n').findIndex((l) => l.includes('(edited)')) + 1;
    expect(run.status).toBe(1);
    expect(run.stderr).toContain(`first at line ${line}: ${JSON.stringify(edited.split('\n')[line - 1])}`);
  });

  test("a panel field that Grafana's schema does not have fails the check, naming it", () => {
    const { run } = checkEditedCopy('"gridPos"', '"gridPosition"');
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(
      /kafka-lance\.json: panels\[\]\.gridPosition: Object literal may only specify known properties, and '"gridPosition"' does not exist in type 'Panel</,
    );
  });
});
