/**
 * One Kafka message as staging takes it. Its offset and timestamp are named apart from
 * kafkajs's decimal-string `offset` and `timestamp`, so that a record read in place
 * (src/common/fetched-record.ts) is one as it is, without a copy per record.
 */
export interface RawMessage {
  readonly offsetNumber: number;
  /** Kafka timestamp, epoch ms. */
  readonly timestampNumber: number;
  readonly key: Uint8Array | null;
  readonly value: Uint8Array | null;
}
