/**
 * A record as kafkajs's consumer reads it (the same fields, its offset and timestamp as
 * decimal strings), kept with both as numbers. kafkajs's records carry decimal strings, which
 * every reader parses back: printing and parsing them was ~9 % of the main thread on 1M JSON
 * logs (a CPU profile: `offsetFrom`, the staging copy, the batch's offset filter, the
 * dead-letter window). Here the strings are made only when kafkajs asks for them (its batch's
 * first and last offsets), and our readers take the numbers (`offsetNumberOf`).
 *
 * Made only where both numbers are exact (below 2^53: record-batch.ts); any other record
 * stays kafkajs's plain object with its strings.
 */
export class FetchedRecord {
  readonly magicByte: number;
  readonly attributes: number;
  /** The record's offset, exact. */
  readonly offsetNumber: number;
  /** Its timestamp (epoch ms), exact. */
  readonly timestampNumber: number;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  readonly headers: Record<string, unknown>;
  /** Set by the abort filter too (fetched-batch.ts). */
  isControlRecord: boolean;
  readonly batchContext: object;

  constructor(
    magicByte: number,
    attributes: number,
    offsetNumber: number,
    timestampNumber: number,
    key: Buffer | null,
    value: Buffer | null,
    headers: Record<string, unknown>,
    isControlRecord: boolean,
    batchContext: object,
  ) {
    this.magicByte = magicByte;
    this.attributes = attributes;
    this.offsetNumber = offsetNumber;
    this.timestampNumber = timestampNumber;
    this.key = key;
    this.value = value;
    this.headers = headers;
    this.isControlRecord = isControlRecord;
    this.batchContext = batchContext;
  }

  /** kafkajs's offset: a decimal string. */
  get offset(): string {
    return String(this.offsetNumber);
  }

  /** kafkajs's timestamp: a decimal string. */
  get timestamp(): string {
    return String(this.timestampNumber);
  }
}

/** A record's offset as a number (exact for every offset a partition reaches). */
export function offsetNumberOf(record: { readonly offset: string }): number {
  return record instanceof FetchedRecord ? record.offsetNumber : Number(record.offset);
}

/** A record's timestamp (epoch ms) as a number. */
export function timestampNumberOf(record: { readonly timestamp: string }): number {
  return record instanceof FetchedRecord ? record.timestampNumber : Number(record.timestamp);
}
