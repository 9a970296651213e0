import { ConfigError, resolveConsumer, TableResolver, tableNameProblem } from '../../src/config';
import { tableFromTemplate, tableTemplateProblem } from '../../src/config/table-name';
import type { RouteRecord } from '../../src/config/table-routing';

const env = { KAFKA_BOOTSTRAP_SERVERS: 'b:9092' };
const base = { name: 'orders', topics: ['orders'], schema: 'infer' };
const problemsOf = (input: unknown) => {
  try {
    resolveConsumer(input, 'test.json', env);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  return [];
};
const record = (over: Partial<RouteRecord> = {}): RouteRecord => ({
  topic: 'orders.eu',
  partition: 0,
  offset: 7,
  timestamp: 0,
  key: null,
  value: Buffer.from('{}'),
  ...over,
});

describe('table names', () => {
  test.each([
    ['orders', undefined],
    ['cdc.shop.public.customers', undefined],
    ['_private-1', undefined],
    ['', /empty/],
    ['a'.repeat(129), /at most 128/],
    ['../escape', /letters, digits/],
    ['a/b', /letters, digits/],
    ['a\\b', /letters, digits/],
    ['a..b', /"\.\."/],
    ['.hidden', /start with/],
    ['-option', /start with/],
    ['sp ace', /letters, digits/],
  ])('%j: %s', (name, problem) => {
    const found = tableNameProblem(name);
    if (problem === undefined) expect(found).toBeUndefined();
    else expect(found).toMatch(problem);
  });

  test('a template takes the topic as it is, except a leading "." or "-" which becomes "_"', () => {
    expect(tableFromTemplate('{topic}', 'orders.eu')).toBe('orders.eu');
    expect(tableFromTemplate('cdc_{topic}', 'shop.public.customers')).toBe('cdc_shop.public.customers');
    expect(tableFromTemplate('{topic}', '.internal')).toBe('_internal');
    expect(tableFromTemplate('{topic}', '-x')).toBe('_x');
    expect(tableFromTemplate('{topic}_{topic}', 'a')).toBe('a_a');
  });

  test('a template with another placeholder or characters a table name refuses is a configuration error', () => {
    expect(tableTemplateProblem('t_{partition}')).toMatch(/only placeholder/);
    expect(tableTemplateProblem('../{topic}')).toMatch(/table name/);
    expect(tableTemplateProblem('{topic}')).toBeUndefined();
  });
});

describe('routing configuration', () => {
  test('a fixed table keeps its name and is the fixed routing', () => {
    const c = resolveConsumer(base, 'x', env);
    expect(c.table).toBe('orders');
    expect(c.tableRouting).toEqual({ kind: 'fixed', table: 'orders' });
    expect(c.topics).toEqual(['orders']);
    expect(c.topicPatterns).toEqual([]);
  });

  test('topics take names and patterns; topicsRegex is one pattern', () => {
    const c = resolveConsumer({ ...base, topics: ['audit', { pattern: '^orders\\..+$' }] }, 'x', env);
    expect(c.topics).toEqual(['audit']);
    expect(c.topicPatterns).toEqual(['^orders\\..+$']);
    expect(c.topicRefreshMs).toBe(30_000);
    const r = resolveConsumer({ ...base, topics: undefined, topicsRegex: '^a' }, 'x', env);
    expect(r.topics).toBeUndefined();
    expect(r.topicPatterns).toEqual(['^a']);
  });

  test('an invalid pattern or a refresh below one second names its field', () => {
    expect(problemsOf({ ...base, topics: [{ pattern: '(' }] }).map((p) => p.field)).toEqual([
      'topics.0.pattern',
    ]);
    expect(problemsOf({ ...base, topicRefreshMs: 10 }).map((p) => p.field)).toEqual(['topicRefreshMs']);
  });

  test('a table template is the template routing; a bad one names "table"', () => {
    const c = resolveConsumer({ ...base, table: 'cdc_{topic}' }, 'x', env);
    expect(c.tableRouting).toEqual({ kind: 'template', template: 'cdc_{topic}' });
    const problems = problemsOf({ ...base, table: '{topic}/x' });
    expect(problems.map((p) => p.field)).toEqual(['table']);
    expect(problems[0]!.message).toMatch(/table name/);
    expect(problemsOf({ ...base, table: 'a.b' }).map((p) => p.field)).toEqual(['table']);
  });

  test('commits after publication are refused with a template or a route, naming offsets.commitAfter', () => {
    for (const routed of [{ table: '{topic}' }, { route: () => 'x' }]) {
      const problems = problemsOf({ ...base, ...routed, offsets: { commitAfter: 'published' } });
      expect(problems.map((p) => p.field)).toEqual(['offsets.commitAfter']);
      expect(problems[0]!.message).toMatch(/"staged"/);
    }
    expect(problemsOf({ ...base, route: 'not code' }).map((p) => p.field)).toEqual(['route']);
  });
});

describe('table resolver', () => {
  test("a route names each record's table; nothing returned is the default table, filled in when it is a template", () => {
    const byKind = new TableResolver({ kind: 'route' }, 'rest_{topic}', (r) =>
      r.key?.toString() === 'skip' ? undefined : `t_${r.key?.toString() ?? 'none'}`,
    );
    expect(byKind.tableOf(record({ key: Buffer.from('a') }))).toEqual({ table: 't_a' });
    expect(byKind.tableOf(record({ key: Buffer.from('skip') }))).toEqual({ table: 'rest_orders.eu' });
  });

  test('a route that throws, returns a path or a non-string gives a problem, never a table', () => {
    const problemOf = (route: () => unknown) => {
      const choice = new TableResolver({ kind: 'route' }, 'd', route as () => string).tableOf(record());
      return 'problem' in choice ? choice.problem : `no problem: table ${choice.table}`;
    };
    expect(problemOf(() => '../../etc')).toMatch(/"\.\.\/\.\.\/etc"/);
    expect(problemOf(() => '')).toMatch(/empty/);
    expect(problemOf(() => 42)).toMatch(/number/);
    expect(
      problemOf(() => {
        throw new Error('no kind');
      }),
    ).toMatch(/threw: no kind/);
  });

  test('a template whose topic makes an over-long name is a problem for that topic only', () => {
    const resolver = new TableResolver({ kind: 'template', template: '{topic}' }, '{topic}');
    const long = resolver.tableOfTopic('a'.repeat(200));
    expect(long && 'problem' in long ? long.problem : long).toMatch(/at most 128/);
    expect(resolver.tableOfTopic('orders.us')).toEqual({ table: 'orders.us' });
  });
});
