/**
 * The metric names a PromQL expression reads. Strings, label matchers, ranges and
 * grouping clauses are removed; what remains is functions (followed by "("),
 * keywords, numbers, and metric names.
 */
const KEYWORDS = new Set([
  'and',
  'or',
  'unless',
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'bool',
  'offset',
  'inf',
  'nan',
]);

export function metricNames(expr: string): string[] {
  let s = expr.replace(/"(?:[^"\\]|\\.)*"/g, '""');
  s = s.replace(/\{[^}]*\}/g, ' ');
  s = s.replace(/\[[^\]]*\]/g, ' ');
  s = s.replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names: string[] = [];
  const re = /([A-Za-z_:][A-Za-z0-9_:]*)(\s*\()?/g;
  for (let m = re.exec(s); m; m = re.exec(s)) {
    const [, name, call] = m;
    if (call || KEYWORDS.has(name!.toLowerCase())) continue;
    if (/^\d/.test(name!)) continue;
    names.push(name!);
  }
  return [...new Set(names)];
}
