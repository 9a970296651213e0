import * as protobuf from 'protobufjs';
import type { DeclaredField, NamedField } from '../../config';
import { columnNameProblem } from '../../config/column-name';
import { identity, mapEntries, structField, type Mapped, type ToValue } from '../column-mapping';
import { SchemaBudget } from '../schema-budget';

/**
 * How a Protobuf message type becomes columns, and its decoded messages (protobufjs)
 * become values the column codecs take (src/decode/typed-codecs.ts). Field names are the
 * .proto names as written (the schema is parsed with keepCase).
 *
 * - The top-level message: one column per field, every column nullable (a record of
 *   another schema version may lack the field).
 * - double → float64, float → float32, int32/sint32/sfixed32 → int32, uint32/fixed32 →
 *   uint32, int64/sint64/sfixed64 → int64, uint64/fixed64 → uint64 (both exact, as
 *   BigInt: uint64 holds 0…2^64−1, so no value is beyond its column), bool → boolean,
 *   string → string, bytes → binary, enum → string (the value's name; a number the enum
 *   does not name, which proto3's open enums keep, as its decimal text).
 * - Presence: a field with explicit presence (a message field, a oneof member, proto3
 *   `optional`, proto2 `optional`) is null when absent. A proto3 scalar without
 *   `optional` has no presence on the wire: absent reads as its default (0, "", false,
 *   empty bytes, the enum's first value), as every Protobuf reader sees it.
 * - message → struct; repeated → list (never null: an empty list); map<K, V> →
 *   list<struct<{key: K, value: V}>> (Lance has no map type; the entries in the payload's
 *   order); oneof → each member its own nullable column, at most one of them set.
 * - Well-known types: google.protobuf.Timestamp → timestamp(µs, UTC); Duration → int64
 *   microseconds; a value with nanoseconds below a microsecond cannot be stored exactly
 *   and is a dead letter. The wrappers (DoubleValue … BytesValue) → their scalar,
 *   nullable. Other well-known messages (Any, FieldMask) are ordinary messages.
 * - A recursive message (google.protobuf.Struct and Value among them) and a message
 *   without fields have no Arrow type: the schema is unsupported, its records dead letters;
 *   so is a schema beyond the limits of schema-budget.ts (a message type is mapped once
 *   and counted at each use).
 */
export interface ProtobufColumns {
  readonly fields: readonly NamedField[];
  /** The row of one decoded message. */
  readonly toRow: (message: protobuf.Message) => Record<string, unknown>;
}

/** A message type this mapping cannot turn into columns: its records are dead letters. */
export class UnsupportedProtobufSchema extends Error {}

/** A value that has no exact column value (a Timestamp with sub-microsecond nanoseconds). */
export class InexactProtobufValue extends Error {}

export function protobufColumns(type: protobuf.Type): ProtobufColumns {
  const mapping = new MessageMapping();
  const fields = mapping.fieldsOf(type);
  return {
    fields: fields.map(({ name, mapped }) => ({ name, ...mapped.field, nullable: true })),
    toRow: (message) => {
      const row: Record<string, unknown> = {};
      for (const f of fields) row[f.name] = f.read(message);
      return row;
    },
  };
}

interface MappedField {
  readonly name: string;
  readonly mapped: Mapped;
  /** The field's column value from its message (null when a field with presence is absent). */
  readonly read: (message: protobuf.Message) => unknown;
}

const WRAPPERS: Readonly<Record<string, string>> = {
  '.google.protobuf.DoubleValue': 'double',
  '.google.protobuf.FloatValue': 'float',
  '.google.protobuf.Int64Value': 'int64',
  '.google.protobuf.UInt64Value': 'uint64',
  '.google.protobuf.Int32Value': 'int32',
  '.google.protobuf.UInt32Value': 'uint32',
  '.google.protobuf.BoolValue': 'bool',
  '.google.protobuf.StringValue': 'string',
  '.google.protobuf.BytesValue': 'bytes',
};

const hasOwn = (o: object, key: string) => Object.prototype.hasOwnProperty.call(o, key);

class MessageMapping {
  readonly #open = new Set<string>();
  readonly #budget = new SchemaBudget((why) => new UnsupportedProtobufSchema(why));

  fieldsOf(type: protobuf.Type): MappedField[] {
    if (this.#open.has(type.fullName))
      throw new UnsupportedProtobufSchema(
        `message ${type.fullName} contains itself (no Arrow type is recursive)`,
      );
    this.#open.add(type.fullName);
    try {
      return type.fieldsArray.map((f) => {
        const problem = columnNameProblem(f.name);
        if (problem !== undefined)
          throw new UnsupportedProtobufSchema(`field "${f.name}" of ${type.fullName}: ${problem}`);
        this.#budget.fields();
        f.resolve();
        const mapped = this.#fieldType(f);
        const name = f.name;
        const present = this.#hasPresence(f);
        return {
          name,
          mapped,
          read: present
            ? (m: protobuf.Message) =>
                hasOwn(m, name) ? mapped.toValue((m as unknown as Record<string, unknown>)[name]) : null
            : (m: protobuf.Message) => mapped.toValue((m as unknown as Record<string, unknown>)[name]),
        };
      });
    } finally {
      this.#open.delete(type.fullName);
    }
  }

  #hasPresence(f: protobuf.Field): boolean {
    if (f.repeated || f.map) return false;
    // protobufjs resolves presence from the syntax or edition: oneof members (proto3
    // `optional` included, a synthetic oneof), proto2 optional fields, editions' EXPLICIT.
    return f.hasPresence || f.resolvedType instanceof protobuf.Type;
  }

