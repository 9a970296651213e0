import { KafkaLanceError } from '../common/errors';
import { describeRowKey } from '../lance/row-counts';

/** A publication whose descriptors do not add up to its plan: nothing was written. */
export class PublicationMismatchError extends KafkaLanceError {
  constructor(planId: string, detail: string) {
    super('PUBLICATION_MISMATCH', `publication ${planId}: ${detail}`, { context: { planId } });
  }
}

/**
 * An insert-if-absent that resolved, yet the table lacks some of its row keys: a
 * commit lost on a store that was taken for atomic. The publication stays `writing`
 * and is retried (its next write inserts only the absent keys).
 */
export class CommitLostError extends KafkaLanceError {
  constructor(planId: string, table: string, found: number, rows: number) {
    super(
      'LANCE_WRITE_FAILED',
      `publication ${planId}: the write resolved but table ${table} holds ${found} of its ${rows} rows (a commit was lost)`,
      { retriable: true, context: { planId, table, found, rows } },
    );
  }
}

/** A publication found half in the table after a crash: it cannot be resolved without a human. */
export class PartialPublicationError extends KafkaLanceError {
  constructor(
    planId: string,
    table: string,
    found: number,
    expected: number,
    message = `table ${table} holds ${found} of the ${expected} rows of publication ${planId}; a Lance add is atomic, so this is not ours to repair: stopping the table`,
    context: Readonly<Record<string, unknown>> = {},
  ) {
    super('PUBLICATION_PARTIAL', message, { context: { planId, table, found, expected, ...context } });
  }
}

/**
 * A row key (_topic, _partition, _offset[, _row]) the table holds more than once in a
 * publication's offset runs: a real duplicate, which no earlier owner or transform
 * explains. It stops the table like a partial publication.
 */
export class DuplicatedRowsError extends PartialPublicationError {
  constructor(planId: string, table: string, found: number, expected: number, duplicated: readonly string[]) {
    const examples = duplicated.slice(0, 5).map(describeRowKey);
    super(
      planId,
      table,
      found,
      expected,
      `table ${table} holds ${duplicated.length} row key(s) of publication ${planId} twice or more (${examples.join(', ')}${duplicated.length > examples.length ? ', ...' : ''}): rows were inserted twice; stopping the table`,
      { duplicatedKeys: duplicated.length, examples },
    );
  }
}
