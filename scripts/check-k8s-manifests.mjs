#!/usr/bin/env node
/**
 * Checks Kubernetes manifests against the published schemas of their kinds, from the
 * kubernetes-models packages (the Kubernetes OpenAPI schema; KEDA's and the Prometheus
 * operator's CRD schemas), in two ways:
 *
 * 1. the packages' own validators (JSON schema: types, enums, required fields, formats);
 * 2. the packages' TypeScript types, with each object as a typed literal, so that a field
 *    the schema does not have is an error. The OpenAPI schemas leave
 *    additionalProperties open, so (1) accepts a misspelled field, while an API server with
 *    strict field validation (kubectl's default) rejects it, and a CRD's structural schema
 *    silently drops it.
 *
 *   node scripts/check-k8s-manifests.mjs [file.yaml | directory]...   (default: deploy/k8s)
 *
 * Prints one line per problem and exits 1 when there is any. A kind without a model here
 * is a problem too, so a new kind cannot go unchecked. Kustomization files are kustomize's
 * configuration, not API objects, and are skipped (test/deploy/k8s.test.ts checks them).
 * ESM because the kubernetes-models packages are ESM only.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import typedLiterals from './typed-literals.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** API groups defined by CRDs, and the package that carries their models. */
const CRD_PACKAGES = {
  'keda.sh': '@kubernetes-models/keda',
  'monitoring.coreos.com': '@kubernetes-models/prometheus-operator',
};

/** The module of an object's model: kubernetes-models/<group>/<version>/<Kind>. */
function modelModule(apiVersion, kind) {
  const group = apiVersion.includes('/') ? apiVersion.slice(0, apiVersion.indexOf('/')) : '';
  const pkg = CRD_PACKAGES[group] ?? 'kubernetes-models';
  return `${pkg}/${apiVersion}/${kind}`;
}

function yamlFilesUnder(target) {
  if (!statSync(target).isDirectory()) return [target];
  return readdirSync(target)
    .sort()
    .flatMap((name) => {
      const file = path.join(target, name);
      if (statSync(file).isDirectory()) return yamlFilesUnder(file);
      return /\.ya?ml$/.test(name) ? [file] : [];
    });
}

/** Every API object of the files, each with where it comes from. */
function readObjects(files, problems) {
  const objects = [];
  for (const file of files) {
    const where = path.relative(ROOT, path.resolve(file));
    parseAllDocuments(readFileSync(file, 'utf8'), { merge: true }).forEach((doc, index) => {
      const errors = [...doc.errors, ...doc.warnings].map((e) => e.message);
      if (errors.length > 0) {
        problems.push(`${where}: ${errors.join('; ')}`);
        return;
      }
      const object = doc.toJS({ maxAliasCount: 100 });
      if (object === null || object === undefined) return;
      const label =
        `${where} (document ${index + 1}, ${object.kind ?? 'no kind'} ${object.metadata?.name ?? ''})`.replace(
          / \)$/,
          ')',
        );
      if (typeof object.apiVersion !== 'string' || typeof object.kind !== 'string') {
        problems.push(`${label}: apiVersion and kind must be strings`);
        return;
      }
      if (object.kind === 'Kustomization' && object.apiVersion.startsWith('kustomize.config.k8s.io/')) return;
      objects.push({ label, object, module: modelModule(object.apiVersion, object.kind) });
    });
  }
  return objects;
}

/** (1) The package's JSON-schema validator of each object's model. */
async function validateWithModels(objects, problems) {
  const checked = [];
  for (const entry of objects) {
    let model;
    try {
      model = (await import(entry.module))[entry.object.kind];
    } catch (error) {
      problems.push(
        `${entry.label}: no schema for ${entry.object.apiVersion} ${entry.object.kind} (${error.code ?? error.message})`,
      );
      continue;
    }
    try {
      new model(entry.object).validate();
    } catch (error) {
      problems.push(`${entry.label}: ${error.message}`);
    }
    checked.push(entry);
  }
  return checked;
}

/** (2) The model's TypeScript interface, each object a literal of it: unknown fields are errors. */
function typeCheck(objects, problems) {
  const literals = objects.map((entry) => ({
    label: entry.label,
    module: entry.module,
    typeName: `I${entry.object.kind}`,
    value: entry.object,
  }));
  problems.push(...typedLiterals.typeCheckLiterals(ROOT, literals));
}

const targets = process.argv.slice(2);
const files = (targets.length > 0 ? targets : [path.join(ROOT, 'deploy/k8s')]).flatMap(yamlFilesUnder);
const problems = [];
const objects = readObjects(files, problems);
const modelled = await validateWithModels(objects, problems);
typeCheck(modelled, problems);
for (const problem of problems) console.log(problem);
if (problems.length > 0) process.exit(1);
console.log(`check-k8s-manifests: ${modelled.length} objects in ${files.length} files match their schemas`);
