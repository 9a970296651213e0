/** One Kafka message as it crosses into a worker. */
export interface RawMessage {
  readonly offset: number;
  /** Kafka timestamp, epoch ms. */
  readonly timestamp: number;
  readonly key: Uint8Array | null;
  readonly value: Uint8Array | null;
}
