import type { NamedField } from '../../config';
import { columnNameProblem } from '../../config/column-name';
import { identity, mapEntries, structField, type Mapped } from '../column-mapping';
import { SchemaBudget } from '../schema-budget';
import { DecimalTooLong, MAX_DECIMAL_BYTES, MAX_VARIABLE_DECIMAL_BYTES, unscaledOf } from './unscaled';

/**
 * How an Avro writer schema becomes columns, and its decoded values become values the
 * column codecs take (src/decode/typed-codecs.ts). Read from the schema's JSON, not from
 * avsc's Type objects, because avsc drops the logical-type attributes it has no class for.
 *
 * - A top-level record: one column per field, every column nullable (a record of another
 *   schema version may lack the field). Any other top-level type: one column, `value`.
 * - null | T (either order) → T, nullable. A union of other branches → a struct with one
 *   nullable field per branch, named by the branch (`int`, `string`, a record's or enum's
 *   short name), of which the value's branch is set (the struct is null for the null branch).
 * - record → struct; enum → string; fixed, bytes → binary; array → list; map →
 *   list<struct<{key: string, value: T}>> (Lance has no map type; the keys' order is the
 *   payload's); int → int32, long → int64 (exact, as BigInt), float → float32,
 *   double → float64, boolean, string.
 * - With `connectTypes` (the Debezium envelope only; otherwise they are their Avro base
 *   types), Kafka Connect's types named by `connect.name` (connectType): Debezium's io.debezium.time
 *   Date → date, Timestamp / MicroTimestamp / NanoTimestamp → timestamp(ms / us / ns)
 *   without a zone, ZonedTimestamp (ISO text) → timestamp(us, UTC); a Connect Decimal
 *   without Avro's logical type → decimal(precision or 38, its `scale` parameter); Debezium's
 *   VariableScaleDecimal (a numeric without precision: a record of scale and unscaled bytes)
 *   → string, the exact decimal text at each value's own scale.
 * - Logical types: decimal (bytes or fixed; precision ≤ 38) → decimal(p, s); date → date;
 *   timestamp-millis / -micros → timestamp(ms / us, UTC); local-timestamp-millis / -micros →
 *   timestamp(ms / us) without a zone; time-millis → int32 and time-micros → int64 (since
 *   midnight: the column types have no Arrow Time); uuid → string. An unknown logical type
 *   is its underlying type (the Avro specification's rule).
 * - A recursive record (a field that refers to an enclosing record) has no Arrow type:
 *   the schema is unsupported, and its records are dead letters; so is a schema beyond
 *   the limits of schema-budget.ts (a named type is mapped once and counted at each use).
 */
export interface AvroColumns {
  readonly fields: readonly NamedField[];
  /** The row of one decoded value (avsc, wrapped unions, longs as BigInt). */
  readonly toRow: (value: unknown) => Record<string, unknown>;
}

/** A writer schema this mapping cannot turn into columns: its records are dead letters. */
export class UnsupportedAvroSchema extends Error {}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };
export const VALUE_COLUMN = 'value';

export interface AvroMappingOptions {
  /**
   * Map Kafka Connect's `connect.name` types as what they mean (connectType): only for
   * Debezium's envelope. A plain Avro consumer keeps their Avro base types, the columns a table
   * created before this mapping existed has (a MicroTimestamp as int64, a ZonedTimestamp as
   * string, a Connect Decimal without Avro's logical type as binary): mapping the same writer
   * schema to other types would refuse every later publication into it.
   */
  readonly connectTypes?: boolean;
}

