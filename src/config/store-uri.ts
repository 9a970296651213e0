/**
 * What a Lance database uri says, read without connecting: pure functions, so the
 * configuration schema checks a uri at start (src/lance/store-config.ts re-exports them).
 */

/** URI schemes LanceDB 0.39 opens through its object store layer. */
export const OBJECT_STORE_SCHEMES = ['s3', 's3+ddb', 'gs', 'az', 'abfs', 'memory', 'file'] as const;

/** The scheme of `uri` when it has one (`s3://b/p` → `s3`), else undefined (a local path). */
export function uriScheme(uri: string): string | undefined {
  const m = /^([a-z][a-z0-9+.-]*):\/\//i.exec(uri);
  return m ? m[1]!.toLowerCase() : undefined;
}

/** DynamoDB's rule for table names. */
const DDB_TABLE_NAME = /^[A-Za-z0-9_.-]{3,255}$/;

/**
 * The DynamoDB commit table of an `s3+ddb://bucket/prefix?ddbTableName=T` uri (Lance
 * claims each version there with a conditional PutItem), or undefined when the uri
 * names none or names it wrongly.
 */
export function ddbTableNameOf(uri: string): string | undefined {
  const query = uri.indexOf('?');
  if (uriScheme(uri) !== 's3+ddb' || query < 0) return undefined;
  const name = new URLSearchParams(uri.slice(query + 1)).get('ddbTableName') ?? '';
  return DDB_TABLE_NAME.test(name) ? name : undefined;
}

/** The uri without its query (where the tables live; the query only configures Lance). */
export function uriWithoutQuery(uri: string): string {
  const query = uri.indexOf('?');
  return query < 0 ? uri : uri.slice(0, query);
}

/** A remote store: anything but a local path or file://. */
export function isObjectStoreUri(uri: string): boolean {
  const scheme = uriScheme(uri);
  return scheme !== undefined && scheme !== 'file';
}
