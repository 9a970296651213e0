import type { OwnerEpoch } from '../ownership/owner-epoch';

/**
 * Who staged a part, and in which ownership period. Every part records its epoch
 * in its Arrow schema metadata, and a part never spans two epochs: the staging
 * seals every open part before a new epoch's first push.
 *
 * The (owner, epoch) pair is ownership's (ownership/owner-epoch.ts). The planner maps it to an ownership epoch of each partition (the
 * chain kept in the Kafka offset metadata) to find the ceiling below which the
 * part's rows of that partition may be published. Rows at or above it were
 * re-consumed by the next owner and are cut (DESIGN.md, "Ceiling rule").
 */
export interface StagingEpoch extends OwnerEpoch {
  /**
   * Topic → Kafka topic id as claimed for this epoch (ownership/claim.ts): every row
   * staged in the epoch carries its topic's (`_topic_id`), so that a topic deleted and
   * recreated under the same name, whose offsets start again at 0, never shares a row
   * key with its old incarnation. A topic absent here has no known id ('' on its rows).
   */
  readonly topicIds?: Readonly<Record<string, string>>;
}

export const OWNER_METADATA_KEY = 'kafka-lance.owner';
export const EPOCH_METADATA_KEY = 'kafka-lance.epoch';

export function epochMetadata(epoch: StagingEpoch): Array<[string, string]> {
  return [
    [OWNER_METADATA_KEY, epoch.owner],
    [EPOCH_METADATA_KEY, String(epoch.epoch)],
  ];
}

/** Reads the epoch back from a part's schema metadata; undefined when it is missing or malformed. */
export function epochFromMetadata(metadata: ReadonlyMap<string, string>): StagingEpoch | undefined {
  const owner = metadata.get(OWNER_METADATA_KEY);
  const epoch = Number(metadata.get(EPOCH_METADATA_KEY));
  if (!owner || !Number.isSafeInteger(epoch) || epoch < 0) return undefined;
  return { owner, epoch };
}
