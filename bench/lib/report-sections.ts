/**
 * Sections of bench/report.md that another bench writes (between `<!-- section:NAME -->`
 * and `<!-- /section:NAME -->`): `npm run bench` rewrites the report from its own arms and
 * keeps these, and the bench that owns a section replaces it in place.
 */
const SECTION = /<!-- section:([a-z-]+) -->\n[\s\S]*?<!-- \/section:\1 -->\n?/g;

const open = (name: string) => `<!-- section:${name} -->`;
const close = (name: string) => `<!-- /section:${name} -->`;

/** The marked sections of a report, in order, each with its markers. */
export function keptSections(report: string): string[] {
  return [...report.matchAll(SECTION)].map((m) => (m[0].endsWith('\n') ? m[0] : `${m[0]}\n`));
}

/** The report with section `name` replaced by `body` (appended when it has none). */
export function withSection(report: string, name: string, body: string): string {
  const block = `${open(name)}\n${body.trimEnd()}\n${close(name)}\n`;
  const existing = new RegExp(`${open(name)}\\n[\\s\\S]*?${close(name)}\\n?`);
  if (existing.test(report)) return report.replace(existing, block);
  return `${report.trimEnd()}\n\n${block}`;
}
