import { existsSync } from 'node:fs';
import type { DiskStage } from '../common/errors';
import { threadFaults } from './thread-faults';

/**
 * Test-only fault injection at the file-system layer, for machines where a test cannot
 * mount a small file system of its own (no CAP_SYS_ADMIN): while the file named by
 * Faults.diskFullFlags (KAFKA_LANCE_TEST_DISK_FULL_STAGING or `..._LANCE`) exists, every
 * staging part write (or Lance add) fails with ENOSPC, exactly as a full disk makes it
 * fail. Without that fault (always, outside tests), it costs one property read per write.
 */
export function injectedDiskFull(stage: DiskStage, file: string): NodeJS.ErrnoException | undefined {
  const flag = threadFaults().diskFullFlags[stage];
  if (!flag || !existsSync(flag)) return undefined;
  return Object.assign(new Error(`ENOSPC: no space left on device (injected), write '${file}'`), {
    code: 'ENOSPC',
    errno: -28,
    syscall: 'write',
    path: file,
  });
}
