/**
 * How much of a writer schema the registry formats' mappings (avro/, protobuf/,
 * json-schema/) will map. Anyone allowed to register a schema chooses its shape, and a
 * schema's text does not bound its columns: a 2 KB Avro schema whose levels each hold two
 * fields of the next level's named type is 2^depth fields once expanded (depth 21 ran the
 * replica out of heap). A schema beyond these limits is unsupported (its records are
 * dead letters, unsupported-schema), found while mapping, so that the work done on it is
 * bounded by the limits too.
 */

/** Fields in all, nested ones included and a named type counted at each use (the Arrow schema's size). */
export const MAX_SCHEMA_FIELDS = 10_000;
/**
 * Fields in all, nested ones included, of the table's columns that writer schemas made: each
 * schema is bounded by MAX_SCHEMA_FIELDS and the columns by `maxInferredColumns`, but versions
 * that each add one struct column of thousands of nested fields would pass both. A writer
 * schema that would take the table beyond this makes its records `too-many-columns` dead letters.
 */
export const MAX_TABLE_FIELDS = MAX_SCHEMA_FIELDS;
/** Levels of nesting (struct, list, map, union) below a top-level column. */
export const MAX_SCHEMA_DEPTH = 32;

interface Measured<T> {
  readonly value: T;
  readonly fields: number;
  readonly height: number;
}

/**
 * One schema's count while it is mapped. A named type (an Avro record, a Protobuf
 * message) is mapped once (`once`): a later use adds what its first mapping measured,
 * without walking it again.
 */
export class SchemaBudget {
  #fields = 0;
  #depth = 0;
  #deepest = 0;
  readonly #memo = new Map<string, Measured<unknown>>();

  /** `unsupported`: the mapping's own error for a schema it cannot take. */
  constructor(private readonly unsupported: (why: string) => Error) {}

  /** `count` more fields at the current level. */
  fields(count = 1): void {
    this.#fields += count;
    if (this.#fields > MAX_SCHEMA_FIELDS)
      throw this.unsupported(
        `more than ${MAX_SCHEMA_FIELDS} fields, nested ones included (a named type counts at each use)`,
      );
  }

  /** Maps a type one level further down. */
  nested<T>(map: () => T): T {
    this.#reach(1);
    this.#depth++;
    try {
      return map();
    } finally {
      this.#depth--;
    }
  }

  /** The mapping of the named type `name`, made at its first use and counted again at each. */
  once<T>(name: string, map: () => T): T {
    const known = this.#memo.get(name) as Measured<T> | undefined;
    if (known) {
      this.#reach(known.height);
      this.fields(known.fields);
      return known.value;
    }
    const fieldsBefore = this.#fields;
    const deepestBefore = this.#deepest;
    this.#deepest = this.#depth;
    const value = map();
    this.#memo.set(name, { value, fields: this.#fields - fieldsBefore, height: this.#deepest - this.#depth });
    this.#deepest = Math.max(deepestBefore, this.#deepest);
    return value;
  }

  #reach(levels: number): void {
    if (this.#depth + levels > MAX_SCHEMA_DEPTH)
      throw this.unsupported(`nested more than ${MAX_SCHEMA_DEPTH} levels deep`);
    this.#deepest = Math.max(this.#deepest, this.#depth + levels);
  }
}
