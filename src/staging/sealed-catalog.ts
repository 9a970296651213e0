import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { PartCorruptError } from '../common/errors';
import type { Logger } from '../common/logger';
import type { FileLocks } from './file-locks';
import { parsePartName } from './part-name';
import { quarantinePart } from './quarantine';
import { readSealedPart, type SealedPart } from './sealed-part';

export interface CatalogRefresh {
  readonly parts: readonly SealedPart[];
  /** Parts moved to quarantine during this refresh. */
  readonly quarantined: readonly string[];
  /** Sealed parts another task held a lock on: neither read nor listed this time. */
  readonly skippedLocked: readonly string[];
}

/**
 * The sealed parts of one table's staging directory, each read and validated once
 * (sealed parts are immutable, so a path's description never changes).
 */
export class SealedPartCatalog {
  readonly #known = new Map<string, SealedPart>();

  constructor(
    readonly tableDir: string,
    private readonly locks: FileLocks,
    private readonly owner: string,
    private readonly logger: Logger,
  ) {}

  async refresh(): Promise<CatalogRefresh> {
    const names = await fsp.readdir(this.tableDir).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return [] as string[];
      throw error;
    });
    const present = new Set<string>();
    const quarantined: string[] = [];
    const skippedLocked: string[] = [];
    for (const name of names.sort()) {
      const parsed = parsePartName(name);
      if (!parsed || parsed.state !== 'sealed') continue;
      const file = path.join(this.tableDir, name);
      present.add(file);
      if (this.#known.has(file)) continue;
      const lock = this.locks.tryLock(file, this.owner);
      if (!lock) {
        skippedLocked.push(file);
        continue;
      }
      try {
        const { part } = await readSealedPart(file);
        this.#known.set(file, part);
      } catch (error) {
        if (!(error instanceof PartCorruptError)) throw error;
        present.delete(file);
        quarantined.push(await quarantinePart(this.tableDir, file, error.message, this.logger));
      } finally {
        lock.release();
      }
    }
    for (const file of this.#known.keys()) if (!present.has(file)) this.#known.delete(file);
    return { parts: [...this.#known.values()], quarantined, skippedLocked };
  }

  /**
   * Takes a part as its writer described it (same checksum and ranges a read would
   * give: the writer hashed the bytes it wrote and ranged the rows it appended), so
   * the part is not read, hashed and decoded once more here: preparation still checks
   * the file against this checksum. A path that is not the one refresh() would list
   * (another directory, another spelling of it) is ignored, so a part is never known
   * twice; one already gone is dropped by the next refresh (it lists the directory first).
   */
  remember(part: SealedPart): void {
    if (path.join(this.tableDir, path.basename(part.path)) !== part.path) return;
    if (parsePartName(path.basename(part.path))?.state !== 'sealed' || this.#known.has(part.path)) return;
    this.#known.set(part.path, part);
  }

  /** Forget a part (its publication deleted it). */
  forget(file: string): void {
    this.#known.delete(file);
  }
}
