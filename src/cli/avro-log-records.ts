/**
 * The log records of log-records.ts as Avro: the schema (the JSON demo's fields, `attrs` as a
 * nested record, `ts` as timestamp-millis) and the conversion of one JSON record to its datum,
 * shared by the Avro demo and the bench's Avro arm so that both carry the same records.
 */

/** The field the second schema version adds. */
export const ADDED_FIELD = 'release';

/** Version 1 of the log records' schema. */
export const LOG_V1 = {
  type: 'record',
  name: 'AppLog',
  namespace: 'kafka_lance.demo',
  fields: [
    { name: 'ts', type: { type: 'long', logicalType: 'timestamp-millis' } },
    { name: 'level', type: 'string' },
    { name: 'service', type: 'string' },
    { name: 'host', type: 'string' },
    { name: 'message', type: 'string' },
    { name: 'status', type: 'int' },
    { name: 'latency_ms', type: 'double' },
    { name: 'trace_id', type: 'string' },
    {
      name: 'attrs',
      type: {
        type: 'record',
        name: 'Attrs',
        fields: [
          { name: 'region', type: 'string' },
          { name: 'attempt', type: 'int' },
          { name: 'seq', type: 'long' },
        ],
      },
    },
  ],
};

/** Version 2: an optional field added (compatible under the registry's BACKWARD rule). */
export const LOG_V2 = {
  ...LOG_V1,
  fields: [...LOG_V1.fields, { name: ADDED_FIELD, type: ['null', 'string'], default: null }],
};

/** One good JSON log record (log-records.ts) as a datum of LOG_V1: the same values, `ts` in epoch ms. */
export function avroLog(json: string): Record<string, unknown> {
  const record = JSON.parse(json) as Record<string, unknown> & { ts: string };
  return { ...record, ts: Date.parse(record.ts) };
}
