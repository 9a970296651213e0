/**
 * The Confluent wire format of a Schema Registry serializer's value: magic byte 0, the
 * schema id as 4 bytes big-endian, then the payload (for Avro, the binary encoding of
 * one datum with that writer schema).
 */
export const MAGIC_BYTE = 0;
export const HEADER_BYTES = 5;

export type Framed = { readonly schemaId: number } | { readonly invalid: string };

/** The schema id a value is framed with, or why it is not framed (a dead letter, `wrong-magic-byte`). */
export function frameOf(value: Uint8Array): Framed {
  if (value.byteLength < HEADER_BYTES)
    return {
      invalid: `${value.byteLength} bytes: the Confluent wire format needs ${HEADER_BYTES} (magic byte 0 and a 4-byte schema id)`,
    };
  if (value[0] !== MAGIC_BYTE)
    return {
      invalid: `magic byte 0x${value[0]!.toString(16).padStart(2, '0')}, not 0x00: not the Confluent wire format`,
    };
  return { schemaId: new DataView(value.buffer, value.byteOffset, value.byteLength).getUint32(1, false) };
}

/**
 * A schema another one references (a Protobuf import), by the name the referencing text
 * uses: its text, or why the registry could not give it (the referencing schema is then
 * unsupported; its records are dead letters).
 */
export type ReferencedSchema =
  { readonly name: string; readonly schema: string } | { readonly name: string; readonly missing: string };

/** What the main thread learnt from the registry about one id, sent to the staging workers with a batch. */
export type WriterSchema =
  | {
      readonly id: number;
      /** The registry's `schemaType`: AVRO (also when the registry leaves it out), PROTOBUF, JSON. */
      readonly schemaType: string;
      readonly schema: string;
      /** The schemas it references, and theirs in turn, each name once (absent: none). */
      readonly references?: readonly ReferencedSchema[];
    }
  /** The registry answered that it has no schema with this id. */
  | { readonly id: number; readonly unknown: string };

/** The bytes of a writer schema's texts (its own and its references'): what caches of schemas are bounded by. */
export function schemaTextBytes(s: WriterSchema): number {
  if ('unknown' in s) return Buffer.byteLength(s.unknown);
  let bytes = Buffer.byteLength(s.schema);
  for (const r of s.references ?? []) bytes += Buffer.byteLength('schema' in r ? r.schema : r.missing);
  return bytes;
}

/** Longer message-index lists than this are refused (each index is one level of nesting). */
export const MAX_MESSAGE_INDEXES = 100;

export type MessageIndexes =
  { readonly indexes: readonly number[]; readonly payloadOffset: number } | { readonly invalid: string };

/**
 * The message-index list a Protobuf serializer writes after the 5-byte header: which
 * message of the schema's .proto file the payload is (the first index among the file's
 * top-level messages, each further one among the nested messages of the one before).
 * A zig-zag varint count, then that many zig-zag varint indexes; the single byte 0 stands
 * for [0], the file's first message. Confluent's serializers write zig-zag varints
 * (ByteUtils.writeVarint), and so does every client that interoperates with them.
 */
export function messageIndexesOf(value: Uint8Array, offset = HEADER_BYTES): MessageIndexes {
  let at = offset;
  const next = (what: string): number | { invalid: string } => {
    let result = 0;
    for (let shift = 0; shift < 35; shift += 7) {
      if (at >= value.byteLength)
        return { invalid: `the value ends inside the message-index list's ${what}` };
      const byte = value[at++]!;
      result += (byte & 0x7f) * 2 ** shift;
      if ((byte & 0x80) === 0) {
        // Zig-zag: 0, -1, 1, -2 … are written 0, 1, 2, 3 …
        return result % 2 === 0 ? result / 2 : -(result + 1) / 2;
      }
    }
    return { invalid: `the message-index list's ${what} is a varint longer than 5 bytes` };
  };
  const count = next('count');
  if (typeof count !== 'number') return count;
  if (count === 0) return { indexes: [0], payloadOffset: at };
  if (count < 0 || count > MAX_MESSAGE_INDEXES)
    return {
      invalid: `a message-index count of ${count} (0 to ${MAX_MESSAGE_INDEXES}): not a Protobuf serializer's framing (written without the message-index list?)`,
    };
  const indexes: number[] = [];
  for (let i = 0; i < count; i++) {
    const index = next(`index ${i}`);
    if (typeof index !== 'number') return index;
    if (index < 0) return { invalid: `message index ${index} is negative` };
    indexes.push(index);
  }
  return { indexes, payloadOffset: at };
}
