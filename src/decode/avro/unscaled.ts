/**
 * A big-endian two's-complement integer (Avro's and Kafka Connect's decimal bytes) as a
 * BigInt, in time linear in its length: shifting a BigInt once per byte copies it each time
 * (quadratic), which an unbounded VariableScaleDecimal would turn into minutes per record.
 */
export function unscaledOf(bytes: Uint8Array, start = 0, end = bytes.length): bigint {
  if (end <= start) return 0n;
  const n = BigInt(`0x${Buffer.from(bytes.buffer, bytes.byteOffset + start, end - start).toString('hex')}`);
  return bytes[start]! & 0x80 ? n - (1n << BigInt((end - start) * 8)) : n;
}

/** The most bytes a decimal of precision ≤ 38 takes (Decimal128's); more is a sign extension at best. */
export const MAX_DECIMAL_BYTES = 16;

/**
 * The most bytes a VariableScaleDecimal's unscaled value may take: PostgreSQL's numeric holds
 * at most 131,072 digits before the point and 16,383 after, about 61,200 bytes.
 */
export const MAX_VARIABLE_DECIMAL_BYTES = 64 * 1024;

/** A value too long for its decimal: its record is a dead letter, before any conversion. */
export class DecimalTooLong extends Error {
  constructor(what: string, bytes: number, limit: number) {
    super(`${what} of ${bytes} bytes is beyond the ${limit} it can take`);
    this.name = 'DecimalTooLong';
  }
}
