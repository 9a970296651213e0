import { brokerSuite, topicAndConsumer } from '../support/broker-suite';
import { produceRecords, waitForCommittedAtEnd } from '../support/ingestion-fixture';
import { testBrokers } from '../support/kafka';
import { PrometheusApi, prometheusLocal, requirePrometheus } from '../support/prometheus-local';
import {
  alertOperands,
  dashboardTargets,
  labelValuesQuery,
  readAlertRules,
  readDashboard,
  regexAlternation,
  substitute,
  type Expression,
} from '../support/promql-expressions';
import { ReplicaProcess } from '../../src/harness/replica-process';
import { tempDir } from '../support/rows';

/**
 * A real Prometheus (deploy/prometheus-local) scrapes a real replica every second with
 * the project's alert rules loaded; the dashboard's queries and the alert rules then run
 * through Prometheus's HTTP API against what it scraped.
 */
const available = requirePrometheus('prometheus.test.ts');
const withPrometheus = available ? test : test.skip;
const suite = brokerSuite('kl-prom');
const prom = new PrometheusApi();

afterAll(() => {
  if (available) prometheusLocal('stop');
});

/** The alert that fires in this run: it produces dead letters on purpose. */
const FIRING = 'KafkaLanceDeadLetters';
const ROUNDS = 6;
const PER_ROUND = 500;
/**
 * Histograms that observe only an event a healthy, light run may never have: a quantile
 * of them is NaN (no observation in the window), yet its series must exist.
 * kafka_lance_permit_wait_seconds observes only tasks that had to wait for a permit
 * (src/materializer/permits.ts), and nothing waits without contention.
 */
const MAY_BE_NAN = [/kafka_lance_permit_wait_seconds_bucket/];
/**
 * Gauges that have a series only while something is wrong, labelled with what it is:
 * kafka_lance_partition_stopped{topic,partition,reason} exists once a partition stopped
 * (src/dead-letters/dead-letter-outbox.ts). A healthy run has none; the query must still run.
 */
const ONLY_WHEN_FAILING = [/kafka_lance_partition_stopped/];
/**
 * Series only an upsert table has (src/lance/upsert-merge.ts counts its merges per table):
 * this run's table appends, so those panels' queries must run but have nothing to show.
 * test/integration/upsert.test.ts reads the same metrics from an upsert replica.
 */
const ONLY_FOR_UPSERT_TABLES = [
  /kafka_lance_(upserted|deleted|merged)_rows_total/,
  /kafka_lance_merge_duration_seconds/,
];

