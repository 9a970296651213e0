#!/usr/bin/env node
'use strict';
/**
 * Writes grafana/dashboards/kafka-lance.json. The dashboard is generated so that
 * every panel has the same shape (datasource variable, instance filter, units);
 * edit this file, run it, and commit both. It refuses to write a dashboard that Grafana's
 * dashboard schema (@grafana/schema) rejects. `--check [file]` writes nothing and exits 1
 * when the file (default: the committed dashboard) fails that schema or differs from what
 * it would write.
 */
const fs = require('node:fs');
const path = require('node:path');
const { typeCheckLiterals } = require('./typed-literals.js');

const ds = { type: 'prometheus', uid: '${datasource}' };
const sel = 'instance=~"$instance"';
/** Per-table families: the `table` variable picks the tables shown (All by default). */
const tsel = `${sel},table=~"$table"`;
let id = 0;
const panel = (title, unit, targets, gridPos, extra = {}) => ({
  id: ++id,
  type: 'timeseries',
  title,
  datasource: ds,
  gridPos,
  fieldConfig: { defaults: { unit }, overrides: [] },
  options: { legend: { displayMode: 'list', placement: 'bottom' }, tooltip: { mode: 'multi' } },
  targets: targets.map(([expr, legendFormat], i) => ({
    refId: String.fromCharCode(65 + i),
    datasource: ds,
    expr,
    legendFormat,
  })),
  ...extra,
});
const row =
  (y) =>
  (x, w = 8, h = 8) => ({ x, y, w, h });

const rate = (m, s = sel) => `rate(${m}{${s}}[$__rate_interval])`;
const q = (quantile, m, by, s = sel) =>
  `histogram_quantile(${quantile}, sum by (le, ${by}) (rate(${m}_bucket{${s}}[$__rate_interval])))`;

