import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Kafka } from 'kafkajs';
import { forgetTopics, trackClusters } from '../../../src/kafka/protocol/coordinator-hook';

/**
 * A replica makes kafkajs clients for as long as it runs (an admin for each offset read
 * with fresh metadata, a consumer per subscription restart). The Kafka instance tracks
 * the clusters they make (forgetTopics reaches each), and must not keep them all forever.
 */
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const tracked = (kafka: Kafka) => {
  const key = Object.getOwnPropertySymbols(kafka).find((s) => s.description === 'kafka-lance:clusters')!;
  return (kafka as unknown as Record<symbol, Set<WeakRef<object>>>)[key]!;
};

test('clusters of clients no longer in use are let go, not kept by the tracking Kafka instance', async () => {
  const kafka = trackClusters(new Kafka({ brokers: ['127.0.0.1:1'] }));
  const make = () => {
    for (let i = 0; i < 20; i++) kafka.admin();
  };
  make();
  const kept = kafka.admin();
  expect(tracked(kafka).size).toBe(21);
  for (let i = 0; i < 5 && [...tracked(kafka)].some((r) => r.deref() === undefined) === false; i++) {
    await new Promise((r) => setImmediate(r));
    gc();
  }
  await new Promise((r) => setImmediate(r));
  forgetTopics(kafka, ['gone']);
  // The admin still held keeps its cluster; the 20 dropped ones are gone.
  expect(tracked(kafka).size).toBeLessThan(21);
  expect(tracked(kafka).size).toBeGreaterThanOrEqual(1);
  expect(kept).toBeDefined();
});
