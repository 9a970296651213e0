import { existsSync, promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const ROOT = path.resolve(__dirname, '../..');
/** Where the project's documents live (node_modules, caches and work dirs are not documents). */
const SKIP = new Set(['node_modules', 'dist', '.git', '.cache', '.work', '.venv']);

async function markdownFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await fsp.readdir(dir, { withFileTypes: true })) {
    if (SKIP.has(entry.name)) continue;
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await markdownFiles(full)));
    else if (entry.name.endsWith('.md')) out.push(full);
  }
  return out;
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
function anchorOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/`/g, '')
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

async function anchorsOf(file: string): Promise<Set<string>> {
  const text = await fsp.readFile(file, 'utf8');
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const m of text.matchAll(/^#{1,6} (.+)$/gm)) {
    const base = anchorOf(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** Relative links under `root` whose file, or whose `#fragment` heading, does not exist. */
async function brokenLinks(root: string): Promise<string[]> {
  const broken: string[] = [];
  for (const file of await markdownFiles(root)) {
    const text = (await fsp.readFile(file, 'utf8')).replace(/```[\s\S]*?```/g, '');
    for (const m of text.matchAll(/\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = m[1]!;
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:
      const [where, fragment] = target.split('#') as [string, string | undefined];
      const resolved = where === '' ? file : path.resolve(path.dirname(file), decodeURI(where));
      const rel = `${path.relative(root, file)}: ${target}`;
      if (!existsSync(resolved)) {
        broken.push(`${rel} (no such file)`);
        continue;
      }
      if (fragment && resolved.endsWith('.md') && !(await anchorsOf(resolved)).has(fragment.toLowerCase()))
        broken.push(`${rel} (no heading #${fragment})`);
    }
  }
  return broken;
}

/**
 * Every relative link in the project's markdown documents points at a file or directory
 * that exists, and a `#fragment` at a heading of its target: a document moved or a
 * heading renamed breaks a reader's path through the docs without any other test failing.
 */
test('every relative link in the documents points at something that exists', async () => {
  expect(await brokenLinks(ROOT)).toEqual([]);
});

/**
 * The documents the link check must read: the README, the design, every page and decision
 * under docs/, and the benchmark notes. A folder added to SKIP, or a document moved under
 * one, would otherwise drop out of the check without a failure.
 */
test('the link check reads the README, DESIGN.md, every file under docs/ and bench/*.md', async () => {
  const checked = new Set((await markdownFiles(ROOT)).map((f) => path.relative(ROOT, f)));
  const docs = (await fsp.readdir(path.join(ROOT, 'docs'), { recursive: true }))
    .filter((f) => f.endsWith('.md'))
    .map((f) => path.join('docs', f));
  const bench = (await fsp.readdir(path.join(ROOT, 'bench'))).filter((f) => f.endsWith('.md'));
  expect(docs).toEqual(
    expect.arrayContaining(['docs/configuration.md', 'docs/decisions/2026-12-02-settle-window-retired.md']),
  );
  for (const file of ['README.md', 'DESIGN.md', ...docs, ...bench.map((f) => path.join('bench', f))])
    expect(checked).toContain(file);
});

test('a link to a missing file or to a heading its target lacks is reported', async () => {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'doc-links-'));
  try {
    await fsp.writeFile(path.join(dir, 'b.md'), '# Object storage\n');
    await fsp.writeFile(
      path.join(dir, 'a.md'),
      '[ok](b.md#object-storage) [gone](c.md) [moved](b.md#settle-window) [web](https://x.org/y)\n',
    );
    expect(await brokenLinks(dir)).toEqual([
      'a.md: c.md (no such file)',
      'a.md: b.md#settle-window (no heading #settle-window)',
    ]);
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
});

/** Source and document files whose text may name a document by its path. */
async function textFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await fsp.readdir(dir, { withFileTypes: true })) {
    if (SKIP.has(entry.name) || entry.name === '.tools' || entry.name === 'target') continue;
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await textFiles(full)));
    else if (/\.(ts|js|mjs|md|sh|py)$/.test(entry.name)) out.push(full);
  }
  return out;
}

/**
 * Document paths (`some/dir/file.md`) named in code comments or prose that resolve
 * nowhere: not from the repository's root, the naming file's folder, or src/ (where
 * comments name modules relative to). A comment that sends the reader to a note that is
 * not in the repository is a dead end no compiler notices.
 */
async function missingDocumentPaths(root: string): Promise<string[]> {
  const missing: string[] = [];
  for (const file of await textFiles(root)) {
    // This file's own examples name documents that do not exist on purpose.
    if (file === __filename) continue;
    const text = await fsp.readFile(file, 'utf8');
    for (const m of text.matchAll(/(?<![\w./-])((?:\.\.?\/)*(?:[\w.-]+\/)+[\w.-]+\.md)\b/g)) {
      const named = m[1]!;
      const bare = named.replace(/^(?:\.\.?\/)+/, '');
      const candidates = [
        path.resolve(path.dirname(file), named),
        path.join(root, named),
        path.join(root, bare),
        path.join(root, 'src', bare),
      ];
      if (!candidates.some((c) => existsSync(c))) missing.push(`${path.relative(root, file)}: ${named}`);
    }
  }
  return missing;
}

test('every document path named in a code comment or a document exists in the repository', async () => {
  expect(await missingDocumentPaths(ROOT)).toEqual([]);
});

test('a comment naming a document the repository does not hold is reported', async () => {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'doc-paths-'));
  try {
    await fsp.mkdir(path.join(dir, 'docs'));
    await fsp.writeFile(path.join(dir, 'docs', 'here.md'), '# Here\n');
    await fsp.writeFile(path.join(dir, 'a.ts'), '// see docs/here.md, and notes/elsewhere.md\n');
    expect(await missingDocumentPaths(dir)).toEqual(['a.ts: notes/elsewhere.md']);
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
});

/**
 * The design is what a newcomer reads first, whole: about 20 minutes at a reading pace.
 * Long reasoning belongs in docs/design/, measurements in bench/ and docs/decisions/.
 */
test('DESIGN.md stays short enough to read in one sitting (at most 5,000 words)', async () => {
  const words = (await fsp.readFile(path.join(ROOT, 'DESIGN.md'), 'utf8')).split(/\s+/).filter(Boolean);
  expect(words.length).toBeLessThanOrEqual(5_000);
});
