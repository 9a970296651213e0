import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { COMPOSITE_TYPES, FIELD_TYPES } from '../../src/config';
import { TYPE_TEXTS, readmeTypesTable, renderTypesTable, typeRows } from '../../src/decode/types-table';

describe("docs/configuration.md's table of column types", () => {
  test('is the table rendered from the codecs (rewrite it: npm run build && node scripts/options-table.js)', () => {
    const page = readFileSync(path.join(__dirname, '../../docs/configuration.md'), 'utf8');
    expect(readmeTypesTable(page)).toBe(renderTypesTable());
  });

  test('every declarable type has a text, and every text names a type', () => {
    const names: string[] = [...FIELD_TYPES, ...COMPOSITE_TYPES];
    expect(names.filter((n) => TYPE_TEXTS[n] === undefined)).toEqual([]);
    expect(Object.keys(TYPE_TEXTS).filter((n) => !names.includes(n))).toEqual([]);
  });

  test('each example declaration is a valid field and names its Arrow type', () => {
    const rows = new Map(typeRows().map((r) => [r.declare.split('<br>')[0]!, r.arrow]));
    expect(rows.get("{ type: 'vector', dim: 768 }")).toBe(
      'FixedSizeList[768]<Float32><br>FixedSizeList[768]<Float16><br>FixedSizeList[768]<Uint8>',
    );
    expect(rows.get("{ type: 'decimal', precision: 10, scale: 2 }")).toBe('Decimal128(10, 2)');
    expect(rows.get("'timestamp'")).toBe('Timestamp<MILLISECOND><br>Timestamp<MICROSECOND, UTC>');
  });
});
