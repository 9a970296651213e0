import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { column, decodeAll, decoder } from './fixture';

/** Regression tests: timestamps were parsed leniently (Date.parse, local time). */
const at = { name: 'at', type: 'timestamp', nullable: true } as const;

describe('timestamps', () => {
  test('a string timestamp is RFC 3339 / ISO 8601 only ("1", "March 7", RFC 2822 are dead letters)', () => {
    const d = decoder({ fields: [at] });
    const bad = [
      '1',
      'March 7',
      'Sun, 30 Nov 2025 10:00:00 GMT',
      '2025-11-30T10:00:00 PM',
      '2025-13-01T00:00:00Z',
      '2025-02-29T00:00:00Z',
      '2025-11-30T24:00:00Z',
      '2025-11-30T10:00:00+25:00',
      '20251130',
      '',
    ];
    const out = decodeAll(
      d,
      bad.map((s) => JSON.stringify({ at: s })),
    );
    expect(out.deadLetters.map((v) => v.offset)).toEqual(bad.map((_, i) => i));
    for (const v of out.deadLetters) {
      expect(v.reason).toBe('schema-mismatch');
      expect(v.detail).toMatch(/"at".*RFC 3339/);
    }
  });

  test('RFC 3339 / ISO 8601 forms are read exactly (offsets, fractions, date only, leap day)', () => {
    const d = decoder({ fields: [at] });
    const good: [string, number][] = [
      ['2025-11-30T10:00:00Z', Date.UTC(2025, 10, 30, 10)],
      ['2025-11-30t10:00:00z', Date.UTC(2025, 10, 30, 10)],
      ['2025-11-30 10:00:00.123456789+01:30', Date.UTC(2025, 10, 30, 8, 30, 0, 123)],
      ['2025-11-30T10:00-05:00', Date.UTC(2025, 10, 30, 15)],
      ['2024-02-29', Date.UTC(2024, 1, 29)],
      ['0001-01-01T00:00:00Z', -62135596800000],
    ];
    const out = decodeAll(
      d,
      good.map(([s]) => JSON.stringify({ at: s })),
    );
    expect(out.deadLetters).toEqual([]);
    expect(column(out.batch!, 'at').map(Number)).toEqual(good.map(([, ms]) => ms));
  });

  test('a zoneless timestamp is UTC whatever the process time zone (TZ=America/New_York, child process)', () => {
    // Node caches the zone at first Date use: a child process gets a fresh one.
    const root = path.resolve(__dirname, '../..');
    const script = `
      const fs = require('node:fs');
      const ts = require('typescript');
      require.extensions['.ts'] = (m, file) => m._compile(ts.transpileModule(fs.readFileSync(file, 'utf8'), {
        compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022 } }).outputText, file);
      const { RecordDecoder } = require(${JSON.stringify(path.join(root, 'src/decode/record-decoder.ts'))});
      const d = new RecordDecoder({ format: 'json', fields: [{ name: 'at', type: 'timestamp', nullable: true }],
        includeKey: false, maxRecordBytes: 1e6, tombstones: 'dead-letter', epochUnit: 'ms', maxInferredColumns: 256 }, () => 0);
      const out = d.decode('t', 0, [{ offsetNumber: 0, timestampNumber: 0, key: null,
        value: new TextEncoder().encode('{"at":"2025-11-30T10:00:00"}') }]);
      process.stdout.write(JSON.stringify({ offset: new Date().getTimezoneOffset(),
        at: String(out.batch.getChild('at').get(0)), dead: out.deadLetters.length }));
    `;
    const child = spawnSync(process.execPath, ['-e', script], {
      cwd: root,
      env: { ...process.env, TZ: 'America/New_York' },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(child.stderr).toBe('');
    const result = JSON.parse(child.stdout) as { offset: number; at: string; dead: number };
    expect(result.offset).toBe(300); // the child really ran in New York time
    expect(result.dead).toBe(0);
    expect(Number(result.at)).toBe(Date.UTC(2025, 10, 30, 10));
  });

  test('numeric timestamps are read in the declared epoch unit (per consumer, per field)', () => {
    const s = 1764496800; // 2025-11-30T10:00:00Z
    const perConsumer = (epochUnit: 's' | 'ms' | 'us' | 'ns', value: string) =>
      Number(column(decodeAll(decoder({ fields: [at], epochUnit }), [`{"at":${value}}`]).batch!, 'at')[0]);
    expect(perConsumer('s', `${s}`)).toBe(s * 1000);
    expect(perConsumer('s', `${s}.25`)).toBe(s * 1000 + 250);
    expect(perConsumer('ms', `${s}123`)).toBe(s * 1000 + 123);
    expect(perConsumer('us', `${s}123456`)).toBe(s * 1000 + 123);
    expect(perConsumer('ns', `${s}123000000`)).toBe(s * 1000 + 123);
    expect(perConsumer('ms', `${s}123.9`)).toBe(s * 1000 + 123); // floored, like the sub-ms digits of a string
    expect(perConsumer('s', `-1.5`)).toBe(-1500);
    const perField = decoder({ fields: [{ ...at, epochUnit: 's' }], epochUnit: 'ns' });
    expect(Number(column(decodeAll(perField, [`{"at":${s}}`]).batch!, 'at')[0])).toBe(s * 1000);
  });

  test('a timestamp outside years 0–9999 is a dead letter naming the range', () => {
    const d = decoder({ fields: [at] });
    const values = ['1e20', '9223372036854775808', '253402300800000', '-62167219200001', '1e400'];
    const out = decodeAll(
      d,
      values.map((v) => `{"at":${v}}`),
    );
    expect(out.deadLetters.map((v) => v.offset)).toEqual(values.map((_, i) => i));
    for (const v of out.deadLetters) expect(v.detail).toMatch(/"at".*years 0000.9999/);
    const edges = decodeAll(d, ['{"at":"0000-01-01T00:00:00Z"}', '{"at":"9999-12-31T23:59:59.999Z"}']);
    expect(edges.deadLetters).toEqual([]);
    expect(column(edges.batch!, 'at').map(Number)).toEqual([-62167219200000, 253402300799999]);
  });
});
