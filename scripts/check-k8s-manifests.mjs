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
import ts from 'typescript';
import { parseAllDocuments } from 'yaml';

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
  if (objects.length === 0) return;
  // In the repository, so that node_modules resolves; never written to disk.
  const virtual = path.join(ROOT, '.k8s-manifests-check.mts');
  const ranges = [];
  let text = '';
  objects.forEach((entry, i) => {
    text += `import type { I${entry.object.kind} as T${i} } from '${entry.module}';\n`;
  });
  objects.forEach((entry, i) => {
    const start = text.length;
    text += `export const object${i}: T${i} = ${JSON.stringify(entry.object, null, 2)};\n`;
    ranges.push({ start, end: text.length, label: entry.label });
  });
  const options = {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const { getSourceFile, fileExists, readFile } = host;
  host.getSourceFile = (name, languageVersion, ...rest) =>
    path.resolve(name) === virtual
      ? ts.createSourceFile(name, text, languageVersion, true)
      : getSourceFile.call(host, name, languageVersion, ...rest);
  host.fileExists = (name) => path.resolve(name) === virtual || fileExists.call(host, name);
  host.readFile = (name) => (path.resolve(name) === virtual ? text : readFile.call(host, name));
  const program = ts.createProgram([virtual], options, host);
  const source = program.getSourceFile(virtual);
  for (const diagnostic of ts.getPreEmitDiagnostics(program, source)) {
    const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, ' ');
    const range = ranges.find((r) => diagnostic.start >= r.start && diagnostic.start < r.end);
    if (range === undefined) {
      problems.push(`kubernetes-models types: ${message}`);
      continue;
    }
    const lineEnd = text.indexOf('\n', diagnostic.start);
    const fieldPath = jsonPathAt(text.slice(range.start, lineEnd));
    problems.push(`${range.label}: ${fieldPath}: ${message}`);
  }
}

/** The path of keys to the last line of a prefix of the generated literal (2-space JSON). */
function jsonPathAt(prefix) {
  const keys = [];
  for (const line of prefix.split('\n').slice(1)) {
    const m = /^( *)(?:"([^"]+)": )?/.exec(line);
    const depth = m[1].length / 2;
    keys.length = Math.max(depth - 1, 0);
    if (m[2] !== undefined) keys[depth - 1] = m[2];
    else if (/^ *[[{]/.test(line)) keys[depth - 1] = '[]';
  }
  return (
    keys
      .filter((k) => k !== undefined)
      .join('.')
      .replace(/\.\[\]/g, '[]') || '(top level)'
  );
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
