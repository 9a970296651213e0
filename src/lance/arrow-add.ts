import { existsSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import type * as lancedb from '@lancedb/lancedb';
import { tableToIPC, type Table as ArrowTable } from 'apache-arrow';

/**
 * An append of an Arrow table with one copy of its IPC bytes fewer than LanceDB's own
 * `Table.add`. LanceDB 0.39's `add` writes the table to Arrow IPC and then copies the
 * bytes once more (`Buffer.from` of the Uint8Array in `fromTableToBuffer`, 12 % of the
 * materializer thread in the bench's profile) before its native `add`. Here the IPC
 * bytes go to that native `add` as a view.
 *
 * The native table is LanceDB's internal `inner`, so this is used only with the exact
 * version it was read from (0.39.0) and only for a table without embedding functions
 * (whose public `add` would compute vectors first); anything else takes the public `add`.
 */
export const ARROW_ADD_LANCEDB_VERSION = '0.39.0';

interface NativeTable {
  add(buffer: Buffer, mode: string): Promise<{ version?: number }>;
}

/** The installed LanceDB's version (its package.json, found up from its entry: `exports` hides it). */
function installedVersion(): string | undefined {
  try {
    let dir = path.dirname(require.resolve('@lancedb/lancedb'));
    for (;;) {
      const manifest = path.join(dir, 'package.json');
      if (existsSync(manifest)) {
        const { name, version } = JSON.parse(readFileSync(manifest, 'utf8')) as {
          name?: string;
          version?: string;
        };
        if (name === '@lancedb/lancedb') return version;
      }
      if (path.dirname(dir) === dir) return undefined;
      dir = path.dirname(dir);
    }
  } catch {
    return undefined;
  }
}

const SUPPORTED = installedVersion() === ARROW_ADD_LANCEDB_VERSION;

/** LanceDB's native table behind `table`, when this module knows how to call it. */
function nativeTableOf(table: lancedb.Table): NativeTable | undefined {
  if (!SUPPORTED) return undefined;
  const inner = (table as unknown as { inner?: { add?: unknown } }).inner;
  return inner !== undefined && typeof inner.add === 'function' ? (inner as NativeTable) : undefined;
}

/**
 * Whether `table` can take appends through its native table (checked once per table
 * handle by the caller: one schema read).
 */
export async function takesArrowAdd(table: lancedb.Table): Promise<boolean> {
  if (nativeTableOf(table) === undefined) return false;
  const schema = await table.schema();
  return !schema.metadata.has('embedding_functions');
}

/**
 * Appends `data` (LanceDB's `add` with mode `append`): an Arrow table, or the bytes of an
 * Arrow IPC file, which only a direct add takes. `direct`: from `takesArrowAdd`.
 */
export function appendArrowTable(
  table: lancedb.Table,
  data: ArrowTable | Uint8Array,
  direct: boolean,
): Promise<{ version?: number }> {
  const inner = direct ? nativeTableOf(table) : undefined;
  if (data instanceof Uint8Array) {
    if (!inner) return Promise.reject(new TypeError('an IPC file is appended only through the native add'));
    return inner.add(Buffer.from(data.buffer, data.byteOffset, data.byteLength), 'append');
  }
  if (!inner) return table.add(data, { mode: 'append' });
  const ipc = tableToIPC(data, 'file');
  return inner.add(Buffer.from(ipc.buffer, ipc.byteOffset, ipc.byteLength), 'append');
}
