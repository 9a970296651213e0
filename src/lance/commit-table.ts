import { createHash, createHmac } from 'node:crypto';
import { errorMessage } from '../common/errors';
import { ddbEndpointOf, ddbTableNameOf } from './store-config';

/**
 * The start check of an `s3+ddb://` database's DynamoDB commit table: Lance claims each
 * version there with a conditional PutItem, and a missing table or one with another key
 * schema only shows at the first commit, as an error deep inside a publication. One
 * DescribeTable names what is wrong at start instead.
 *
 * The request is signed here (AWS Signature V4, ~40 lines with node:crypto) rather than
 * through @aws-sdk/client-dynamodb: the SDK brings ~80 packages for one read-only call.
 * It signs with static credentials (storage options or AWS_* variables); without them
 * (an instance role, a profile) it answers `skipped`, and the start checks through Lance
 * instead (commit-table-probe.ts), which resolves credentials itself.
 */

/** The key schema Lance 12's DynamoDB commit store reads and writes. */
export const COMMIT_TABLE_KEYS = {
  hash: { name: 'base_uri', type: 'S' },
  range: { name: 'version', type: 'N' },
} as const;

export interface CommitTableCheck {
  readonly ok: boolean;
  /** Skipped: no static credentials to sign with (then commit-table-probe.ts checks). */
  readonly skipped?: boolean;
  readonly table: string;
  readonly endpoint: string;
  /** The field to fix and why, when not ok. */
  readonly field?: string;
  readonly message?: string;
}

interface DescribeTableAnswer {
  Table?: {
    TableStatus?: string;
    KeySchema?: { AttributeName: string; KeyType: 'HASH' | 'RANGE' }[];
    AttributeDefinitions?: { AttributeName: string; AttributeType: string }[];
  };
  __type?: string;
  message?: string;
  Message?: string;
}

function option(options: Readonly<Record<string, string>>, names: readonly string[]): string | undefined {
  const hit = Object.entries(options).find(([k, v]) => names.includes(k.toLowerCase()) && v.length > 0);
  return hit?.[1];
}

export async function checkCommitTable(
  uri: string,
  storageOptions: Readonly<Record<string, string>> | undefined,
  env: NodeJS.ProcessEnv,
  timeoutMs: number,
): Promise<CommitTableCheck> {
  const options = storageOptions ?? {};
  const table = ddbTableNameOf(uri) ?? '';
  const region =
    option(options, ['region', 'aws_region', 'default_region', 'aws_default_region']) ??
    env.AWS_REGION ??
    env.AWS_DEFAULT_REGION ??
    'us-east-1';
  const endpoint = ddbEndpointOf(options, env) ?? `https://dynamodb.${region}.amazonaws.com`;
  const keyId = option(options, ['aws_access_key_id', 'access_key_id']) ?? env.AWS_ACCESS_KEY_ID;
  const secret = option(options, ['aws_secret_access_key', 'secret_access_key']) ?? env.AWS_SECRET_ACCESS_KEY;
  const token = option(options, ['aws_session_token', 'session_token', 'token']) ?? env.AWS_SESSION_TOKEN;
  if (!keyId || !secret) return { ok: true, skipped: true, table, endpoint };
  const fail = (field: string, message: string): CommitTableCheck => ({
    ok: false,
    table,
    endpoint,
    field,
    message,
  });

  let answer: { status: number; body: DescribeTableAnswer };
  try {
    answer = await describeTable(endpoint, region, table, { keyId, secret, token }, timeoutMs);
  } catch (error) {
    return fail(
      'lance.storageOptions.dynamodb_endpoint',
      `cannot reach the DynamoDB endpoint ${endpoint} for the commit table ${table}: ${errorMessage(error)}`,
    );
  }
  const { status, body } = answer;
  const type = (body.__type ?? '').split('#').pop() ?? '';
  if (status !== 200) {
    if (type === 'ResourceNotFoundException') {
      return fail(
        'lance.uri',
        `the DynamoDB commit table ${table} does not exist at ${endpoint}: create it with hash key ${COMMIT_TABLE_KEYS.hash.name} (S) and range key ${COMMIT_TABLE_KEYS.range.name} (N) (deploy/dynamodb-local creates one locally)`,
      );
    }
    const field = /Signature|Credential|Token|AccessDenied|Unrecognized/i.test(type)
      ? 'lance.storageOptions.aws_secret_access_key'
      : 'lance.storageOptions.dynamodb_endpoint';
    return fail(
      field,
      `DynamoDB at ${endpoint} refused DescribeTable ${table} (HTTP ${status} ${type || ''}${(body.message ?? body.Message) ? `: ${body.message ?? body.Message}` : ''})`,
    );
  }
  const wrong = keySchemaProblems(body);
  if (wrong.length > 0) {
    return fail(
      'lance.uri',
      `the DynamoDB commit table ${table} at ${endpoint} has the wrong key schema (${wrong.join('; ')}): Lance needs hash key ${COMMIT_TABLE_KEYS.hash.name} (S) and range key ${COMMIT_TABLE_KEYS.range.name} (N)`,
    );
  }
  return { ok: true, table, endpoint };
}

