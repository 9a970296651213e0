#!/usr/bin/env node
'use strict';
/**
 * Rewrites the README's table of consumer-definition options (between
 * `<!-- options:start -->` and `<!-- options:end -->`) from the zod schema, through
 * the compiled src/config/options-table-generator.ts, and its table of column types (between
 * `<!-- types:start -->` and `<!-- types:end -->`) from src/config/types-table.ts:
 * run `npm run build` first. With `--check`
 * it only says whether the README is up to date (exit 1 when not), as the jest test
 * test/docs/readme-options.test.ts does.
 */
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');
const readmePath = path.join(root, 'README.md');
let table;
let types;
try {
  table = require(path.join(root, 'dist/src/config/options-table-generator.js'));
  types = require(path.join(root, 'dist/src/config/types-table.js'));
} catch (error) {
  console.error(
    `options-table: cannot load the compiled renderer (${error.message}); run npm run build first`,
  );
  process.exit(2);
}
const readme = fs.readFileSync(readmePath, 'utf8');
const updated = types.withTypesTable(table.withOptionsTable(readme));
if (process.argv.includes('--check')) {
  if (updated !== readme) {
    console.error(
      'README.md: the options or types table differs from the code; run node scripts/options-table.js',
    );
    process.exit(1);
  }
  console.log('README.md: the options and types tables match the code');
} else if (updated === readme) {
  console.log('README.md: the options and types tables are up to date');
} else {
  fs.writeFileSync(readmePath, updated);
  console.log('README.md: options and types tables rewritten from the code');
}
