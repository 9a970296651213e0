import type { QualifyContext, QualifyStep } from '../step';
import { runKillCampaign } from './kill-campaign';

const MiB = 1024 * 1024;

/**
 * The kill campaign on object storage: three replicas publish into one `s3://` table on
 * a store with conditional writes (s3proxy 4.0.0 from deploy/s3-local), racing for its
 * versions, while replicas are SIGKILLed during publications, recoveries and joins, and
 * one is SIGSTOPped inside a Lance add past its session timeout. Checked like the others
 * (every offset a row or a dead letter, rows unique, committed = log end, pylance agrees).
 */
export const step: QualifyStep = {
  name: 'object-store-kills',
  title: 'Object store: kill campaign and a zombie inside a Lance add (s3://, conditional writes)',
  needs: ['object-store'],
  run: (ctx: QualifyContext) => {
    const store = ctx.objectStore;
    if (!store) throw new Error('object-store-kills needs the object store the runner starts');
    return runKillCampaign(ctx, {
      name: 'os-kill',
      replicas: 3,
      totalBytes: ctx.short ? 12 * MiB : 64 * MiB,
      bytesPerSecond: ctx.short ? 0.5 * MiB : 1 * MiB,
      lance: { uri: store.databaseUri('kills'), storageOptions: store.storageOptions },
      store: 'an S3 store with conditional writes (s3proxy 4.0.0)',
      zombieInAdd: true,
    });
  },
};

/**
 * The same campaign through `s3+ddb://`: Lance claims each version in moto's DynamoDB
 * (deploy/dynamodb-local), on the same S3 store.
 */
export const ddbStep: QualifyStep = {
  name: 'object-store-kills-ddb',
  title: 'Object store: kill campaign and a zombie inside a Lance add (s3+ddb://, DynamoDB commit table)',
  needs: ['object-store', 'commit-table'],
  run: (ctx: QualifyContext) => {
    const store = ctx.objectStore;
    const commits = ctx.commitTable;
    if (!store || !commits)
      throw new Error('object-store-kills-ddb needs the object store and the commit table');
    const uri = `${store.databaseUri('kills-ddb').replace(/^s3:/, 's3+ddb:')}?ddbTableName=${commits.table}`;
    return runKillCampaign(ctx, {
      name: 'os-kill-ddb',
      replicas: 3,
      totalBytes: ctx.short ? 12 * MiB : 64 * MiB,
      bytesPerSecond: ctx.short ? 0.5 * MiB : 1 * MiB,
      lance: { uri, storageOptions: { ...store.storageOptions, dynamodb_endpoint: commits.endpoint } },
      store: `s3+ddb:// (commits claimed in moto's DynamoDB table ${commits.table})`,
      zombieInAdd: true,
    });
  },
};
