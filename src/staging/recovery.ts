import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { errorMessage } from '../common/errors';
import { tableNameProblem } from '../config/table-name';
import { fsyncDirectory, mkdirDurably, pathExists, unlinkDurably } from '../common/fs-durable';
import type { Logger } from '../common/logger';
import type { FileLocks } from './file-locks';
import { END_OF_STREAM, decodeBatches, scanStream } from './ipc-stream';
import { RunningCrc, checkDigestTrailer, digestTrailer } from './part-digest';
import {
  formatPartName,
  isRecoveredId,
  originalIdOf,
  parsePartName,
  recoveredIdOf,
  type PartName,
} from './part-name';
import { quarantinePart } from './quarantine';
import { SealedPartCatalog } from './sealed-catalog';
import { offsetRangesOf, type SealedPart } from './sealed-part';

export interface RecoveryOptions {
  readonly tableDir: string;
  readonly locks: FileLocks;
  readonly owner: string;
  readonly logger: Logger;
}

export interface RecoveryReport {
  /** Every readable sealed part after recovery, including the ones it sealed. */
  readonly sealedParts: readonly SealedPart[];
  /** Open parts sealed by this recovery. */
  readonly recoveredParts: number;
  /** Open parts that had a torn tail, and the bytes dropped from them. */
  readonly tornParts: number;
  readonly tornBytes: number;
  /** Open parts with no whole batch (empty or headerless), removed. */
  readonly removedEmpty: number;
  /** Leftovers of a rewrite a previous recovery did not finish, removed. */
  readonly removedLeftovers: number;
  readonly quarantined: readonly string[];
  /** Parts another task held a lock on: left untouched. */
  readonly skippedLocked: readonly string[];
}

/**
 * Makes a table's staging directory whole again after a crash, before any push:
 * every `.part` keeps its valid prefix of whole batches and is sealed; a torn tail
 * (never fsynced, never committed: Kafka redelivers it) is dropped and counted.
 *
 * A part is never truncated or reopened, so a torn part is rewritten to a new file
 * `<id>-r.arrows` (prefix + end-of-stream) and only then is the original removed.
 * If recovery itself is interrupted, the next one sees which step was reached:
 * `<id>-r.arrows.part` (rewrite unfinished) is removed and redone; `<id>-r.arrows`
 * beside `<id>.arrows.part` (original not yet removed) just removes the original.
 *
 * Recovery does not decide which rows count: after a crash the broker's committed
 * offsets are the redelivery threshold, and rows staged above them are cut by the
 * planner's ceiling rule (a part's max offset is no safe threshold: one tick writes
 * several parts, and a crash can keep a later part's write and lose an earlier one's).
 *
 * Every file is locked before it is touched, and a locked file is skipped: a live
 * writer's part or another task's output is never renamed, sealed or deleted.
 */
