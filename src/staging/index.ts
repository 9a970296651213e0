export { FileLocks, FileLock, FileLockSet } from './file-locks';
export { minuteKeyOf, parsePartName, formatPartName, type MinuteKey, type PartName } from './part-name';
export { schemaKeyOf, type SchemaKey } from './schema-key';
export { readSealedPart, type SealedPart, type PartOffsetRange } from './sealed-part';
export { SealedPartCatalog } from './sealed-catalog';
export { epochFromMetadata, type StagingEpoch } from './epoch';
export {
  recoverTableStaging,
  recoverStagingTables,
  stagedTableNames,
  type RecoveryReport,
  type RecoveryOptions,
} from './recovery';
export {
  TableStaging,
  StagingFailedError,
  tableStagingDir,
  type TableStagingOptions,
  type StagingPush,
  type PushResult,
  type FlushResult,
  type StagingStats,
} from './table-staging';
export * from './system-columns';
