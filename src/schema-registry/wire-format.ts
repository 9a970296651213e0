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

/** What the main thread learnt from the registry about one id, sent to the staging workers with a batch. */
export type WriterSchema =
  | {
      readonly id: number;
      /** The registry's `schemaType`: AVRO (also when the registry leaves it out), PROTOBUF, JSON. */
      readonly schemaType: string;
      readonly schema: string;
    }
  /** The registry answered that it has no schema with this id. */
  | { readonly id: number; readonly unknown: string };