withPrometheus(
  'Prometheus scraping a replica: every dashboard query and alert operand returns data; only the dead-letter alert fires, and replica-down once it stops',
  async () => {
    const { topic, groupId, file } = await topicAndConsumer(suite, 3, {
      staging: { maxPartAgeMs: 500 },
      materializer: { maxPublicationDelayMs: 200, pollMs: 200, indexEveryMs: 1_000 },
      // A declared index, so that the index panels and alert have series to read.
      indexes: [{ column: 'service', type: 'bitmap' }],
    });
    const replica = new ReplicaProcess(file, await tempDir('kl-prom-run'), testBrokers());
    try {
      const target = `127.0.0.1:${await replica.metricsPort()}`;
      const started = prometheusLocal('start', [target]);
      expect([started.code, started.output]).toEqual([0, expect.stringContaining('up on http://127.0.0.1:')]);
      const since = Date.now();
      await replica.waitForEvent('kafka.join');
      const sel = `job="kafka-lance",instance="${target}"`;
      await prom.until(`up{${sel}}`, (s) => s.length === 1 && s[0]!.value === 1);

      // Rounds a scrape or more apart, so that every counter rises across scrapes (a series
      // first scraped at its final value has no rate), dead letters of both kinds included.
      const producer = suite.kafka.producer();
      await producer.connect();
      for (let round = 0; round < ROUNDS; round++) {
        await produceRecords(suite.kafka, topic, 3, PER_ROUND, undefined, round * PER_ROUND);
        await producer.send({
          topic,
          messages: [
            { value: 'not json', partition: round % 3 },
            { value: '{"n":"x"}', partition: (round + 1) % 3 },
          ],
        });
        await new Promise((r) => setTimeout(r, 1_500));
      }
      await producer.disconnect();
      const good = ROUNDS * PER_ROUND;
      await waitForCommittedAtEnd(suite.admin, groupId, topic);
      await prom.until(`sum(kafka_lance_published_records_total{${sel}})`, (s) => s[0]?.value === good);
      await prom.until(`sum(kafka_lance_consumer_lag{${sel}})`, (s) => s[0]?.value === 0);
      const scrapes = await prom.samples(`count_over_time(up{${sel}}[1h])`);
      expect(scrapes[0]!.value).toBeGreaterThanOrEqual(10);

      // Variables as Grafana fills them: label_values() through the API, the rate interval
      // over the whole run (as if the dashboard showed the run's time range).
      const dashboard = readDashboard();
      const window = `${Math.ceil((Date.now() - since) / 1000) + 5}s`;
      const values = new Map([
        ['__rate_interval', window],
        ['__interval', window],
        ['__range', window],
      ]);
      const variableQueries: Expression[] = [];
      for (const v of dashboard.templating.list.filter((x) => x.type === 'query')) {
        const q = labelValuesQuery(v);
        if (!q) throw new Error(`variable $${v.name}: only label_values() queries are understood here`);
        const found = await prom.labelValues(q.label, q.match);
        variableQueries.push({ where: `variable $${v.name}`, expr: q.match ?? q.label });
        expect([v.name, found.length > 0]).toEqual([v.name, true]);
        values.set(v.name, v.multi || v.includeAll ? regexAlternation(found) : found[0]!);
      }
      expect(values.get('instance')).toBe(regexAlternation([target]));

      const report: string[] = [];
      const problems: string[] = [];
      const evaluate = async (where: string, expr: string, want: 'data' | 'series' | 'empty' | 'answer') => {
        const answer = await prom.query(expr);
        if (!answer.ok) {
          problems.push(`${where}: ${answer.error} in ${expr}`);
          return;
        }
        const finite = answer.samples.filter((s) => Number.isFinite(s.value));
        report.push(
          `${answer.samples.length} series (${finite.length} finite, e.g. ${finite[0]?.value ?? answer.samples[0]?.value}) ← ${where}`,
        );
        if (want === 'empty' && answer.samples.length > 0)
          problems.push(
            `${where}: expected no series in a healthy run, got ${JSON.stringify(answer.samples)}`,
          );
        // NaN alone (a quantile of no observations) is no data for a run that moved records.
        if (want === 'series' && answer.samples.length === 0)
          problems.push(`${where}: no series for ${expr}`);
        if (want === 'data' && finite.length === 0)
          problems.push(`${where}: no data (${JSON.stringify(answer.samples)}) for ${expr}`);
      };

      for (const { where, expr } of [...dashboardTargets(dashboard), ...variableQueries])
        await evaluate(
          where,
          substitute(expr, values),
          ONLY_FOR_UPSERT_TABLES.some((re) => re.test(expr))
            ? 'answer'
            : MAY_BE_NAN.some((re) => re.test(expr))
              ? 'series'
              : 'data',
        );
      for (const rule of readAlertRules()) {
        await evaluate(`alert ${rule.alert}`, rule.expr, rule.alert === FIRING ? 'data' : 'empty');
        // What each alert compares must exist, even when the comparison rightly finds nothing.
        // The run is shorter than two 1m subquery steps: check those at a 1s step.
        for (const [i, operand] of alertOperands(rule.expr).entries())
          await evaluate(
            `alert ${rule.alert} operand ${i + 1}`,
            operand.replace(/\[(\w+):\w+\]/g, '[$1:1s]'),
            ONLY_WHEN_FAILING.some((re) => re.test(operand)) ? 'answer' : 'data',
          );
      }
      console.log(`PromQL through Prometheus (window ${window}):\n${report.join('\n')}`);
      expect(problems).toEqual([]);

      const rules = await prom.rules();
      expect(rules.map((r) => [r.name, r.health, r.lastError ?? ''])).toEqual(
        readAlertRules().map((r) => [r.alert, 'ok', '']),
      );
      // Evaluated every second: the dead-letter alert (no `for`) fires for both reasons, nothing else is active.
      const alerts = await prom.alerts();
      expect(alerts.map((a) => [a.labels.alertname, a.labels.reason, a.state]).sort()).toEqual([
        [FIRING, 'invalid-json', 'firing'],
        [FIRING, 'schema-mismatch', 'firing'],
      ]);

      // A replica that stops answering scrapes: the replica-down condition holds at once.
      expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });
      const down = readAlertRules().find((r) => r.alert === 'KafkaLanceReplicaDown')!;
      await prom.until(down.expr, (s) => s.some((x) => x.metric.instance === target), 30_000);
      const pending = async () =>
        (await prom.alerts()).filter((a) => a.labels.alertname === down.alert).map((a) => a.state);
      for (let i = 0; i < 20 && (await pending()).length === 0; i++)
        await new Promise((r) => setTimeout(r, 250));
      expect(await pending()).toEqual(['pending']); // for: 2m
    } finally {
      // A failed assertion must not leave the replica running (it would keep jest alive).
      await replica.kill('SIGKILL');
    }
  },
  180_000,
);
