import { execFileSync } from 'node:child_process';
import * as path from 'node:path';

/**
 * Every staging worker loads the staging service: LanceDB (tens of MB of native code per
 * worker thread) must stay out of its module graph until a routing lane first reads a
 * table's seeds. The compiled module (what workers load) is required in a fresh process.
 */
test('loading the staging service does not load LanceDB (a fixed table never needs it in a worker)', () => {
  const service = path.join(__dirname, '../../dist/src/pool/staging-service.js');
  const loaded = execFileSync(
    process.execPath,
    [
      '-e',
      `require(${JSON.stringify(service)});` +
        "console.log(JSON.stringify(Object.keys(require.cache).filter((k) => k.includes('@lancedb'))))",
    ],
    { encoding: 'utf8' },
  );
  expect(JSON.parse(loaded)).toEqual([]);
});
