import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { parse } from 'yaml';
import { alertOperands, readAlertRules, regexAlternation, substitute } from '../support/promql-expressions';
import { promtool, requirePrometheus } from '../support/prometheus-local';

const root = path.resolve(__dirname, '../..');
const available = requirePrometheus('alert-rules.test.ts (promtool)');
const withPromtool = available ? test : test.skip;

interface RuleTest {
  alertname: string;
  eval_time: string;
  exp_alerts: unknown[] | null;
}
const unitTests = parse(readFileSync(path.join(root, 'deploy/prometheus/alerts.test.yaml'), 'utf8')) as {
  rule_files: string[];
  tests: { name: string; alert_rule_test: RuleTest[] }[];
};

test('alerts.test.yaml tests every alert of alerts.yaml: with series that fire it and series that must not', () => {
  expect(unitTests.rule_files).toEqual(['alerts.yaml']);
  const checks = unitTests.tests.flatMap((t) => t.alert_rule_test);
  const alerts = readAlertRules().map((r) => r.alert);
  expect(alerts.length).toBeGreaterThanOrEqual(6);
  for (const alert of alerts) {
    const mine = checks.filter((c) => c.alertname === alert);
    expect([alert, mine.some((c) => (c.exp_alerts ?? []).length > 0)]).toEqual([alert, true]);
    expect([alert, mine.some((c) => (c.exp_alerts ?? []).length === 0)]).toEqual([alert, true]);
  }
  // A test of an alert that does not exist would pass vacuously.
  for (const c of checks) expect(alerts).toContain(c.alertname);
});

withPromtool('promtool check rules: alerts.yaml', () => {
  const checked = promtool(['check', 'rules', 'deploy/prometheus/alerts.yaml'], root);
  expect([checked.code, checked.output]).toEqual([
    0,
    expect.stringContaining(`SUCCESS: ${readAlertRules().length} rules found`),
  ]);
});

withPromtool('promtool check config: prometheus.yml and the rule files it loads', () => {
  const checked = promtool(['check', 'config', 'deploy/prometheus/prometheus.yml'], root);
  expect([checked.code, checked.output]).toEqual([
    0,
    expect.stringContaining('is valid prometheus config file syntax'),
  ]);
});

withPromtool('promtool test rules: alerts.test.yaml', () => {
  const tested = promtool(['test', 'rules', 'deploy/prometheus/alerts.test.yaml'], root);
  expect([tested.code, tested.output]).toEqual([0, expect.stringContaining('SUCCESS')]);
});

test('alert operands: split at and/or/unless (with on/ignoring), comparisons with numbers dropped', () => {
  expect(
    alertOperands('sum by (table) (increase(m_total{result="success"}[15m])) == 0 and on () sum(lag) > 0'),
  ).toEqual(['sum by (table) (increase(m_total{result="success"}[15m]))', 'sum(lag)']);
  expect(alertOperands('up{job="a and b"} == 0')).toEqual(['up{job="a and b"}']);
  expect(alertOperands('x > bool 1.5 unless ignoring (brand) y_or_z')).toEqual(['x', 'y_or_z']);
  expect(alertOperands('deriv(sum by (topic) (lag)[10m:1m]) > 0')).toEqual([
    'deriv(sum by (topic) (lag)[10m:1m])',
  ]);
});

test('Grafana variables are substituted, and one without a value is an error', () => {
  const values = new Map([
    ['instance', regexAlternation(['127.0.0.1:1', 'b'])],
    ['__rate_interval', '30s'],
  ]);
  expect(substitute('rate(m{instance=~"$instance"}[$__rate_interval])', values)).toBe(
    'rate(m{instance=~"(127\\\\.0\\\\.0\\\\.1:1|b)"}[30s])',
  );
  expect(substitute('m{instance=~"${instance}"}[[[__rate_interval]]]', values)).toBe(
    'm{instance=~"(127\\\\.0\\\\.0\\\\.1:1|b)"}[30s]',
  );
  expect(() => substitute('m{topic="$topic"}', values)).toThrow('$topic');
});
