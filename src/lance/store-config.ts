import { REDACTED } from '../common/redaction';
/**
 * Object-store settings of a Lance database that can be checked before anything
 * connects. The uri's own rules (schemes, the DynamoDB table name) are the
 * configuration's, in src/config/store-uri.ts, re-exported here.
 */

export interface ConfigProblem {
  readonly field: string;
  readonly message: string;
}

export {
  OBJECT_STORE_SCHEMES,
  ddbTableNameOf,
  isObjectStoreUri,
  uriScheme,
  uriWithoutQuery,
} from '../config/store-uri';
import { ddbTableNameOf, uriScheme } from '../config/store-uri';

/**
 * Option names object_store accepts for the same setting (it lower-cases keys and
 * takes them with or without the `aws_` prefix). Lance also reads the AWS_*
 * environment variables itself (checked: AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY, AWS_REGION with no storage options reach s3proxy).
 */
const ENDPOINT_KEYS = ['endpoint', 'endpoint_url', 'aws_endpoint', 'aws_endpoint_url'];
const REGION_KEYS = ['region', 'aws_region', 'default_region', 'aws_default_region'];
const KEY_ID_KEYS = ['access_key_id', 'aws_access_key_id'];
const SECRET_KEYS = ['secret_access_key', 'aws_secret_access_key'];
const ENDPOINT_ENV = ['AWS_ENDPOINT_URL', 'AWS_ENDPOINT', 'AWS_ENDPOINT_URL_S3'];
const REGION_ENV = ['AWS_REGION', 'AWS_DEFAULT_REGION'];
/** Where Lance's DynamoDB client of an s3+ddb:// database sends its requests. */
export const DDB_ENDPOINT_KEYS = ['dynamodb_endpoint', 'aws_dynamodb_endpoint'];
export const DDB_ENDPOINT_ENV = 'DYNAMODB_ENDPOINT';

function has(options: Readonly<Record<string, string>>, keys: readonly string[]): boolean {
  return Object.entries(options).some(([k, v]) => keys.includes(k.toLowerCase()) && v.length > 0);
}

function hasEnv(env: NodeJS.ProcessEnv, names: readonly string[]): boolean {
  return names.some((n) => (env[n] ?? '').length > 0);
}

/**
 * Problems of an object-store configuration that depend on the environment (the
 * static ones are in the consumer definition's zod schema): an s3:// database needs
 * an endpoint or a region to address the bucket, and credentials given in the
 * options must be whole (a key id without its secret would silently fall back to
 * another identity from the AWS chain).
 */
export function objectStoreProblems(
  uri: string,
  storageOptions: Readonly<Record<string, string>> | undefined,
  env: NodeJS.ProcessEnv,
): ConfigProblem[] {
  const scheme = uriScheme(uri);
  if (scheme !== 's3' && scheme !== 's3+ddb') return [];
  const options = storageOptions ?? {};
  const problems: ConfigProblem[] = [];
  // object_store takes a set but empty endpoint variable as a URL and panics on it (measured).
  for (const name of ENDPOINT_ENV) {
    if (env[name] === '') {
      problems.push({ field: name, message: 'is set but empty: unset it or give the endpoint URL' });
    }
  }
  if (!has(options, [...ENDPOINT_KEYS, ...REGION_KEYS]) && !hasEnv(env, [...ENDPOINT_ENV, ...REGION_ENV])) {
    problems.push({
      field: 'lance.storageOptions',
      message: `${uri} needs an endpoint (storageOptions.endpoint or AWS_ENDPOINT_URL, for MinIO/Ceph/s3proxy) or a region (storageOptions.region or AWS_REGION, for AWS S3)`,
    });
  }
  const keyId = has(options, KEY_ID_KEYS);
  const secret = has(options, SECRET_KEYS);
  if (keyId !== secret) {
    problems.push({
      field: `lance.storageOptions.${keyId ? 'aws_secret_access_key' : 'aws_access_key_id'}`,
      message: `missing: credentials in storageOptions need both aws_access_key_id and aws_secret_access_key (or neither: then AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or the AWS credential chain)`,
    });
  }
  if (scheme === 's3+ddb') problems.push(...commitTableProblems(uri, options, env));
  const endpoint = Object.entries(options).find(([k]) => ENDPOINT_KEYS.includes(k.toLowerCase()))?.[1];
  if (
    endpoint?.startsWith('http://') &&
    !/^true$/i.test(options.allow_http ?? options.aws_allow_http ?? '')
  ) {
    problems.push({
      field: 'lance.storageOptions.allow_http',
      message: `endpoint ${endpoint} is plain HTTP: set allow_http: 'true' (object_store refuses HTTP otherwise)`,
    });
  }
  return problems;
}

/**
 * An s3+ddb:// database's commit table: named in the uri, and addressed (DynamoDB needs
 * a region to sign even with a local endpoint; an http endpoint is taken as it is).
 */
function commitTableProblems(
  uri: string,
  options: Readonly<Record<string, string>>,
  env: NodeJS.ProcessEnv,
): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  if (ddbTableNameOf(uri) === undefined) {
    problems.push({
      field: 'lance.uri',
      message: `${uri} names no DynamoDB commit table: s3+ddb://<bucket>/<prefix>?ddbTableName=<table>`,
    });
  }
  if (!has(options, REGION_KEYS) && !hasEnv(env, REGION_ENV)) {
    problems.push({
      field: 'lance.storageOptions.region',
      message: `${uri} needs a region for its DynamoDB commit table (storageOptions.region or AWS_REGION), also with a dynamodb_endpoint`,
    });
  }
  const endpoint = ddbEndpointOf(options, env);
  if (endpoint !== undefined && !/^https?:\/\/[^/]+/.test(endpoint)) {
    problems.push({
      field: 'lance.storageOptions.dynamodb_endpoint',
      message: `"${endpoint}" is not an http(s) URL of a DynamoDB endpoint`,
    });
  }
  return problems;
}

/** The DynamoDB endpoint Lance uses for an s3+ddb:// database, when one is set (else AWS's for the region). */
export function ddbEndpointOf(
  options: Readonly<Record<string, string>>,
  env: NodeJS.ProcessEnv,
): string | undefined {
  const fromOptions = Object.entries(options).find(([k]) => DDB_ENDPOINT_KEYS.includes(k.toLowerCase()))?.[1];
  if (fromOptions) return fromOptions;
  const fromEnv = env[DDB_ENDPOINT_ENV];
  return fromEnv ? fromEnv : undefined;
}

/** storageOptions for logs and errors: every value replaced, the keys kept (which options are set). */
export function redactStorageOptions(
  options: Readonly<Record<string, string>> | undefined,
): Record<string, string> | undefined {
  if (!options) return undefined;
  return Object.fromEntries(Object.keys(options).map((k) => [k, REDACTED]));
}
