import { existsSync, readFileSync } from 'node:fs';
import * as path from 'node:path';

/**
 * The repository root, found by walking up to kafka-lance's package.json: this code runs
 * both compiled (dist/qualify/...) and from source under jest (qualify/...), so a fixed
 * number of `..` would be right in only one of them.
 */
export const ROOT = findRoot(__dirname);
export const BIN = path.join(ROOT, 'bin/kafka-lance');
export const KAFKA_LOCAL = path.join(ROOT, 'deploy/kafka-local/kafka-local');
export const S3_LOCAL = path.join(ROOT, 'deploy/s3-local/s3-local');
export const DYNAMODB_LOCAL = path.join(ROOT, 'deploy/dynamodb-local/dynamodb-local');
export const SCHEMA_REGISTRY_LOCAL = path.join(ROOT, 'deploy/schema-registry-local/schema-registry-local');
export const DEBEZIUM_LOCAL = path.join(ROOT, 'deploy/debezium-local/debezium-local');
export const QUALIFY_DIR = path.join(ROOT, 'qualify');

function findRoot(from: string): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    const manifest = path.join(dir, 'package.json');
    if (existsSync(manifest)) {
      const name = (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name;
      if (name === 'kafka-lance') return dir;
    }
    if (path.dirname(dir) === dir) throw new Error(`no kafka-lance package.json above ${from}`);
  }
}
