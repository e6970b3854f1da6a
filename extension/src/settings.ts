// Typed settings and what the server receives as initializationOptions (no vscode import).
import { BUILDER_PREFERENCES, BuilderPreference, isWord } from './generated/protocol';

/** What a recipe may ask for (trtls.core.vocabulary.BuilderPreference, generated): `auto` or a TensorRT module. */
export type BuilderModule = BuilderPreference;

export interface TrtlsSettings {
  python: string;
  builderModule: BuilderModule;
  cancelGraceS: number | null;
}

export interface InitializationOptions {
  buildTree: true;
  settings: { builderModule: BuilderModule; cancelGraceS: number | null };
}

/** Reads the settings through a getter (vscode's WorkspaceConfiguration.get fits), fixing bad values. */
export function readSettings(get: (key: string) => unknown): { settings: TrtlsSettings; problems: string[] } {
  const problems: string[] = [];
  const pyRaw = get('python');
  const python = typeof pyRaw === 'string' ? pyRaw.trim() : '';
  if (pyRaw !== undefined && pyRaw !== null && typeof pyRaw !== 'string') problems.push('trtls.python must be a string');
  const bmRaw = get('builderModule');
  let builderModule: BuilderModule = 'auto';
  if (isWord(BUILDER_PREFERENCES, bmRaw)) {
    builderModule = bmRaw;
  } else if (bmRaw !== undefined && bmRaw !== null) {
    problems.push(`trtls.builderModule: ${JSON.stringify(bmRaw)} is not one of ${BUILDER_PREFERENCES.join(', ')}; using auto`);
  }
  const cgRaw = get('cancelGraceS');
  let cancelGraceS: number | null = null;
  if (typeof cgRaw === 'number' && Number.isFinite(cgRaw) && cgRaw >= 0) {
    cancelGraceS = cgRaw;
  } else if (cgRaw !== undefined && cgRaw !== null) {
    problems.push(`trtls.cancelGraceS: ${JSON.stringify(cgRaw)} is not a number ≥ 0; using the server default`);
  }
  return { settings: { python, builderModule, cancelGraceS }, problems };
}

export function initializationOptions(s: TrtlsSettings): InitializationOptions {
  return { buildTree: true, settings: { builderModule: s.builderModule, cancelGraceS: s.cancelGraceS } };
}

/** The settings whose change needs a server restart (trace level does not). */
export const RESTART_KEYS = ['trtls.python', 'trtls.builderModule', 'trtls.cancelGraceS'] as const;

export function needsRestart(affects: (section: string) => boolean): boolean {
  return RESTART_KEYS.some((k) => affects(k));
}

/** Expands `${workspaceFolder}`, `${userHome}` / a leading `~`, and `${env:NAME}` in a path setting. */
export function expandPath(value: string, vars: { workspaceFolder?: string; home?: string; env?: Record<string, string | undefined> }): string {
  let out = value.replace(/\$\{workspaceFolder\}/g, vars.workspaceFolder ?? '${workspaceFolder}');
  if (vars.home !== undefined) {
    out = out.replace(/\$\{userHome\}/g, vars.home).replace(/^~(?=$|\/)/, vars.home);
  }
  out = out.replace(/\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}/g, (_m, name: string) => vars.env?.[name] ?? '');
  return out;
}

/** Picks the interpreter: explicit setting, then the Python extension's, then python3. */
export function resolvePython(setting: string, fromPythonExtension: string | undefined): { python: string; source: string } {
  if (setting !== '') return { python: setting, source: 'setting trtls.python' };
  if (fromPythonExtension) return { python: fromPythonExtension, source: 'Python extension interpreter' };
  return { python: 'python3', source: 'default' };
}

/** "warn" when the server's major.minor differs from the extension's. */
export function checkServerVersion(expected: string, serverInfo: { name?: string; version?: string } | undefined):
  { ok: true } | { ok: false; message: string } {
  const want = /^(\d+)\.(\d+)/.exec(expected);
  const got = serverInfo?.version !== undefined ? /^(\d+)\.(\d+)/.exec(serverInfo.version) : null;
  if (serverInfo === undefined || serverInfo.version === undefined) {
    return { ok: false, message: `The trtls server did not report its version; this extension expects ${expected}.` };
  }
  if (want === null || got === null || want[1] !== got[1] || want[2] !== got[2]) {
    return {
      ok: false,
      message: `trtls server ${serverInfo.version} does not match this extension (${expected}); update one of them (pip install -U trtls, or the extension).`,
    };
  }
  return { ok: true };
}
