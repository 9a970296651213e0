import * as semver from 'semver';
import { read } from './deploy-files';

/**
 * One tested Node release: .nvmrc names it, CI installs it (scripts/install-node.sh) and
 * runs on it, the image and the documented prerequisite are its major, and every locked
 * package accepts it (LanceDB 0.39 declares Node >= 22, a bump of a dependency may raise
 * that again).
 */
const tested = read('.nvmrc').trim();
const major = semver.major(tested);
const pkg = JSON.parse(read('package.json')) as { engines: { node: string } };
const lock = JSON.parse(read('package-lock.json')) as {
  packages: Record<string, { engines?: { node?: string } | string[] }>;
};

describe('the tested Node release', () => {
  test('.nvmrc names an exact release that package.json engines accepts as its floor major', () => {
    expect(semver.valid(tested)).toBe(tested);
    expect(semver.satisfies(tested, pkg.engines.node)).toBe(true);
    expect(semver.minVersion(pkg.engines.node)!.major).toBe(major);
  });

  test('every locked package that declares an engine accepts the tested release', () => {
    const declared = Object.entries(lock.packages).flatMap(([name, p]) =>
      p.engines && !Array.isArray(p.engines) && p.engines.node ? [[name, p.engines.node] as const] : [],
    );
    expect(declared.map(([name]) => name)).toContain('node_modules/@lancedb/lancedb');
    const refusing = declared.filter(([, range]) => !semver.satisfies(tested, range));
    expect(refusing).toEqual([]);
  });

  test('scripts/install-node.sh pins the tarball of that release, and .ci/run puts it on PATH before installing', () => {
    expect(read('scripts/install-node.sh')).toMatch(
      new RegExp(`\\[${tested.replace(/\./g, '\\.')}\\]='sha512-[A-Za-z0-9+/]{86}=='`),
    );
    const ci = read('.ci/run');
    const onPath = ci.indexOf('PATH="$(scripts/install-node.sh):$PATH"');
    expect(onPath).toBeGreaterThan(0);
    expect(onPath).toBeLessThan(ci.indexOf('npm ci --no-audit'));
    expect(onPath).toBeLessThan(ci.indexOf('npm test'));
  });

  test('the README states the prerequisite and the tested release', () => {
    const prerequisites = read('README.md')
      .split('\n')
      .find((l) => l.startsWith('Prerequisites:'))!;
    expect(prerequisites).toContain(`Node.js ${major}`);
    expect(read('README.md')).toContain(`Node.js ${tested}`);
  });

  // CI sets CI=true; elsewhere the tests may run on the machine's own Node.
  (process.env.CI === 'true' ? test : test.skip)('CI runs the tests on the tested release', () => {
    expect(process.version).toBe(`v${tested}`);
  });
});
