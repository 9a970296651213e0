import * as path from 'node:path';

/**
 * The path of a compiled module for `new Worker(...)`. Worker threads and child
 * processes do not go through jest's transform, so they always run the files that
 * `tsc -b` wrote to dist/ (notes/node-jest.md). From dist this is a sibling file;
 * from src (under ts-jest) it is the same file's twin in dist/.
 */
export function compiledEntry(fromDir: string, file: string): string {
  const js = file.replace(/\.ts$/, '.js');
  const root = path.resolve(__dirname, '../..');
  if (path.basename(root) === 'dist') return path.join(fromDir, js);
  return path.join(root, 'dist', path.relative(root, fromDir), js);
}
