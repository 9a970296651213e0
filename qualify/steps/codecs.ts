import { registerCompressionCodecs } from '../../src/kafka/protocol/compression';
import {
  ensureKcat,
  produceWithJava,
  produceWithKcat,
  type ProducerCodec,
} from '../../test/support/foreign-producers';
import { Campaign } from '../support/campaign';
import { finalCheck } from '../support/final-check';
import { recordValue } from '../support/gapped-topics';
import { logRecords } from '../support/log-offsets';
import { sleep } from '../support/random';
import { campaignDetails } from '../support/report-lines';
import { settle } from '../support/settle';
import type { QualifyContext, QualifyStep, QualifyStepReport } from '../step';

const CODECS: readonly ProducerCodec[] = ['none', 'gzip', 'snappy', 'lz4', 'zstd'];
const PRODUCERS = ['java', 'kcat'] as const;
const PAYLOAD_CHARS = 300;
const BAD_EVERY = 997;

/**
 * Compressed topics from producers nobody here wrote: the Java producer
 * (kafka-console-producer from the broker's jars) and librdkafka's (kcat) each write the
 * backlog in every codec (none, gzip, snappy, lz4, zstd), in rounds that alternate codec
 * and producer, so every partition holds record batches of all five codecs from both
 * producers one after the other. Checksummed JSON records (one in 997 not JSON: dead
 * letters). Two replicas then consume the backlog while one of them is SIGKILLed after
 * publications (1 kill short, 3 full) and restarted from its data dir. The final check:
 * every offset a row or a dead letter, once, every row's payload matching its checksum
 * (so decompressed byte for byte), read again with pylance, committed = log end.
 */
export const step: QualifyStep = {
  name: 'codecs',
  title: 'Compressed topics: five codecs from the Java producer and librdkafka, SIGKILLs while consuming',
  async run(ctx: QualifyContext): Promise<QualifyStepReport> {
    ensureKcat();
    // The campaign's own readers (none here) and any client of this process read every codec.
    registerCompressionCodecs();
    const perRun = ctx.short ? 800 : 12_000;
    const c = new Campaign({
      context: ctx,
      name: 'codecs',
      partitions: 3,
      replicas: 2,
      sessionTimeoutMs: 10_000,
    });
    try {
      await c.createTopic();
      const runs: string[] = [];
      let n = 0;
      let bytes = 0;
      for (const codec of CODECS)
        for (const producer of PRODUCERS) {
          const values = Array.from({ length: perRun }, () =>
            recordValue(c.random, n++, PAYLOAD_CHARS, BAD_EVERY),
          );
          (producer === 'java' ? produceWithJava : produceWithKcat)(ctx.brokers, c.topic, codec, values);
          bytes += values.reduce((s, v) => s + v.length, 0);
          runs.push(`${producer} ${codec}`);
        }
      const log = await logRecords(c);
      c.log(
        `produced ${n} records (${(bytes / 1048576).toFixed(1)} MiB) in ${runs.length} runs (${runs.join(', ')}); the log holds ${log.total}; starting 2 replicas`,
      );
      const problems: string[] = [];
      if (log.total !== n) problems.push(`the producers wrote ${n} records, the log holds ${log.total}`);

      const replicasAt = Date.now();
      await c.startReplicas();
      for (let k = 0; k < (ctx.short ? 1 : 3); k++) {
        // After a publication of either replica: the backlog is being consumed and published.
        await Promise.race(c.slots.map((s) => s.run.seen('publication', 60_000)));
        await sleep(c.random.int(0, 2_000));
        const slot = c.random.pick(c.slots);
        await c.kill(slot, 'after publications (random moment)');
        await sleep(c.random.int(300, 2_000));
        const run = c.restart(slot);
        await run.seen('kafka.join', 60_000);
      }
      const settled = await settle(c, ctx.short ? 120_000 : 300_000);
      const drained = (Date.now() - replicasAt) / 1000;
      const exitedAlone = c.slots.filter((s) => !s.run.alive).map((s) => s.label);
      await c.stopAll();
      const check = await finalCheck(c, settled.stalled);
      problems.push(...check.problems);
      if (exitedAlone.length > 0) problems.push(`${exitedAlone.join(', ')} exited during the run`);
      const stops = c.count('partition.stopped');
      if (stops > 0) problems.push(`${stops} partition stops`);
      const passed = problems.length === 0;
      return {
        passed,
        summary:
          `${n} checksummed records (${(bytes / 1048576).toFixed(1)} MiB) on 3 partitions, written by the Java producer and by kcat in every codec (${runs.length} runs of ${perRun}: ${runs.join(', ')}), so each partition holds all five codecs from both producers. ` +
          `2 replicas (${c.kills.map((k) => `${k.replica} SIGKILLed at ${k.at} s during ${k.interrupted.split(' (')[0]}, restarted`).join('; ')}): quiescent ${drained.toFixed(0)} s after they started; ${check.rows} rows + ${check.deadLetters} dead letters = ${log.total} records` +
          ` (pylance: ${check.independent?.rows ?? '?'} rows, ${check.independent?.duplicates ?? '?'} duplicates, ${check.independent?.checksumMismatches ?? '?'} checksum mismatches); every row's payload matches its checksum; committed = log end. ` +
          (passed ? 'Passed.' : `FAILED: ${problems.join('; ')}`),
        details: campaignDetails(c, check, [
          `- Production, before the replicas: ${runs.length} runs of ${perRun} records, each one producer process with \`compression.type\` set (Java: kafka-console-producer, batch.size 1 MiB, linger.ms 200; librdkafka: kcat -z, batch.size 1 MB, linger.ms 200), acks=all; payloads of ${PAYLOAD_CHARS} characters, one record in ${BAD_EVERY} not JSON`,
          ...problems.filter((p) => !check.problems.includes(p)).map((p) => `- **${p}**`),
        ]),
      };
    } finally {
      await c.close();
    }
  },
};
