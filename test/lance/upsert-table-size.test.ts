import { UpsertTableSize } from '../../src/lance/upsert-table-size';
import { capturingLogger } from '../support/materializer-fixture';

test('an upsert table is said to need memory beyond the budget once at 2M rows, then at each doubling', async () => {
  const { logger, lines } = capturingLogger();
  const size = new UpsertTableSize('docs', logger);
  let counts = 0;
  const table = {
    countRows: () => {
      counts += 1;
      return Promise.resolve(1_500_000);
    },
  };
  await size.merged(table, 100);
  expect(lines).toEqual([]);
  for (let i = 0; i < 10; i++) await size.merged(table, 100_000);
  // Counted once: the merges' inserts follow it.
  expect(counts).toBe(1);
  expect(lines.map((l) => [l['event'], l['rows'], l['mergeMemoryGiB']])).toEqual([
    ['upsert.table.large', 2_000_000, 1.1],
  ]);
  await size.merged(table, 1_500_000);
  await size.merged(table, 1_000_000);
  expect(lines.map((l) => l['rows'])).toEqual([2_000_000, 4_000_000]);
  expect(String(lines[1]!['msg'])).toContain('about 1.6 GiB');
});
