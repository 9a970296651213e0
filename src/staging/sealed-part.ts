import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import type { RecordBatch, Schema } from 'apache-arrow';
import { PartCorruptError } from '../common/errors';
import { recordOffset, tpKey, type RecordOffset, type TopicPartitionKey } from '../common/offsets';
import { epochFromMetadata, type StagingEpoch } from './epoch';
import { decodeBatches, scanStream } from './ipc-stream';
import { checkDigestTrailer } from './part-digest';
import { parsePartName, type MinuteKey } from './part-name';
import { OFFSET_COLUMN, PARTITION_COLUMN, TOPIC_COLUMN, systemColumnReader } from './system-columns';

/**
 * The rows of one partition inside a part: offsets never decrease; `rows` may be fewer
 * than the span (filtered records) or more (a multi-row transform's rows share an offset).
 */
export interface PartOffsetRange {
  readonly topic: string;
  readonly partition: number;
  readonly firstOffset: RecordOffset;
  readonly lastOffset: RecordOffset;
  readonly rows: number;
  /** The rows' topic incarnation (`_topic_id`); absent in parts staged before the column. */
  readonly topicId?: string;
}

/** What the planner needs to know of a sealed part. */
export interface SealedPart {
  readonly path: string;
  readonly schemaKey: string;
  readonly minute: MinuteKey;
  readonly epoch: StagingEpoch;
  readonly bytes: number;
  readonly rows: number;
  readonly batches: number;
  /** Of the whole file: `crc32c:` + hex (part-digest.ts, `partChecksum`). */
  readonly checksum: string;
  readonly ranges: readonly PartOffsetRange[];
}

/**
 * Reads and validates a sealed part. A part is self-describing (every row carries
 * `_topic`, `_partition`, `_offset`), so there is no sidecar: a second record of
 * the same facts could disagree with the part after a crash, and the part is the
 * one that gets published. Reading back is cheap beside decoding (bench/report.md),
 * and callers cache the result per path since sealed parts are immutable.
 *
 * A sealed part must be whole: schema, whole batches, end-of-stream, and nothing after
 * but its checksum trailer (part-digest.ts), which must match.
 * Anything else throws PartCorruptError, never a silent half-read.
 */
export async function readSealedPart(
  file: string,
): Promise<{ part: SealedPart; schema: Schema; batches: RecordBatch[] }> {
  const name = parsePartName(path.basename(file));
  if (!name || name.state !== 'sealed') throw new PartCorruptError(file, 'not a sealed part name');
  const bytes = await fsp.readFile(file);
  const scan = scanStream(bytes);
  if (scan.damage)
    throw new PartCorruptError(file, `${scan.damage.reason} (message at byte ${scan.damage.offset})`);
  if (!scan.hasSchema) throw new PartCorruptError(file, 'no schema message');
  if (!scan.ended)
    throw new PartCorruptError(file, `no end-of-stream marker (${scan.trailingBytes} torn bytes)`);
  const trailer = checkDigestTrailer(bytes, scan.validLength);
  if (trailer.kind === 'invalid') throw new PartCorruptError(file, trailer.reason);
  let decoded: { schema: Schema; batches: RecordBatch[] };
  try {
    decoded = decodeBatches(bytes);
  } catch (error) {
    throw new PartCorruptError(file, 'batches do not decode', error);
  }
  const epoch = epochFromMetadata(decoded.schema.metadata);
  if (!epoch) throw new PartCorruptError(file, 'no kafka-lance epoch in the schema metadata');
  let ranges: PartOffsetRange[];
  try {
    ranges = offsetRangesOf(file, decoded.batches);
  } catch (error) {
    // A damaged system column (an offset beyond 2^53, a null partition): set aside, never a throw.
    if (error instanceof PartCorruptError) throw error;
    throw new PartCorruptError(file, 'its system columns do not read as offsets', error);
  }
  const rows = decoded.batches.reduce((n, b) => n + b.numRows, 0);
  return {
    schema: decoded.schema,
    batches: decoded.batches,
    part: {
      path: file,
      schemaKey: name.schemaKey,
      minute: name.minute,
      epoch,
      bytes: bytes.byteLength,
      rows,
      batches: decoded.batches.length,
      checksum: trailer.checksum,
      ranges,
    },
  };
}

/** Per-partition offset ranges of staged batches, checking that offsets never go backwards per partition. */
export function offsetRangesOf(file: string, batches: readonly RecordBatch[]): PartOffsetRange[] {
  const ranges = new Map<
    TopicPartitionKey,
    { topic: string; partition: number; first: number; last: number; rows: number; topicId?: string }
  >();
  for (const batch of batches) {
    const topics = batch.getChild(TOPIC_COLUMN);
    const partitions = batch.getChild(PARTITION_COLUMN);
    const offsets = batch.getChild(OFFSET_COLUMN);
    if (!topics || !partitions || !offsets)
      throw new PartCorruptError(file, 'missing _topic/_partition/_offset');
    const reader = systemColumnReader(batch);
    if (!reader) throw new PartCorruptError(file, 'system columns have unexpected types');
    // A staged batch holds one partition's rows: the previous row's entry is the usual hit.
    let r:
      | { topic: string; partition: number; first: number; last: number; rows: number; topicId?: string }
      | undefined;
    for (let i = 0; i < batch.numRows; i++) {
      const topic = reader.topic(i);
      const partition = reader.partition(i);
      const offset = reader.offset(i);
      if (r === undefined || r.partition !== partition || r.topic !== topic)
        r = ranges.get(tpKey(topic, partition));
      if (!r) {
        // One epoch stages a partition under one claim, so one incarnation: its first row's id.
        const topicId = reader.topicId(i);
        r = {
          topic,
          partition,
          first: offset,
          last: offset,
          rows: 1,
          ...(topicId === undefined ? {} : { topicId }),
        };
        ranges.set(tpKey(topic, partition), r);
      } else {
        if (offset < r.last) {
          throw new PartCorruptError(
            file,
            `offsets of ${topic}[${partition}] go backwards (${offset} after ${r.last})`,
          );
        }
        r.last = offset;
        r.rows += 1;
      }
    }
  }
  return [...ranges.values()].map((r) => ({
    topic: r.topic,
    partition: r.partition,
    firstOffset: recordOffset(r.first),
    lastOffset: recordOffset(r.last),
    rows: r.rows,
    ...(r.topicId === undefined ? {} : { topicId: r.topicId }),
  }));
}
