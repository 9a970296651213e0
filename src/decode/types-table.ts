import { DataType } from 'apache-arrow';
import type { DeclaredField } from '../config/field-spec';
import { COMPOSITE_TYPES, FIELD_TYPES, VECTOR_ELEMENTS, fieldSpec } from '../config/field-spec';
import { cell, markdownTable, tableBetweenMarkers, withTableBetweenMarkers } from '../config/markdown-table';
import { declaredField } from '../config/resolve';
import { codecOf } from './typed-codecs';

/**
 * The README's table of column types, rendered from the code that stores them: the
 * type names from FIELD_TYPES and COMPOSITE_TYPES, each Arrow type from the codec the
 * decoder uses (src/decode/typed-codecs.ts), what JSON each accepts from TYPE_TEXTS
 * below. test/docs/readme-types.test.ts fails when the README's table differs from
 * this rendering, when a type has no text here, or when a text names no type.
 *
 * Rewrite the README's table (and the options table): `npm run build && node scripts/options-table.js`.
 */

export interface TypeText {
  /** How a definition writes it (a bare name, or an object with its parameters). */
  readonly declare: readonly string[];
  /** What JSON values it accepts, as Markdown. */
  readonly accepts: string;
}

/** One entry per declarable type, keyed by its `type` name. */
export const TYPE_TEXTS: Readonly<Record<string, TypeText>> = {
  string: {
    declare: ["'string'"],
    accepts: 'JSON strings (a lone UTF-16 surrogate is refused). Inferred from strings.',
  },
  int32: { declare: ["'int32'"], accepts: 'Integer numbers in range.' },
  int64: {
    declare: ["'int64'"],
    accepts: 'Integer numbers, exactly beyond 2^53, and decimal digit strings, in range.',
  },
  float64: {
    declare: ["'float64'"],
    accepts: 'Numbers; an integer beyond 2^53 only when exact. Inferred from numbers.',
  },
  boolean: { declare: ["'boolean'"], accepts: '`true`, `false`. Inferred from booleans.' },
  timestamp: {
    declare: ["'timestamp'", "{ type: 'timestamp', unit: 'us', timezone: 'UTC' }"],
    accepts:
      "RFC 3339 strings (no zone: UTC), epoch numbers in the field's `epochUnit` (else its `unit`, else the consumer's). Kept down to `unit` (default `ms`), below it floored; years 0000–9999 (`ns`: 1677–2262).",
  },
  json: {
    declare: ["'json'"],
    accepts:
      'Any JSON value, stored as its JSON text (big integers exact). Inferred from objects and arrays.',
  },
  float32: {
    declare: ["'float32'"],
    accepts: 'Numbers, rounded to the nearest float32; beyond its range refused.',
  },
  int8: { declare: ["'int8'"], accepts: 'Integer numbers, -128 to 127.' },
  int16: { declare: ["'int16'"], accepts: 'Integer numbers, -32768 to 32767.' },
  uint8: { declare: ["'uint8'"], accepts: 'Integer numbers, 0 to 255.' },
  uint16: { declare: ["'uint16'"], accepts: 'Integer numbers, 0 to 65535.' },
  uint32: { declare: ["'uint32'"], accepts: 'Integer numbers, 0 to 4294967295.' },
  uint64: {
    declare: ["'uint64'"],
    accepts: 'Integer numbers, exactly beyond 2^53, and decimal digit strings, 0 to 2^64-1.',
  },
  date: {
    declare: ["'date'"],
    accepts: '`YYYY-MM-DD` strings, or integer days since 1970-01-01; years 0000–9999.',
  },
  binary: {
    declare: ["'binary'"],
    accepts:
      'Standard base64, padded (anything else is refused, not skipped); bytes as they are from a `transform` (`format: raw`).',
  },
  large_string: {
    declare: ["'large_string'"],
    accepts: 'Like `string`, with 64-bit offsets.',
  },
  large_binary: {
    declare: ["'large_binary'"],
    accepts: 'Like `binary`, with 64-bit offsets.',
  },
  vector: {
    declare: VECTOR_ELEMENTS.map((e) =>
      e === 'float32' ? "{ type: 'vector', dim: 768 }" : `{ type: 'vector', dim: 768, element: '${e}' }`,
    ),
    accepts:
      'A JSON array of exactly `dim` numbers, or base64 of `dim` little-endian elements (4, 2 or 1 bytes each). A wrong length (naming both dimensions), a non-number, NaN, ±Infinity or an element out of range is refused. A LanceDB vector column: `vectorSearch` works on it.',
  },
  decimal: {
    declare: ["{ type: 'decimal', precision: 10, scale: 2 }"],
    accepts:
      'Decimal strings (`"-12.50"`, `"1e3"`) exactly, numbers through their shortest decimal form; more than `scale` fractional digits (other than zeros) or more than `precision` digits is refused, never rounded.',
  },
  list: {
    declare: ["{ type: 'list', items: 'int32' }"],
    accepts:
      'A JSON array (empty too), each item as `items` says; null items when `items` is nullable (the default).',
  },
  struct: {
    declare: ["{ type: 'struct', fields: { a: 'string', b: { type: 'list', items: 'float32' } } }"],
    accepts:
      'A JSON object; absent or null fields are null (refused when not nullable); keys not declared are ignored.',
  },
};

