import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import type { WorkerReply, WorkerRequest } from '../../src/pool/protocol';
import type { RawMessage } from '../../src/decode/raw-message';
import { StagingService } from '../../src/pool/staging-service';
import { tempDir } from './rows';

export type WithoutId<R> = R extends unknown ? Omit<R, 'id'> : never;

function unexpected(reply: WorkerReply): never {
  throw new Error(`unexpected reply ${JSON.stringify(reply)}`);
}

/**
 * A routing lane's StagingService on the main thread, for `definition` (a consumer module's
 * text), with helpers that send one request each and check the reply's type.
 */
export async function openRoutingLane(definition: string, maxOpenParts = 8, dir?: string) {
  dir ??= await tempDir('kl-routing');
  const consumerPath = path.join(dir, 'routed.ts');
  await fsp.writeFile(consumerPath, definition);
  const service = await StagingService.open(
    {
      consumerPath,
      knownFields: [],
      brokers: ['127.0.0.1:1'],
      tableDir: path.join(dir, 'staging', 'routed'),
      dataDir: dir,
      workerIndex: 0,
      epoch: { owner: 'o', epoch: 0 },
      maxPartBytes: 1 << 30,
      maxPartAgeMs: 1 << 30,
      maxOpenParts,
      logLevel: 'silent',
    },
    'test-lane',
  );
  let id = 0;
  const ask = async <T extends WorkerReply['type']>(request: WithoutId<WorkerRequest>, type: T) => {
    const reply = await service.handle({ ...request, id: ++id });
    if (reply.type !== type) throw new Error(`expected ${type}, got ${JSON.stringify(reply)}`);
    return reply;
  };
  const batchReply = async (request: WithoutId<Extract<WorkerRequest, { type: 'batch' }>>) => {
    const reply = await ask(request, 'batch');
    return reply.type === 'batch' ? reply.result : unexpected(reply);
  };
  const batch = (partition: number, messages: RawMessage[], through = messages.at(-1)!.offsetNumber) =>
    batchReply({ type: 'batch', topic: 't', partition, records: messages, through, epoch: 0, schemas: [] });
  const durable = async () => {
    const reply = await ask({ type: 'sync' }, 'sync');
    return reply.type === 'sync' ? reply.durable : unexpected(reply);
  };
  const close = async () => {
    const reply = await ask({ type: 'close' }, 'close');
    return reply.type === 'close' ? reply.sealed : unexpected(reply);
  };
  return { dir, service, ask, batch, batchReply, durable, close };
}