/** What differs from the key schema Lance needs (empty: it fits). */
export function keySchemaProblems(answer: DescribeTableAnswer): string[] {
  const keys = answer.Table?.KeySchema ?? [];
  const types = new Map(
    (answer.Table?.AttributeDefinitions ?? []).map((a) => [a.AttributeName, a.AttributeType]),
  );
  const problems: string[] = [];
  for (const [role, want] of [
    ['HASH', COMMIT_TABLE_KEYS.hash],
    ['RANGE', COMMIT_TABLE_KEYS.range],
  ] as const) {
    const have = keys.find((k) => k.KeyType === role);
    const label = role === 'HASH' ? 'hash key' : 'range key';
    if (!have) problems.push(`no ${label}`);
    else if (have.AttributeName !== want.name)
      problems.push(`${label} is ${have.AttributeName}, not ${want.name}`);
    else if (types.get(want.name) !== want.type)
      problems.push(`${label} ${want.name} is of type ${types.get(want.name) ?? '?'}, not ${want.type}`);
  }
  return problems;
}

async function describeTable(
  endpoint: string,
  region: string,
  table: string,
  creds: { keyId: string; secret: string; token: string | undefined },
  timeoutMs: number,
): Promise<{ status: number; body: DescribeTableAnswer }> {
  const url = new URL(endpoint);
  const payload = JSON.stringify({ TableName: table });
  const now = new Date();
  const amzDate = now.toISOString().replace(/[:-]|\.\d{3}/g, '');
  const day = amzDate.slice(0, 8);
  const headers: Record<string, string> = {
    'content-type': 'application/x-amz-json-1.0',
    host: url.host,
    'x-amz-date': amzDate,
    'x-amz-target': 'DynamoDB_20120810.DescribeTable',
    ...(creds.token ? { 'x-amz-security-token': creds.token } : {}),
  };
  const names = Object.keys(headers).sort();
  const canonical = [
    'POST',
    url.pathname || '/',
    '',
    ...names.map((n) => `${n}:${headers[n]}`),
    '',
    names.join(';'),
    sha256(payload),
  ].join('\n');
  const scope = `${day}/${region}/dynamodb/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256(canonical)].join('\n');
  let key: Buffer = hmac(`AWS4${creds.secret}`, day);
  for (const part of [region, 'dynamodb', 'aws4_request']) key = hmac(key, part);
  const signature = hmac(key, toSign).toString('hex');
  headers.authorization = `AWS4-HMAC-SHA256 Credential=${creds.keyId}/${scope}, SignedHeaders=${names.join(';')}, Signature=${signature}`;
  const response = await fetch(url, {
    method: 'POST',
    headers,
    body: payload,
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await response.text();
  let body: DescribeTableAnswer = {};
  try {
    body = JSON.parse(text) as DescribeTableAnswer;
  } catch {
    body = { message: text.slice(0, 200) };
  }
  return { status: response.status, body };
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

function hmac(key: string | Buffer, text: string): Buffer {
  return createHmac('sha256', key).update(text).digest();
}