const r0 = row(0);
const r1 = row(8);
const r2 = row(16);
const r3 = row(24);
const r4 = row(32);
const r5 = row(40);
const r6 = row(48);
const r7 = row(56);
const r8 = row(64);
const panels = [
  panel(
    'Records per second: consumed, staged, published',
    'rps',
    [
      [`sum(${rate('kafka_lance_consumed_records_total')})`, 'consumed'],
      [`sum(${rate('kafka_lance_staged_records_total', tsel)})`, 'staged'],
      [`sum(${rate('kafka_lance_published_records_total', tsel)})`, 'published'],
    ],
    r0(0),
  ),
  panel(
    'Bytes per second: consumed, staged, published',
    'Bps',
    [
      [`sum(${rate('kafka_lance_consumed_bytes_total')})`, 'consumed'],
      [`sum(${rate('kafka_lance_staged_bytes_total', tsel)})`, 'staged'],
      [`sum(${rate('kafka_lance_published_bytes_total', tsel)})`, 'published'],
    ],
    r0(8),
  ),
  panel(
    'Consumer lag per partition',
    'short',
    [[`sum by (topic, partition) (kafka_lance_consumer_lag{${sel}})`, '{{topic}}[{{partition}}]']],
    r0(16),
  ),
  panel(
    'Source wait (writer waiting for prepared data)',
    's',
    [
      [q(0.5, 'kafka_lance_source_wait_seconds', 'table, mode', tsel), 'p50 {{table}} {{mode}}'],
      [q(0.99, 'kafka_lance_source_wait_seconds', 'table, mode', tsel), 'p99 {{table}} {{mode}}'],
    ],
    r1(0),
  ),
  panel(
    'Permits in use vs capacity',
    'short',
    [
      [`sum by (kind) (kafka_lance_permits_in_use{${sel}})`, 'in use {{kind}}'],
      [`sum by (kind) (kafka_lance_permits_capacity{${sel}})`, 'capacity {{kind}}'],
      [q(0.99, 'kafka_lance_permit_wait_seconds', 'kind'), 'p99 wait {{kind}} (s)'],
    ],
    r1(8),
  ),
  panel(
    'Source reservation',
    'bytes',
    [
      [`sum(kafka_lance_source_reservation_bytes{${sel}})`, 'reserved'],
      [`sum(kafka_lance_source_reservation_limit_bytes{${sel}})`, 'limit'],
    ],
    r1(16),
  ),
  panel(
    'Staging queue depth vs capacity',
    'short',
    [
      [`sum by (queue) (kafka_lance_queue_depth{${sel}})`, 'depth {{queue}}'],
      [`sum by (queue) (kafka_lance_queue_capacity{${sel}})`, 'capacity {{queue}}'],
    ],
    r2(0),
  ),
  panel(
    'Publication duration by phase',
    's',
    [
      [q(0.5, 'kafka_lance_publication_duration_seconds', 'phase', tsel), 'p50 {{phase}}'],
      [q(0.99, 'kafka_lance_publication_duration_seconds', 'phase', tsel), 'p99 {{phase}}'],
    ],
    r2(8),
  ),
  panel(
    'Publications per minute: results, failures by reason, quarantined parts',
    'short',
    [
      [
        `sum by (table, result) (increase(kafka_lance_publications_total{${tsel}}[1m]))`,
        '{{table}} {{result}}',
      ],
      [
        `sum by (table, reason) (increase(kafka_lance_publication_failures_total{${tsel}}[1m]))`,
        '{{table}} failed: {{reason}}',
      ],
      [
        `sum by (table, reason) (increase(kafka_lance_quarantined_parts_total{${tsel}}[1m]))`,
        '{{table}} parts quarantined: {{reason}}',
      ],
    ],
    r2(16),
  ),
  panel(
    'Dead letters per second by reason',
    'rps',
    [[`sum by (topic, reason) (${rate('kafka_lance_dead_letter_records_total')})`, '{{topic}} {{reason}}']],
    r3(0),
  ),
  panel(
    'Staging parts by state',
    'short',
    [[`sum by (state) (kafka_lance_staging_parts{${tsel}})`, '{{state}}']],
    r3(8),
  ),
  panel(
    'Durability tick (sync) duration',
    's',
    [
      [q(0.5, 'kafka_lance_durable_sync_seconds', 'instance'), 'p50 {{instance}}'],
      [q(0.99, 'kafka_lance_durable_sync_seconds', 'instance'), 'p99 {{instance}}'],
    ],
    r3(16),
  ),
  panel('Replicas up', 'short', [['count(up{job="kafka-lance"} == 1)', 'up']], r4(0), { type: 'stat' }),
  panel(
    'Event-loop lag (main thread)',
    's',
    [[`max by (instance) (nodejs_eventloop_lag_p99_seconds{${sel}})`, 'p99 {{instance}}']],
    r4(8),
  ),
  panel(
    'Resident memory per replica',
    'bytes',
    [[`max by (instance) (process_resident_memory_bytes{${sel}})`, '{{instance}}']],
    r4(16),
  ),
  // Object storage: 0 means the store lets concurrent Lance commits overwrite each other
  // (no put-if-absent): only a declared single writer publishes there (DESIGN.md).
  panel(
    'Lance store: atomic commits (1) or a declared single writer (0)',
    'short',
    [[`min by (table) (kafka_lance_store_atomic_commits{${tsel}})`, '{{table}}']],
    r5(0),
    { type: 'stat' },
  ),
  // Declared indexes, reported by the replica that keeps them: rows queries still scan
  // outside each index (back near 0 after every round when the index keeps up).
  panel(
    'Declared indexes: rows not indexed yet',
    'short',
    [[`max by (table, index) (kafka_lance_index_unindexed_rows{${tsel}})`, '{{table}} {{index}}']],
    r5(8),
  ),
  panel(
    'Declared indexes: last build or update duration',
    's',
    [[`max by (table, index) (kafka_lance_index_update_duration_seconds{${tsel}})`, '{{table}} {{index}}']],
    r5(16),
  ),
  // Registry formats: a replica whose Schema Registry does not answer waits (its
  // partitions hold, nothing is dead-lettered); failed requests per second beside it.
  panel(
    'Schema Registry: unreachable (1) and failed requests/s',
    'short',
    [
      [`max by (instance) (kafka_lance_schema_registry_unreachable{${sel}})`, 'unreachable {{instance}}'],
      [`sum by (instance) (${rate('kafka_lance_schema_registry_errors_total')})`, 'errors/s {{instance}}'],
    ],
    r6(0),
  ),
  // A running replica the broker stops accepting (rotated password, revoked certificate)
  // keeps what it staged and retries: refused (1) beside refusals per second, and its
  // consumer stopped (1) between a crash and its rejoin, with the restarts it made by
  // reason (a cluster out of reach, a refusal).
  panel(
    'Broker: authentication refused (1), refusals/s, consumer stopped (1) and restarts/s',
    'short',
    [
      [`max by (instance) (kafka_lance_broker_authentication_failing{${sel}})`, 'refused {{instance}}'],
      [
        `sum by (instance) (${rate('kafka_lance_broker_authentication_failures_total')})`,
        'refusals/s {{instance}}',
      ],
      [
        `sum by (instance, reason) (${rate('kafka_lance_consumer_restarts_total')})`,
        'restarts/s {{instance}} {{reason}}',
      ],
      [`max by (instance) (kafka_lance_consumer_stopped{${sel}})`, 'consumer stopped {{instance}}'],
    ],
    r6(8),
  ),
  // Upsert tables (mode: 'upsert'): keys upserted and deleted per second, what the merges
  // changed (a replay changes nothing), and the merge's duration.
  panel(
    'Upserts: keys upserted, deleted and rows changed per second',
    'rps',
    [
      [`sum by (table) (${rate('kafka_lance_upserted_rows_total', tsel)})`, '{{table}} upserted'],
      [`sum by (table) (${rate('kafka_lance_deleted_rows_total', tsel)})`, '{{table}} deleted'],
      [`sum by (table, change) (${rate('kafka_lance_merged_rows_total', tsel)})`, '{{table}} {{change}}'],
    ],
    r7(0),
  ),
  panel(
    'Upserts: merge duration',
    's',
    [
      [q(0.5, 'kafka_lance_merge_duration_seconds', 'table', tsel), 'p50 {{table}}'],
      [q(0.99, 'kafka_lance_merge_duration_seconds', 'table', tsel), 'p99 {{table}}'],
    ],
    r7(8),
  ),
  // Many tables (docs/routing.md): a table that publishes nothing while the others go on
  // (its Lance table refuses the definition, or its store fails), and each table's freshness.
  panel(
    'Tables: stalled (1) and published rows per second',
    'short',
    [
      [`max by (table) (kafka_lance_table_stalled{${tsel}})`, 'stalled {{table}}'],
      [`sum by (table) (${rate('kafka_lance_published_records_total', tsel)})`, 'rows/s {{table}}'],
    ],
    r8(0),
  ),
  panel(
    'Tables: seconds since the last publication',
    's',
    [
      [
        `time() - max by (table) (kafka_lance_table_last_publication_timestamp_seconds{${tsel}} > 0)`,
        '{{table}}',
      ],
    ],
    r8(8),
  ),
];

