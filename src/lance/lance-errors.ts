import { KafkaLanceError, errorMessage } from '../common/errors';

/**
 * LanceDB's errors are untyped text (Lance's and object_store's messages): this module
 * is the one place that reads it. Everything else branches on the typed errors and the
 * answers below, never on a message.
 */

/** A Lance error classified once, here at the boundary: callers branch on `retriable`. */
export class LanceWriteError extends KafkaLanceError {
  constructor(message: string, cause: unknown, retriable: boolean, table: string) {
    super('LANCE_WRITE_FAILED', `Lance table ${table}: ${message}`, { cause, retriable, context: { table } });
  }
}

/** What makes staged data unfit for the table; none of them goes away by retrying. */
export type SchemaProblem = 'type-conflict' | 'invalid-column-name' | 'rejected';

/**
 * Staged data the table cannot take as it is (a column typed differently in the table,
 * a name Lance refuses): permanent, so the publication is set aside, never retried forever.
 */
export class LanceSchemaError extends KafkaLanceError {
  constructor(
    readonly problem: SchemaProblem,
    table: string,
    detail: string,
    facts: { column?: string; tableType?: string; stagedType?: string } = {},
    cause?: unknown,
  ) {
    super('LANCE_SCHEMA_INCOMPATIBLE', `Lance table ${table}: ${detail}`, {
      cause,
      retriable: false,
      context: { table, problem, ...facts },
    });
  }
}

/** A cleanup fence that did not commit as one: nothing is cleaned up without it. */
export class CleanupFenceError extends KafkaLanceError {
  constructor(table: string, detail: string, cause?: unknown) {
    super('LANCE_WRITE_FAILED', `Lance table ${table}: cleanup fence ${detail}; no version removed`, {
      cause,
      retriable: true,
      context: { table },
    });
  }
}

/** A commit preempted by another writer (another replica, a compaction): retried. */
export function isCommitConflict(error: unknown): boolean {
  return /Retryable commit conflict|preempted by concurrent transaction|Commit conflict/i.test(
    errorMessage(error),
  );
}

/** Lance's text for ENOSPC / EDQUOT (os error 28 / 122), or an injected one (test seam). */
export function isLanceDiskFull(error: unknown): boolean {
  if ((error as { code?: unknown } | null)?.code === 'ENOSPC') return true;
  return /No space left on device|Disk quota exceeded|os error (28|122)\b/.test(errorMessage(error));
}

/** Lance refusing a schema (not a storage failure): the same data will be refused again. */
export function isSchemaRejection(error: unknown): boolean {
  return /LanceError\(Schema\)/.test(errorMessage(error));
}

/**
 * A merge-insert Lance refuses for its data, not its store: "Ambiguous merge inserts are
 * prohibited" (a source key matching a target row twice). The same rows are refused on
 * every retry, so it is permanent: the plan is set aside with the reason instead of
 * stalling its table forever.
 */
export function isMergeRefusal(error: unknown): boolean {
  return /Ambiguous merge insert/i.test(errorMessage(error));
}

/**
 * Lance's answer to a checkout of a version whose manifest does not exist. On a store
 * it lists itself it tries the V2 name (u64::MAX - version, 20 digits), then the V1 name
 * (the number), and says `Dataset at path …/_versions/<name>.manifest was not found`;
 * with a DynamoDB commit table it says `Not found: …/_versions/<name>.manifest`. Any
 * other failure (the store unreachable) is not an answer.
 */
export function isMissingVersion(error: unknown, version: number): boolean {
  const v2 = (2n ** 64n - 1n - BigInt(version)).toString().padStart(20, '0');
  const name = `_versions/(?:${version}|${v2})\\.manifest\\b`;
  return new RegExp(`${name} was not found|Not found: \\S*${name}`).test(errorMessage(error));
}

/** Why the store could not be reached, as far as its answer tells. */
export type StoreProblem = 'endpoint' | 'credentials' | 'bucket' | 'timeout' | 'other';

/**
 * A failed round trip to the store under `uri` (object_store's RetryError with the HTTP
 * status and the S3 error code), as the problem and a sentence naming the setting to fix.
 */
export function classifyStoreError(uri: string, error: unknown): { problem: StoreProblem; message: string } {
  const text = errorMessage(error);
  const bucket = /^[a-z0-9+]+:\/\/([^/]+)/i.exec(uri)?.[1] ?? uri;
  if (/NoSuchBucket|status: 404[^]*bucket/i.test(text)) {
    return {
      problem: 'bucket',
      message: `bucket "${bucket}" of ${uri} does not exist on the store (S3: NoSuchBucket)`,
    };
  }
  if (
    /SignatureDoesNotMatch|InvalidAccessKeyId|AccessDenied|status: 403|status: 401|ExpiredToken/i.test(text)
  ) {
    const code = /<Code>([A-Za-z]+)<\/Code>/.exec(text)?.[1] ?? 'HTTP 403';
    return {
      problem: 'credentials',
      message: `the store refused the credentials for ${uri} (${code}): check lance.storageOptions.aws_access_key_id/aws_secret_access_key or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY`,
    };
  }
  if (
    /kind: Connect|ConnectionRefused|dns error|tcp connect error|error sending request|timed out|Timeout/i.test(
      text,
    )
  ) {
    const target = /uri: Some\((https?:\/\/[^/?)]+)/.exec(text)?.[1] ?? 'the endpoint';
    return {
      problem: 'endpoint',
      message: `cannot reach ${target} for ${uri}: check lance.storageOptions.endpoint (or AWS_ENDPOINT_URL) and that the store is running`,
    };
  }
  if (/status: 404/i.test(text)) {
    return {
      problem: 'bucket',
      message: `the store answered 404 for ${uri}: wrong endpoint or missing bucket "${bucket}"`,
    };
  }
  return { problem: 'other', message: `the store of ${uri} failed: ${text.slice(0, 300)}` };
}

/** Why commits through an `s3+ddb://` commit table failed, as far as Lance's text tells. */
export type CommitTableProblem = 'missing-table' | 'credentials' | 'other';

export function classifyCommitTableError(error: unknown): CommitTableProblem {
  const text = errorMessage(error);
  if (/ResourceNotFoundException/.test(text)) return 'missing-table';
  if (/Failed to get AWS credentials|credentials/i.test(text)) return 'credentials';
  return 'other';
}
