/**
 * Runs a materializer over a staging directory until nothing is left to publish:
 * the process the crash-point tests SIGKILL (KAFKA_LANCE_TEST_CRASH_AT) and restart.
 *
 *   node dist/test/support/materializer-child.js <tableDir> <lanceDir> <partitions> <committed> <mode> [maxPermanentFailures]
 */
import { parseFaults } from '../../src/faults/faults';
import { shareFaults } from '../../src/faults/thread-faults';
import { ownershipOf, openMaterializer, sealedPartCount } from './materializer-fixture';

async function main(): Promise<void> {
  // The process start, as the CLI's run command: its crash point comes from its variables.
  shareFaults(parseFaults(process.env));
  const [tableDir, lanceDir, partitions, committed, mode, maxPermanentFailures] = process.argv.slice(2);
  const m = await openMaterializer(tableDir!, lanceDir!, {
    mode: mode === 'streamed' ? 'streamed' : 'buffered',
    maxPublicationBytes: 256 * 1024,
    maxPermanentFailures: Number(maxPermanentFailures ?? 3),
  });
  m.setOwnership(ownershipOf(Number(partitions), [{ owner: 'A', epoch: 1, start: 0 }], Number(committed)));
  await m.resume();
  while ((await sealedPartCount(tableDir!)) > 0) await m.runOnce();
  m.close();
  process.stdout.write(`${JSON.stringify(m.stats())}\n`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
