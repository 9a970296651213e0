import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { ROOT, read, yamlDocuments, yamlFiles } from './deploy-files';

/**
 * The manifests against the published schemas of their kinds (kubernetes-models and its
 * KEDA and Prometheus-operator packages), through scripts/check-k8s-manifests.mjs: the
 * same command a developer runs. It runs as a child process because the packages are ESM
 * only, which jest's CommonJS loader cannot import.
 */
const SCRIPT = path.join(ROOT, 'scripts/check-k8s-manifests.mjs');

function check(...targets: string[]): { code: number | null; lines: string[] } {
  const run = spawnSync(process.execPath, [SCRIPT, ...targets], { cwd: ROOT, encoding: 'utf8' });
  if (run.error) throw run.error;
  const lines = `${run.stdout}${run.stderr}`.split('\n').filter((l) => l !== '');
  return { code: run.status, lines };
}

/** A copy of a manifest with one edit; fails if the edit no longer applies to the file. */
function broken(file: string, from: string | RegExp, to: string): string {
  const original = read(`deploy/k8s/${file}`);
  const edited = original.replace(from, to);
  expect([file, edited !== original]).toEqual([file, true]);
  return edited;
}

const apiObjects = [
  ...yamlFiles('deploy/k8s').map((f) => `deploy/k8s/${f}`),
  'deploy/k8s/s3-ddb/configmap.yaml',
]
  .flatMap((f) => yamlDocuments(f) as { kind: string }[])
  .filter((o) => o.kind !== 'Kustomization');

describe('deploy/k8s against the published schemas', () => {
  test('every API object matches the schema of its kind, with no field the schema lacks', () => {
    const { code, lines } = check();
    expect(lines).toEqual([
      `check-k8s-manifests: ${apiObjects.length} objects in ${yamlFiles('deploy/k8s').length + 2} files match their schemas`,
    ]);
    expect(code).toBe(0);
    // The kinds the deployment relies on are among them, CRDs included.
    expect(apiObjects.map((o) => o.kind)).toEqual(
      expect.arrayContaining(['StatefulSet', 'Service', 'PodDisruptionBudget', 'PodMonitor', 'ScaledObject']),
    );
  });

  test('a copy with a field its schema does not allow, a wrong type or a wrong enum value fails, naming it', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'kl-k8s-broken-'));
    try {
      const copies: Record<string, string> = {
        // A misspelled probe would leave the pods without readiness gating.
        'container-field.yaml': broken('statefulset.yaml', 'readinessProbe:', 'readinesProbe:'),
        'statefulset-enum.yaml': broken(
          'statefulset.yaml',
          'podManagementPolicy: Parallel',
          'podManagementPolicy: parallel',
        ),
        // KEDA's CRD would drop an unknown field without a word.
        'scaledobject-field.yaml': broken(
          'scaledobject.yaml',
          /^ {2}pollingInterval:/m,
          '  pollingIntervall:',
        ),
        'scaledobject-type.yaml': broken(
          'scaledobject.yaml',
          /pollingInterval: \d+/,
          "pollingInterval: '30'",
        ),
        'podmonitor-field.yaml': broken('podmonitor.yaml', 'interval: 15s', 'scrapeInterval: 15s'),
        'unknown-kind.yaml': 'apiVersion: v1\nkind: Frobnicator\nmetadata:\n  name: x\n',
      };
      for (const [name, text] of Object.entries(copies)) writeFileSync(path.join(dir, name), text);
      const { code, lines } = check(dir);
      expect(code).toBe(1);
      const about = (name: string) => lines.filter((l) => l.includes(`${name} (document 1,`)).join('\n');
      expect(about('container-field.yaml')).toMatch(
        /spec\.template\.spec\.containers\[\]\.readinesProbe: .*'"readinesProbe"' does not exist in type 'IContainer'/,
      );
      expect(about('statefulset-enum.yaml')).toContain(
        'data/spec/podManagementPolicy must be equal to one of the allowed values',
      );
      expect(about('scaledobject-field.yaml')).toMatch(
        /spec\.pollingIntervall: .*does not exist in type 'IScaledObjectSpec'/,
      );
      expect(about('scaledobject-type.yaml')).toContain('data/spec/pollingInterval must be integer');
      expect(about('podmonitor-field.yaml')).toMatch(
        /spec\.podMetricsEndpoints\[\]\.scrapeInterval: .*does not exist in type 'IPodMetricsEndpoint'/,
      );
      expect(about('unknown-kind.yaml')).toContain('no schema for v1 Frobnicator');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
