import { runOutage } from '../support/outage';
import type { QualifyContext, QualifyStep } from '../step';

const MiB = 1024 * 1024;

/** The broker stopped and restarted (same data dir, same port) mid-run. */
export const step: QualifyStep = {
  name: 'broker-outage',
  title: 'Broker outage: Kafka stopped and restarted mid-run, nothing lost or duplicated',
  needs: ['broker-control'],
  run: (ctx: QualifyContext) =>
    runOutage({
      context: ctx,
      name: 'broker-outage',
      what: 'the broker',
      stop: () => ctx.broker.stop(),
      start: () => ctx.broker.start(),
      totalBytes: ctx.short ? 6 * MiB : 48 * MiB,
      bytesPerSecond: ctx.short ? 0.4 * MiB : 1 * MiB,
      outageMs: ctx.short ? 10_000 : 20_000,
    }),
};
