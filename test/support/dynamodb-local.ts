import * as path from 'node:path';
import { leasedLocalServer } from './leased-local-server';
import { runBounded } from './run-bounded';

/** The DynamoDB API server of deploy/dynamodb-local that the s3+ddb:// suites use. */
export const TEST_DDB_PORT = Number(process.env.DYNAMODB_TEST_PORT ?? 19910);
export const DDB_COMMIT_TABLE = 'kafka-lance-commits';

const SCRIPT = path.resolve(__dirname, '../../deploy/dynamodb-local/dynamodb-local');

export function ddbLocal(
  command: 'start' | 'stop' | 'status' | 'create-table',
  port = TEST_DDB_PORT,
): { code: number; output: string } {
  const result = runBounded(SCRIPT, [command], {
    env: { ...process.env, ...ddbEnv(port) },
    // First use installs moto from PyPI into the script's venv.
    timeoutMs: 300_000,
  });
  return { code: result.status ?? 1, output: `${result.stdout}${result.stderr}`.trim() };
}

const ddbEnv = (port: number) => ({
  DYNAMODB_LOCAL_PORT: String(port),
  DYNAMODB_LOCAL_TABLE: DDB_COMMIT_TABLE,
});

export function ddbEndpoint(port = TEST_DDB_PORT): string {
  return `http://127.0.0.1:${port}`;
}

/**
 * Starts the DynamoDB server (with the commit table) for a suite unless it already runs,
 * and stops it after the suite only if a suite started it and no other suite still uses
 * it (leased-local-server.ts): suites in parallel jest workers share it.
 */
export function ddbLocalSuite(port = TEST_DDB_PORT): void {
  leasedLocalServer({
    work: path.join(
      process.env.DYNAMODB_LOCAL_HOME ?? path.join(path.dirname(SCRIPT), '.cache'),
      `ddb-${port}`,
    ),
    label: `the local DynamoDB server on port ${port}`,
    run: (command) => {
      const result = ddbLocal(command, port);
      // Running already (started before this run, maybe without the table): the table too.
      return command === 'status' && result.code === 0 ? ddbLocal('create-table', port) : result;
    },
    // A first use installs moto from PyPI.
    startTimeoutMs: 360_000,
    stopCommand: { script: SCRIPT, env: ddbEnv(port) },
  });
}
