import { brokerSuite, topicAndConsumer } from '../support/broker-suite';
import { produceRecords, waitForCommittedAtEnd } from '../support/ingestion-fixture';
import { testBrokers } from '../support/kafka';
import { ReplicaProcess } from '../../src/harness/replica-process';
import { tempDir } from '../support/rows';

const suite = brokerSuite('kl-obs');
const { kafka } = suite;

const get = async (port: number, p: string) => {
  const res = await fetch(`http://127.0.0.1:${port}${p}`);
  return { status: res.status, text: await res.text() };
};

/** Prometheus text → { "name{labels}": value }. */
function samples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}
const value = (s: Map<string, number>, prefix: string) =>
  [...s].filter(([k]) => k === prefix || k.startsWith(`${prefix}{`)).reduce((n, [, v]) => n + v, 0);

test('/readyz answers "not ready" until recovery ends and the group is joined; /healthz answers all along', async () => {
  const { file } = await topicAndConsumer(suite, 1, { schema: 'infer' });
  const replica = new ReplicaProcess(file, await tempDir('kl-obs-ready'), testBrokers(), {
    KAFKA_LANCE_TEST_RECOVERY_DELAY_MS: '3000',
  });
  const port = await replica.metricsPort();
  expect(await get(port, '/healthz')).toEqual({ status: 200, text: 'ok\n' });
  expect((await get(port, '/readyz')).status).toBe(503);
  await replica.waitForEvent('kafka.join');
  let ready = await get(port, '/readyz');
  for (let i = 0; i < 50 && ready.status !== 200; i++) {
    await new Promise((r) => setTimeout(r, 100));
    ready = await get(port, '/readyz');
  }
  expect(ready).toEqual({ status: 200, text: 'ready\n' });
  expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });
});

test('/metrics after a real run: every family, throughput counters equal to what was produced, permits back to zero', async () => {
  const { topic, groupId, file } = await topicAndConsumer(suite, 3, {
    staging: { maxPartAgeMs: 500 },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
  });
  const good = 30_000;
  await produceRecords(kafka, topic, 3, good);
  const producer = kafka.producer();
  await producer.connect();
  await producer.send({
    topic,
    messages: [
      { value: 'not json', partition: 0 },
      { value: '{"n":"x"}', partition: 1 },
    ],
  });
  await producer.disconnect();
  const replica = new ReplicaProcess(file, await tempDir('kl-obs-run'), testBrokers());
  const port = await replica.metricsPort();
  await waitForCommittedAtEnd(suite.admin, groupId, topic);
  let s = samples((await get(port, '/metrics')).text);
  for (let i = 0; i < 100 && value(s, 'kafka_lance_published_records_total') < good; i++) {
    await new Promise((r) => setTimeout(r, 200));
    s = samples((await get(port, '/metrics')).text);
  }
  await new Promise((r) => setTimeout(r, 2_500)); // one more stats report and lag refresh at rest
  const text = (await get(port, '/metrics')).text;
  s = samples(text);
  expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });

  const families = [
    'kafka_lance_source_wait_seconds',
    'kafka_lance_permits_in_use',
    'kafka_lance_permits_capacity',
    'kafka_lance_permit_wait_seconds',
    'kafka_lance_source_reservation_bytes',
    'kafka_lance_source_reservation_limit_bytes',
    'kafka_lance_consumed_records_total',
    'kafka_lance_consumed_bytes_total',
    'kafka_lance_staged_records_total',
    'kafka_lance_staged_bytes_total',
    'kafka_lance_published_records_total',
    'kafka_lance_published_bytes_total',
    'kafka_lance_publications_total',
    'kafka_lance_publication_duration_seconds',
    'kafka_lance_committed_offset',
    'kafka_lance_consumer_lag',
    'kafka_lance_queue_depth',
    'kafka_lance_queue_capacity',
    'kafka_lance_dead_letter_records_total',
    'kafka_lance_staging_parts',
    'kafka_lance_durable_sync_seconds',
    'nodejs_eventloop_lag_p99_seconds',
    'process_resident_memory_bytes',
  ];
  for (const f of families) expect([f, text.includes(`# HELP ${f} `)]).toEqual([f, true]);
  expect(value(s, `kafka_lance_consumed_records_total{topic="${topic}"}`)).toBe(good + 2);
  expect(value(s, 'kafka_lance_staged_records_total')).toBe(good);
  expect(value(s, 'kafka_lance_published_records_total')).toBe(good);
  expect(value(s, 'kafka_lance_dead_letter_records_total')).toBe(2);
  expect(s.get(`kafka_lance_dead_letter_records_total{topic="${topic}",reason="invalid-json"}`)).toBe(1);
  expect(s.get(`kafka_lance_dead_letter_records_total{topic="${topic}",reason="schema-mismatch"}`)).toBe(1);
  expect(value(s, 'kafka_lance_publications_total{table="logs",result="success"}')).toBeGreaterThan(0);
  expect(value(s, 'kafka_lance_permits_in_use')).toBe(0);
  expect(s.get('kafka_lance_permits_capacity{kind="decode"}')).toBe(2);
  expect(value(s, 'kafka_lance_source_reservation_bytes')).toBe(0);
  expect(value(s, 'kafka_lance_consumer_lag')).toBe(0);
  expect(value(s, 'kafka_lance_committed_offset')).toBe(good + 2); // offsets start at 0: sum of log ends
  expect(value(s, 'kafka_lance_durable_sync_seconds_count')).toBeGreaterThan(0);
  expect(
    value(s, 'kafka_lance_publication_duration_seconds_count{table="logs",phase="write"}'),
  ).toBeGreaterThan(0);
  expect(s.get('kafka_lance_queue_capacity{queue="staging"}')).toBe(50_000);
  // No secret and no per-record label: label values are topics, tables, partitions, reasons, kinds.
  expect(text).not.toMatch(/password|secret/i);
});
