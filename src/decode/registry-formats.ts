import type { ResolvedConsumer } from '../config';
import { AVRO_PAYLOADS, avroPayloads } from './avro/writer-schemas';
import { JSON_SCHEMA_PAYLOADS } from './json-schema/json-schema-payloads';
import { PROTOBUF_PAYLOADS } from './protobuf/protobuf-payloads';
import { RegistryWriterSchemas, type WriterSchemas } from './registry-writer-schemas';

/**
 * A staging worker's writer schemas for a registry format; undefined for json and raw.
 * `connectTypes`: Avro maps Kafka Connect's `connect.name` types (the Debezium envelope only).
 */
export function writerSchemasFor(
  format: ResolvedConsumer['format'],
  options: { readonly connectTypes?: boolean } = {},
): WriterSchemas | undefined {
  switch (format) {
    case 'avro':
      return new RegistryWriterSchemas(
        options.connectTypes ? avroPayloads({ connectTypes: true }) : AVRO_PAYLOADS,
      );
    case 'protobuf':
      return new RegistryWriterSchemas(PROTOBUF_PAYLOADS);
    case 'json-schema':
      return new RegistryWriterSchemas(JSON_SCHEMA_PAYLOADS);
    default:
      return undefined;
  }
}
