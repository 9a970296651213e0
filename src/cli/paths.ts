import { existsSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { ConsumerFileMissingError } from './errors';

import { ROOT } from '../common/repo-root';

export { ROOT };
export const KAFKA_LOCAL = path.join(ROOT, 'deploy/kafka-local/kafka-local');

/** The version in package.json, read at run time: the compiled CLI has no copy of it. */
export function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version?: unknown };
  return typeof pkg.version === 'string' ? pkg.version : '0.0.0';
}

/**
 * A missing definition file would otherwise surface as a bare "Cannot find module"
 * from require: name the file and say what to pass instead.
 */
export function requireConsumerFile(file: string): string {
  const absolute = path.resolve(file);
  if (!existsSync(absolute)) throw new ConsumerFileMissingError(absolute);
  return absolute;
}
