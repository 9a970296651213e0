import * as path from 'node:path';
import { mkdirDurably, renameDurably } from '../common/fs-durable';
import type { Logger } from '../common/logger';

export const QUARANTINE_DIR = 'quarantine';

/**
 * Moves a part that cannot be read as whole batches out of the way, keeping its
 * bytes for a human. It is never published and never deleted by kafka-lance.
 */
export async function quarantinePart(
  tableDir: string,
  file: string,
  reason: string,
  logger: Logger,
): Promise<string> {
  const dir = path.join(tableDir, QUARANTINE_DIR);
  await mkdirDurably(dir);
  const target = path.join(dir, path.basename(file));
  await renameDurably(file, target);
  logger.error(
    { event: 'staging.quarantine', part: file, quarantinedAs: target, reason },
    'corrupt staging part quarantined',
  );
  return target;
}
