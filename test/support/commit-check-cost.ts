/**
 * Measures what a publication costs (DESIGN.md "Object storage"): one publisher, 20
 * publications of 1,000 rows, into a local directory, the S3 server of deploy/s3-local
 * (S3_TEST_PORT, default 19900; start it first), or that server through s3+ddb:// with
 * the DynamoDB server of deploy/dynamodb-local (DYNAMODB_TEST_PORT, default 19910).
 *
 *   npm run build
 *   node dist/test/support/commit-check-cost.js local|s3|s3+ddb
 */
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { TABLE, openMaterializer, ownershipOf, stageRows } from './materializer-fixture';
import { tempDir } from './rows';
import { DDB_COMMIT_TABLE, ddbEndpoint } from './dynamodb-local';
import { storageOptions } from './s3-local';

async function main(): Promise<void> {
  const [store = 'local'] = process.argv.slice(2);
  const dir = await tempDir('kl-check-cost');
  try {
    const tableDir = path.join(dir, 'staging', TABLE);
    await stageRows(tableDir, { partitions: 1, perPartition: 20_000, rowsPerPart: 1_000 });
    const uri =
      store === 's3'
        ? `s3://kafka-lance/check-cost-${Date.now()}`
        : store === 's3+ddb'
          ? `s3+ddb://kafka-lance/check-cost-${Date.now()}?ddbTableName=${DDB_COMMIT_TABLE}`
          : path.join(dir, 'lance');
    const options =
      store === 's3'
        ? storageOptions()
        : store === 's3+ddb'
          ? { ...storageOptions(), dynamodb_endpoint: ddbEndpoint() }
          : undefined;
    const m = await openMaterializer(tableDir, uri, {
      lance: { uri, table: TABLE, ...(options ? { storageOptions: options } : {}) },
      maxPublicationBytes: 100 * 1024,
    });
    m.setOwnership(ownershipOf(1, [{ owner: 'A', epoch: 1, start: 0 }], 20_000));
    const t0 = performance.now();
    const results = await m.runOnce();
    const seconds = (performance.now() - t0) / 1000;
    m.close();
    const median = (values: number[]) => values.sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
    console.log(
      JSON.stringify({
        store,
        publications: results.length,
        checkMsMedian: +median(results.map((r) => r.checkSeconds * 1000)).toFixed(1),
        checkMsMax: +Math.max(...results.map((r) => r.checkSeconds * 1000)).toFixed(1),
        writeMsMedian: +median(results.map((r) => r.writeSeconds * 1000)).toFixed(1),
        totalSeconds: +seconds.toFixed(2),
      }),
    );
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
}

void main();