export function avroColumns(schema: Json, options: AvroMappingOptions = {}): AvroColumns {
  const names = new NamedTypes(options.connectTypes ?? false);
  const top = names.resolve(schema, '');
  if (isObject(top) && top.type === 'record') {
    const namespace = names.namespaceOf(top, '');
    names.enter(top, namespace);
    const fields = recordFields(top, namespace, names);
    const mapped = fields.map(({ name, mapped }) => ({ name, ...mapped.field, nullable: true }));
    return {
      fields: mapped,
      toRow: (value) => {
        const record = value as Record<string, unknown>;
        const row: Record<string, unknown> = {};
        for (const f of fields) row[f.name] = f.mapped.toValue(record[f.name]);
        return row;
      },
    };
  }
  const mapped = mapType(schema, '', names);
  return {
    fields: [{ name: VALUE_COLUMN, ...mapped.field, nullable: true }],
    toRow: (value) => ({ [VALUE_COLUMN]: mapped.toValue(value) }),
  };
}

function recordFields(
  record: JsonObject,
  namespace: string,
  names: NamedTypes,
): { name: string; mapped: Mapped }[] {
  const fields = record.fields;
  if (!Array.isArray(fields))
    throw new UnsupportedAvroSchema(`record ${JSON.stringify(record.name)} has no fields`);
  return fields.map((f) => {
    if (!isObject(f) || typeof f.name !== 'string') throw new UnsupportedAvroSchema('a field without a name');
    names.budget.fields();
    const problem = columnNameProblem(f.name);
    if (problem !== undefined) throw new UnsupportedAvroSchema(`field "${f.name}": ${problem}`);
    return { name: f.name, mapped: mapType(f.type ?? null, namespace, names) };
  });
}

function mapType(schema: Json, namespace: string, names: NamedTypes): Mapped {
  if (Array.isArray(schema)) return mapUnion(schema, namespace, names);
  const resolved = names.resolve(schema, namespace);
  if (typeof resolved === 'string') return primitive(resolved);
  if (!isObject(resolved)) throw new UnsupportedAvroSchema(`not an Avro type: ${JSON.stringify(schema)}`);
  const logical =
    (typeof resolved.logicalType === 'string' ? logicalType(resolved) : undefined) ??
    (names.connectTypes ? connectType(resolved) : undefined);
  if (logical) return logical;
  switch (resolved.type) {
    case 'record': {
      const inner = names.namespaceOf(resolved, namespace);
      return names.budget.nested(() =>
        names.budget.once(names.fullName(resolved, namespace), () => {
          names.enter(resolved, inner);
          try {
            const fields = recordFields(resolved, inner, names);
            return {
              field: structField(fields, false),
              toValue: (v: unknown) => {
                const record = v as Record<string, unknown>;
                const out: Record<string, unknown> = {};
                for (const f of fields) out[f.name] = f.mapped.toValue(record[f.name]);
                return out;
              },
            };
          } finally {
            names.leave(resolved, inner);
          }
        }),
      );
    }
    case 'enum':
      return { field: { type: 'string', nullable: false }, toValue: identity };
    case 'fixed':
      return { field: { type: 'binary', nullable: false }, toValue: identity };
    case 'array': {
      const items = names.budget.nested(() => mapType(resolved.items ?? null, namespace, names));
      return {
        field: { type: 'list', items: items.field, nullable: false },
        toValue: (v) => (v as unknown[]).map(items.toValue),
      };
    }
    case 'map': {
      // Avro's map keys are strings.
      const keys: Mapped = { field: { type: 'string', nullable: false }, toValue: identity };
      return mapEntries(
        keys,
        names.budget.nested(() => mapType(resolved.values ?? null, namespace, names)),
      );
    }
    default:
      // { "type": "string" } and the like: a primitive written as an object.
      if (typeof resolved.type === 'string' && !isNamedDefinition(resolved))
        return mapType(resolved.type, namespace, names);
      throw new UnsupportedAvroSchema(`not an Avro type: ${JSON.stringify(resolved).slice(0, 200)}`);
  }
}

