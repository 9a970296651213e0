#!/usr/bin/env node
'use strict';
/**
 * npm writes into package-lock.json only the LanceDB native packages it could
 * resolve; our registry mirror serves linux-x64 alone, and `npm ci` then refuses the
 * lock ("Missing: @lancedb/lancedb-darwin-arm64 from lock file"). This adds the other
 * platforms' entries (never installed on linux-x64) with their registry addresses.
 */
const fs = require('node:fs');
const path = require('node:path');

const lockPath = path.join(__dirname, '..', 'package-lock.json');
const lock = JSON.parse(fs.readFileSync(lockPath, 'utf8'));
const version = lock.packages['node_modules/@lancedb/lancedb'].version;
const platforms = {
  'darwin-arm64': { os: 'darwin', cpu: 'arm64' },
  'linux-arm64-gnu': { os: 'linux', cpu: 'arm64', libc: 'glibc' },
  'linux-arm64-musl': { os: 'linux', cpu: 'arm64', libc: 'musl' },
  'linux-x64-gnu': { os: 'linux', cpu: 'x64', libc: 'glibc' },
  'linux-x64-musl': { os: 'linux', cpu: 'x64', libc: 'musl' },
  'win32-arm64-msvc': { os: 'win32', cpu: 'arm64' },
  'win32-x64-msvc': { os: 'win32', cpu: 'x64' },
};
for (const [suffix, { os, cpu, libc }] of Object.entries(platforms)) {
  const key = `node_modules/@lancedb/lancedb-${suffix}`;
  if (lock.packages[key]) continue;
  lock.packages[key] = {
    version,
    resolved: `https://registry.npmjs.org/@lancedb/lancedb-${suffix}/-/lancedb-${suffix}-${version}.tgz`,
    cpu: [cpu],
    license: 'Apache-2.0',
    optional: true,
    os: [os],
    ...(libc ? { libc: [libc] } : {}),
    engines: { node: '>= 18' },
  };
}
const sorted = {};
for (const key of Object.keys(lock.packages).sort()) sorted[key] = lock.packages[key];
lock.packages = sorted;
fs.writeFileSync(lockPath, `${JSON.stringify(lock, null, 2)}\n`);
