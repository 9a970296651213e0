/**
 * A staging worker thread: decodes the batches of the partitions routed to it and
 * stages them in its own TableStaging (its own part files in the table's staging
 * directory). It answers every request on its port in order, so a batch's reply
 * always arrives before the reply of a later sync that covers it.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { DiskFullError, errorMessage } from '../common/errors';
import { createLogger } from '../common/logger';
import { parseTpKey, recordOffset, type DurableOffset } from '../common/offsets';
import { loadConsumer } from '../config/load';
import { RecordDecoder } from '../decode/record-decoder';
import { FileLocks } from '../staging/file-locks';
import { StagingFailedError, TableStaging, type FlushResult } from '../staging/table-staging';
import { unpackMessages } from './packed-messages';
import type { StagingWorkerInit, WorkerReply, WorkerRequest } from './protocol';

async function main(): Promise<void> {
  const port = parentPort;
  if (!port) throw new Error('staging-worker runs only as a worker thread');
  const init = workerData as StagingWorkerInit;
  const logger = createLogger({ level: init.logLevel as 'info', name: `staging-worker-${init.workerIndex}` });
  const consumer = loadConsumer(init.consumerPath, process.env, { brokers: init.brokers });
  const decoder = new RecordDecoder({ ...consumer, knownFields: init.knownFields });
  const staging = await TableStaging.open({
    tableDir: init.tableDir,
    table: consumer.table,
    locks: new FileLocks(),
    owner: `staging-worker-${init.workerIndex}`,
    logger,
    maxPartBytes: init.maxPartBytes,
    maxPartAgeMs: init.maxPartAgeMs,
    maxOpenParts: init.maxOpenParts,
    epoch: init.epoch,
  });
  const reply = (message: WorkerReply) => port.postMessage(message);
  const summary = (r: FlushResult) => ({
    parts: r.sealed.length,
    rows: r.sealed.reduce((n, p) => n + p.rows, 0),
    bytes: r.sealed.reduce((n, p) => n + p.bytes, 0),
    sealed: r.sealed,
  });

  // Requests are handled one at a time, in arrival order.
  let chain: Promise<void> = Promise.resolve();
  port.on('message', (request: WorkerRequest) => {
    chain = chain.then(async () => {
      try {
        switch (request.type) {
          case 'batch': {
            if (request.epoch !== staging.epoch.epoch) {
              // Admitted before a join that began a newer epoch: its offsets follow the
              // old claim's fetch position, so staging it could leave a gap below it.
              reply({
                type: 'batch',
                id: request.id,
                result: { dropped: true, staged: 0, skipped: 0, deadLetters: [], stagedBytes: 0 },
              });
              break;
            }
            const messages = unpackMessages(request.packed);
            const decoded =
              messages.length > 0
                ? decoder.decode(
                    request.topic,
                    request.partition,
                    messages,
                    staging.epoch.topicIds?.[request.topic] ?? '',
                    request.schemas,
                  )
                : { batch: undefined, minute: [], earlier: [], deadLetters: [] };
            // Rows decoded before a column was retyped: their own schema, so their own parts.
            // Each push hands over only through its own last record, so the high-water never
            // passes rows still to be pushed.
            let staged = 0;
            let skipped = 0;
            let stagedBytes = decoded.batch?.data.byteLength ?? 0;
            for (const segment of decoded.earlier) {
              const pushed = staging.push({
                topic: request.topic,
                partition: request.partition,
                batch: segment.batch,
                minute: segment.minute,
                handledThrough: recordOffset(segment.through),
              });
              staged += pushed.staged;
              skipped += pushed.skipped;
              stagedBytes += segment.batch.data.byteLength;
            }
            const pushed = staging.push({
              topic: request.topic,
              partition: request.partition,
              batch: decoded.batch,
              minute: decoded.minute,
              handledThrough: recordOffset(request.through),
            });
            reply({
              type: 'batch',
              id: request.id,
              result: {
                dropped: false,
                staged: staged + pushed.staged,
                skipped: skipped + pushed.skipped,
                deadLetters: decoded.deadLetters,
                stagedBytes,
              },
            });
            break;
          }
          case 'sync': {
            const durable = await staging.sync();
            const stats = staging.stats();
            reply({
              type: 'sync',
              id: request.id,
              epoch: staging.epoch.epoch,
              parts: { open: stats.openParts, sealing: stats.sealingParts },
              unsealed: staging.unsealedPartIds(),
              durable: [...durable].map(([key, offset]) => {
                const { topic, partition } = parseTpKey(key);
                return [topic, partition, offset] as const;
              }),
            });
            break;
          }
          case 'flush':
            reply({
              type: 'flush',
              id: request.id,
              sealed: summary(await staging.flush({ force: request.force })),
            });
            break;
          case 'epoch': {
            for (const [topic, partition, ceiling] of request.revoked) {
              staging.lowerHighWater(topic, partition, ceiling as DurableOffset);
            }
            for (const [topic, partition, offset] of request.assigned) {
              staging.lowerHighWater(topic, partition, offset as DurableOffset);
              staging.raiseHighWater(topic, partition, offset as DurableOffset);
            }
            reply({
              type: 'epoch',
              id: request.id,
              sealed: summary(await staging.beginEpoch(request.epoch)),
            });
            break;
          }
          case 'close':
            reply({ type: 'close', id: request.id, sealed: summary(await staging.close()) });
            port.close();
            break;
        }
      } catch (error) {
        if (error instanceof DiskFullError) {
          // Not a failure of staging: the main thread pauses and retries (kafka/durability-tick.ts).
          reply({
            type: 'error',
            id: request.id,
            message: errorMessage(error),
            fatal: false,
            diskFull: { path: error.path, operation: error.operation },
          });
          return;
        }
        logger.error(
          { event: 'staging-worker.error', request: request.type, err: error },
          errorMessage(error),
        );
        reply({
          type: 'error',
          id: request.id,
          message: errorMessage(error),
          fatal: error instanceof StagingFailedError,
        });
      }
    });
  });
  reply({ type: 'ready' });
}

main().catch((error: unknown) => {
  parentPort?.postMessage({
    type: 'error',
    id: undefined,
    message: errorMessage(error),
    fatal: true,
  } satisfies WorkerReply);
});