function primitive(name: string): Mapped {
  switch (name) {
    case 'null':
      throw new UnsupportedAvroSchema('a null type outside a union has no column');
    case 'boolean':
      return { field: { type: 'boolean', nullable: false }, toValue: identity };
    case 'int':
      return { field: { type: 'int32', nullable: false }, toValue: identity };
    case 'long':
      return { field: { type: 'int64', nullable: false }, toValue: identity };
    case 'float':
      return { field: { type: 'float32', nullable: false }, toValue: identity };
    case 'double':
      return { field: { type: 'float64', nullable: false }, toValue: identity };
    case 'bytes':
      return { field: { type: 'binary', nullable: false }, toValue: identity };
    case 'string':
      return { field: { type: 'string', nullable: false }, toValue: identity };
    default:
      throw new UnsupportedAvroSchema(`unknown type name "${name}"`);
  }
}

function logicalType(schema: JsonObject): Mapped | undefined {
  const base = schema.type;
  switch (schema.logicalType) {
    case 'decimal': {
      if (base !== 'bytes' && base !== 'fixed') return undefined;
      const precision = schema.precision;
      const scale = schema.scale ?? 0;
      if (typeof precision !== 'number' || typeof scale !== 'number' || scale > precision) return undefined;
      if (precision > 38)
        throw new UnsupportedAvroSchema(`decimal precision ${precision} is above Decimal128's 38`);
      return {
        field: { type: 'decimal', precision, scale, nullable: false },
        // Exact: the unscaled two's-complement integer, read back by the decimal codec at its scale.
        toValue: (v) => {
          const bytes = v as Uint8Array;
          // A fixed's length is its schema's; bytes are as long as the writer made them.
          if (base === 'bytes' && bytes.length > MAX_DECIMAL_BYTES)
            throw new DecimalTooLong(`a decimal(${precision}, ${scale})`, bytes.length, MAX_DECIMAL_BYTES);
          return `${unscaledOf(bytes)}e-${scale}`;
        },
      };
    }
    case 'date':
      return base === 'int' ? { field: { type: 'date', nullable: false }, toValue: identity } : undefined;
    case 'time-millis':
      return base === 'int' ? { field: { type: 'int32', nullable: false }, toValue: identity } : undefined;
    case 'time-micros':
      return base === 'long' ? { field: { type: 'int64', nullable: false }, toValue: identity } : undefined;
    case 'timestamp-millis':
    case 'timestamp-micros':
    case 'local-timestamp-millis':
    case 'local-timestamp-micros': {
      if (base !== 'long') return undefined;
      const unit = schema.logicalType.endsWith('micros') ? 'us' : 'ms';
      const zone = schema.logicalType.startsWith('local-') ? {} : { timezone: 'UTC' };
      return {
        field: { type: 'timestamp', unit, epochUnit: unit, ...zone, nullable: false },
        toValue: identity,
      };
    }
    case 'uuid':
      return base === 'string'
        ? { field: { type: 'string', nullable: false }, toValue: identity }
        : undefined;
    default:
      return undefined;
  }
}

/**
 * Kafka Connect's logical types that Avro has no logical type for, named by the converter's
 * `connect.name` annotation (Debezium's temporal types, a Connect decimal without Avro's
 * `decimal`): mapped as their meaning, not as the int, long or string that carries them.
 */