export interface TypeRow {
  readonly declare: string;
  readonly arrow: string;
  readonly accepts: string;
}

/** Every declarable type with each way of writing it and the Arrow type that stores it. */
export function typeRows(): TypeRow[] {
  return [...FIELD_TYPES, ...COMPOSITE_TYPES].map((name) => {
    const text = TYPE_TEXTS[name];
    if (!text) throw new Error(`no README text for column type ${name}`);
    const arrow = text.declare.map((d) => arrowName(codecOf(declarationOf(d), 'ms').arrowType()));
    return { declare: text.declare.join('<br>'), arrow: arrow.join('<br>'), accepts: text.accepts };
  });
}

/** apache-arrow's name of a type, but a decimal as `Decimal128(precision, scale)` (it writes `Decimal[10e+2]`). */
function arrowName(type: DataType): string {
  // Every concrete DataType names itself in toString(); the base class does not declare it.
  if (!DataType.isDecimal(type)) return (type as DataType & { toString(): string }).toString();
  return `Decimal${type.bitWidth}(${type.precision}, ${type.scale})`;
}

/** A declaration as the README writes it (TypeScript object syntax) → the field it declares. */
function declarationOf(text: string): DeclaredField {
  const json = text.replace(/'/g, '"').replace(/([{,]\s*)([A-Za-z_]\w*)\s*:/g, '$1"$2":');
  return declaredField(fieldSpec.parse(JSON.parse(json)));
}

/** The table as Markdown, laid out as Prettier lays out tables (so `prettier --check` accepts it). */
export function renderTypesTable(rows: readonly TypeRow[] = typeRows()): string {
  return markdownTable(
    ['Declared as', 'Arrow type in Lance', 'Accepts (JSON)'],
    rows.map((r) => [
      r.declare
        .split('<br>')
        .map((d) => `\`${d}\``)
        .join('<br>'),
      r.arrow
        .split('<br>')
        .map((a) => `\`${cell(a)}\``)
        .join('<br>'),
      cell(r.accepts),
    ]),
  );
}

export const TYPES_START = '<!-- types:start -->';
export const TYPES_END = '<!-- types:end -->';

/** The table between the README's markers, or undefined when a marker is missing. */
export function readmeTypesTable(readme: string): string | undefined {
  return tableBetweenMarkers(readme, TYPES_START, TYPES_END);
}

/** The README with the types table between its markers replaced. */
export function withTypesTable(readme: string, table: string = renderTypesTable()): string {
  return withTableBetweenMarkers(readme, TYPES_START, TYPES_END, table);
}
