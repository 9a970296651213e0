/** What a definition's `transform` takes and gives back. */

/** A record as a transform sees it. */
export interface SourceRecord {
  readonly topic: string;
  readonly partition: number;
  readonly offset: number;
  /** Kafka timestamp, epoch milliseconds. */
  readonly timestamp: number;
  readonly key: Buffer | null;
  /**
   * The parsed JSON value (format `json`), or the raw bytes (format `raw`). Integer
   * literals beyond Number.MAX_SAFE_INTEGER are BigInt, exact (JSON.parse would round them).
   */
  readonly value: unknown;
}
export type Row = Record<string, unknown>;
export type Transform = (record: SourceRecord) => Row | readonly Row[] | null | undefined;
