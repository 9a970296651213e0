import { z } from 'zod';
import { consumerDefinitionSchema } from './consumer-definition';
import { OPTION_TEXTS } from './options-table';
import { secretSchemas } from './secret';
import { cell, markdownTable, tableBetweenMarkers, withTableBetweenMarkers } from './markdown-table';

/**
 * The table of consumer-definition options (docs/configuration.md), rendered from the
 * zod schema so that it cannot drift: option paths, types, ranges and defaults come
 * from the schema (through zod's JSON Schema output, its public introspection), the
 * meaning of each option from OPTION_TEXTS (options-table.ts).
 * test/docs/options-table.test.ts fails when the page's table differs from this rendering.
 *
 * Rewrite the table: `npm run build && node scripts/options-table.js`.
 */

/** The JSON Schema subset zod emits for this schema. */
interface Json {
  readonly type?: string;
  readonly const?: unknown;
  readonly enum?: readonly unknown[];
  readonly default?: unknown;
  readonly description?: string;
  readonly properties?: Readonly<Record<string, Json>>;
  readonly required?: readonly string[];
  readonly additionalProperties?: Json | boolean;
  readonly items?: Json;
  readonly anyOf?: readonly Json[];
  readonly oneOf?: readonly Json[];
  readonly $ref?: string;
  readonly $defs?: Readonly<Record<string, Json>>;
  readonly minimum?: number;
  readonly maximum?: number;
  readonly exclusiveMinimum?: number;
  readonly 'x-kafka-lance-type'?: string;
}

export interface OptionRow {
  readonly path: string;
  readonly type: string;
  /** `undefined`: optional, nothing computed either. */
  readonly default: string | undefined;
  readonly required: boolean;
  readonly meaning: string;
}

function jsonSchema(): Json {
  return z.toJSONSchema(consumerDefinitionSchema, {
    io: 'input',
    // The one schema JSON Schema cannot express: a transform function.
    unrepresentable: ({ zodSchema }) =>
      zodSchema._zod.def.type === 'custom' ? { 'x-kafka-lance-type': 'function' } : 'throw',
    // A secret option is one type: text, `${env:NAME}` in it, or `{ file }` (secret.ts).
    override: ({ zodSchema, jsonSchema }) => {
      if (!secretSchemas.has(zodSchema)) return;
      for (const key of Object.keys(jsonSchema)) delete (jsonSchema as Record<string, unknown>)[key];
      Object.assign(jsonSchema, { 'x-kafka-lance-type': 'secret' });
    },
  }) as Json;
}

/** Every option of a consumer definition, in schema order, with what the schema says of it. */
export function optionRows(): OptionRow[] {
  const root = jsonSchema();
  const rows = new Map<string, { path: string; nodes: Json[]; required: boolean }>();
  // A field type nests field types (list items, struct fields): its definition is walked
  // once, where it first appears (schema.fields.<name>); deeper uses are one row each.
  const walked = new Set<string>();
  const resolve = (node: Json): Json | undefined => {
    if (node.$ref === undefined || walked.has(node.$ref)) return undefined;
    walked.add(node.$ref);
    return root.$defs?.[node.$ref.replace('#/$defs/', '')];
  };
  const objectChildren = (node: Json, prefix: string) => {
    for (const [key, child] of Object.entries(node.properties ?? {}))
      visit(child, prefix ? `${prefix}.${key}` : key, node.required?.includes(key) ?? false);
  };
  const visit = (given: Json, path: string, required: boolean): void => {
    const node = resolve(given) ?? given;
    const record = isRecord(node);
    const open = node.properties !== undefined && node.additionalProperties !== false;
    // Plain nested objects (errors, queue, ...) are groups: their fields carry the rows.
    if (node.properties === undefined || open || record) {
      // A key of several branches (a field type's `type`, `nullable`) is one row.
      const row = rows.get(path);
      if (row) row.nodes.push(node);
      else rows.set(path, { path, nodes: [node], required });
    }
    if (node.properties) objectChildren(node, path);
    if (record && typeof node.additionalProperties === 'object') {
      const value = resolve(node.additionalProperties) ?? node.additionalProperties;
      if (isStructured(value)) visit(value, `${path}.<name>`, false);
    }
    for (const branch of branches(node)) if (branch.properties) objectChildren(branch, path);
    // A list of objects (indexes): its items' options are rows of their own, `<path>[].<option>`.
    if (node.type === 'array' && node.items) {
      const items = resolve(node.items) ?? node.items;
      for (const branch of [items, ...branches(items)])
        if (branch.properties) objectChildren(branch, `${path}[]`);
    }
  };
  objectChildren(root, '');
  return [...rows.values()].map(({ path, nodes, required }) => {
    const text = OPTION_TEXTS[path];
    const node = nodes[0]!;
    const fallback = nodes.find((n) => n.default !== undefined)?.default;
    return {
      path,
      type: [...new Set(nodes.map(typeText))].join(' | '),
      default: fallback !== undefined ? defaultText(path, fallback) : text?.computedDefault,
      required,
      meaning: node.description ?? text?.meaning ?? '',
    };
  });
}

