import { ConfigError, resolveConsumer } from '../../src/config';
import { Metrics } from '../../src/metrics/metrics';
import { OTHER_TABLES, TableLabels } from '../../src/metrics/table-labels';
import { capturingLogger } from '../support/materializer-fixture';

const valid = { name: 'orders', topics: ['orders'], schema: 'infer' };
const env = { KAFKA_BOOTSTRAP_SERVERS: 'b:1' };

describe('table labels: a bounded number of distinct tables in every per-table metric', () => {
  test('the first tables keep their name, every later one is _other, and one warning names the first and the option', () => {
    const { logger, lines } = capturingLogger();
    const labels = new TableLabels(100);
    labels.configure(2, logger);
    expect([labels.of('a'), labels.of('b'), labels.of('a')]).toEqual(['a', 'b', 'a']);
    expect([labels.of('c'), labels.of('d'), labels.of('c')]).toEqual([
      OTHER_TABLES,
      OTHER_TABLES,
      OTHER_TABLES,
    ]);
    // A table named before the bound was reached keeps its name after it.
    expect(labels.of('b')).toBe('b');
    const warnings = lines.filter((l) => l.event === 'metrics.tables.bounded');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ table: 'c', maxTableLabels: 2 });
    expect(String(warnings[0]!.msg)).toContain('metrics.maxTableLabels');
  });

  test('series beyond the bound are one _other series per family, whatever the number of tables', async () => {
    const metrics = new Metrics();
    const { logger } = capturingLogger();
    metrics.tableLabels.configure(3, logger);
    for (let t = 0; t < 50; t++) metrics.publishedRecords.inc({ table: metrics.tableLabels.of(`t${t}`) }, 1);
    const values = (await metrics.publishedRecords.get()).values;
    expect(values.map((v) => v.labels.table).sort()).toEqual([OTHER_TABLES, 't0', 't1', 't2']);
    expect(values.find((v) => v.labels.table === OTHER_TABLES)?.value).toBe(47);
  });

  test('metrics.maxTableLabels: 100 by default, a positive integer or the definition is refused naming it', () => {
    expect(resolveConsumer(valid, 'x', env).metrics.maxTableLabels).toBe(100);
    expect(
      resolveConsumer({ ...valid, metrics: { maxTableLabels: 500 } }, 'x', env).metrics.maxTableLabels,
    ).toBe(500);
    for (const bad of [0, -1, 1.5, 'many']) {
      let error: unknown;
      try {
        resolveConsumer({ ...valid, metrics: { maxTableLabels: bad } }, 'x', env);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).problems.map((p) => p.field)).toEqual(['metrics.maxTableLabels']);
    }
  });
});
