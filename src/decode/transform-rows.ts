import type { Row, SourceRecord } from '../config';
import type { RawMessage } from './raw-message';

/** What a transform returned, as rows: nothing, one object or an array of objects. */
export function normalizeRows(result: Row | readonly Row[] | null | undefined): readonly Row[] {
  if (result === null || result === undefined) return [];
  const rows = Array.isArray(result) ? (result as readonly Row[]) : [result as Row];
  for (const r of rows) {
    if (r === null || typeof r !== 'object' || Array.isArray(r))
      throw new TypeError('a transform must return objects');
  }
  return rows;
}

/** A message as a transform receives it (Buffers for the key and a raw value). */
export function sourceRecord(topic: string, partition: number, m: RawMessage, value: unknown): SourceRecord {
  return {
    topic,
    partition,
    offset: m.offset,
    timestamp: m.timestamp,
    key: m.key ? Buffer.from(m.key.buffer, m.key.byteOffset, m.key.byteLength) : null,
    value:
      value instanceof Uint8Array ? Buffer.from(value.buffer, value.byteOffset, value.byteLength) : value,
  };
}
