#!/usr/bin/env node
'use strict';
/**
 * Rewrites the README's table of consumer-definition options (between
 * `<!-- options:start -->` and `<!-- options:end -->`) from the zod schema, through
 * the compiled src/config/options-table.ts: run `npm run build` first. With `--check`
 * it only says whether the README is up to date (exit 1 when not), as the jest test
 * test/docs/readme-options.test.ts does.
 */
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');
const readmePath = path.join(root, 'README.md');
let table;
try {
  table = require(path.join(root, 'dist/src/config/options-table.js'));
} catch (error) {
  console.error(
    `options-table: cannot load the compiled renderer (${error.message}); run npm run build first`,
  );
  process.exit(2);
}
const readme = fs.readFileSync(readmePath, 'utf8');
const updated = table.withOptionsTable(readme);
if (process.argv.includes('--check')) {
  if (updated !== readme) {
    console.error('README.md: the options table differs from the schema; run node scripts/options-table.js');
    process.exit(1);
  }
  console.log('README.md: the options table matches the schema');
} else if (updated === readme) {
  console.log('README.md: the options table is up to date');
} else {
  fs.writeFileSync(readmePath, updated);
  console.log('README.md: options table rewritten from the schema');
}