export async function recoverTableStaging(options: RecoveryOptions): Promise<RecoveryReport> {
  const { tableDir, locks, owner, logger } = options;
  await mkdirDurably(tableDir);
  const names = await fsp.readdir(tableDir);
  const parts = names
    .map((n) => ({ file: path.join(tableDir, n), name: parsePartName(n) }))
    .filter((p): p is { file: string; name: PartName } => p.name !== undefined && p.name.state === 'open')
    // Unfinished rewrites first: the original they came from is recovered again afterwards.
    .sort((a, b) => Number(isRecoveredId(b.name.id)) - Number(isRecoveredId(a.name.id)));

  const counts = { recoveredParts: 0, tornParts: 0, tornBytes: 0, removedEmpty: 0, removedLeftovers: 0 };
  const quarantined: string[] = [];
  const skippedLocked: string[] = [];

  for (const { file, name } of parts) {
    using lock = locks.tryLock(file, owner);
    if (!lock) {
      skippedLocked.push(file);
      continue;
    }
    const sibling = (id: string, state: 'open' | 'sealed') =>
      path.join(tableDir, formatPartName({ ...name, id }, state));
    if (isRecoveredId(name.id) && (await pathExists(sibling(originalIdOf(name.id), 'open')))) {
      await unlinkDurably(file);
      counts.removedLeftovers += 1;
      continue;
    }
    if (!isRecoveredId(name.id) && (await pathExists(sibling(recoveredIdOf(name.id), 'sealed')))) {
      // The original of a finished rewrite: a torn one is a leftover; a damaged one (put
      // back from quarantine by hand) still holds the batches after its damage.
      const damage = scanStream(await fsp.readFile(file)).damage;
      if (damage) {
        const reason = `${damage.reason} (message at byte ${damage.offset}); its whole batches before it are already sealed as ${path.basename(sibling(recoveredIdOf(name.id), 'sealed'))}`;
        quarantined.push(await quarantinePart(tableDir, file, reason, logger));
        continue;
      }
      await unlinkDurably(file);
      counts.removedLeftovers += 1;
      continue;
    }
    const outcome = await recoverOpenPart(file, name, tableDir, locks, owner, logger);
    switch (outcome.kind) {
      case 'empty':
        await unlinkDurably(file);
        counts.removedEmpty += 1;
        logger.info(
          { event: 'staging.recovery.removed', part: file, reason: outcome.reason },
          'removed a part with no whole batch',
        );
        break;
      case 'corrupt':
        quarantined.push(await quarantinePart(tableDir, file, outcome.reason, logger));
        break;
      case 'sealed':
        counts.recoveredParts += 1;
        if (outcome.quarantinedAs !== undefined) quarantined.push(outcome.quarantinedAs);
        if (outcome.tornBytes > 0) {
          counts.tornParts += 1;
          counts.tornBytes += outcome.tornBytes;
          logger.warn(
            {
              event: 'staging.recovery.torn',
              part: file,
              sealedAs: outcome.sealedPath,
              tornBytes: outcome.tornBytes,
            },
            'dropped the torn tail of a staging part (never committed; Kafka redelivers it)',
          );
        }
        break;
    }
  }

  const catalog = new SealedPartCatalog(tableDir, locks, owner, logger);
  const refreshed = await catalog.refresh();
  quarantined.push(...refreshed.quarantined);
  skippedLocked.push(...refreshed.skippedLocked);

  const report: RecoveryReport = {
    ...counts,
    sealedParts: refreshed.parts,
    quarantined,
    skippedLocked,
  };
  logger.info(
    {
      event: 'staging.recovery',
      tableDir,
      sealedParts: report.sealedParts.length,
      ...counts,
      quarantined: quarantined.length,
      skippedLocked: skippedLocked.length,
    },
    'staging recovery finished',
  );
  return report;
}

type OpenPartOutcome =
  | { kind: 'empty'; reason: string }
  | { kind: 'corrupt'; reason: string }
  /** `quarantinedAs`: the damaged original, kept aside whole beside its sealed prefix. */
  | { kind: 'sealed'; sealedPath: string; tornBytes: number; quarantinedAs?: string };

