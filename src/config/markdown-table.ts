/**
 * What the generated tables of the docs (options, column types: docs/configuration.md)
 * share: the Markdown layout Prettier accepts as it is, and the markers each table
 * stands between.
 */

/** A table cell: a `|` in the text would end the cell. */
export const cell = (text: string): string => text.replace(/\|/g, '\\|');

/**
 * The table as Markdown, laid out the way Prettier lays out tables (columns padded to
 * their widest cell, at least 3), so that `prettier --check` accepts it as is.
 */
export function markdownTable(header: readonly string[], body: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(3, h.length, ...body.map((b) => b[i]!.length)));
  const line = (cells: readonly string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [line(header), `| ${widths.map((w) => '-'.repeat(w)).join(' | ')} |`, ...body.map(line)].join('\n');
}

/** The text between the two markers, trimmed, or undefined when a marker is missing. */
export function tableBetweenMarkers(
  page: string,
  startMarker: string,
  endMarker: string,
): string | undefined {
  const start = page.indexOf(startMarker);
  const end = page.indexOf(endMarker);
  if (start < 0 || end < start) return undefined;
  return page.slice(start + startMarker.length, end).trim();
}

/** The page with the text between its two markers replaced by `table`, a blank line either side. */
export function withTableBetweenMarkers(
  page: string,
  startMarker: string,
  endMarker: string,
  table: string,
): string {
  const start = page.indexOf(startMarker);
  const end = page.indexOf(endMarker);
  if (start < 0 || end < start) throw new Error(`README lacks ${startMarker} ... ${endMarker}`);
  return `${page.slice(0, start + startMarker.length)}\n\n${table}\n\n${page.slice(end)}`;
}
