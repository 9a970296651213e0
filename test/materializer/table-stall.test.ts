import { TableRefusedError } from '../../src/lance/table-opening';
import { PartialPublicationError } from '../../src/materializer/publication-errors';
import { alertsOn, TableStall } from '../../src/materializer/table-stall';
import { capturingLogger } from '../support/materializer-fixture';

const events = (lines: Record<string, unknown>[]) =>
  lines.map((l) => `${String(l['event'])}:${String(l['reason'] ?? l['was'])}`);

test('a failing table backs off alone, doubling from half a second to at most 30 s, and says so once', () => {
  const { logger, lines } = capturingLogger();
  const stall = new TableStall('orders', logger);
  const waits: number[] = [];
  for (let i = 0; i < 9; i++) {
    stall.failed(new Error('store down'), 1_000);
    waits.push(stall.retryAt - 1_000);
  }
  expect(waits).toEqual([500, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000]);
  expect(stall.reason).toBe('failing');
  expect(events(lines)).toEqual(['table.stalled:failing']);
  expect(lines[0]).toMatchObject({ table: 'orders', err: 'store down', retryInMs: 500 });
});

test('a turn that runs through starts the backoff over and says the table publishes again', () => {
  const { logger, lines } = capturingLogger();
  const stall = new TableStall('orders', logger);
  for (let i = 0; i < 4; i++) stall.failed(new Error('store down'), 0);
  stall.served(false);
  expect(stall.reason).toBeUndefined();
  stall.failed(new Error('store down'), 0);
  expect(stall.retryAt).toBe(500);
  expect(events(lines)).toEqual(['table.stalled:failing', 'table.resumed:failing', 'table.stalled:failing']);
});

test('a refused table is checked again only every 30 s, and the log names the refused fields', () => {
  const { logger, lines } = capturingLogger();
  const stall = new TableStall('orders', logger);
  stall.failed(
    new TableRefusedError('orders', [{ field: 'columns.n', message: 'declared Int64, table has Utf8' }]),
    0,
  );
  expect(stall.retryAt).toBe(30_000);
  expect(stall.reason).toBe('refused');
  expect(alertsOn(stall.reason)).toBe(true);
  expect(lines[0]).toMatchObject({ event: 'table.stalled', reason: 'refused', fields: ['columns.n'] });
});

test('a damaged table is never tried again; plans waiting for a retry are a stall that does not alert', () => {
  const { logger } = capturingLogger();
  const damaged = new TableStall('orders', logger);
  damaged.damaged(new PartialPublicationError('p1', 'orders', 3, 10));
  expect(damaged.retryAt).toBe(Number.POSITIVE_INFINITY);
  expect(alertsOn(damaged.reason)).toBe(true);
  const retrying = new TableStall('events', logger);
  retrying.served(true);
  expect(retrying.reason).toBe('retrying');
  expect(alertsOn(retrying.reason)).toBe(false);
  retrying.idle();
  expect(retrying.reason).toBeUndefined();
});