async function recoverOpenPart(
  file: string,
  name: PartName,
  tableDir: string,
  locks: FileLocks,
  owner: string,
  logger: Logger,
): Promise<OpenPartOutcome> {
  const bytes = await fsp.readFile(file);
  const scan = scanStream(bytes);
  // A message that is all there but unreadable: rot, or a block a crash left unwritten
  // (zeros) with later ones written, even in a part whose last write held its trailer.
  // The batches before it were durable and may be committed: they are sealed as for a
  // torn tail, and the file itself is kept aside whole for a human (the batches after it
  // may have been committed too).
  if (scan.damage && scan.batchCount === 0)
    return { kind: 'corrupt', reason: `${scan.damage.reason} (message at byte ${scan.damage.offset})` };
  if (!scan.hasSchema)
    return { kind: 'empty', reason: bytes.byteLength === 0 ? 'empty file' : 'no schema message' };
  if (scan.batchCount === 0) return { kind: 'empty', reason: 'no whole batch' };
  // Whole: the writer wrote end-of-stream and a matching checksum trailer (or, before the
  // trailer existed, nothing after end-of-stream). A torn trailer is rewritten like a torn tail.
  const trailer = scan.ended ? checkDigestTrailer(bytes, scan.validLength) : undefined;
  if (trailer?.kind === 'invalid' && trailer.whole) {
    // A whole trailer that does not match: the bytes changed after they were written.
    // Checked before decoding: nothing is read out of bytes known to be damaged.
    return { kind: 'corrupt', reason: trailer.reason };
  }
  const prefix = bytes.subarray(0, scan.validLength);
  try {
    // Whole messages that decode, with system columns that read as offsets (a bit flipped
    // in an offset decodes fine and would only fail later, in every reader of the part).
    offsetRangesOf(file, decodeBatches(prefix).batches);
  } catch (error) {
    return { kind: 'corrupt', reason: `whole messages do not decode: ${errorMessage(error)}` };
  }
  const sealedPath = path.join(tableDir, formatPartName(name, 'sealed'));
  const whole = trailer !== undefined && trailer.kind !== 'invalid';
  if (!whole && isRecoveredId(name.id)) {
    // Rewrites are only torn while their original still exists (handled by the caller).
    return { kind: 'corrupt', reason: 'a torn recovery rewrite whose original is gone' };
  }
  if (whole) {
    // The writer finished the stream but died before the rename: the file is whole as it is.
    using _sealed = locks.lock(sealedPath, owner);
    await fsp.rename(file, sealedPath);
    await fsyncDirectory(tableDir);
    return { kind: 'sealed', sealedPath, tornBytes: 0 };
  }
  const rewrite = { ...name, id: recoveredIdOf(originalIdOf(name.id)) };
  const rewriteOpen = path.join(tableDir, formatPartName(rewrite, 'open'));
  const rewriteSealed = path.join(tableDir, formatPartName(rewrite, 'sealed'));
  using _locks = locks.lockAll([rewriteOpen, rewriteSealed], owner);
  const handle = await fsp.open(rewriteOpen, 'wx');
  try {
    const stream = scan.ended ? prefix : Buffer.concat([prefix, END_OF_STREAM]);
    await handle.writeFile(stream);
    await handle.writeFile(digestTrailer(new RunningCrc().update(stream).value));
    await handle.sync();
  } finally {
    await handle.close();
  }
  // A damaged original goes to quarantine before its rewrite is sealed: a sealed rewrite
  // beside its original makes the next recovery delete the original as a leftover, and
  // the batches after the damage with it. A rewrite left open by a crash here is whole,
  // and the next recovery seals it as it is.
  const quarantinedAs = scan.damage
    ? await quarantinePart(
        tableDir,
        file,
        `${scan.damage.reason} (message at byte ${scan.damage.offset}); the ${scan.batchCount} whole batches before it are sealed as ${path.basename(rewriteSealed)}`,
        logger,
      )
    : undefined;
  await fsp.rename(rewriteOpen, rewriteSealed);
  await fsyncDirectory(tableDir);
  if (quarantinedAs !== undefined)
    return { kind: 'sealed', sealedPath: rewriteSealed, tornBytes: 0, quarantinedAs };
  await unlinkDurably(file);
  return { kind: 'sealed', sealedPath: rewriteSealed, tornBytes: scan.trailingBytes };
}

/**
 * The table directories under `<dataDir>/staging/` (a routing consumer stages each table
 * in its own): every directory whose name is a valid table name, sorted. None when the
 * staging root does not exist yet.
 */
export async function stagedTableNames(stagingRoot: string): Promise<string[]> {
  let entries;
  try {
    entries = await fsp.readdir(stagingRoot, { withFileTypes: true });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
  return entries
    .filter((e) => e.isDirectory() && tableNameProblem(e.name) === undefined)
    .map((e) => e.name)
    .sort();
}

/** Recovers every table directory under the staging root (a routing consumer's start), one after another. */
export async function recoverStagingTables(
  stagingRoot: string,
  options: Omit<RecoveryOptions, 'tableDir'>,
): Promise<Map<string, RecoveryReport>> {
  const reports = new Map<string, RecoveryReport>();
  for (const table of await stagedTableNames(stagingRoot)) {
    reports.set(table, await recoverTableStaging({ ...options, tableDir: path.join(stagingRoot, table) }));
  }
  return reports;
}
