import { keptSections, withSection } from '../../bench/lib/report-sections';

test("another bench's section of the report survives the report being rewritten and is replaced in place", () => {
  const first = withSection('# report\n\n| arm |\n', 'many-tables', '## Many tables\n\nratio 0.8');
  expect(first).toContain(
    '<!-- section:many-tables -->\n## Many tables\n\nratio 0.8\n<!-- /section:many-tables -->',
  );
  // npm run bench renders a new report and appends the kept sections.
  const kept = keptSections(first);
  expect(kept).toHaveLength(1);
  const rewritten = `# report (new run)\n\n${kept.join('\n')}`;
  // The owner's next run replaces its section instead of adding a second one.
  const again = withSection(rewritten, 'many-tables', '## Many tables\n\nratio 0.9');
  expect(again).toContain('ratio 0.9');
  expect(again).not.toContain('ratio 0.8');
  expect(keptSections(again)).toHaveLength(1);
});
