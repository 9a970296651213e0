import { templateMatcher } from '../../src/cli/tables';

describe("a routing definition's tables in a shared Lance database", () => {
  test('compact and inspect take only the tables its template could produce, not every table of the database', () => {
    const produces = templateMatcher('orders_{topic}');
    expect(['orders_eu', 'orders_us.v2'].filter((t) => produces.test(t))).toEqual([
      'orders_eu',
      'orders_us.v2',
    ]);
    // Another definition's tables in the same database.
    for (const other of ['orders_', 'payments', 'xorders_eu', 'orders'])
      expect(produces.test(other)).toBe(false);
  });

  test('the literal text of a template is matched as it is (a dot is not any character)', () => {
    const produces = templateMatcher('logs.{topic}.v1');
    expect(produces.test('logs.app.v1')).toBe(true);
    expect(produces.test('logsXappYv1')).toBe(false);
    expect(templateMatcher('{topic}').test('anything')).toBe(true);
  });
});
