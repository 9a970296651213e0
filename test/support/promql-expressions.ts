import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { parse } from 'yaml';

const root = path.resolve(__dirname, '../..');

interface Panel {
  readonly title: string;
  readonly targets?: readonly { readonly expr?: string; readonly refId: string }[];
  /** A collapsed row holds its panels. */
  readonly panels?: readonly Panel[];
}

export interface TemplateVariable {
  readonly name: string;
  readonly type: string;
  readonly query?: string | { readonly query?: string };
  readonly multi?: boolean;
  readonly includeAll?: boolean;
}

export interface Expression {
  /** Where it comes from: a panel and refId, a variable, or an alert. */
  readonly where: string;
  readonly expr: string;
}

interface Dashboard {
  readonly panels: readonly Panel[];
  readonly templating: { readonly list: readonly TemplateVariable[] };
}

export function readDashboard(): Dashboard {
  return JSON.parse(
    readFileSync(path.join(root, 'grafana/dashboards/kafka-lance.json'), 'utf8'),
  ) as Dashboard;
}

/** Every PromQL expression of every panel target, rows included. */
export function dashboardTargets(dashboard: Dashboard = readDashboard()): Expression[] {
  const walk = (panels: readonly Panel[]): Expression[] =>
    panels.flatMap((p) => [
      ...(p.targets ?? [])
        .filter((t) => t.expr !== undefined && t.expr.trim() !== '')
        .map((t) => ({ where: `panel "${p.title}" ${t.refId}`, expr: t.expr! })),
      ...walk(p.panels ?? []),
    ]);
  return walk(dashboard.panels);
}

/** The query of a `query` variable, and what label_values() asks of it, if that is what it is. */
export function labelValuesQuery(v: TemplateVariable): { label: string; match?: string } | undefined {
  const q = typeof v.query === 'string' ? v.query : v.query?.query;
  const m = q?.trim().match(/^label_values\(\s*(?:(.+?)\s*,\s*)?([A-Za-z_][A-Za-z0-9_]*)\s*\)$/);
  if (!m) return undefined;
  return m[1] ? { label: m[2]!, match: m[1] } : { label: m[2]! };
}

export interface AlertRule {
  readonly alert: string;
  readonly expr: string;
  readonly for?: string;
}

export function readAlertRules(): AlertRule[] {
  const rules = parse(readFileSync(path.join(root, 'deploy/prometheus/alerts.yaml'), 'utf8')) as {
    groups: { rules: (AlertRule & { record?: string })[] }[];
  };
  return rules.groups.flatMap((g) => g.rules.filter((r) => r.alert !== undefined));
}

/** A value as Grafana interpolates a multi-value variable into a regex matcher: (a|b), escaped. */
export function regexAlternation(values: readonly string[]): string {
  // Two backslashes: one for the PromQL string literal, one for the regex.
  const escaped = values.map((v) => v.replace(/[.*+?^${}()|[\]\\]/g, '\\\\$&'));
  return escaped.length === 1 ? escaped[0]! : `(${escaped.join('|')})`;
}

/**
 * Replaces Grafana variables ($name, ${name}, ${name:format}, [[name]]) by the given
 * values; a variable left without a value is an error (the expression could not run).
 */
export function substitute(expr: string, values: ReadonlyMap<string, string>): string {
  const out = expr.replace(
    /\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]|\$(\w+)/g,
    (whole, a?: string, b?: string, c?: string) => values.get((a ?? b ?? c)!) ?? whole,
  );
  const left = out.match(/\$\{?\w+|\[\[\w+\]\]/);
  if (left) throw new Error(`no value for the variable ${left[0]} in: ${expr}`);
  return out;
}

/**
 * The operands of an alert condition: the expression split at its top-level set
 * operators (and, or, unless, with their on/ignoring clauses), each without a trailing
 * comparison with a number. `a > 0 and on () b == 0` gives [a, b]. Used to check that
 * the series an alert compares exist even when the alert itself (rightly) returns nothing.
 */
export function alertOperands(expr: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let quote = '';
  let start = 0;
  for (let i = 0; i < expr.length; i++) {
    const ch = expr[i]!;
    if (quote) {
      if (ch === '\\') i++;
      else if (ch === quote) quote = '';
      continue;
    }
    if (ch === '"' || ch === "'" || ch === '`') quote = ch;
    else if ('([{'.includes(ch)) depth++;
    else if (')]}'.includes(ch)) depth--;
    else if (depth === 0 && !/\w/.test(expr[i - 1] ?? ' ')) {
      const op = /^(and|or|unless)(?!\w)\s*((on|ignoring)\s*\([^)]*\)\s*)?/.exec(expr.slice(i));
      if (op) {
        parts.push(expr.slice(start, i));
        i += op[0].length - 1;
        start = i + 1;
      }
    }
  }
  parts.push(expr.slice(start));
  return parts.map((p) =>
    p.replace(/\s*(==|!=|>=|<=|>|<)\s*(bool\s+)?[-+]?(\d+(\.\d*)?([eE][-+]?\d+)?|Inf|NaN)\s*$/i, '').trim(),
  );
}
