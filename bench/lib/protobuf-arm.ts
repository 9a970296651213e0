/**
 * The Protobuf arm: the bench's records as Protobuf messages of LOG_PROTO (the Avro arm's
 * fields: `ts` a google.protobuf.Timestamp, `attrs` a nested message), the .proto registered
 * in a real registry (registry-local.ts), each value framed as Confluent's Protobuf
 * serializer frames it (header, message-index list [0], the message), then one replica with
 * `format: 'protobuf'` on them. Its MiB/s and CPU s/GiB are of the Protobuf bytes in Kafka.
 */
import { SchemaRegistry, SchemaType } from '@kafkajs/confluent-schema-registry';
import * as protobuf from 'protobufjs';
import { produceDataset } from './kafka';
import { benchRecord } from './records';
import { profiled, registryTopic, withRegistry } from './registry-local';
import { runReplicaArm } from './replica-arm';
import type { ArmResult } from './result';

/** The log records' schema: the fields of src/cli/avro-log-records.ts's LOG_V1. */
export const LOG_PROTO = `syntax = "proto3";
package kafka_lance.demo;
import "google/protobuf/timestamp.proto";

message AppLog {
  google.protobuf.Timestamp ts = 1;
  string level = 2;
  string service = 3;
  string host = 4;
  string message = 5;
  int32 status = 6;
  double latency_ms = 7;
  string trace_id = 8;
  Attrs attrs = 9;
}

message Attrs {
  string region = 1;
  int32 attempt = 2;
  int64 seq = 3;
}
`;

export interface ProtobufArmOptions {
  readonly records: number;
  readonly partitions: number;
  readonly brokers: readonly string[];
  /** Extra environment of the replica, and what the label says of it. */
  readonly variant?: { readonly id: string; readonly env: Record<string, string>; readonly label: string };
}

/** Encodes one JSON log record (log-records.ts) as a framed AppLog of schema `id`. */
export function protobufEncoder(id: number): (json: string) => Buffer {
  const root = protobuf.parse(LOG_PROTO, new protobuf.Root(), { keepCase: true }).root;
  root.addJSON(protobuf.common.get('google/protobuf/timestamp.proto')!.nested!);
  const AppLog = root.lookupType('kafka_lance.demo.AppLog');
  const header = Buffer.alloc(6); // magic 0, the schema id, then the message-index list [0]
  header.writeUInt32BE(id, 1);
  return (json) => {
    const record = JSON.parse(json) as Record<string, unknown> & { ts: string };
    const ms = Date.parse(record.ts);
    const ts = { seconds: Math.floor(ms / 1000), nanos: (((ms % 1000) + 1000) % 1000) * 1_000_000 };
    return Buffer.concat([header, AppLog.encode(AppLog.fromObject({ ...record, ts })).finish()]);
  };
}

export async function runProtobufArm(o: ProtobufArmOptions, log: (line: string) => void): Promise<ArmResult> {
  return withRegistry(log, async (url) => {
    const registry = new SchemaRegistry({ host: url });
    const { id } = await registry.register(
      { type: SchemaType.PROTOBUF, schema: LOG_PROTO },
      { subject: 'bench-logs-protobuf-value' },
    );
    const topic = registryTopic('protobuf', o.records, url, id);
    const encode = protobufEncoder(id);
    let data = await produceDataset(o.brokers, topic, o.records, o.partitions, log, (json) =>
      Promise.resolve(encode(json)),
    );
    if (data.reused) {
      // The same records, encoded again: their exact Protobuf bytes.
      let bytes = 0;
      for (let n = 0; n < o.records; n++) bytes += encode(benchRecord(n)).length;
      data = { ...data, bytes };
    }
    return runReplicaArm(
      {
        id: o.variant?.id ?? 'e2e-protobuf',
        label: `kafka-lance run, buffered (defaults), Protobuf values from a Schema Registry (columns from the writer schema)${o.variant?.label ?? ''}`,
        ...(o.variant ? { env: o.variant.env } : {}),
        topic: data.topic,
        records: data.records,
        bytes: data.bytes,
        brokers: o.brokers,
        ...profiled(o.variant?.id ?? 'e2e-protobuf'),
        extra: { format: 'protobuf', schema: 'infer', schemaRegistry: { url } },
      },
      log,
    );
  });
}
