/** What kafkajs's consumer may fetch at once (its `maxBytesPerPartition` and `maxBytes`). */
export interface FetchSizes {
  readonly maxBytesPerPartition: number;
  readonly maxBytes: number;
}

/**
 * The fetch sizes of a consumer whose staging queue holds `queueMaxBytes`
 * (`queue.maxBytes`): a fetch, and a partition's part of it, as large as the queue.
 *
 * kafkajs keeps one fetch in flight per broker and asks for the next only once every
 * batch of the last was admitted, so what one fetch brings bounds the consumption rate
 * at one fetch per broker round trip. A partition's fetch also ends inside a record
 * batch, which the broker sends cut and the client drops: at 4 MiB a partition and
 * kafkajs's 10 MiB a fetch, 16 KB vectors produced in 3 MiB batches came 6.2 MiB a fetch
 * (998 MiB sent for 777), 130 round trips for 774 MiB. Each batch of a fetch waits for
 * room in the queue before the next is handed out. Twice the queue in all kept the lanes
 * no busier but raised a log-record replica's peak RSS from ~430 to 515 MiB, past the
 * memory budget; as large as the queue it stayed at 455-496 MiB (bench/report.md's
 * e2e-buffered, docs/design/memory.md).
 */
export function fetchSizes(queueMaxBytes: number): FetchSizes {
  return { maxBytesPerPartition: queueMaxBytes, maxBytes: queueMaxBytes };
}
