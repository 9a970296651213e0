/** The Python peers' interpreter: bench/.venv with the pinned packages of bench/requirements.txt. */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import * as path from 'node:path';

const BENCH = path.resolve(__dirname, '../../../bench');

/** Bench/.venv with the pinned packages of bench/requirements.txt (reinstalled when they change). */
export function ensureVenv(log: (line: string) => void): string {
  const venv = path.join(BENCH, '.venv');
  const python = path.join(venv, 'bin', 'python');
  const requirements = path.join(BENCH, 'requirements.txt');
  const stamp = path.join(venv, '.installed-requirements');
  const wanted = readFileSync(requirements, 'utf8');
  if (existsSync(python) && existsSync(stamp) && readFileSync(stamp, 'utf8') === wanted) return python;
  log('creating bench/.venv and installing bench/requirements.txt from PyPI');
  execFileSync('python3', ['-m', 'venv', venv], { stdio: 'inherit' });
  execFileSync(python, ['-m', 'pip', 'install', '--quiet', '-r', requirements], { stdio: 'inherit' });
  execFileSync('cp', [requirements, stamp]);
  return python;
}