/** The alternatives of a union, flattened (zod writes a discriminated union as oneOf). */
function branches(node: Json): Json[] {
  return [...(node.anyOf ?? []), ...(node.oneOf ?? [])].flatMap((b) =>
    b.anyOf || b.oneOf ? [b, ...branches(b)] : [b],
  );
}

const isRecord = (node: Json): boolean =>
  node.type === 'object' && node.properties === undefined && node.additionalProperties !== undefined;

const isStructured = (node: Json): boolean =>
  node.properties !== undefined || branches(node).some((b) => b.properties !== undefined);

/** Enums longer than this are named by the README's table of column types, not listed. */
const MAX_LISTED_ENUM = 8;

function typeText(node: Json): string {
  if (node['x-kafka-lance-type']) return node['x-kafka-lance-type'];
  if (node.$ref !== undefined) return 'field type';
  if (node.const !== undefined) return JSON.stringify(node.const);
  if (node.enum && node.enum.length > MAX_LISTED_ENUM) return 'type name';
  if (node.enum) return node.enum.map((v) => JSON.stringify(v)).join(' | ');
  if (node.anyOf || node.oneOf)
    return [...new Set([...(node.anyOf ?? []), ...(node.oneOf ?? [])].map(typeText))].join(' | ');
  if (node.type === 'array') return `${node.items ? typeText(node.items) : 'unknown'}[]`;
  if (isRecord(node)) {
    const value = node.additionalProperties;
    if (typeof value === 'object' && value.$ref !== undefined) return 'record<string, field type>';
    if (typeof value === 'object' && value['x-kafka-lance-type'] === 'secret')
      return 'record<string, secret>';
    return typeof value === 'object' && value.type === 'string' && !value.enum
      ? 'record<string, string>'
      : 'object';
  }
  if (node.type === 'integer' || node.type === 'number') return `${node.type}${rangeText(node)}`;
  return node.type ?? 'unknown';
}

function rangeText(node: Json): string {
  const max = node.maximum !== undefined && node.maximum < Number.MAX_SAFE_INTEGER ? node.maximum : undefined;
  if (node.exclusiveMinimum !== undefined) return ` > ${node.exclusiveMinimum}`;
  if (node.minimum !== undefined && max !== undefined) return `, ${node.minimum} to ${max}`;
  if (node.minimum !== undefined) return ` >= ${node.minimum}`;
  return max !== undefined ? ` <= ${max}` : '';
}

const MIB = 1024 * 1024;

function defaultText(path: string, value: unknown): string {
  const code = `\`${JSON.stringify(value)}\``;
  if (typeof value !== 'number' || value === 0) return code;
  if (path.endsWith('Bytes') && value % MIB === 0) return `${code} (${value / MIB} MiB)`;
  if (path.endsWith('Ms') && value >= 60_000 && value % 60_000 === 0)
    return `${code} (${value / 60_000} min)`;
  if (path.endsWith('Ms') && value >= 1_000 && value % 1_000 === 0) return `${code} (${value / 1_000} s)`;
  return code;
}

/** The table as Markdown, laid out the way Prettier lays out tables (see markdownTable). */
export function renderOptionsTable(rows: readonly OptionRow[] = optionRows()): string {
  return markdownTable(
    ['Option', 'Type', 'Default', 'Meaning'],
    rows.map((r) => [
      `\`${r.path}\``,
      `\`${cell(r.type)}\``,
      r.required ? 'required' : cell(r.default ?? '-'),
      cell(r.meaning),
    ]),
  );
}

export const OPTIONS_START = '<!-- options:start -->';
export const OPTIONS_END = '<!-- options:end -->';

/** The table between the README's markers, or undefined when a marker is missing. */
export function readmeOptionsTable(readme: string): string | undefined {
  return tableBetweenMarkers(readme, OPTIONS_START, OPTIONS_END);
}

/** The README with the table between its markers replaced. */
export function withOptionsTable(readme: string, table: string = renderOptionsTable()): string {
  return withTableBetweenMarkers(readme, OPTIONS_START, OPTIONS_END, table);
}