const dashboard = {
  id: null,
  uid: 'kafka-lance',
  title: 'kafka-lance',
  description: 'Kafka → staging → Lance: throughput, lag, preparation and publication health per replica.',
  tags: ['kafka', 'lance', 'kafka-lance'],
  schemaVersion: 39,
  version: 1,
  editable: true,
  refresh: '10s',
  time: { from: 'now-1h', to: 'now' },
  timezone: 'browser',
  templating: {
    list: [
      {
        name: 'datasource',
        label: 'Data source',
        type: 'datasource',
        query: 'prometheus',
        hide: 0,
      },
      {
        name: 'instance',
        label: 'Replica',
        type: 'query',
        datasource: ds,
        query: { query: 'label_values(kafka_lance_consumed_records_total, instance)', refId: 'instance' },
        includeAll: true,
        multi: true,
        allValue: '.*',
        current: { text: 'All', value: '$__all' },
        refresh: 2,
        hide: 0,
      },
      {
        name: 'table',
        label: 'Table',
        type: 'query',
        datasource: ds,
        query: { query: 'label_values(kafka_lance_published_records_total, table)', refId: 'table' },
        includeAll: true,
        multi: true,
        allValue: '.*',
        current: { text: 'All', value: '$__all' },
        refresh: 2,
        hide: 0,
      },
    ],
  },
  annotations: { list: [] },
  panels,
};

const target = path.join(__dirname, '..', 'grafana', 'dashboards', 'kafka-lance.json');
const text = `${JSON.stringify(dashboard, null, 2)}\n`;
/** What Grafana's own dashboard schema (@grafana/schema, its TypeScript types) rejects in a dashboard. */
const schemaProblems = (label, value) =>
  typeCheckLiterals(path.join(__dirname, '..'), [
    { label, module: '@grafana/schema', typeName: 'Dashboard', value },
  ]);

const [mode, checked = target] = process.argv.slice(2);
if (mode === '--check') {
  // `node scripts/build-dashboard.js --check [file]`: the file must match Grafana's schema and
  // be exactly what this script writes, or a hand edit is lost at the next generation
  // (test/metrics/dashboard.test.ts).
  const name = path.relative(process.cwd(), checked);
  const problems = schemaProblems(name, JSON.parse(fs.readFileSync(checked, 'utf8')));
  const committed = fs.readFileSync(checked, 'utf8').split('\n');
  const generated = text.split('\n');
  const line = generated.findIndex((l, i) => l !== committed[i]);
  if (line >= 0 || committed.length !== generated.length) {
    const at = line >= 0 ? line : Math.min(committed.length, generated.length);
    problems.push(
      `${name} differs from what scripts/build-dashboard.js generates, ` +
        `first at line ${at + 1}: ${JSON.stringify(committed[at] ?? '(end of file)')}, generated ` +
        `${JSON.stringify(generated[at] ?? '(end of file)')}. Edit the script, run it and commit both.`,
    );
  }
  for (const problem of problems) console.error(problem);
  if (problems.length > 0) process.exit(1);
  console.log(`${name} matches Grafana's dashboard schema and is what scripts/build-dashboard.js generates`);
} else {
  const problems = schemaProblems('the generated dashboard', dashboard);
  for (const problem of problems) console.error(problem);
  if (problems.length > 0) process.exit(1);
  fs.writeFileSync(target, text);
}
