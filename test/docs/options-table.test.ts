import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { consumerDefinitionSchema } from '../../src/config/consumer-definition';
import { OPTION_TEXTS } from '../../src/config/options-table';
import { defaultStagingWorkers } from '../../src/config/resolve';
import { optionRows, readmeOptionsTable, renderOptionsTable } from '../../src/config/options-table-generator';

/** Where the generated table lives: the configuration page of the docs. */
const CONFIGURATION_PAGE = path.join(__dirname, '../../docs/configuration.md');

describe("docs/configuration.md's table of consumer-definition options", () => {
  test('is the table rendered from the zod schema (rewrite it: npm run build && node scripts/options-table.js)', () => {
    const page = readFileSync(CONFIGURATION_PAGE, 'utf8');
    const table = readmeOptionsTable(page);
    expect(table).toBeDefined();
    expect(table).toBe(renderOptionsTable());
  });

  test('every option of the schema has a meaning, and every text names an option of the schema', () => {
    const rows = optionRows();
    const paths = rows.map((r) => r.path);
    expect(rows.filter((r) => r.meaning === '').map((r) => r.path)).toEqual([]);
    expect(Object.keys(OPTION_TEXTS).filter((p) => !paths.includes(p))).toEqual([]);
  });

  test('covers every top-level key and every nested group of the schema', () => {
    const paths = optionRows().map((r) => r.path);
    for (const key of Object.keys(consumerDefinitionSchema.shape)) {
      expect(paths.some((p) => p === key || p.startsWith(`${key}.`))).toBe(true);
    }
    expect(paths).toEqual(
      expect.arrayContaining([
        'errors.tolerance',
        'staging.maxPartAgeMs',
        'materializer.sourceReservationBytes',
        'deadLetter.topic',
        'deadLetter.file',
        'schema.fields.<name>.nullable',
        'client.sasl.mechanism',
      ]),
    );
  });

  test('shows the defaults the schema applies', () => {
    const parsed = consumerDefinitionSchema.parse({ name: 'x', topics: ['t'], schema: 'infer' });
    const rows = new Map(optionRows().map((r) => [r.path, r]));
    expect(rows.get('queue.maxRecords')?.default).toBe(`\`${parsed.queue.maxRecords}\``);
    expect(parsed.workers).toBeUndefined();
    expect(rows.get('workers')?.default).toBe(
      `\`${defaultStagingWorkers(2)}\` with 2 CPU cores or fewer, else \`${defaultStagingWorkers(3)}\``,
    );
    expect(rows.get('errors.tolerance')?.default).toBe(`\`"${parsed.errors.tolerance}"\``);
    expect(rows.get('staging.maxPartBytes')?.default).toBe(`\`${parsed.staging.maxPartBytes}\` (16 MiB)`);
    expect(rows.get('sessionTimeoutMs')?.default).toBe(`\`${parsed.sessionTimeoutMs}\` (30 s)`);
    expect(rows.get('name')?.required).toBe(true);
    expect(rows.get('groupId')?.default).toBe('`kafka-lance-<name>`');
  });

  test('escapes pipes so that union types stay in their cell', () => {
    const line = renderOptionsTable()
      .split('\n')
      .find((l) => l.startsWith('| `format`'));
    expect(line).toContain('`"json" \\| "raw" \\| "avro" \\| "protobuf" \\| "json-schema"`');
    expect(line?.split(/(?<!\\)\|/).length).toBe(6);
  });
});
