#!/usr/bin/env node
'use strict';
/**
 * Rewrites docs/configuration.md's table of consumer-definition options (between
 * `<!-- options:start -->` and `<!-- options:end -->`) from the zod schema, through
 * the compiled src/config/options-table-generator.ts, and its table of column types (between
 * `<!-- types:start -->` and `<!-- types:end -->`) from src/decode/types-table.ts:
 * run `npm run build` first. With `--check` it only says whether the page is up to
 * date (exit 1 when not), as the jest tests test/docs/options-table.test.ts and
 * types-table.test.ts do.
 */
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');
const pagePath = path.join(root, 'docs/configuration.md');
const page = path.relative(root, pagePath);
let table;
let types;
try {
  table = require(path.join(root, 'dist/src/config/options-table-generator.js'));
  types = require(path.join(root, 'dist/src/decode/types-table.js'));
} catch (error) {
  console.error(
    `options-table: cannot load the compiled renderer (${error.message}); run npm run build first`,
  );
  process.exit(2);
}
const text = fs.readFileSync(pagePath, 'utf8');
const updated = types.withTypesTable(table.withOptionsTable(text));
if (process.argv.includes('--check')) {
  if (updated !== text) {
    console.error(
      `${page}: the options or types table differs from the code; run node scripts/options-table.js`,
    );
    process.exit(1);
  }
  console.log(`${page}: the options and types tables match the code`);
} else if (updated === text) {
  console.log(`${page}: the options and types tables are up to date`);
} else {
  fs.writeFileSync(pagePath, updated);
  console.log(`${page}: options and types tables rewritten from the code`);
}
