import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { mkdirDurably, unlinkDurably, writeFileAtomically } from '../common/fs-durable';

/**
 * The duty a create of the table leaves behind: a create may land over the table
 * (table-creation.ts), and then its rows must be put back. Kept in a file of the
 * replica's own data directory, so that a creator killed between its create and its
 * restore, or restarted while a restore keeps failing, finishes the restore when it
 * starts again instead of forgetting the rows.
 *
 * Written before the create (`version` not known yet: after a crash, the version is
 * found by looking for the overwrite among the versions since `writtenAt`,
 * `findOverwrite`), rewritten with the create's version once it committed over rows,
 * and removed once they are back, or once the create is known to have landed over
 * nothing.
 */

/** Its name in a table's staging directory, beside the publication ledger. */
export const RESTORE_INTENT_FILE = 'lance-restore.json';

export interface RestoreIntent {
  /** The table's store and name: an intent left for another (lance.uri changed) is not this table's. */
  readonly uri: string;
  readonly table: string;
  /** The version the create committed, when it is known. */
  readonly version: number | undefined;
  /** When it was written (ms): a version the create committed is no older, give or take clock skew. */
  readonly writtenAt: number;
}

export class RestoreIntentFile {
  constructor(readonly file: string) {}

  async read(): Promise<RestoreIntent | undefined> {
    let text: string;
    try {
      text = await fsp.readFile(this.file, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
    // Written whole (temp file, fsync, rename): a file that does not parse was not written by us.
    const parsed = JSON.parse(text) as Partial<Record<keyof RestoreIntent, unknown>>;
    if (
      typeof parsed.table !== 'string' ||
      typeof parsed.uri !== 'string' ||
      typeof parsed.writtenAt !== 'number'
    )
      throw new Error(`${this.file}: not a restore intent: ${text.slice(0, 200)}`);
    return {
      uri: parsed.uri,
      table: parsed.table,
      version: typeof parsed.version === 'number' ? parsed.version : undefined,
      writtenAt: parsed.writtenAt,
    };
  }

  async write(intent: RestoreIntent): Promise<void> {
    await mkdirDurably(path.dirname(this.file));
    await writeFileAtomically(this.file, JSON.stringify({ ...intent, version: intent.version ?? null }));
  }

  async clear(): Promise<void> {
    await unlinkDurably(this.file).catch((error: unknown) => {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    });
  }
}