  #fieldType(f: protobuf.Field): Mapped {
    if (f instanceof protobuf.MapField) {
      return mapEntries(
        scalar(f.keyType, true),
        this.#budget.nested(() => this.#valueType(f)),
      );
    }
    const one = f.repeated ? this.#budget.nested(() => this.#valueType(f)) : this.#valueType(f);
    if (!f.repeated) return { field: { ...one.field, nullable: this.#hasPresence(f) }, toValue: one.toValue };
    return {
      field: { type: 'list', items: one.field, nullable: false },
      toValue: (v) => ((v ?? []) as unknown[]).map(one.toValue),
    };
  }

  /** One value of the field's type (a repeated field's item, a map's value). */
  #valueType(f: protobuf.Field): Mapped {
    const resolved = f.resolvedType;
    if (resolved instanceof protobuf.Enum) {
      const names = resolved.valuesById;
      return {
        field: { type: 'string', nullable: false },
        toValue: (v) => (typeof v === 'string' ? v : (names[v as number] ?? String(v))),
      };
    }
    if (resolved instanceof protobuf.Type)
      return this.#budget.nested(() => this.#budget.once(resolved.fullName, () => this.#message(resolved)));
    return scalar(f.type, false);
  }

  #message(type: protobuf.Type): Mapped {
    const name = type.fullName;
    if (name === '.google.protobuf.Timestamp' || name === '.google.protobuf.Duration') {
      const timestamp = name === '.google.protobuf.Timestamp';
      return {
        field: timestamp
          ? { type: 'timestamp', unit: 'us', epochUnit: 'us', timezone: 'UTC', nullable: true }
          : { type: 'int64', nullable: true },
        toValue: (v) => (v === null || v === undefined ? null : microseconds(v, name)),
      };
    }
    const wrapped = WRAPPERS[name];
    if (wrapped !== undefined) {
      const inner = scalar(wrapped, false);
      return {
        field: { ...inner.field, nullable: true },
        toValue: (v) =>
          v === null || v === undefined
            ? null
            : inner.toValue((v as { value?: unknown }).value ?? defaultOf(wrapped)),
      };
    }
    const fields = this.fieldsOf(type);
    if (fields.length === 0)
      throw new UnsupportedProtobufSchema(`message ${name} has no fields (Arrow has no empty struct)`);
    return {
      field: structField(fields, true),
      toValue: (v) => {
        if (v === null || v === undefined) return null;
        const out: Record<string, unknown> = {};
        for (const f of fields) out[f.name] = f.read(v as protobuf.Message);
        return out;
      },
    };
  }
}

interface SecondsNanos {
  readonly seconds?: unknown;
  readonly nanos?: number;
}

function microseconds(v: SecondsNanos, type: string): bigint {
  const nanos = v.nanos ?? 0;
  if (nanos % 1000 !== 0)
    throw new InexactProtobufValue(
      `a ${type.slice(1)} with ${nanos} nanoseconds: the column holds microseconds, and this value is not one`,
    );
  return exactInteger(v.seconds ?? 0) * 1_000_000n + BigInt(nanos / 1000);
}

/** A protobufjs 64-bit value (a Long, or a number when it fits) as an exact BigInt. */
function exactInteger(v: unknown): bigint {
  if (typeof v === 'number') return BigInt(v);
  if (typeof v === 'bigint') return v;
  const { low, high, unsigned } = v as { low: number; high: number; unsigned: boolean };
  // A Long's two 32-bit halves: exact, and several times cheaper than its toString.
  const bits = (BigInt(high >>> 0) << 32n) | BigInt(low >>> 0);
  return unsigned ? bits : BigInt.asIntN(64, bits);
}

/** A map key, which protobufjs gives as a string (64-bit keys as an 8-byte hash). */
function keyOf(type: string): ToValue {
  switch (type) {
    case 'int64':
    case 'sint64':
    case 'sfixed64':
    case 'uint64':
    case 'fixed64': {
      const unsigned = type === 'uint64' || type === 'fixed64';
      // protobufjs keys a map by a 64-bit key's 8-byte hash (a decimal string without Long).
      return (k) =>
        (k as string).length === 8 && !/^-?\d+$/.test(k as string)
          ? exactInteger(protobuf.util.LongBits.fromHash(k as string).toLong(unsigned))
          : BigInt(k as string);
    }
    case 'bool':
      return (k) => k === 'true' || k === true;
    case 'string':
      return identity;
    default:
      return (k) => Number(k);
  }
}

function defaultOf(type: string): unknown {
  switch (type) {
    case 'bool':
      return false;
    case 'string':
      return '';
    case 'bytes':
      return new Uint8Array(0);
    default:
      return 0;
  }
}

function scalar(type: string, isKey: boolean): Mapped {
  const toValue = isKey ? keyOf(type) : undefined;
  const of = (column: DeclaredField['type'], read: ToValue): Mapped => ({
    field: { type: column, nullable: false } as DeclaredField,
    toValue: toValue ?? read,
  });
  switch (type) {
    case 'double':
      return of('float64', identity);
    case 'float':
      return of('float32', identity);
    case 'int32':
    case 'sint32':
    case 'sfixed32':
      return of('int32', identity);
    case 'uint32':
    case 'fixed32':
      return of('uint32', identity);
    case 'int64':
    case 'sint64':
    case 'sfixed64':
      return of('int64', exactInteger);
    case 'uint64':
    case 'fixed64':
      return of('uint64', exactInteger);
    case 'bool':
      return of('boolean', identity);
    case 'string':
      return of('string', identity);
    case 'bytes':
      // An absent bytes field reads as protobufjs's default, an empty array.
      return of('binary', (v) => (v instanceof Uint8Array ? v : Uint8Array.from(v as number[])));
    default:
      throw new UnsupportedProtobufSchema(`unknown scalar type "${type}"`);
  }
}
