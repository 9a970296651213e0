import type * as Lance from '@lancedb/lancedb';

/**
 * LanceDB with every connection pointed at a local s3proxy, for suites whose shared
 * checker (support/faults.ts) opens the table with a plain `lancedb.connect(uri)`:
 * jest's process.env is a copy, so the AWS variables LanceDB reads itself cannot be set
 * from a test. The checker retries its reads (s3proxy's listing race), so nothing here does.
 *
 *   jest.mock('@lancedb/lancedb', () =>
 *     jest.requireActual<typeof OnS3>('../support/lancedb-on-s3').lancedbOnS3(port));
 */
export function lancedbOnS3(storageOptions: Record<string, string>): typeof Lance {
  const actual = jest.requireActual<typeof Lance>('@lancedb/lancedb');
  return {
    ...actual,
    connect: (uri: string, options: Partial<Lance.ConnectionOptions> = {}) =>
      actual.connect(uri, {
        ...options,
        storageOptions: { ...storageOptions, ...options.storageOptions },
      }),
  } as typeof Lance;
}