function connectType(schema: JsonObject): Mapped | undefined {
  const base = schema.type;
  const timestamp = (unit: 'ms' | 'us' | 'ns', zone: { timezone?: string } = {}): Mapped => ({
    field: { type: 'timestamp', unit, epochUnit: unit, ...zone, nullable: false },
    toValue: identity,
  });
  switch (schema['connect.name']) {
    // Days since the epoch (PostgreSQL date).
    case 'io.debezium.time.Date':
      return base === 'int' ? { field: { type: 'date', nullable: false }, toValue: identity } : undefined;
    // A local date-time (timestamp without time zone) as epoch ms, µs or ns of its UTC reading.
    case 'io.debezium.time.Timestamp':
      return base === 'long' ? timestamp('ms') : undefined;
    case 'io.debezium.time.MicroTimestamp':
      return base === 'long' ? timestamp('us') : undefined;
    case 'io.debezium.time.NanoTimestamp':
      return base === 'long' ? timestamp('ns') : undefined;
    // An instant as ISO-8601 text with its offset (timestamptz), to the microsecond.
    case 'io.debezium.time.ZonedTimestamp':
      return base === 'string' ? timestamp('us', { timezone: 'UTC' }) : undefined;
    // PostgreSQL's numeric without a precision: each value with its own scale, as exact text.
    case 'io.debezium.data.VariableScaleDecimal': {
      const fields = Array.isArray(schema.fields) ? schema.fields : [];
      const typeOf = (name: string) => {
        const f = fields.find((x) => isObject(x) && x.name === name);
        return isObject(f) ? f.type : undefined;
      };
      if (base !== 'record' || typeOf('scale') !== 'int' || typeOf('value') !== 'bytes') return undefined;
      return {
        field: { type: 'string', nullable: false },
        toValue: (v) => {
          const { scale, value } = v as { scale: number; value: Uint8Array };
          // PostgreSQL's bound; a wild scale would make text of any length.
          if (Math.abs(scale) > MAX_NUMERIC_SCALE)
            throw new Error(`a VariableScaleDecimal's scale ${scale} is beyond ±${MAX_NUMERIC_SCALE}`);
          if (value.length > MAX_VARIABLE_DECIMAL_BYTES)
            throw new DecimalTooLong('a VariableScaleDecimal', value.length, MAX_VARIABLE_DECIMAL_BYTES);
          return decimalText(unscaledOf(value), scale);
        },
      };
    }
    case 'org.apache.kafka.connect.data.Decimal': {
      // The unscaled bytes at the `scale` parameter; the precision when the converter kept it.
      const parameters = isObject(schema['connect.parameters']) ? schema['connect.parameters'] : {};
      const scale = Number(parameters.scale);
      const precision = Number(parameters['connect.decimal.precision'] ?? 38);
      if (base !== 'bytes' || !Number.isInteger(scale) || !Number.isInteger(precision)) return undefined;
      return logicalType({ type: 'bytes', logicalType: 'decimal', precision, scale });
    }
    default:
      return undefined;
  }
}

function mapUnion(branches: Json[], namespace: string, names: NamedTypes): Mapped {
  const nonNull = branches.filter((b) => names.resolve(b, namespace) !== 'null');
  const hasNull = nonNull.length < branches.length;
  if (nonNull.length === 0) throw new UnsupportedAvroSchema('a union of null only has no column');
  // avsc wraps every union value (wrapUnions): { <branch name>: value }, null as null.
  if (nonNull.length === 1) {
    const only = mapType(nonNull[0]!, namespace, names);
    return {
      field: { ...only.field, nullable: hasNull },
      toValue: (v) => (v === null ? null : only.toValue(Object.values(v as object)[0])),
    };
  }
  names.budget.fields(nonNull.length);
  const mapped = nonNull.map((b) => ({
    branch: names.branchName(b, namespace),
    mapped: names.budget.nested(() => mapType(b, namespace, names)),
  }));
  const columns = mapped.map(({ branch }) => shortName(branch));
  if (new Set(columns).size !== columns.length)
    throw new UnsupportedAvroSchema(`union branches with the same short name: ${columns.join(', ')}`);
  return {
    field: {
      type: 'struct',
      fields: mapped.map(({ mapped }, i) => ({ name: columns[i]!, ...mapped.field, nullable: true })),
      nullable: hasNull,
    },
    toValue: (v) => {
      if (v === null) return null;
      const [branch, inner] = Object.entries(v as Record<string, unknown>)[0]!;
      const out: Record<string, unknown> = {};
      mapped.forEach((m, i) => {
        out[columns[i]!] = m.branch === branch ? m.mapped.toValue(inner) : null;
      });
      return out;
    },
  };
}

