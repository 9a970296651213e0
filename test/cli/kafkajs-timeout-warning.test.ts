import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';

/**
 * kafkajs sets a timer with a negative delay as it connects; Node 24 prints a
 * TimeoutNegativeWarning for it on stderr. bin/kafka-lance loads a filter that drops that
 * warning and no other. The child runs kafkajs's own request queue code path.
 */
const ROOT = path.resolve(__dirname, '../..');
const FILTER = path.join(ROOT, 'bin/kafkajs-timeout-warning.js');
const nodeMajor = Number(process.versions.node.split('.')[0]);

function stderrOf(withFilter: boolean, after = ''): string {
  const script = `
    ${withFilter ? `require(${JSON.stringify(FILTER)});` : ''}
    const RequestQueue = require('kafkajs/src/network/requestQueue/index.js');
    const { createLogger, LEVELS } = require('kafkajs/src/loggers');
    const logger = createLogger({ level: LEVELS.NOTHING, logCreator: () => () => {} });
    const queue = new RequestQueue({ maxInFlightRequests: 1, requestTimeout: 1000, clientId: 'c', broker: 'b', logger });
    queue.scheduleCheckPendingRequests();
    ${after}
    // The queue re-arms its check every millisecond until destroyed.
    setTimeout(() => queue.destroy(), 20);
  `;
  const run = spawnSync(process.execPath, ['-e', script], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
  expect(run.status).toBe(0);
  return run.stderr;
}

test("kafkajs's negative throttle-check timer leaves stderr empty under the CLI's filter", () => {
  // Without the filter Node 24 prints the warning (older Node prints nothing).
  expect(stderrOf(false)).toMatch(
    nodeMajor >= 24 ? /TimeoutNegativeWarning: -\d+ is a negative number/ : /^$/,
  );
  expect(stderrOf(true)).toBe('');
});

test('the filter lets every other warning through', () => {
  const stderr = stderrOf(true, "process.emitWarning('something to act on', 'ExampleWarning');");
  expect(stderr).toContain('ExampleWarning: something to act on');
});

test('bin/kafka-lance loads the filter before the CLI', () => {
  const bin = readFileSync(path.join(ROOT, 'bin/kafka-lance'), 'utf8');
  expect(bin.indexOf("require('./kafkajs-timeout-warning.js')")).toBeGreaterThan(0);
  expect(bin.indexOf("require('./kafkajs-timeout-warning.js')")).toBeLessThan(
    bin.indexOf("require('../dist/src/cli/main.js')"),
  );
});
