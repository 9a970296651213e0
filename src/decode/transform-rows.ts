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

/**
 * A message as a transform receives it (Buffers for the key and a raw value). The Buffers
 * are copies: staged on the main thread, the message's bytes are views into the fetch
 * response, which the dead-letter outbox reads after staging, so a transform that wrote
 * into them would change a dead letter's bytes, and one that kept them would keep the
 * whole response alive outside the queue's byte budget.
 */
export function sourceRecord(topic: string, partition: number, m: RawMessage, value: unknown): SourceRecord {
  return {
    topic,
    partition,
    offset: m.offsetNumber,
    timestamp: m.timestampNumber,
    key: m.key ? Buffer.from(m.key) : null,
    value: value instanceof Uint8Array ? Buffer.from(value) : value,
  };
}
