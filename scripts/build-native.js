#!/usr/bin/env node
'use strict';
/**
 * Builds the native decoders (native/json-columns, Rust through N-API: JSON, and the Avro and
 * Protobuf readers of the registry formats) into
 * native/json-columns/json-columns.node, which the staging workers load when it is
 * there (src/decode/native-json-columns.ts). Part of `npm run build`, so both README
 * commands build it on a fresh machine; cargo's own check makes a rebuild of an
 * unchanged crate take a fraction of a second.
 *
 * Without cargo the build goes on and the TypeScript decoder reads every record (the
 * same rows, more CPU). KAFKA_LANCE_NATIVE_JSON=required (CI) makes a missing cargo or
 * a failed build an error; KAFKA_LANCE_NATIVE_JSON=off skips the build.
 */
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const root = path.join(__dirname, '..');
const crate = path.join(root, 'native', 'json-columns');
const target = path.join(crate, 'json-columns.node');
const mode = process.env.KAFKA_LANCE_NATIVE_JSON ?? 'auto';

if (mode === 'off') process.exit(0);

function fail(message) {
  if (mode === 'required') {
    console.error(`kafka-lance: ${message} (KAFKA_LANCE_NATIVE_JSON=required)`);
    process.exit(1);
  }
  console.warn(
    `kafka-lance: ${message}; JSON is decoded by the TypeScript decoder (the same rows, more CPU)`,
  );
  process.exit(0);
}

/** cargo on PATH, else where rustup puts it (a non-login shell may not have it on PATH). */
function findCargo() {
  const candidates = [
    process.env.CARGO,
    'cargo',
    path.join(process.env.CARGO_HOME ?? path.join(os.homedir(), '.cargo'), 'bin', 'cargo'),
  ].filter(Boolean);
  for (const candidate of candidates) {
    const probe = spawnSync(candidate, ['--version'], { encoding: 'utf8' });
    if (probe.status === 0) return candidate;
  }
  return undefined;
}

const cargo = findCargo();
if (!cargo) fail('cargo not found, the native JSON decoder is not built');

const built = spawnSync(
  cargo,
  ['build', '--release', '--locked', '--quiet', '--manifest-path', path.join(crate, 'Cargo.toml')],
  { stdio: 'inherit', env: { ...process.env, CARGO_TARGET_DIR: path.join(crate, 'target') } },
);
if (built.status !== 0) fail(`cargo build of native/json-columns failed (exit ${built.status})`);

const library =
  { darwin: 'libkafka_lance_json_columns.dylib', win32: 'kafka_lance_json_columns.dll' }[process.platform] ??
  'libkafka_lance_json_columns.so';
const output = path.join(crate, 'target', 'release', library);
const stale = !fs.existsSync(target) || fs.statSync(target).mtimeMs < fs.statSync(output).mtimeMs;
if (stale) {
  // Replace, never overwrite in place: a running replica has the old file mapped.
  const temporary = `${target}.${process.pid}.tmp`;
  fs.copyFileSync(output, temporary);
  fs.renameSync(temporary, target);
}
