/**
 * Arm 1, kafkajs consume-only (the source limit for this client): a fresh group reads
 * the bench topic from the start with `eachBatch`, counts records and value bytes,
 * and stops at the expected count. No decode, no disk, no commits.
 */
import { Kafka, logLevel } from 'kafkajs';
import { FirstRecord, ProgressTicker, armArgs, emit, processCpuSeconds } from '../lib/arm-protocol';

async function main(): Promise<void> {
  const args = armArgs();
  const records = Number(args.get('records'));
  const kafka = new Kafka({
    clientId: 'bench-consume',
    brokers: args.get('brokers')!.split(','),
    logLevel: logLevel.NOTHING,
  });
  const consumer = kafka.consumer({
    groupId: args.get('group')!,
    maxBytes: 64 * 1024 * 1024,
    maxBytesPerPartition: 16 * 1024 * 1024,
  });
  await consumer.connect();
  await consumer.subscribe({ topic: args.get('topic')!, fromBeginning: true });
  consumer.on(consumer.events.GROUP_JOIN, () => emit({ event: 'start' }));
  const ticker = new ProgressTicker();
  const first = new FirstRecord();
  let cpuSeconds = 0;
  let finish: () => void = () => undefined;
  const finished = new Promise<void>((r) => (finish = r));
  await consumer.run({
    autoCommit: false,
    partitionsConsumedConcurrently: 6,
    eachBatch: async ({ batch }) => {
      first.mark();
      for (const m of batch.messages) ticker.bytes += m.value?.byteLength ?? 0;
      ticker.rows += batch.messages.length;
      if (ticker.rows >= records) {
        cpuSeconds ||= processCpuSeconds();
        finish();
      }
      await Promise.resolve();
    },
  });
  await finished;
  ticker.stop();
  emit({ event: 'done', rows: ticker.rows, bytes: ticker.bytes, cpuSeconds });
  await consumer.disconnect();
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
