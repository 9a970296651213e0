import * as lancedb from '@lancedb/lancedb';
import { ulid } from 'ulid';
import { errorMessage } from '../common/errors';
import { COMMIT_TABLE_KEYS, type CommitTableCheck } from './commit-table';
import { classifyCommitTableError } from './lance-errors';
import { ddbEndpointOf, ddbTableNameOf } from './store-config';

export const START_CHECK_TABLE_PREFIX = '_kafka_lance_start_';

/**
 * The start check of an `s3+ddb://` commit table when the configuration holds no static
 * credentials (an instance role, a web identity token, a profile file, ECS task
 * credentials): the signed DescribeTable (commit-table.ts) has nothing to sign with, and
 * skipping the check let a replica start against a missing table and fail every
 * publication, retried for ever. Lance resolves those credentials through the AWS default
 * chain itself, so it is Lance that checks: two commits (create, add) on a scratch table
 * under the database, each a conditional PutItem in the commit table, then the table is
 * dropped. Whatever stops them stops the start, named.
 */
export async function checkCommitTableThroughLance(
  uri: string,
  storageOptions: Readonly<Record<string, string>> | undefined,
  env: NodeJS.ProcessEnv,
  timeoutMs: number,
): Promise<CommitTableCheck & { readonly leftover?: string }> {
  const table = ddbTableNameOf(uri) ?? '';
  const endpoint = ddbEndpointOf(storageOptions ?? {}, env) ?? 'AWS DynamoDB (the region’s endpoint)';
  const scratch = `${START_CHECK_TABLE_PREFIX}${ulid()}`;
  let step: 'connect' | 'create' | 'add' = 'connect';
  let created = false;
  let db: lancedb.Connection | undefined;
  const commits = (async () => {
    db = await lancedb.connect(uri, storageOptions ? { storageOptions: { ...storageOptions } } : {});
    step = 'create';
    const t = await db.createTable(scratch, [{ check: 1 }], { mode: 'create' });
    created = true;
    step = 'add';
    try {
      await t.add([{ check: 2 }]);
    } finally {
      t.close();
    }
  })();
  // Credential discovery, then a dozen round trips to S3 and DynamoDB: more than one connect.
  const budgetMs = 3 * timeoutMs;
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      commits,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new StartCheckTimeout(budgetMs, step)), budgetMs);
      }),
    ]);
  } catch (error) {
    // The scratch table goes once the commits end, whatever they did (best effort: the
    // start fails now; a table left behind is named in the log by its prefix).
    void commits.then(dropScratch, dropScratch);
    return { ok: false, table, endpoint, ...explain(error, table, endpoint, step) };
  } finally {
    clearTimeout(timer);
  }
  // The commits went through: the verdict is given. The drop is only housekeeping (a
  // role allowed to commit but not to delete is fine for a replica, which deletes nothing).
  const leftover = await dropScratch();
  return { ok: true, table, endpoint, ...(leftover ? { leftover } : {}) };

  async function dropScratch(): Promise<string | undefined> {
    try {
      if (created && db) await db.dropTable(scratch);
      return undefined;
    } catch (error) {
      return `${scratch} (${errorMessage(error).slice(0, 200)})`;
    } finally {
      db?.close();
    }
  }
}

class StartCheckTimeout extends Error {
  constructor(
    readonly ms: number,
    readonly step: string,
  ) {
    super(`no answer within ${ms} ms`);
  }
}

/** The field to fix for Lance's failure (its text read by lance-errors.ts). */
function explain(
  error: unknown,
  table: string,
  endpoint: string,
  step: string,
): { field: string; message: string } {
  const text = errorMessage(error);
  const how = `checked by two commits through Lance with the credentials it found itself; step: ${step}`;
  if (error instanceof StartCheckTimeout) {
    return {
      field: step === 'connect' ? 'lance.uri' : 'lance.storageOptions.dynamodb_endpoint',
      message: `a commit through the DynamoDB commit table ${table} at ${endpoint} got ${text} (${how}; the store, the credentials or DynamoDB did not answer)`,
    };
  }
  const problem = classifyCommitTableError(error);
  if (problem === 'missing-table') {
    return {
      field: 'lance.uri',
      message: `the DynamoDB commit table ${table} does not exist at ${endpoint} (${how}): create it with hash key ${COMMIT_TABLE_KEYS.hash.name} (S) and range key ${COMMIT_TABLE_KEYS.range.name} (N) (deploy/dynamodb-local creates one locally)`,
    };
  }
  if (problem === 'credentials') {
    return {
      field: 'lance.storageOptions.aws_secret_access_key',
      message: `no AWS credentials for the commit table ${table}: none in lance.storageOptions or AWS_* variables, and Lance found none in a profile, a web identity token or an instance role (${text.slice(0, 300)})`,
    };
  }
  return {
    field: 'lance.uri',
    message: `a commit through the DynamoDB commit table ${table} at ${endpoint} failed (${how}): ${text.slice(0, 500)}`,
  };
}
