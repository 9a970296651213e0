/**
 * The Avro arm: the bench's records Avro-encoded by Confluent's serializer
 * (@kafkajs/confluent-schema-registry) with the schema of src/cli/avro-log-records.ts,
 * registered in a real registry (registry-local.ts), then one replica with `format: 'avro'` on them.
 * Its MiB/s and CPU s/GiB are of the Avro bytes in Kafka.
 */
import { SchemaRegistry, SchemaType } from '@kafkajs/confluent-schema-registry';
import { avroLog, LOG_V1 } from '../../src/cli/avro-log-records';
import { produceDataset } from './kafka';
import { benchRecord } from './records';
import { profiled, registryTopic, withRegistry } from './registry-local';
import { runReplicaArm } from './replica-arm';
import type { ArmResult } from './result';

export interface AvroArmOptions {
  readonly records: number;
  readonly partitions: number;
  readonly brokers: readonly string[];
  /** The replica with the reference Avro decoder only (KAFKA_LANCE_COMPILED_AVRO=off): the state before the compiled reader. */
  readonly reference?: boolean;
}

export async function runAvroArm(o: AvroArmOptions, log: (line: string) => void): Promise<ArmResult> {
  return withRegistry(log, async (url) => {
    const registry = new SchemaRegistry({ host: url });
    const { id } = await registry.register(
      { type: SchemaType.AVRO, schema: JSON.stringify(LOG_V1) },
      { subject: 'bench-logs-avro-value' },
    );
    const topic = registryTopic('avro', o.records, url, id);
    const encode = (json: string) => registry.encode(id, avroLog(json));
    let data = await produceDataset(o.brokers, topic, o.records, o.partitions, log, encode);
    if (data.reused) {
      // The same records, encoded again: their exact Avro bytes.
      let bytes = 0;
      for (let n = 0; n < o.records; n++) bytes += (await encode(benchRecord(n))).length;
      data = { ...data, bytes };
    }
    return runReplicaArm(
      {
        id: o.reference ? 'e2e-avro-reference' : 'e2e-avro',
        label: `kafka-lance run, buffered (defaults), Avro values from a Schema Registry (columns from the writer schema)${o.reference ? ', reference decoder only (KAFKA_LANCE_COMPILED_AVRO=off)' : ''}`,
        ...(o.reference ? { env: { KAFKA_LANCE_COMPILED_AVRO: 'off' } } : {}),
        topic: data.topic,
        records: data.records,
        bytes: data.bytes,
        brokers: o.brokers,
        ...profiled(o.reference ? 'e2e-avro-reference' : 'e2e-avro'),
        extra: { format: 'avro', schema: 'infer', schemaRegistry: { url } },
      },
      log,
    );
  });
}
