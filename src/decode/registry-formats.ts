import type { ResolvedConsumer } from '../config';
import { AVRO_PAYLOADS } from './avro/writer-schemas';
import { JSON_SCHEMA_PAYLOADS } from './json-schema/json-schema-payloads';
import { PROTOBUF_PAYLOADS } from './protobuf/protobuf-payloads';
import { RegistryWriterSchemas, type WriterSchemas } from './registry-writer-schemas';

/** A staging worker's writer schemas for a registry format; undefined for json and raw. */
export function writerSchemasFor(format: ResolvedConsumer['format']): WriterSchemas | undefined {
  switch (format) {
    case 'avro':
      return new RegistryWriterSchemas(AVRO_PAYLOADS);
    case 'protobuf':
      return new RegistryWriterSchemas(PROTOBUF_PAYLOADS);
    case 'json-schema':
      return new RegistryWriterSchemas(JSON_SCHEMA_PAYLOADS);
    default:
      return undefined;
  }
}
