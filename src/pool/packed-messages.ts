import type { RawMessage } from '../decode/raw-message';
import { offsetNumberOf, timestampNumberOf } from '../common/fetched-record';

/**
 * A Kafka batch packed into two transferable buffers, so crossing into a worker
 * costs one copy of the bytes and no structured clone per message:
 * `meta` holds 4 numbers per message (offset, timestamp, key length, value length;
 * -1 for null) and `data` the keys and values back to back.
 */
export interface PackedMessages {
  readonly count: number;
  readonly meta: Float64Array;
  readonly data: Uint8Array;
}

/** The bytes `meta` holds per message (4 doubles). */
export const PACKED_META_BYTES = 32;

export interface PackableMessage {
  readonly offset: string;
  readonly timestamp: string;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
}

export function packMessages(messages: readonly PackableMessage[]): PackedMessages {
  let total = 0;
  for (const m of messages) total += (m.key?.byteLength ?? 0) + (m.value?.byteLength ?? 0);
  const meta = new Float64Array(messages.length * 4);
  const data = new Uint8Array(total);
  let pos = 0;
  messages.forEach((m, i) => {
    meta[i * 4] = offsetNumberOf(m);
    meta[i * 4 + 1] = timestampNumberOf(m);
    meta[i * 4 + 2] = m.key ? m.key.byteLength : -1;
    meta[i * 4 + 3] = m.value ? m.value.byteLength : -1;
    if (m.key) {
      data.set(m.key, pos);
      pos += m.key.byteLength;
    }
    if (m.value) {
      data.set(m.value, pos);
      pos += m.value.byteLength;
    }
  });
  return { count: messages.length, meta, data };
}

/** Views into the packed buffers (no copy). */
export function unpackMessages(packed: PackedMessages): RawMessage[] {
  const out: RawMessage[] = new Array<RawMessage>(packed.count);
  let pos = 0;
  for (let i = 0; i < packed.count; i++) {
    const keyLength = packed.meta[i * 4 + 2]!;
    const valueLength = packed.meta[i * 4 + 3]!;
    const key = keyLength < 0 ? null : packed.data.subarray(pos, (pos += keyLength));
    const value = valueLength < 0 ? null : packed.data.subarray(pos, (pos += valueLength));
    out[i] = { offsetNumber: packed.meta[i * 4]!, timestampNumber: packed.meta[i * 4 + 1]!, key, value };
  }
  return out;
}

export const packedBytes = (p: PackedMessages): number => p.data.byteLength + p.meta.byteLength;
