'use strict';
/**
 * Checks parsed YAML or JSON values against the TypeScript types a package publishes for a
 * format (kubernetes-models for Kubernetes objects, @grafana/schema for dashboards), by
 * compiling each value as an object literal of its type: a field the type does not have,
 * a value of the wrong type or a missing required field is a compile error. JSON schemas
 * that leave additionalProperties open accept a misspelled field; a typed literal does not.
 * Used by scripts/check-k8s-manifests.mjs and scripts/build-dashboard.js.
 */
const path = require('node:path');
const ts = require('typescript');

/**
 * @typedef {{ label: string, module: string, typeName: string, value: unknown }} TypedLiteral
 * @param {string} root a directory whose node_modules holds the packages
 * @param {TypedLiteral[]} literals
 * @returns {string[]} one `<label>: <field path>: <message>` per problem
 */
function typeCheckLiterals(root, literals) {
  if (literals.length === 0) return [];
  // Inside root, so that node_modules resolves; never written to disk.
  const virtual = path.join(root, '.typed-literals-check.mts');
  const ranges = [];
  let text = '';
  literals.forEach((literal, i) => {
    text += `import type { ${literal.typeName} as T${i} } from '${literal.module}';\n`;
  });
  literals.forEach((literal, i) => {
    const start = text.length;
    text += `export const value${i}: T${i} = ${JSON.stringify(literal.value, null, 2)};\n`;
    ranges.push({ start, end: text.length, label: literal.label });
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
  const isVirtual = (name) => path.resolve(name) === virtual;
  host.getSourceFile = (name, languageVersion, ...rest) =>
    isVirtual(name)
      ? ts.createSourceFile(name, text, languageVersion, true)
      : getSourceFile.call(host, name, languageVersion, ...rest);
  host.fileExists = (name) => isVirtual(name) || fileExists.call(host, name);
  host.readFile = (name) => (isVirtual(name) ? text : readFile.call(host, name));
  const program = ts.createProgram([virtual], options, host);
  const source = program.getSourceFile(virtual);
  return ts.getPreEmitDiagnostics(program, source).map((diagnostic) => {
    const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, ' ');
    const range = ranges.find((r) => diagnostic.start >= r.start && diagnostic.start < r.end);
    if (range === undefined) return `types: ${message}`;
    const lineEnd = text.indexOf('\n', diagnostic.start);
    return `${range.label}: ${jsonPathAt(text.slice(range.start, lineEnd))}: ${message}`;
  });
}

/** The path of keys to the last line of a prefix of a generated literal (2-space JSON). */
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

module.exports = { typeCheckLiterals };
