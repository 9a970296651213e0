import { RecordDecoder, type DecoderOptions, type RawMessage } from '../../src/decode/record-decoder';

/** Shared by the decoder tests: a fixed clock, message and column helpers, one declared schema. */
export const NOW = Date.UTC(2026, 10, 30, 12, 0, 0);

const enc = (s: string) => new TextEncoder().encode(s);

export const msg = (
  offset: number,
  value: string | Uint8Array | null,
  key: string | null = null,
): RawMessage => ({
  offsetNumber: offset,
  timestampNumber: NOW + offset,
  key: key === null ? null : enc(key),
  value: value === null ? null : typeof value === 'string' ? enc(value) : value,
});

export const base: DecoderOptions = {
  format: 'json',
  fields: undefined,
  transform: undefined,
  eventTimeField: undefined,
  includeKey: false,
  maxRecordBytes: 1024 * 1024,
  tombstones: 'dead-letter',
  epochUnit: 'ms',
  maxInferredColumns: 256,
};

export const decoder = (options: Partial<DecoderOptions> = {}) =>
  new RecordDecoder({ ...base, ...options }, () => NOW);

export function column(
  batch: NonNullable<ReturnType<RecordDecoder['decode']>['batch']>,
  name: string,
): unknown[] {
  const c = batch.getChild(name)!;
  return Array.from({ length: batch.numRows }, (_, i) => c.get(i) as unknown);
}

/** Decodes each value as its own message (offsets 0..n-1). */
export function decodeAll(d: RecordDecoder, values: readonly string[]) {
  return d.decode(
    't',
    0,
    values.map((v, i) => msg(i, v)),
  );
}
