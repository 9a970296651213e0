/**
 * A jest reporter that names the test files still running after a while. jest prints a
 * file's results only when it ends, so a file that never ends (a child process that
 * does not exit, a native call that never returns) leaves nothing in the log to say
 * which one it was: this prints it, once per interval, to stderr.
 */
const path = require('node:path');

const FIRST_NOTICE_MS = 5 * 60_000;
const INTERVAL_MS = 60_000;

class SlowSuiteReporter {
  constructor(globalConfig) {
    this.rootDir = globalConfig.rootDir;
    this.running = new Map();
    this.timer = undefined;
  }

  onRunStart() {
    this.timer = setInterval(() => this.#report(), INTERVAL_MS);
    this.timer.unref();
  }

  onTestFileStart(test) {
    this.running.set(test.path, Date.now());
  }

  onTestFileResult(test) {
    this.running.delete(test.path);
  }

  onRunComplete() {
    clearInterval(this.timer);
  }

  #report() {
    const now = Date.now();
    for (const [file, started] of this.running) {
      const ms = now - started;
      if (ms < FIRST_NOTICE_MS) continue;
      process.stderr.write(
        `jest: ${path.relative(this.rootDir, file)} still running after ${Math.round(ms / 60_000)} min\n`,
      );
    }
  }
}

module.exports = SlowSuiteReporter;
