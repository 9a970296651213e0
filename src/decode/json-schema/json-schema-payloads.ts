import Ajv, { type ValidateFunction } from 'ajv';
import Ajv2019 from 'ajv/dist/2019';
import Ajv2020 from 'ajv/dist/2020';
import { errorMessage } from '../../common/errors';
import { HEADER_BYTES } from '../../schema-registry/wire-format';
import { mayHoldUnsafeInteger, parseJsonExact } from '../exact-json';
import type { RegistryPayloadFormat } from '../registry-writer-schemas';
import { jsonSchemaColumns, UnsupportedJsonSchema, type JsonSchemaColumns } from './json-schema-mapping';

/**
 * At most this many objects and arrays in a writer schema (every subschema, `properties`
 * and `definitions` included): ajv's compile time grows with about the square of a
 * schema's size (1,000 properties 0.6 s, 2,000 3.6 s; 4,000 overflow its stack, and 10,001
 * held a staging lane 78 s), and it compiles the whole document, parts the columns never
 * read included.
 */
export const MAX_VALIDATED_NODES = 2_000;

/** Objects and arrays in a parsed JSON document, counted without recursion (a deep one must not overflow). */
function subschemaCount(json: unknown): number {
  let count = 0;
  const stack: unknown[] = [json];
  while (stack.length > 0) {
    const node = stack.pop();
    if (node === null || typeof node !== 'object') continue;
    count += 1;
    if (count > MAX_VALIDATED_NODES) return count;
    for (const child of Array.isArray(node) ? node : Object.values(node)) stack.push(child);
  }
  return count;
}

interface ParsedJsonSchema {
  readonly validate: ValidateFunction;
  readonly columns: JsonSchemaColumns;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * JSON Schema in the Confluent wire format: the 5-byte header, then the value as UTF-8
 * JSON; the registry holds the schema (schemaType JSON).
 *
 * Each value is validated against its whole writer schema (ajv), not only what the
 * columns need: a value the schema rejects (a `minimum`, a `pattern`, an `enum`, a
 * missing `required` property) is a dead letter (schema-validation-failed) naming the
 * first violation, as Confluent's deserializer refuses it, so the table holds only what
 * the topic's contract allows. `format` keywords are not asserted by the validator (JSON
 * Schema makes them annotations by default); the columns that need one (`date-time`,
 * `date`) check it as they convert the value. Drafts: 2020-12 and 2019-09 by their
 * `$schema`, otherwise draft-07 (which reads draft-06 schemas too).
 */
export const JSON_SCHEMA_PAYLOADS: RegistryPayloadFormat<ParsedJsonSchema> = {
  format: 'json-schema',
  schemaType: 'JSON',
  parse(schema) {
    const json = JSON.parse(schema) as Parameters<typeof jsonSchemaColumns>[0] & { $schema?: unknown };
    const draft =
      typeof json === 'object' && json !== null && !Array.isArray(json) ? json.$schema : undefined;
    const options = { strict: false, validateFormats: false, allErrors: false } as const;
    // One validator per schema id: versions of a subject often share one `$id`, which one
    // Ajv instance would refuse to hold twice.
    const ajv =
      typeof draft === 'string' && draft.includes('2020-12')
        ? new Ajv2020(options)
        : typeof draft === 'string' && draft.includes('2019-09')
          ? new Ajv2019(options)
          : new Ajv(options);
    // Columns first: a schema beyond the mapping's limits is refused before ajv compiles it.
    const columns = jsonSchemaColumns(json);
    const nodes = subschemaCount(json);
    if (nodes > MAX_VALIDATED_NODES)
      throw new UnsupportedJsonSchema(
        `${nodes} objects and arrays in the schema, more than the ${MAX_VALIDATED_NODES} its validator is compiled for`,
      );
    return { validate: ajv.compile(json as object), columns };
  },
  decode(parsed, value) {
    const payload = value.subarray(HEADER_BYTES);
    let text: string;
    try {
      text = utf8.decode(payload);
    } catch {
      return { reason: 'undecodable-payload', detail: 'the payload is not valid UTF-8' };
    }
    let json: unknown;
    const exact = mayHoldUnsafeInteger(payload);
    try {
      json = exact ? parseJsonExact(text) : JSON.parse(text);
    } catch (error) {
      return { reason: 'undecodable-payload', detail: `the payload is not JSON: ${errorMessage(error)}` };
    }
    // The validator knows numbers, not BigInt: it checks a copy where big integers are the
    // nearest double (right for type and range checks); the row keeps the exact values.
    if (!parsed.validate(exact ? withNumbers(json) : json)) {
      const first = parsed.validate.errors?.[0];
      const where = first?.instancePath ? `at ${first.instancePath}` : 'the value';
      return {
        reason: 'schema-validation-failed',
        detail: `the writer schema rejects the payload: ${where} ${first?.message ?? 'is invalid'} (${first?.schemaPath ?? ''})`,
      };
    }
    const row = parsed.columns.toRow(json);
    if (!row) return { reason: 'undecodable-payload', detail: 'the payload is not an object' };
    return { row, fields: parsed.columns.fields };
  },
};

function withNumbers(value: unknown): unknown {
  if (typeof value === 'bigint') return Number(value);
  if (Array.isArray(value)) return value.map(withNumbers);
  if (value !== null && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withNumbers(v)]));
  return value;
}
