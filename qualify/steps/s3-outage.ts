import { runOutage } from '../support/outage';
import type { QualifyContext, QualifyStep } from '../step';

const MiB = 1024 * 1024;

/** S3proxy (an object-storage table, `lance.uri: s3://...`) stopped and restarted mid-run. */
export const step: QualifyStep = {
  name: 's3-outage',
  title: 'Object-store outage: S3 stopped and restarted mid-run, nothing lost or duplicated',
  needs: ['object-store'],
  run: (ctx: QualifyContext) => {
    const store = ctx.objectStore;
    if (!store) throw new Error('s3-outage needs the object store the runner starts');
    return runOutage({
      context: ctx,
      name: 's3-outage',
      what: 'the S3 store (s3proxy)',
      stop: () => store.stop(),
      start: () => store.start(),
      lance: { uri: store.databaseUri('qualify'), storageOptions: store.storageOptions },
      totalBytes: ctx.short ? 6 * MiB : 32 * MiB,
      bytesPerSecond: ctx.short ? 0.4 * MiB : 1 * MiB,
      outageMs: ctx.short ? 10_000 : 20_000,
    });
  },
};
