import { spawn } from 'node:child_process';
import * as path from 'node:path';

const MODULE = path.resolve(__dirname, '../../dist/src/cli/early-signals.js');

/**
 * Runs `body` in a child that holds stop signals while it is busy for 600 ms (as while
 * the CLI's modules load), SIGTERMs it in that window and returns how it ended.
 */
async function heldThenHandedOver(
  body: string,
): Promise<{ code: number | null; signal: string | null; out: string }> {
  const script = `
    const held = require(${JSON.stringify(MODULE)}).holdStopSignals();
    process.stdout.write('holding\\n');
    const until = Date.now() + 600; while (Date.now() < until) {}
    ${body}`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    if (out === 'holding\n') child.kill('SIGTERM');
  });
  return new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal, out })));
}

test('a stop signal held while loading reaches the handler the command installs later', async () => {
  const ended = await heldThenHandedOver(
    `held.deliverTo((s) => { console.log('stopping on', s); process.exit(0); });
     setTimeout(() => process.exit(3), 5000);`,
  );
  expect(ended).toEqual({ code: 0, signal: null, out: 'holding\nstopping on SIGTERM\n' });
});

test('a command that does not stop gracefully gets the held signal back with its default action', async () => {
  const ended = await heldThenHandedOver(`held.release(); setTimeout(() => process.exit(3), 5000);`);
  expect(ended.signal).toBe('SIGTERM');
});

test('a signal held and handed over after an await (the replica start) is not dropped', async () => {
  const ended = await heldThenHandedOver(
    `Promise.resolve().then(() => held.deliverTo(() => process.exit(0)));
     setTimeout(() => process.exit(3), 5000);`,
  );
  expect(ended.code).toBe(0);
});
