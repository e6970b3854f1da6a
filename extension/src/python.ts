// Which Python runs the server: the trtls.python setting, else the Python extension's selected interpreter, else
// python3 (the choice itself is settings.resolvePython, unit-tested); and a restart when that interpreter changes.
import * as vscode from 'vscode';

interface PythonExtensionApi {
  environments?: {
    getActiveEnvironmentPath(resource?: vscode.Uri): { path: string };
    resolveEnvironment(env: { path: string } | string): Promise<{ executable: { uri?: vscode.Uri } } | undefined>;
    onDidChangeActiveEnvironmentPath: vscode.Event<unknown>;
  };
}

async function pythonExtensionApi(log: vscode.LogOutputChannel): Promise<PythonExtensionApi | undefined> {
  const ext = vscode.extensions.getExtension<PythonExtensionApi>('ms-python.python');
  if (ext === undefined) return undefined;
  try {
    return ext.isActive ? ext.exports : await ext.activate();
  } catch (e) {
    log.warn(`ms-python.python did not activate: ${String(e)}`);
    return undefined;
  }
}

/** The Python extension's interpreter for the first workspace folder, if it is installed and says. */
export async function interpreterFromPythonExtension(log: vscode.LogOutputChannel): Promise<string | undefined> {
  const api = await pythonExtensionApi(log);
  if (api?.environments === undefined) return undefined;
  try {
    const resource = vscode.workspace.workspaceFolders?.[0]?.uri;
    const active = api.environments.getActiveEnvironmentPath(resource);
    const env = await api.environments.resolveEnvironment(active);
    return env?.executable.uri?.fsPath ?? active.path;
  } catch (e) {
    log.warn(`could not read the Python extension's interpreter: ${String(e)}`);
    return undefined;
  }
}

/** Calls `changed` when the Python extension's interpreter changes (the caller decides whether it matters). */
export async function watchPythonExtension(context: vscode.ExtensionContext, log: vscode.LogOutputChannel, changed: () => void): Promise<void> {
  const api = await pythonExtensionApi(log);
  if (api?.environments !== undefined) {
    context.subscriptions.push(api.environments.onDidChangeActiveEnvironmentPath(changed));
  }
}
