import { readFileSync } from 'node:fs';
import Module from 'node:module';
import * as path from 'node:path';
import type * as TypeScript from 'typescript';
import { errorMessage } from '../common/errors';
import { ConfigError, resolveConsumer, type ConsumerOverrides, type ResolvedConsumer } from './resolve';

/**
 * Loads a consumer definition file (`.ts`, `.js` or `.json`) and validates it.
 * TypeScript files are transpiled in memory with the TypeScript compiler (types are
 * not checked here: `kafka-lance validate` and the build do that), so users keep
 * their definitions in `.ts` without a build step. Workers load the same file the
 * same way, since a transform function cannot cross a thread boundary.
 */
export function loadConsumer(
  file: string,
  env: NodeJS.ProcessEnv = process.env,
  overrides: ConsumerOverrides = {},
): ResolvedConsumer {
  const absolute = path.resolve(file);
  let exported: unknown;
  try {
    exported = requireDefinition(absolute);
  } catch (error) {
    if (error instanceof ConfigError) throw error;
    throw new ConfigError(absolute, [{ field: '(file)', message: `cannot load: ${errorMessage(error)}` }]);
  }
  const definition =
    exported && typeof exported === 'object' && 'default' in exported ? exported.default : exported;
  return resolveConsumer(definition, absolute, env, overrides);
}

let tsHookInstalled = false;

function requireDefinition(absolute: string): unknown {
  installPackageAlias();
  if (absolute.endsWith('.ts')) installTypeScriptHook();
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const definitionModule: unknown = require(absolute);
  return definitionModule;
}

let aliasInstalled = false;

/**
 * Definitions import `defineConsumer` from 'kafka-lance'. They may live anywhere (a
 * mounted volume, a user's repository) where no node_modules holds the package, so
 * the name resolves to this running copy of kafka-lance.
 */
function installPackageAlias(): void {
  if (aliasInstalled) return;
  aliasInstalled = true;
  const self = require.resolve('../index');
  const mod = Module as unknown as {
    _resolveFilename: (request: string, parent: unknown, ...rest: unknown[]) => string;
  };
  const original = mod._resolveFilename;
  mod._resolveFilename = function (request: string, parent: unknown, ...rest: unknown[]): string {
    return original.call(this, request === 'kafka-lance' ? self : request, parent, ...rest);
  };
}

/** A require hook for `.ts` files outside dist/ (definitions), transpiled to CommonJS. */
function installTypeScriptHook(): void {
  if (tsHookInstalled) return;
  tsHookInstalled = true;
  // Loaded lazily: only definitions written in TypeScript need the compiler.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const ts = require('typescript') as typeof TypeScript;
  const extensions = (
    Module as unknown as { _extensions: Record<string, (m: NodeModule, f: string) => void> }
  )._extensions;
  extensions['.ts'] = (module: NodeModule, filename: string) => {
    const source = readFileSync(filename, 'utf8');
    const { outputText } = ts.transpileModule(source, {
      fileName: filename,
      compilerOptions: {
        module: ts.ModuleKind.CommonJS,
        target: ts.ScriptTarget.ES2022,
        esModuleInterop: true,
        sourceMap: false,
      },
    });
    (module as unknown as { _compile: (code: string, file: string) => void })._compile(outputText, filename);
  };
}