/** The largest scale of PostgreSQL's numeric (its display scale). */
const MAX_NUMERIC_SCALE = 16_383;

/** An unscaled integer at a scale as decimal text: 1234 at 2 → "12.34", -5 at 2 → "-0.05", 12 at -1 → "120". */
function decimalText(unscaled: bigint, scale: number): string {
  if (scale <= 0) return String(unscaled * 10n ** BigInt(-scale));
  const negative = unscaled < 0n;
  const digits = String(negative ? -unscaled : unscaled).padStart(scale + 1, '0');
  return `${negative ? '-' : ''}${digits.slice(0, -scale)}.${digits.slice(-scale)}`;
}

function shortName(name: string): string {
  return name.slice(name.lastIndexOf('.') + 1);
}

function isObject(v: Json | undefined): v is JsonObject {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function isNamedDefinition(schema: JsonObject): boolean {
  return schema.type === 'record' || schema.type === 'enum' || schema.type === 'fixed';
}

const PRIMITIVES = new Set(['null', 'boolean', 'int', 'long', 'float', 'double', 'bytes', 'string']);

/**
 * Named types (records, enums, fixed) by full name, as the schema defines them before
 * it refers to them, and the records being mapped (a reference to one is recursion).
 */
class NamedTypes {
  constructor(readonly connectTypes: boolean) {}

  readonly budget = new SchemaBudget((why) => new UnsupportedAvroSchema(why));
  readonly #defined = new Map<string, JsonObject>();
  readonly #open = new Set<string>();

  namespaceOf(schema: JsonObject, enclosing: string): string {
    const name = typeof schema.name === 'string' ? schema.name : '';
    if (name.includes('.')) return name.slice(0, name.lastIndexOf('.'));
    return typeof schema.namespace === 'string' ? schema.namespace : enclosing;
  }

  fullName(schema: JsonObject, enclosing: string): string {
    const name = typeof schema.name === 'string' ? schema.name : '';
    if (name.includes('.')) return name;
    const namespace = this.namespaceOf(schema, enclosing);
    return namespace ? `${namespace}.${name}` : name;
  }

  /** A type name → its definition (or the primitive's name); a definition is recorded. */
  resolve(schema: Json, namespace: string): Json {
    if (typeof schema === 'string') {
      if (PRIMITIVES.has(schema)) return schema;
      const full = schema.includes('.') || !namespace ? schema : `${namespace}.${schema}`;
      const name = this.#defined.has(full) ? full : schema;
      if (this.#open.has(name))
        throw new UnsupportedAvroSchema(`record ${name} refers to itself (no Arrow type is recursive)`);
      const found = this.#defined.get(name);
      if (!found) throw new UnsupportedAvroSchema(`unknown type name "${schema}"`);
      return found;
    }
    if (isObject(schema) && isNamedDefinition(schema) && typeof schema.name === 'string') {
      this.#defined.set(this.fullName(schema, namespace), schema);
    }
    return schema;
  }

  /** The key avsc gives a union value of this branch: a named type's full name, else the type's name. */
  branchName(schema: Json, namespace: string): string {
    const resolved = this.resolve(schema, namespace);
    if (typeof resolved === 'string') return resolved;
    if (isObject(resolved)) {
      if (isNamedDefinition(resolved)) return this.fullName(resolved, namespace);
      if (typeof resolved.type === 'string') return resolved.type;
    }
    throw new UnsupportedAvroSchema(`a union inside a union: ${JSON.stringify(schema).slice(0, 200)}`);
  }

  enter(record: JsonObject, namespace: string): void {
    this.#open.add(this.fullName(record, namespace));
  }

  leave(record: JsonObject, namespace: string): void {
    this.#open.delete(this.fullName(record, namespace));
  }
}
