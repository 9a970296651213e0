import {
  MAX_PARSED_SCHEMA_BYTES,
  RegistryWriterSchemas,
  type RegistryPayloadFormat,
} from '../../src/decode/registry-writer-schemas';
import type { WriterSchema } from '../../src/schema-registry/wire-format';
import { framed } from '../support/avro-fixtures';

/**
 * A staging worker's parsed writer schemas are bounded by their text's bytes, not only by
 * their count: 1,000 schemas of up to 16 MiB each would hold gigabytes per worker.
 */
const MIB = 1024 * 1024;
const format: RegistryPayloadFormat<string> = {
  format: 'avro',
  schemaType: 'AVRO',
  parse: (schema) => schema.slice(0, 8),
  decode: () => ({ row: {}, fields: [] }),
};
const big = (id: number): WriterSchema => ({
  id,
  schemaType: 'AVRO',
  schema: `"${String(id).padEnd(MIB, 'x')}"`,
});
const ids = (from: number, count: number) => Array.from({ length: count }, (_, i) => from + i);
const header = (id: number) => framed(id, new Uint8Array(0));

test('large schemas are evicted by their text bytes, well before the count bound', () => {
  const schemas = new RegistryWriterSchemas(format);
  const perBatch = 8;
  for (let from = 1; from <= 200; from += perBatch) schemas.learn(ids(from, perBatch).map(big));
  expect(schemas.textBytes).toBeLessThanOrEqual(MAX_PARSED_SCHEMA_BYTES);
  // The oldest went first: its records are dead letters with the reason, not a failure.
  expect(schemas.decode(header(1))).toEqual(expect.objectContaining({ reason: 'unknown-schema-id' }));
  expect(schemas.decode(header(200))).toEqual(expect.objectContaining({ schemaId: 200 }));
});

test('a batch whose schemas are more text than the bound keeps them all while it is in hand', () => {
  const schemas = new RegistryWriterSchemas(format);
  const count = MAX_PARSED_SCHEMA_BYTES / MIB + 4;
  const batch = ids(1, count).map(big);
  schemas.learn(batch);
  for (const s of batch)
    expect(schemas.decode(header(s.id))).toEqual(expect.objectContaining({ schemaId: s.id }));
  expect(schemas.textBytes).toBeGreaterThan(MAX_PARSED_SCHEMA_BYTES);
  // The next batch trims the rest back under the bound.
  schemas.learn([big(count + 1)]);
  expect(schemas.textBytes).toBeLessThanOrEqual(MAX_PARSED_SCHEMA_BYTES);
});
