// trtls VS Code client: wires the pieces (the template's split: client.ts = server lifecycle, python.ts =
// interpreter, settings.ts = settings, views.ts + treeView.ts = views, commands.ts = commands). All logic, and every
// word shown, is the server's.
import * as path from 'path';
import * as vscode from 'vscode';
import { BuildTreeModel } from './buildTree';
import { currentSettings, RECIPE_GLOB, ServerClient } from './client';
import { UiCommands } from './commands';
import { watchPythonExtension } from './python';
import { needsRestart } from './settings';
import { registerTriageCommands } from './triageCommands';
import { BuildViews } from './views';

let server: ServerClient | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const log = vscode.window.createOutputChannel('TensorRT Language Server', { log: true });
  context.subscriptions.push(log);
  const model = new BuildTreeModel();
  const views = new BuildViews(context, model, log);
  const s = new ServerClient(context, log, model, views);
  server = s;
  new UiCommands(context, log, s, model, views).register(() => s.restart('command'));
  registerTriageCommands(context, log, s);

  context.subscriptions.push(vscode.workspace.onDidChangeConfiguration((e) => {
    if (needsRestart((k) => e.affectsConfiguration(k))) {
      log.info('trtls settings changed, restarting the server');
      void s.restart('settings changed');
    }
  }));
  await watchPythonExtension(context, log, () => {
    if (currentSettings(log).python === '') {
      log.info('Python interpreter changed, restarting the server');
      void s.restart('interpreter changed');
    }
  });
  if (await recipePresent()) {
    await s.restart('activation');
  } else {
    // Activated by a TOML file that is not a recipe (onLanguage:toml, e.g. a lone Cargo.toml): start the server
    // only when a trtls.toml is opened, so other TOML files never cost a Python process.
    const waiting = vscode.workspace.onDidOpenTextDocument((doc) => {
      if (isRecipe(doc)) {
        waiting.dispose();
        void s.restart('recipe opened');
      }
    });
    context.subscriptions.push(waiting);
  }
}

export async function deactivate(): Promise<void> {
  await server?.stop();
}

function isRecipe(doc: vscode.TextDocument): boolean {
  return doc.uri.scheme === 'file' && path.basename(doc.uri.fsPath) === 'trtls.toml';
}

/** A trtls.toml is open (a lone file, no folder) or somewhere in the workspace. */
async function recipePresent(): Promise<boolean> {
  if (vscode.workspace.textDocuments.some(isRecipe)) return true;
  return (await vscode.workspace.findFiles(RECIPE_GLOB, '**/node_modules/**', 1)).length > 0;
}
