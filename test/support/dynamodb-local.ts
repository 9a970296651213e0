import * as path from 'node:path';
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
    env: { ...process.env, DYNAMODB_LOCAL_PORT: String(port), DYNAMODB_LOCAL_TABLE: DDB_COMMIT_TABLE },
    // First use installs moto from PyPI into the script's venv.
    timeoutMs: 300_000,
  });
  return { code: result.status ?? 1, output: `${result.stdout}${result.stderr}`.trim() };
}

export function ddbEndpoint(port = TEST_DDB_PORT): string {
  return `http://127.0.0.1:${port}`;
}

/**
 * Starts the DynamoDB server (with the commit table) for a suite unless it already runs,
 * and stops it after the suite if this suite started it. One suite uses it at a time.
 */
export function ddbLocalSuite(port = TEST_DDB_PORT): void {
  let started = false;
  beforeAll(() => {
    if (ddbLocal('status', port).code === 0) {
      const table = ddbLocal('create-table', port);
      if (table.code !== 0) throw new Error(`could not create the commit table:\n${table.output}`);
      return;
    }
    const start = ddbLocal('start', port);
    if (start.code !== 0) throw new Error(`could not start the local DynamoDB server:\n${start.output}`);
    started = true;
  }, 360_000);
  afterAll(() => {
    if (!started) return;
    const stop = ddbLocal('stop', port);
    if (stop.code !== 0) throw new Error(`could not stop the local DynamoDB server:\n${stop.output}`);
  }, 60_000);
}
