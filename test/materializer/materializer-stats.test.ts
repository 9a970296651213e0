import { PublicationCounters, type PublicationCounts } from '../../src/materializer/materializer-stats';
import type { PublicationResult } from '../../src/materializer/publisher';

const result = (rows: number, bytes: number): PublicationResult => ({
  id: `p${rows}`,
  rows,
  bytes,
  prepareSeconds: 0,
  writeSeconds: 0,
  sourceWaitSeconds: 0,
  checkSeconds: 0,
  adds: 1,
});

/** Counts of one publication of `rows` rows and one storage failure, plus what `extra` adds. */
const onePublicationOneFailure = (
  rows: number,
  extra: Partial<PublicationCounts> = {},
): PublicationCounts => ({
  publications: 1,
  failedPublications: 1,
  publishedRows: rows,
  publishedBytes: rows * 10,
  failures: { storage: 1 },
  quarantinedParts: {},
  deadLetteredRows: {},
  ...extra,
});

test('each report hands over what the counts grew by since the previous one, and the totals', () => {
  const counters = new PublicationCounters();
  counters.published(result(10, 100));
  counters.failed('storage', new Error('store down'));
  counters.quarantined('schema-incompatible', 2);
  counters.deadLettered('orders', 7);
  const first = counters.report();
  expect(first.counted).toEqual(
    onePublicationOneFailure(10, {
      quarantinedParts: { 'schema-incompatible': 2 },
      deadLetteredRows: { orders: 7 },
    }),
  );
  expect(first.recent.map((r) => r.rows)).toEqual([10]);

  counters.published(result(5, 50));
  counters.failed('storage', new Error('store down'));
  const second = counters.report();
  // Only the growth: a host adding `counted` to its counters never counts a publication twice.
  expect(second.counted).toEqual(onePublicationOneFailure(5));
  expect(second).toMatchObject({
    publications: 2,
    failedPublications: 2,
    publishedRows: 15,
    publishedBytes: 150,
    failures: { storage: 2 },
    quarantinedParts: { 'schema-incompatible': 2 },
    deadLetteredRows: { orders: 7 },
  });
  expect(second.recent.map((r) => r.rows)).toEqual([5]);
  expect(second.last?.rows).toBe(5);

  const quiet = counters.report();
  expect(quiet.counted.publications).toBe(0);
  expect(quiet.recent).toEqual([]);
  expect(quiet.publications).toBe(2);
});

test('a full disk is reported until the next attempt that ends without a failure', () => {
  const counters = new PublicationCounters();
  const full = Object.assign(new Error('ENOSPC'), {
    code: 'ENOSPC',
    path: '/data/t/ledger',
    syscall: 'open',
  });
  counters.failed('disk-full', full);
  expect(counters.report().diskFull).toEqual({ stage: 'staging', path: '/data/t/ledger', operation: 'open' });
  expect(counters.report().diskFull).toBeDefined();
  counters.succeeded();
  expect(counters.report().diskFull).toBeUndefined();
});
