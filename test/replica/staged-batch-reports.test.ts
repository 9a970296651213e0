import { StagedBatchReports } from '../../src/replica/staged-batch-reports';
import { Metrics } from '../../src/metrics/metrics';
import { OffsetTracker } from '../../src/ownership/offset-tracker';
import { parsePrometheus, sumOf } from '../../src/harness/prometheus-text';

async function stagedBy(metrics: Metrics, table: string): Promise<number> {
  return sumOf(parsePrometheus(await metrics.registry.metrics()), 'kafka_lance_staged_records_total', {
    table,
  });
}

describe('staged records by table', () => {
  test('a routed batch is counted under each table it reached, not under the definition’s table template', async () => {
    const metrics = new Metrics();
    const reports = new StagedBatchReports(new OffsetTracker(), metrics, '{topic}');
    reports.onBatchDone('orders', 0, {
      dropped: false,
      staged: 5,
      skipped: 0,
      deadLetters: [],
      stagedBytes: 500,
      byTable: [
        { table: 'logs_info', staged: 3, stagedBytes: 300 },
        { table: 'logs_error', staged: 2, stagedBytes: 200 },
      ],
    });
    expect(await stagedBy(metrics, 'logs_info')).toBe(3);
    expect(await stagedBy(metrics, 'logs_error')).toBe(2);
    expect(await stagedBy(metrics, '{topic}')).toBe(0);
  });

  test('a fixed table’s batch is counted under its table', async () => {
    const metrics = new Metrics();
    const reports = new StagedBatchReports(new OffsetTracker(), metrics, 'events');
    reports.onBatchDone('orders', 0, {
      dropped: false,
      staged: 4,
      skipped: 0,
      deadLetters: [],
      stagedBytes: 40,
    });
    expect(await stagedBy(metrics, 'events')).toBe(4);
  });
});
