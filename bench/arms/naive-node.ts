/**
 * Arm 6, the consumer a Node user would write in twenty lines: kafkajs `eachBatch`
 * (client defaults) → `JSON.parse` each value → LanceDB `add` of the parsed rows per
 * batch into a table created with an explicit schema → commit the batch's offsets.
 */
import * as lancedb from '@lancedb/lancedb';
import { Field, Float64, Int32, Int64, Schema, TimeUnit, Timestamp, Utf8 } from 'apache-arrow';
import { Kafka, logLevel } from 'kafkajs';
import { FirstRecord, ProgressTicker, armArgs, emit, processCpuSeconds } from '../lib/arm-protocol';

const schema = new Schema([
  new Field('ts', new Timestamp(TimeUnit.MILLISECOND), true),
  new Field('level', new Utf8(), true),
  new Field('service', new Utf8(), true),
  new Field('host', new Utf8(), true),
  new Field('message', new Utf8(), true),
  new Field('status', new Int32(), true),
  new Field('latency_ms', new Float64(), true),
  new Field('trace_id', new Utf8(), true),
  new Field('attrs', new Utf8(), true),
  new Field('partition', new Int32(), false),
  new Field('offset', new Int64(), false),
]);

async function main(): Promise<void> {
  const args = armArgs();
  const records = Number(args.get('records'));
  const topic = args.get('topic')!;
  const db = await lancedb.connect(args.get('lance')!);
  const table = await db.createEmptyTable('logs', schema, { mode: 'create' });
  const kafka = new Kafka({
    clientId: 'bench-naive',
    brokers: args.get('brokers')!.split(','),
    logLevel: logLevel.NOTHING,
  });
  const consumer = kafka.consumer({ groupId: args.get('group')! });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  consumer.on(consumer.events.GROUP_JOIN, () => emit({ event: 'start' }));
  const ticker = new ProgressTicker();
  const first = new FirstRecord();
  let cpuSeconds = 0;
  let finish: () => void = () => undefined;
  const finished = new Promise<void>((r) => (finish = r));
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch }) => {
      if (batch.messages.length === 0) return;
      first.mark();
      const rows = batch.messages.map((m) => {
        const r = JSON.parse(m.value!.toString()) as Record<string, unknown>;
        ticker.bytes += m.value!.byteLength;
        return {
          ...r,
          ts: new Date(r.ts as string),
          attrs: JSON.stringify(r.attrs),
          partition: batch.partition,
          offset: BigInt(m.offset),
        };
      });
      await table.add(rows);
      await consumer.commitOffsets([
        { topic, partition: batch.partition, offset: String(Number(batch.lastOffset()) + 1) },
      ]);
      ticker.rows += rows.length;
      if (ticker.rows >= records) {
        cpuSeconds ||= processCpuSeconds();
        finish();
      }
    },
  });
  await finished;
  ticker.stop();
  await consumer.disconnect();
  const verifiedRows = await table.countRows();
  emit({ event: 'done', rows: ticker.rows, bytes: ticker.bytes, verifiedRows, cpuSeconds });
  table.close();
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
