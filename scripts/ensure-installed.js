#!/usr/bin/env node
'use strict';
/**
 * `npm test` and `npm run demo` must work on a fresh clone with nothing but Node,
 * Java and Maven: install the locked dependencies when node_modules is missing or
 * older than package-lock.json. Uses only Node built-ins (nothing is installed yet).
 */
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');
const lock = path.join(root, 'package-lock.json');
const installed = path.join(root, 'node_modules', '.package-lock.json');

const mtime = (p) => (fs.existsSync(p) ? fs.statSync(p).mtimeMs : -1);
if (mtime(installed) >= mtime(lock)) process.exit(0);
// A worktree whose node_modules links to another checkout's: npm ci would empty the
// shared directory through the link (it did once, under every worktree at once). Leave
// installing to that checkout.
if (fs.lstatSync(path.join(root, 'node_modules'), { throwIfNoEntry: false })?.isSymbolicLink()) {
  console.log('kafka-lance: node_modules is a link to a shared install; not reinstalling it');
  process.exit(0);
}

console.log('kafka-lance: installing locked dependencies (npm ci)');
const npm = process.env.npm_execpath
  ? [process.execPath, [process.env.npm_execpath]]
  : [process.platform === 'win32' ? 'npm.cmd' : 'npm', []];
const result = spawnSync(npm[0], [...npm[1], 'ci', '--no-audit', '--no-fund'], {
  cwd: root,
  stdio: 'inherit',
});
process.exit(result.status ?? 1);
